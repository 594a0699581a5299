"""Positions, ETA and reasons for waiting jobs. Pure: no database."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import time_machine

from core.texts import english
from jobs.admission import History, Policy

from .test_admission_helpers import A100, NOW, admitted, job, node, quota, run

# -- positions -----------------------------------------------------------------------------


def test_positions_in_pool_and_model_follow_the_admission_order():
    nodes = [node("h1", used=8), node("a1", model=A100, used=8)]
    jobs = [job(1, pool="dev", minutes_ago=50),
            job(2, pool="prod", minutes_ago=40),
            job(3, pool="dev", model=A100, minutes_ago=30),
            job(4, pool="dev", minutes_ago=20),
            job(5, pool="prod", model=A100, minutes_ago=10)]
    quotas = [quota(pool="dev", nominal=8, **{f"gpu__{A100}": (8, 8)}),
              quota(pool="prod", nominal=8, **{f"gpu__{A100}": (8, 8)})]
    d = run(nodes, jobs, quotas)
    pos = {i: (d.waiting[i].position_in_pool, d.waiting[i].position_in_model) for i in d.waiting}
    # production first in each model queue; dev pool: 1, 3, 4 by submission time
    assert pos == {2: (1, 1), 5: (2, 1), 1: (1, 2), 3: (2, 2), 4: (3, 3)}


def test_positions_count_only_jobs_still_waiting():
    d = run([node("n1", gpus=2)], [job(1), job(2), job(3), job(4)], [quota()])
    assert sorted(admitted(d)) == [1, 2]
    assert [d.waiting[3].position_in_pool, d.waiting[4].position_in_pool] == [1, 2]


def test_positions_reflect_fair_share_not_just_submission_time():
    nodes = [node("n1", used=8)]
    jobs = [job(10, tenant="acme", state="running", gpus=0, on="n1"),
            job(1, tenant="acme", minutes_ago=50), job(2, tenant="acme", minutes_ago=40),
            job(3, tenant="globex", minutes_ago=5)]
    d = run(nodes, jobs, [quota("acme"), quota("globex")])
    assert [d.waiting[i].position_in_pool for i in (1, 3, 2)] == [1, 2, 3]


# -- ETA -----------------------------------------------------------------------------------


def test_eta_is_when_the_holder_is_expected_to_finish():
    nodes = [node("n1")]
    jobs = [job(10, tenant="globex", state="running", gpus=8, on="n1",
                started_at=NOW - timedelta(minutes=10), expected_seconds=3600.0),
            job(1, gpus=8)]
    d = run(nodes, jobs, [quota("acme"), quota("globex")])
    assert d.waiting[1].eta_p50 == NOW + timedelta(minutes=50)
    # an estimate is not a promise: p90 is a real upper quantile, later than p50 ...
    assert d.waiting[1].eta_p90 == NOW + timedelta(seconds=3600 * 1.6 - 600)
    # ... capped by the holder's maximum run time (it is stopped then)
    jobs[0] = replace(jobs[0], max_run_seconds=4200.0)
    d = run(nodes, jobs, [quota("acme"), quota("globex")])
    assert d.waiting[1].eta_p90 == NOW + timedelta(minutes=60)


def test_eta_uses_history_percentiles_when_the_job_gives_no_estimate():
    nodes = [node("n1")]
    jobs = [job(10, tenant="globex", state="running", gpus=8, on="n1",
                started_at=NOW, expected_seconds=None),
            job(1, gpus=8)]
    history = History(durations={("globex", "development"): (600.0, 1200.0, 1800.0, 2400.0,
                                                             3000.0, 3600.0, 4200.0, 4800.0,
                                                             5400.0, 6000.0)})
    d = run(nodes, jobs, [quota("acme"), quota("globex")], history=history)
    assert d.waiting[1].eta_p50 == NOW + timedelta(seconds=3000)
    assert d.waiting[1].eta_p90 == NOW + timedelta(seconds=5400)


def test_eta_defaults_to_an_hour_and_two_for_p90():
    jobs = [job(10, tenant="globex", state="running", gpus=8, on="n1", started_at=NOW,
                expected_seconds=None), job(1, gpus=8)]
    d = run([node("n1")], jobs, [quota("acme"), quota("globex")])
    assert d.waiting[1].eta_p50 == NOW + timedelta(hours=1)
    assert d.waiting[1].eta_p90 == NOW + timedelta(hours=2)
    d = run([node("n1")], jobs, [quota("acme"), quota("globex")],
            policy=Policy(default_duration_seconds=600))
    assert d.waiting[1].eta_p50 == NOW + timedelta(minutes=10)


def test_eta_is_monotone_in_queue_order_and_p90_not_before_p50_not_before_now():
    nodes = [node("n1", gpus=4)]
    jobs = [job(10, tenant="globex", state="running", gpus=4, on="n1", expected_seconds=None,
                started_at=NOW - timedelta(minutes=5))]
    jobs += [job(i, gpus=2, minutes_ago=60 - i, expected_seconds=None) for i in range(1, 8)]
    history = History(durations={("acme", "development"): (300.0, 900.0, 2000.0),
                                 ("globex", "development"): (1000.0, 4000.0)})
    d = run(nodes, jobs, [quota("acme"), quota("globex")], history=history)
    waits = sorted(d.waiting.values(), key=lambda w: w.position_in_pool)
    assert [w.position_in_pool for w in waits] == list(range(1, 8))
    for w in waits:
        assert w.eta_p50 is not None and w.eta_p90 is not None
        assert NOW <= w.eta_p50 <= w.eta_p90
    p50s = [w.eta_p50 for w in waits]
    assert p50s == sorted(p50s)
    assert waits[0].eta_p50 == waits[1].eta_p50 == NOW + timedelta(seconds=1000 - 300)


def test_overdue_running_jobs_are_expected_soon_and_by_their_maximum_run():
    # it has outlived its estimate: not "now" (the ETA would slide at every pass) but a
    # share of its age, and p90 no later than its maximum run time
    jobs = [job(10, tenant="globex", state="running", gpus=8, on="n1",
                started_at=NOW - timedelta(hours=3), expected_seconds=3600.0,
                max_run_seconds=4 * 3600.0),
            job(1, gpus=8)]
    d = run([node("n1")], jobs, [quota("acme"), quota("globex")])
    w = d.waiting[1]
    assert NOW < w.eta_p50 < w.eta_p90 == NOW + timedelta(hours=1)
    jobs[0] = replace(jobs[0], max_run_seconds=3 * 3600.0)   # at its maximum: it stops now
    d = run([node("n1")], jobs, [quota("acme"), quota("globex")])
    assert d.waiting[1].eta_p50 == d.waiting[1].eta_p90 == NOW


def test_running_jobs_remaining_time_is_conditional_on_their_age():
    history = History(durations={("globex", "development"): tuple(
        float(60 * m) for m in (10, 20, 30, 40, 50, 60, 70, 80, 90, 100))})
    jobs = [job(10, tenant="globex", state="running", gpus=8, on="n1",
                started_at=NOW - timedelta(minutes=55), expected_seconds=None),
            job(1, gpus=8)]
    d = run([node("n1")], jobs, [quota("acme"), quota("globex")], history=history)
    # of the runs longer than 55 minutes (60..100), the median ends at 80, p90 at 100
    assert d.waiting[1].eta_p50 == NOW + timedelta(minutes=80 - 55)
    assert d.waiting[1].eta_p90 == NOW + timedelta(minutes=100 - 55)


def test_eta_counts_the_jobs_ahead():
    nodes = [node("n1", gpus=4)]
    jobs = [job(10, tenant="globex", state="running", gpus=4, on="n1", started_at=NOW,
                expected_seconds=600.0),
            job(1, gpus=4, expected_seconds=1200.0, minutes_ago=30),
            job(2, gpus=4, expected_seconds=60.0, minutes_ago=20)]
    d = run(nodes, jobs, [quota("acme"), quota("globex")])
    assert d.waiting[1].eta_p50 == NOW + timedelta(seconds=600)
    assert d.waiting[2].eta_p50 == NOW + timedelta(seconds=1800)


def test_eta_waits_for_the_pools_own_jobs_when_above_quota():
    nodes = [node("n1"), node("n2")]
    jobs = [job(10, state="running", gpus=8, on="n1", started_at=NOW, expected_seconds=900.0),
            job(1, gpus=8)]
    d = run(nodes, jobs, [quota(nominal=8)])
    assert d.waiting[1].eta_p50 == NOW + timedelta(seconds=900)


def test_eta_of_a_job_waiting_for_preemption_is_the_grace_deadline():
    nodes = [node("n1", gpus=4)]
    jobs = [job(10, tenant="globex", state="running", gpus=4, on="n1", borrowing=True),
            job(1, gpus=4)]
    d = run(nodes, jobs, [quota("acme", 4), quota("globex", 0, 4)])
    assert d.waiting[1].eta_p50 == NOW + timedelta(seconds=300)


def test_no_eta_for_jobs_that_cannot_start():
    d = run([node("n1")], [job(1, gpus=10), job(2, held=True)], [quota(nominal=16)])
    assert d.waiting[1].eta_p50 is None and d.waiting[1].eta_p90 is None
    assert d.waiting[2].eta_p50 is None


# -- reasons -------------------------------------------------------------------------------


def test_reason_names_the_holders_and_when_they_finish():
    nodes = [node("n1", gpus=8)]
    jobs = [job(10, tenant="globex", pool="prod", state="running", gpus=2, on="n1",
                started_at=NOW, expected_seconds=8400.0),
            job(11, tenant="globex", pool="prod", state="running", gpus=4, on="n1",
                started_at=NOW, expected_seconds=20000.0),
            job(1, gpus=4)]
    d = run(nodes, jobs, [quota("acme"), quota("globex", 8, pool="prod")])
    with time_machine.travel(NOW, tick=False):   # read at NOW: "today", in one format
        reason = english(d.waiting[1].reason)
    assert reason == ("needs 4 NVIDIA-H800, 2 free; 2 held by production jobs "
                      "expected to finish around today 14:20 UTC")


def test_reason_for_a_replica_larger_than_any_node():
    d = run([node("n1"), node("n2")], [job(1, gpus=10)], [quota(nominal=16)])
    reason = english(d.waiting[1].reason)
    assert reason == ("no schedulable node has 10 NVIDIA-H800 for one replica; "
                                   "the largest node has 8")


def test_reason_for_free_gpus_spread_too_thin():
    d = run([node("n1", used=4), node("n2", used=4)], [job(1, gpus=8)], [quota(nominal=16)])
    reason = english(d.waiting[1].reason)
    assert reason == ("needs 8 NVIDIA-H800 on one node, 8 free but no node has "
                                   "8 free")


def test_reason_behind_jobs_of_your_own_tenant():
    nodes = [node("n1", used=8)]
    jobs = [job(1, minutes_ago=30), job(2, minutes_ago=20), job(3, minutes_ago=10)]
    d = run(nodes, jobs, [quota()])
    reason = english(d.waiting[3].reason)
    assert reason.endswith("; 3rd in the dev queue behind jobs of your own tenant")
    assert "queue" not in english(d.waiting[1].reason)


def test_reason_behind_other_tenants_does_not_blame_your_tenant():
    nodes = [node("n1", used=8)]
    jobs = [job(1, tenant="globex", minutes_ago=30), job(2, minutes_ago=10)]
    d = run(nodes, jobs, [quota(), quota("globex")])
    assert english(d.waiting[2].reason).endswith("; 2nd in the dev queue")


def test_reason_for_unknown_gpu_model():
    d = run([node("n1")], [job(1, model="NVIDIA-B200")], [quota()])
    assert english(d.waiting[1].reason) == "no schedulable node you may use has NVIDIA-B200"


def test_reasons_are_one_sentence():
    nodes = [node("n1", used=6)]
    jobs = [job(10, tenant="globex", pool="prod", state="running", gpus=2, on="n1"),
            job(1, gpus=4), job(2, gpus=4, held=True), job(3, gpus=12), job(4, tier="batch"),
            job(5, tenant="globex", gpus=4)]
    d = run(nodes, jobs, [quota(nominal=8), quota("globex", 2, pool="dev"),
                          quota("globex", 8, pool="prod")])
    for w in d.waiting.values():
        reason = english(w.reason)
        assert reason and ". " not in english(w.reason) and not english(w.reason).endswith(".")


def test_times_far_ahead_carry_the_date():
    jobs = [job(10, tenant="globex", state="running", gpus=8, on="n1", started_at=NOW,
                expected_seconds=3 * 86400.0), job(1, gpus=8)]
    d = run([node("n1")], jobs, [quota("acme"), quota("globex")])
    with time_machine.travel(NOW, tick=False):
        reason = english(d.waiting[1].reason)
    assert reason.endswith("expected to finish around Thu 3 Dec 12:00 UTC")


def test_ordinals_and_clock():
    from jobs.admission import text

    assert [text.ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "101st",
        "111th"]
    assert text.clock(NOW + timedelta(hours=2, minutes=20), NOW) == "14:20 UTC"
    assert text.clock(NOW + timedelta(days=2), NOW) == "02 Dec 12:00 UTC"


def test_eta_counts_jobs_admitted_in_the_same_call():
    nodes = [node("n1", gpus=4)]
    jobs = [job(1, gpus=4, expected_seconds=900.0, minutes_ago=30),
            job(2, gpus=4, expected_seconds=60.0, minutes_ago=20)]
    d = run(nodes, jobs, [quota()])
    assert list(admitted(d)) == [1]
    assert d.waiting[2].eta_p50 == NOW + timedelta(seconds=900)


def test_history_is_capped_by_the_jobs_own_maximum_run_time():
    jobs = [job(10, tenant="globex", state="running", gpus=8, on="n1", started_at=NOW,
                expected_seconds=None, max_run_seconds=2000.0), job(1, gpus=8)]
    history = History(durations={("globex", "development"): (600.0, 1200.0, 5000.0)})
    d = run([node("n1")], jobs, [quota("acme"), quota("globex")], history=history)
    assert d.waiting[1].eta_p50 == NOW + timedelta(seconds=1200)
    assert d.waiting[1].eta_p90 == NOW + timedelta(seconds=2000)
