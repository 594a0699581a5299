"""The admission engine's rules, one test (or a few) per rule. Pure: no database."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
import time_machine

from core.texts import english
from jobs.admission import Decisions, History, JobView, NodeView, Policy, PoolQuota, decide

from .test_admission_helpers import (
    A100,
    H800,
    NOW,
    admitted,
    job,
    node,
    preempted,
    quota,
    run,
)


@pytest.fixture(autouse=True)
def _read_at_now():
    """Reasons name clock times as the reader sees them ("today 12:05 UTC"): read them at
    NOW, the decisions' own clock, whatever the calendar says."""
    with time_machine.travel(NOW, tick=False):
        yield

def decide_plain(nodes: list[NodeView], jobs: list[JobView], quotas: list[PoolQuota],
                 policy: Policy | None = None) -> Decisions:
    """decide() with the nodes' usage exactly as given (no placement-derived usage)."""
    return decide(nodes=nodes, jobs=jobs, quotas=quotas, policy=policy or Policy(),
                  history=History(), now=NOW)


# -- gang: all or nothing ------------------------------------------------------------------


def test_gang_is_admitted_whole_or_not_at_all():
    nodes = [node("n1", used=4), node("n2", used=6)]   # 4 + 2 free
    d = run(nodes, [job(1, replicas=2, gpus=4)], [quota(nominal=16)])
    assert admitted(d) == {}
    assert 1 in d.waiting
    nodes = [node("n1", used=4), node("n2", used=4)]   # 4 + 4 free
    d = run(nodes, [job(1, replicas=2, gpus=4)], [quota(nominal=16)])
    assert admitted(d) == {1: ("n1", "n2")}


def test_gang_prefers_one_node_and_best_fit():
    nodes = [node("n1", used=0), node("n2", used=4)]
    d = run(nodes, [job(1, replicas=2, gpus=2)], [quota(nominal=16)])
    assert admitted(d) == {1: ("n2", "n2")}   # the fuller node that fits the whole gang


def test_every_replica_of_a_gang_on_a_node_of_its_gpu_model():
    nodes = [node("a1", model=A100), node("h1", model=H800, used=6)]
    d = run(nodes, [job(1, replicas=2, gpus=2, model=H800)], [quota(nominal=16)])
    assert admitted(d) == {}


# -- one switch for multi-node jobs --------------------------------------------------------


def test_multi_node_job_never_spans_switches():
    nodes = [node("n1", switch="s1"), node("n2", switch="s2")]
    d = run(nodes, [job(1, replicas=2, gpus=8)], [quota(nominal=16)])
    assert admitted(d) == {}
    assert english(d.waiting[1].reason).startswith("no switch has room for 2 replicas")


def test_multi_node_job_picks_the_switch_with_room():
    nodes = [node("n1", switch="s1"), node("n2", switch="s1", used=1),
             node("n3", switch="s2"), node("n4", switch="s2")]
    d = run(nodes, [job(1, replicas=2, gpus=8)], [quota(nominal=16)])
    assert admitted(d) == {1: ("n3", "n4")}


def test_switch_with_least_room_that_fits_is_chosen():
    nodes = [node("a1", switch="big"), node("a2", switch="big"), node("a3", switch="big"),
             node("b1", switch="small"), node("b2", switch="small")]
    d = run(nodes, [job(1, replicas=2, gpus=8)], [quota(nominal=16)])
    assert admitted(d) == {1: ("b1", "b2")}   # keeps the big switch whole


def test_multi_node_too_big_for_any_switch_says_so_and_has_no_eta():
    nodes = [node("n1", switch="s1"), node("n2", switch="s2")]
    d = run(nodes, [job(1, replicas=3, gpus=8)], [quota(nominal=24)])
    w = d.waiting[1]
    assert english(w.reason) == ("no switch has room for 3 replicas of 8 NVIDIA-H800 together; "
                        "the largest switch has 8")
    assert w.eta_p50 is None and w.eta_p90 is None


# -- dedicated nodes -----------------------------------------------------------------------


def test_dedicated_node_takes_only_its_tenants_jobs():
    nodes = [node("ded", dedicated_to="globex")]
    d = run(nodes, [job(1, tenant="acme")], [quota("acme"), quota("globex")])
    assert admitted(d) == {}
    assert "no schedulable node you may use" in english(d.waiting[1].reason)
    d = run(nodes, [job(1, tenant="globex")], [quota("acme"), quota("globex")])
    assert admitted(d) == {1: ("ded",)}


def test_dedicated_tenant_uses_its_own_nodes_first_then_shared():
    nodes = [node("a-shared"), node("z-ded", dedicated_to="globex")]
    d = run(nodes, [job(1, tenant="globex", gpus=8), job(2, tenant="globex", gpus=8)],
            [quota("globex", nominal=16)])
    assert admitted(d) == {1: ("z-ded",), 2: ("a-shared",)}


def test_dedicated_node_is_not_counted_as_room_for_others():
    nodes = [node("shared", used=8), node("ded", dedicated_to="globex")]
    d = run(nodes, [job(1, tenant="acme", gpus=4)], [quota("acme"), quota("globex")])
    assert admitted(d) == {}
    assert english(d.waiting[1].reason).startswith("needs 4 NVIDIA-H800, 0 free")


# -- tier order ----------------------------------------------------------------------------


def test_tier_order_production_then_development_then_batch():
    nodes = [node("n1", gpus=1)]
    jobs = [job(1, pool="dev", tier="batch", minutes_ago=90),
            job(2, pool="dev", minutes_ago=80),
            job(3, pool="prod", minutes_ago=1)]
    quotas = [quota(pool="prod"), quota(pool="dev")]
    unlimited = Policy(watermark=1.0)   # one card: any batch job is above the 85% watermark
    assert admitted(run(nodes, jobs, quotas)) == {3: ("n1",)}
    assert admitted(run(nodes, jobs[:2], quotas)) == {2: ("n1",)}
    assert admitted(run(nodes, jobs[:1], quotas, policy=unlimited)) == {1: ("n1",)}
    d = run(nodes, jobs, quotas)
    assert [d.waiting[2].position_in_model, d.waiting[1].position_in_model] == [1, 2]


# -- fair share ----------------------------------------------------------------------------


def test_fair_share_lower_current_use_against_quota_goes_first():
    nodes = [node("n1", gpus=8)]
    jobs = [job(10, tenant="acme", state="running", gpus=4, on="n1"),
            job(1, tenant="acme", gpus=4, minutes_ago=120),       # older, but acme uses 4/8
            job(2, tenant="globex", gpus=4, minutes_ago=1)]       # globex uses 0/8
    d = run(nodes, jobs, [quota("acme"), quota("globex")])
    assert admitted(d) == {2: ("n1",)}


def test_fair_share_is_relative_to_each_tenants_quota():
    nodes = [node("n1", gpus=8)]
    jobs = [job(10, tenant="acme", state="running", gpus=2, on="n1"),     # 2 of 16 = 0.125
            job(11, tenant="globex", state="running", gpus=2, on="n1"),   # 2 of 4 = 0.5
            job(1, tenant="globex", gpus=4, minutes_ago=120),
            job(2, tenant="acme", gpus=4, minutes_ago=1)]
    d = run(nodes, jobs, [quota("acme", nominal=16), quota("globex", nominal=4, ceiling=8)])
    assert list(admitted(d)) == [2]


def test_fair_share_uses_decayed_history():
    nodes = [node("n1", gpus=4)]
    jobs = [job(1, tenant="acme", gpus=4, minutes_ago=120),
            job(2, tenant="globex", gpus=4, minutes_ago=1)]
    quotas = [quota("acme"), quota("globex")]
    assert list(admitted(run(nodes, jobs, quotas))) == [1]
    heavy = History(usage={"acme": 8 * 86400.0})
    assert list(admitted(run(nodes, jobs, quotas, history=heavy))) == [2]


def test_fair_share_interleaves_tenants_as_jobs_are_taken():
    nodes = [node("n1", gpus=4)]
    jobs = [job(i, tenant="acme", minutes_ago=100 - i) for i in range(1, 5)]
    jobs += [job(i, tenant="globex", minutes_ago=50 - i) for i in range(11, 15)]
    d = run(nodes, jobs, [quota("acme"), quota("globex")])
    assert sorted(admitted(d)) == [1, 2, 11, 12]


def test_priority_then_submission_time_within_a_tenant():
    nodes = [node("n1", gpus=1)]
    jobs = [job(1, minutes_ago=90), job(2, minutes_ago=10, priority=5), job(3, minutes_ago=50)]
    d = run(nodes, jobs, [quota()])
    assert list(admitted(d)) == [2]
    assert d.waiting[3].position_in_pool == 2   # behind 2 (admitted) come 3 then 1 (older? no)
    assert d.waiting[1].position_in_pool == 1   # 1 is older than 3


# -- nominal quota per model ----------------------------------------------------------------


def test_nominal_quota_per_gpu_model():
    nodes = [node("h1"), node("a1", model=A100)]
    jobs = [job(10, state="running", gpus=4, on="h1"),
            job(1, gpus=2), job(2, model=A100, gpus=2)]
    d = run(nodes, jobs, [quota(nominal=4, **{f"gpu__{A100}": (4, 4)})])
    assert admitted(d) == {2: ("a1",)}
    # a ceiling equal to the quota: a platform admin capped borrowing (the cap is named)
    assert english(d.waiting[1].reason) == (
        "above your dev quota of 4 NVIDIA-H800 and the borrowing cap of 4 NVIDIA-H800 a "
        "platform admin set (4 in use): waits for your jobs to finish, or ask for more quota")
    assert d.waiting[1].eta_p50 is not None   # starts when its own job ends


def test_the_batch_tier_is_suggested_only_when_it_would_start_the_job_now():
    """Production never borrows; the same job as a batch job would run on idle capacity,
    so the reason says so (only when it would start now)."""
    nodes = [node("h1")]
    jobs = [job(10, state="running", gpus=4, on="h1", tier="production", pool="prod"),
            job(1, gpus=2, tier="production", pool="prod")]
    roomy = quota(pool="prod", nominal=4, ceiling=8)   # batch may borrow, production never
    d = run(nodes, jobs, [roomy])
    assert admitted(d) == {}
    assert english(d.waiting[1].reason) == ("above your prod quota of 4 NVIDIA-H800 (4 in use): "
                                   "ask for more quota or use the batch tier")
    # the same job, but the idle GPUs are taken by another tenant: batch would not help
    d = run(nodes, [*jobs, job(11, tenant="globex", state="running", gpus=4, on="h1")],
            [roomy, quota("globex")])
    assert english(d.waiting[1].reason).endswith("waits for your jobs to finish, or ask for "
                                                 "more quota")


def test_batch_uses_idle_capacity_beyond_the_pool_ceiling_and_yields_to_quota():
    nodes = [node("n1"), node("n2")]
    roomy = replace(quota("acme", 4), batch_ceiling={f"gpu:{H800}": 12})
    d = run(nodes, [job(10, tier="batch", state="running", gpus=8, on="n1"),
                    job(1, tier="batch", gpus=4)], [roomy, quota("globex", 8)])
    assert admitted(d) == {1: ("n2",)}   # 12 held by batch: 3x its quota, on idle GPUs
    # globex, within its quota, needs the room: the batch job beyond the ceiling yields
    jobs = [job(10, tier="batch", state="running", gpus=8, on="n1"),
            job(11, tier="batch", state="running", gpus=4, on="n2",
                admitted_at=NOW - timedelta(minutes=1)),
            job(2, tenant="globex", gpus=8)]
    d = run(nodes, jobs, [roomy, quota("globex", 8)], policy=Policy(watermark=1.0))
    assert preempted(d) == [11]   # the most recent batch job, with the batch grace alone
    assert d.preempt[0].grace_seconds == Policy().grace_seconds["batch"]
    assert {p.for_job for p in d.preempt} == {2}
    # the pool's own development job reclaims its own batch work too
    jobs = [job(10, tier="batch", state="running", gpus=8, on="n1"),
            job(11, tier="batch", state="running", gpus=8, on="n2"), job(3, gpus=4)]
    d = run(nodes, jobs, [roomy], policy=Policy(watermark=1.0))
    assert len(d.preempt) == 1 and d.preempt[0].for_job == 3


def test_quota_counts_admitted_and_preempting_jobs_of_the_pool():
    nodes = [node("n1"), node("n2")]
    jobs = [job(10, state="admitted", gpus=2, on="n1"),
            job(11, state="preempting", gpus=2, on="n1", preempt_deadline=NOW),
            job(1, gpus=1)]
    d = run(nodes, jobs, [quota(nominal=4)])
    assert admitted(d) == {}   # n2 is empty, but the pool's 4 are held until job 11 is gone
    assert english(d.waiting[1].reason).startswith("waiting for 1 preempted job to checkpoint")
    d = run(nodes, [j for j in jobs if j.id != 11], [quota(nominal=2)])
    reason = english(d.waiting[1].reason)
    assert reason.startswith("above your dev quota of 2 NVIDIA-H800 and the borrowing cap")


def test_quota_is_per_pool():
    nodes = [node("n1")]
    jobs = [job(10, pool="dev", state="running", gpus=4, on="n1"), job(1, pool="prod", gpus=4)]
    d = run(nodes, jobs, [quota(pool="dev", nominal=4), quota(pool="prod", nominal=4)])
    assert list(admitted(d)) == [1]


def test_no_quota_at_all_is_explained_and_never_admitted():
    d = run([node("n1")], [job(1)], [])
    assert admitted(d) == {}
    assert english(d.waiting[1].reason) == (
        "your tenant has no dev quota for NVIDIA-H800 and a platform admin capped borrowing: "
        "ask for quota")
    assert d.waiting[1].eta_p50 is None


def test_job_larger_than_quota_is_told_so():
    d = run([node("n1"), node("n2")], [job(1, gpus=8, replicas=2)], [quota(nominal=8)])
    reason = english(d.waiting[1].reason)
    assert reason.startswith("asks for 16 NVIDIA-H800, more than the borrowing cap of 8")
    d = run([node("n1"), node("n2")], [job(1, gpus=8, replicas=2, tier="production",
                                          pool="prod")], [quota(pool="prod", nominal=8)])
    assert english(d.waiting[1].reason).startswith(
        "asks for 16 NVIDIA-H800, more than your prod quota")


# -- borrowing -----------------------------------------------------------------------------


def test_borrowing_up_to_the_ceiling_on_idle_capacity():
    nodes = [node("n1"), node("n2")]
    jobs = [job(10, state="running", gpus=4, on="n1"), job(1, gpus=4), job(2, gpus=4),
            job(3, gpus=1)]
    d = run(nodes, jobs, [quota(nominal=4, ceiling=12)])
    assert {a.job_id: a.borrowing for a in d.admit} == {1: True, 2: True}
    assert "the borrowing cap of 12 NVIDIA-H800 a platform admin set" in english(
        d.waiting[3].reason)


def test_no_borrowing_when_ceiling_equals_nominal():
    nodes = [node("n1"), node("n2")]
    jobs = [job(10, state="running", gpus=4, on="n1"), job(1, gpus=4)]
    d = run(nodes, jobs, [quota(nominal=4)])
    assert admitted(d) == {}


def test_within_nominal_admission_is_not_borrowing():
    d = run([node("n1")], [job(1, gpus=4)], [quota(nominal=4, ceiling=8)])
    assert [a.borrowing for a in d.admit] == [False]


def test_borrowing_needs_idle_capacity_and_never_displaces_a_nominal_job():
    nodes = [node("n1")]
    jobs = [job(10, tenant="globex", state="running", gpus=8, on="n1"),
            job(11, tenant="acme", state="running", gpus=0, on="n1"),
            job(1, tenant="acme", gpus=4)]
    d = run(nodes, jobs, [quota("acme", nominal=0, ceiling=8), quota("globex", nominal=8)],
            policy=Policy(watermark=1.0))   # the borrowing rule alone
    assert admitted(d) == {} and preempted(d) == []
    assert english(d.waiting[1].reason).startswith(
        "above your dev quota of 0 NVIDIA-H800 (0 in use), so it borrows idle NVIDIA-H800: "
        "needs 4 NVIDIA-H800, 0 free")


def test_reclaim_preempts_borrowers_when_the_owner_needs_its_quota():
    nodes = [node("n1")]
    jobs = [job(10, tenant="globex", state="running", gpus=8, on="n1", borrowing=True),
            job(1, tenant="acme", gpus=4)]
    quotas = [quota("acme", nominal=4), quota("globex", nominal=4, ceiling=8)]
    d = run(nodes, jobs, quotas)
    assert admitted(d) == {}
    [p] = d.preempt
    assert (p.job_id, p.for_job, p.grace_seconds) == (10, 1, 300)
    assert "returning borrowed NVIDIA-H800" in english(p.reason)
    assert english(d.waiting[1].reason) == ("waiting for 1 development job to checkpoint and stop "
                                   "(by today 12:05 UTC)")


# -- batch ---------------------------------------------------------------------------------


def test_batch_runs_on_idle_capacity_without_using_nominal_quota():
    nodes = [node("n1"), node("n2")]
    jobs = [job(1, tier="batch", gpus=8), job(2, gpus=8)]
    d = run(nodes, jobs, [quota(nominal=8, ceiling=16)], policy=Policy(watermark=1.0))
    assert {a.job_id: a.borrowing for a in d.admit} == {1: False, 2: False}


def test_batch_stays_within_the_ceiling():
    jobs = [job(10, tier="batch", state="running", gpus=8, on="n1"), job(1, tier="batch", gpus=4)]
    d = run([node("n1"), node("n2")], jobs, [quota(nominal=4, ceiling=8)])
    assert admitted(d) == {}
    reason = english(d.waiting[1].reason)
    assert reason.startswith("above your dev quota of 4 NVIDIA-H800 and the borrowing cap of 8")


def test_batch_never_displaces_anyone():
    nodes = [node("n1")]
    jobs = [job(10, tenant="globex", tier="batch", state="running", gpus=8, on="n1"),
            job(1, tier="batch", gpus=2)]
    d = run(nodes, jobs, [quota("acme", 8, 16), quota("globex", 8, 16)],
            policy=Policy(watermark=1.0))   # (above it, the batch job is evicted: step 4)
    assert admitted(d) == {} and preempted(d) == []
    assert english(d.waiting[1].reason).startswith("batch jobs run only on idle capacity: needs 2")


def test_batch_is_preempted_first():
    nodes = [node("n1")]
    jobs = [job(10, tenant="globex", state="running", gpus=4, on="n1", borrowing=True,
                admitted_at=NOW - timedelta(minutes=1)),
            job(11, tenant="globex", tier="batch", state="running", gpus=4, on="n1",
                admitted_at=NOW - timedelta(minutes=30)),
            job(1, tenant="acme", gpus=4)]
    d = run(nodes, jobs, [quota("acme", 4), quota("globex", 4, 8)])
    assert preempted(d) == [11]
    assert d.preempt[0].grace_seconds == 30
    assert "batch jobs run only on idle capacity" in english(d.preempt[0].reason)


def test_a_borrower_may_displace_batch_but_not_others():
    nodes = [node("n1")]
    jobs = [job(10, tenant="globex", state="running", gpus=4, on="n1"),
            job(11, tenant="globex", tier="batch", state="running", gpus=4, on="n1"),
            job(1, tenant="acme", gpus=4)]
    d = run(nodes, jobs, [quota("acme", 0, 8), quota("globex", 4, 8)])
    assert preempted(d) == [11]


# -- reclaim order ------------------------------------------------------------------------


def _reclaim_case(victims):
    nodes = [node("n1", gpus=4)]
    jobs = [*victims, job(1, tenant="acme", pool="prod", gpus=1)]
    quotas = [quota("acme", 4, pool="prod"), quota("globex", 2, 4, pool="dev"),
              quota("globex", 4, pool="prod"), quota("initech", 2, 4, pool="dev")]
    return run(nodes, jobs, quotas)


def test_reclaim_takes_borrowers_before_lower_tier_jobs_within_quota():
    d = _reclaim_case([
        job(10, tenant="globex", state="running", gpus=2, on="n1",
            admitted_at=NOW - timedelta(minutes=1)),                   # within quota, recent
        job(11, tenant="initech", state="running", gpus=2, on="n1", borrowing=True,
            admitted_at=NOW - timedelta(minutes=50))])
    assert preempted(d) == [11]


def test_reclaim_takes_the_lowest_tier_first():
    d = _reclaim_case([
        job(10, tenant="globex", tier="batch", state="running", gpus=2, on="n1",
            admitted_at=NOW - timedelta(minutes=50)),
        job(11, tenant="initech", state="running", gpus=2, on="n1", borrowing=True,
            admitted_at=NOW - timedelta(minutes=1))])
    assert preempted(d) == [10]


def test_reclaim_takes_the_most_recently_admitted_first():
    d = _reclaim_case([
        job(10, tenant="globex", state="running", gpus=2, on="n1", borrowing=True,
            admitted_at=NOW - timedelta(minutes=5)),
        job(11, tenant="initech", state="running", gpus=2, on="n1", borrowing=True,
            admitted_at=NOW - timedelta(minutes=50))])
    assert preempted(d) == [10]


def test_a_borrower_whose_pool_is_back_within_nominal_is_not_reclaimed():
    nodes = [node("n1", gpus=4)]
    jobs = [job(10, tenant="globex", state="running", gpus=4, on="n1", borrowing=True),
            job(1, gpus=4)]
    d = run(nodes, jobs, [quota("acme", 4), quota("globex", 4, 8)])   # globex: 4 of 4
    assert preempted(d) == []


def test_reclaim_stops_taking_from_a_pool_once_it_is_back_within_nominal():
    nodes = [node("n1", gpus=8)]
    jobs = [job(10, tenant="globex", state="running", gpus=4, on="n1", borrowing=True,
                admitted_at=NOW - timedelta(minutes=1)),
            job(11, tenant="globex", state="running", gpus=4, on="n1", borrowing=True,
                admitted_at=NOW - timedelta(minutes=2)),
            job(1, gpus=4), job(2, gpus=4)]
    d = run(nodes, jobs, [quota("acme", 8), quota("globex", 4, 8)])   # globex: 8 of 4
    assert preempted(d) == [10]


def test_reclaim_preempts_just_enough():
    nodes = [node("n1", gpus=4)]
    victims = [job(10 + i, tenant="globex", state="running", gpus=1, on="n1", borrowing=True,
                   admitted_at=NOW - timedelta(minutes=i)) for i in range(4)]
    d = run(nodes, [*victims, job(1, gpus=2)], [quota("acme", 4), quota("globex", 0, 4)],
            policy=Policy(watermark=1.0))   # the reclaim alone, no watermark eviction
    assert preempted(d) == [10, 11]
    assert all(p.for_job == 1 for p in d.preempt)


def test_lower_tier_preempted_for_a_higher_tier_that_cannot_fit():
    nodes = [node("n1", gpus=4)]
    jobs = [job(10, tenant="globex", pool="dev", state="running", gpus=4, on="n1"),
            job(1, tenant="acme", pool="prod", gpus=4)]
    d = run(nodes, jobs, [quota("acme", 4, pool="prod"), quota("globex", 4, pool="dev")])
    assert preempted(d) == [10]
    assert "production job takes precedence" in english(d.preempt[0].reason)


def test_same_tier_jobs_within_quota_are_not_preempted():
    nodes = [node("n1", gpus=4)]
    jobs = [job(10, tenant="globex", state="running", gpus=4, on="n1"), job(1, gpus=4)]
    d = run(nodes, jobs, [quota("acme", 4), quota("globex", 4)])
    assert preempted(d) == []
    reason = english(d.waiting[1].reason)
    assert reason == ("needs 4 NVIDIA-H800, 0 free; 4 held by development jobs "
                                   "expected to finish around today 12:50 UTC")


def test_never_preempt_for_a_job_that_still_would_not_fit():
    # Victims are 1 GPU on each of 4 nodes; the job needs 4 on one node.
    nodes = [node(f"n{i}", gpus=4, used=3, switch=f"s{i}") for i in range(4)]
    victims = [job(10 + i, tenant="globex", state="running", gpus=1, on=f"n{i}", borrowing=True)
               for i in range(4)]
    d = run(nodes, [*victims, job(1, gpus=4)], [quota("acme", 8), quota("globex", 0, 8)],
            policy=Policy(watermark=1.0))
    assert preempted(d) == []


def test_victims_on_the_right_node_are_chosen():
    nodes = [node("n1", gpus=4), node("n2", gpus=4, used=3)]
    victims = [job(10, tenant="globex", state="running", gpus=3, on="n1", borrowing=True,
                   admitted_at=NOW - timedelta(minutes=50)),
               job(11, tenant="globex", state="running", gpus=1, on="n2", borrowing=True,
                   admitted_at=NOW - timedelta(minutes=1))]
    d = run(nodes, [*victims, job(1, gpus=4)], [quota("acme", 8), quota("globex", 0, 8)],
            policy=Policy(watermark=1.0))
    assert preempted(d) == [10]   # 11 is more recent, but freeing n2 would not fit 4


def test_room_made_by_reclaim_is_not_given_to_a_later_job():
    nodes = [node("n1", gpus=4, used=0), node("n2", gpus=4)]
    jobs = [job(10, tenant="globex", state="running", gpus=4, on="n2", borrowing=True),
            job(11, tenant="globex", state="running", gpus=2, on="n1", borrowing=True),
            job(1, tenant="acme", replicas=2, gpus=4, minutes_ago=30),
            job(2, tenant="acme", gpus=2, minutes_ago=1)]
    d = run(nodes, jobs, [quota("acme", 10), quota("globex", 0, 8)])
    # job 1 needs both nodes: preempts both borrowers and reserves n1's free 2 GPUs.
    assert sorted(preempted(d)) == [10, 11]
    assert admitted(d) == {}


def test_lower_priority_within_a_tenant_only_when_policy_allows():
    nodes = [node("n1", gpus=4)]
    jobs = [job(10, state="running", gpus=4, on="n1", priority=50), job(1, gpus=4, priority=200)]
    quotas = [quota("acme", 4, 8)]
    # (a watermark of 1: above the default 85%, work beyond its guarantee is evicted anyway)
    assert preempted(run(nodes, jobs, quotas, policy=Policy(watermark=1.0))) == []
    d = run(nodes, jobs, quotas, policy=Policy(preempt_lower_priority_within_tenant=True,
                                                watermark=1.0))
    assert preempted(d) == [10]
    assert "higher-priority job of your tenant" in english(d.preempt[0].reason)
    same = [job(10, state="running", gpus=4, on="n1", priority=200), jobs[1]]
    assert preempted(run(nodes, same, quotas,
                         policy=Policy(preempt_lower_priority_within_tenant=True,
                                       watermark=1.0))) == []


# -- production never preempted -------------------------------------------------------------


def test_production_jobs_are_never_preempted():
    nodes = [node("n1", gpus=4)]
    jobs = [job(10, tenant="globex", pool="prod", state="running", gpus=4, on="n1",
                borrowing=True),
            job(1, tenant="acme", pool="prod", gpus=4)]
    d = run(nodes, jobs, [quota("acme", 4, pool="prod"), quota("globex", 0, 4, pool="prod")])
    assert preempted(d) == []
    assert "held by production jobs" in english(d.waiting[1].reason)


def test_production_never_evicted_above_the_watermark():
    nodes = [node("n1", gpus=4), node("n2", gpus=4)]
    jobs = [job(10, tenant="globex", pool="prod", state="running", gpus=4, on="n1",
                borrowing=True),
            job(11, tenant="globex", pool="prod", state="running", gpus=3, on="n2"),
            job(1, tenant="acme", pool="prod", gpus=4)]
    d = run(nodes, jobs, [quota("acme", 4, pool="prod"), quota("globex", 4, 8, pool="prod")])
    assert preempted(d) == []


# -- preempting jobs still hold their GPUs ---------------------------------------------------


def test_preempting_jobs_hold_their_gpus_until_gone():
    nodes = [node("n1", gpus=4)]
    jobs = [job(10, tenant="globex", state="preempting", gpus=4, on="n1",
                preempt_deadline=NOW + timedelta(minutes=3)),
            job(1, tenant="acme", gpus=4)]
    d = run(nodes, jobs, [quota("acme", 4), quota("globex", 4)])
    assert admitted(d) == {} and preempted(d) == []
    assert english(d.waiting[1].reason) == ("waiting for 1 preempted job to checkpoint and stop "
                                   "(by today 12:03 UTC)")
    assert d.waiting[1].eta_p50 == NOW + timedelta(minutes=3)


def test_capacity_being_released_is_promised_once():
    nodes = [node("n1", gpus=4)]
    jobs = [job(10, tenant="globex", state="preempting", gpus=4, on="n1",
                preempt_deadline=NOW + timedelta(minutes=3)),
            job(11, tenant="initech", state="running", gpus=0, on="n1"),
            job(20, tenant="initech", state="running", gpus=0, on="n1"),
            job(1, tenant="acme", gpus=4, minutes_ago=20),
            job(2, tenant="acme", gpus=4, minutes_ago=10)]
    d = run(nodes, jobs, [quota("acme", 8), quota("globex", 4)])
    assert "checkpoint" in english(d.waiting[1].reason)
    assert "checkpoint" not in english(d.waiting[2].reason)
    assert preempted(d) == []


def test_preempting_jobs_are_not_chosen_again():
    nodes = [node("n1", gpus=4)]
    jobs = [job(10, tenant="globex", state="preempting", gpus=2, on="n1", borrowing=True,
                preempt_deadline=NOW + timedelta(minutes=3)),
            job(11, tenant="globex", state="running", gpus=2, on="n1", borrowing=True),
            job(1, tenant="acme", gpus=4)]
    d = run(nodes, jobs, [quota("acme", 4), quota("globex", 0, 4)])
    assert preempted(d) == [11]


# -- watermark eviction ----------------------------------------------------------------------


def _watermark_case(extra_jobs=(), policy=None):
    # 16 GPUs; n1: globex 7 (within quota) + batch 1; n2: initech 6 (within quota); 14/16 > 85%.
    # acme needs 4 on one node: reclaiming the batch GPU would not fit it.
    nodes = [node("n1"), node("n2")]
    jobs = [job(10, tenant="globex", state="running", gpus=7, on="n1"),
            job(11, tenant="initech", tier="batch", state="running", gpus=1, on="n1"),
            job(12, tenant="initech", state="running", gpus=6, on="n2"),
            *extra_jobs]
    quotas = [quota("acme", 4), quota("globex", 8), quota("initech", 6, 8)]
    return run(nodes, jobs, quotas, policy=policy)


def test_watermark_evicts_batch_when_nominal_jobs_wait():
    d = _watermark_case([job(1, tenant="acme", gpus=4)])
    assert preempted(d) == [11]
    assert d.preempt[0].for_job is None
    assert "above the 85% eviction watermark" in english(d.preempt[0].reason)


def test_watermark_evicts_whether_or_not_anyone_waits():
    # (issue 13: the watermark used to fire only while a job within its quota waited)
    assert preempted(_watermark_case()) == [11]
    assert preempted(_watermark_case([job(1, tenant="acme", gpus=5)])) == [11]  # above quota
    d = _watermark_case()
    assert english(d.preempt[0].reason) == (
        "NVIDIA-H800 are at 88% of their physical capacity, above the 85% eviction watermark: "
        "preemptible work beyond its guarantee is evicted until use is back below it")


def test_watermark_threshold_is_policy():
    d = _watermark_case([job(1, tenant="acme", gpus=4)], policy=Policy(watermark=0.9))
    assert preempted(d) == []


def test_watermark_evicts_batch_then_borrowing_development_most_recent_first():
    nodes = [node("n1"), node("n2")]
    jobs = [job(10, tenant="globex", state="running", gpus=6, on="n1"),
            job(11, tenant="initech", state="running", gpus=1, on="n1", borrowing=True,
                admitted_at=NOW - timedelta(minutes=1)),
            job(12, tenant="initech", state="running", gpus=1, on="n1", borrowing=True,
                admitted_at=NOW - timedelta(minutes=30)),
            job(13, tenant="initech", tier="batch", state="running", gpus=1, on="n2",
                admitted_at=NOW - timedelta(minutes=60)),
            job(14, tenant="globex", state="running", gpus=6, on="n2"),
            job(1, tenant="acme", gpus=4)]
    quotas = [quota("acme", 4), quota("globex", 12), quota("initech", 0, 8)]
    # 15/16 allocated; limit 13.6: evict batch 13 (14), then the most recent borrower 11 (13).
    # (Reclaim could not fit acme's 4 on one node from these victims.)
    d = run(nodes, jobs, quotas)
    assert preempted(d) == [11, 13]


# -- held ----------------------------------------------------------------------------------


def test_held_jobs_are_never_admitted_and_say_so():
    d = run([node("n1")], [job(1, held=True), job(2)], [quota()])
    assert admitted(d) == {2: ("n1",)}
    w = d.waiting[1]
    assert english(w.reason) == "held by a platform admin"
    assert w.eta_p50 is None and w.position_in_pool == 1


def test_held_jobs_come_after_unheld_ones_in_positions():
    d = run([node("n1", used=8)], [job(1, held=True), job(2), job(3)], [quota()])
    assert [d.waiting[i].position_in_pool for i in (2, 3, 1)] == [1, 2, 3]


# -- decisions are unique ---------------------------------------------------------------------


def test_at_most_one_decision_per_job():
    nodes = [node("n1", gpus=4), node("n2", gpus=4)]
    jobs = [job(10, tenant="globex", state="running", gpus=4, on="n1", borrowing=True),
            job(11, tenant="globex", tier="batch", state="running", gpus=4, on="n2"),
            job(1, tenant="acme", gpus=4), job(2, tenant="acme", gpus=4),
            job(3, tenant="acme", pool="prod", gpus=4)]
    d = run(nodes, jobs, [quota("acme", 8), quota("acme", 4, pool="prod"), quota("globex", 0, 8)])
    ids = [a.job_id for a in d.admit] + [p.job_id for p in d.preempt] + list(d.waiting)
    assert len(ids) == len(set(ids))
    assert set(d.waiting) | {a.job_id for a in d.admit} == {1, 2, 3}


def test_mig_profiles_are_their_own_resource():
    nodes = [node("m1", gpus=0, mig={"1g.10gb": 7}, mig_used={"1g.10gb": 5})]
    jobs = [job(1, mig="1g.10gb", gpus=2), job(2, mig="1g.10gb", gpus=1)]
    d = run(nodes, jobs, [quota(nominal=7, key="mig:1g.10gb")])
    assert admitted(d) == {1: ("m1",)}
    assert english(d.waiting[2].reason).startswith("needs 1 1g.10gb MIG instance, 0 free")


def test_cpu_only_jobs_need_no_gpu_quota():
    d = run([node("c1", model="", gpus=0)], [job(1, gpus=0, model="", replicas=2)], [])
    assert admitted(d) == {1: ("c1", "c1")}


def test_unschedulable_nodes_are_not_used():
    d = run([node("n1", schedulable=False)], [job(1)], [quota()])
    assert admitted(d) == {}


def test_admitted_jobs_reserve_their_placement():
    jobs = [job(10, tenant="globex", state="admitted", gpus=6, on="n1"), job(1, gpus=4)]
    d = run([node("n1")], jobs, [quota("acme"), quota("globex")])
    assert admitted(d) == {}


def test_within_tenant_priority_preemption_also_when_the_job_would_borrow():
    nodes = [node("n1", gpus=4)]
    jobs = [job(10, state="running", gpus=2, on="n1", priority=50),
            job(11, state="running", gpus=2, on="n1", priority=50, borrowing=True),
            job(1, gpus=2, priority=200)]
    policy = Policy(preempt_lower_priority_within_tenant=True, watermark=1.0)
    d = run(nodes, jobs, [quota("acme", 2, 8)], policy=policy)
    assert preempted(d) == [11]   # the borrower of the two, and just one


def test_a_job_waiting_for_its_own_preempted_jobs_does_not_preempt_more():
    nodes = [node("n1", gpus=4)]
    jobs = [job(10, state="preempting", gpus=2, on="n1", priority=50,
                preempt_deadline=NOW + timedelta(seconds=30)),
            job(11, state="running", gpus=2, on="n1", priority=50),
            job(1, gpus=2, priority=200)]
    policy = Policy(preempt_lower_priority_within_tenant=True, watermark=1.0)
    d = run(nodes, jobs, [quota("acme", 4)], policy=policy)
    assert preempted(d) == []
    assert english(d.waiting[1].reason) == ("waiting for 1 preempted job to checkpoint and stop "
                                   "(by today 12:00 UTC)")


def test_grace_period_comes_from_the_victims_tier():
    nodes = [node("n1", gpus=4)]
    jobs = [job(10, tenant="globex", state="running", gpus=2, on="n1", borrowing=True),
            job(11, tenant="globex", tier="batch", state="running", gpus=2, on="n1"),
            job(1, pool="prod", gpus=4)]
    policy = Policy(grace_seconds={"production": 0, "development": 120, "batch": 10})
    d = run(nodes, jobs, [quota("acme", 4, pool="prod"), quota("globex", 0, 8)], policy=policy)
    assert {p.job_id: p.grace_seconds for p in d.preempt} == {10: 120, 11: 10}
    reason = english(d.waiting[1].reason)
    assert reason == ("waiting for 2 development and batch jobs to checkpoint "
                                   "and stop (by today 12:02 UTC)")


def test_waiting_reason_counts_only_the_preempting_jobs_it_waits_for():
    nodes = [node("n1", gpus=4), node("n2", gpus=4)]
    jobs = [job(10, tenant="globex", state="preempting", gpus=4, on="n1",
                preempt_deadline=NOW + timedelta(minutes=2)),
            job(11, tenant="globex", state="preempting", gpus=4, on="n2",
                preempt_deadline=NOW + timedelta(minutes=4)),
            job(1, gpus=4)]
    d = run(nodes, jobs, [quota("acme", 4), quota("globex", 8)])
    assert english(d.waiting[1].reason) == ("waiting for 1 preempted job to checkpoint and stop "
                                   "(by today 12:02 UTC)")


def test_a_borrower_never_preempts_other_borrowers_or_lower_tiers():
    nodes = [node("n1", gpus=4)]
    jobs = [job(10, tenant="globex", state="running", gpus=2, on="n1", borrowing=True),
            job(11, tenant="globex", state="running", gpus=2, on="n1"),
            job(1, tenant="acme", gpus=2),                 # dev, beyond its nominal 0
            job(2, tenant="acme", pool="prod", gpus=2)]    # production, beyond its nominal 0
    quotas = [quota("acme", 0, 8), quota("acme", 0, 8, pool="prod"), quota("globex", 0, 8)]
    d = run(nodes, jobs, quotas, policy=Policy(watermark=1.0))
    assert preempted(d) == [] and admitted(d) == {}


def test_cpu_only_jobs_use_only_schedulable_nodes():
    nodes = [node("c1", model="", gpus=0, schedulable=False)]
    d = run(nodes, [job(1, gpus=0, model="")], [])
    assert admitted(d) == {}
    assert english(d.waiting[1].reason) == "no schedulable node you may use"


# -- running jobs passed without placement (the engine then reasons in aggregate) ----------


def test_victims_of_unknown_placement_are_reclaimed_in_aggregate():
    nodes = [node("n1", gpus=4, used=4)]   # globex's dev job, placement not passed
    jobs = [job(10, tenant="globex", state="running", gpus=4),
            job(1, pool="prod", gpus=4)]
    d = decide_plain(nodes, jobs, [quota("acme", 4, pool="prod"), quota("globex", 4)])
    assert preempted(d) == [10]
    assert d.preempt[0].for_job == 1
    assert admitted(d) == {}


def test_preempting_jobs_of_unknown_placement_are_waited_for_not_replaced():
    nodes = [node("n1", gpus=4, used=4)]
    jobs = [job(10, tenant="globex", state="preempting", gpus=4,
                preempt_deadline=NOW + timedelta(minutes=5)),
            job(11, tenant="globex", state="running", gpus=0),
            job(1, pool="prod", gpus=4)]
    d = decide_plain(nodes, jobs, [quota("acme", 4, pool="prod"), quota("globex", 4)])
    assert preempted(d) == [] and admitted(d) == {}
    assert english(d.waiting[1].reason) == ("waiting for 1 preempted job to checkpoint and stop "
                                   "(by today 12:05 UTC)")


def test_unknown_placement_never_preempts_more_than_the_aggregate_needs():
    nodes = [node("n1", gpus=8, used=6)]
    jobs = [job(10, tenant="globex", state="running", gpus=2, borrowing=True,
                admitted_at=NOW - timedelta(minutes=1)),
            job(11, tenant="globex", state="running", gpus=2, borrowing=True,
                admitted_at=NOW - timedelta(minutes=2)),
            job(12, tenant="globex", state="running", gpus=2, borrowing=True,
                admitted_at=NOW - timedelta(minutes=3)),
            job(1, gpus=4)]
    d = decide_plain(nodes, jobs, [quota("acme", 4), quota("globex", 0, 8)],
                     policy=Policy(watermark=1.0))
    assert preempted(d) == [10]   # 2 free + 2 freed = 4
