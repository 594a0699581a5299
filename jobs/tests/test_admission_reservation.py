"""Anti-starvation: the first waiting job of a GPU model has its room reserved at its ETA,
and later jobs backfill only when they do not delay it. Pure: no database."""

from __future__ import annotations

import random
import re
from datetime import timedelta

from core.texts import english
from jobs.admission import History

from .test_admission_helpers import NOW, admitted, job, node, quota, run

NODES = [node("n1"), node("n2")]
QUOTAS = [quota("acme", 32), quota("globex", 32)]


def holders() -> list:
    """n1 half held until 50 minutes from now, n2 half held until 20 minutes from now."""
    return [job(10, tenant="globex", state="running", gpus=4, on="n1",
                expected_seconds=3600.0, max_run_seconds=3600.0),
            job(11, tenant="globex", state="running", gpus=4, on="n2",
                expected_seconds=1800.0, max_run_seconds=1800.0)]


def large() -> list:
    return [job(1, replicas=2, gpus=8, minutes_ago=30)]


def test_the_head_of_the_queue_gets_a_reservation_and_a_small_short_job_backfills():
    alone = run(NODES, holders() + large(), QUOTAS)
    head_eta = alone.waiting[1].eta_p50
    assert head_eta == NOW + timedelta(minutes=50)
    short = job(2, gpus=1, minutes_ago=5, expected_seconds=300.0, max_run_seconds=900.0)
    long = job(3, gpus=1, minutes_ago=4, expected_seconds=7200.0, max_run_seconds=7200.0)
    d = run(NODES, holders() + large() + [short, long], QUOTAS)
    assert set(admitted(d)) == {2}   # ends (p90 at most 15 min) before the reserved start
    assert d.waiting[1].eta_p50 == head_eta
    w = d.waiting[3]
    assert w.reason[0]["code"] == "jobs.wait.reserved"
    # the one format of times (core.when): the reader's zone, with its day
    assert re.search(r"reserved from \S.* 12:50 UTC", english(w.reason))
    assert w.eta_p50 is not None and w.eta_p50 >= head_eta   # it goes after the head


def test_without_the_large_job_small_jobs_start_at_once():
    long = job(3, gpus=1, minutes_ago=4, expected_seconds=7200.0)
    d = run(NODES, [*holders(), long], QUOTAS)
    assert set(admitted(d)) == {3}


def test_a_backfill_that_leaves_the_reserved_room_alone_may_run_long():
    nodes = [*NODES, node("n3", switch="s2")]   # n3 is not where the head will go
    long = job(3, gpus=8, minutes_ago=4, expected_seconds=7200.0)
    d = run(nodes, holders() + large() + [long], QUOTAS)
    assert admitted(d) == {3: ("n3",)}
    assert d.waiting[1].eta_p50 == NOW + timedelta(minutes=50)   # as without job 3


def test_the_head_eta_never_moves_later_when_small_jobs_arrive():
    """Property: whatever small jobs arrive behind it, the head's ETA stays."""
    rng = random.Random(5)
    history = History(durations={("acme", "development"): (600.0, 1200.0, 2400.0, 4800.0)})
    for trial in range(60):
        base = holders() + large()
        before = run(NODES, base, QUOTAS, history=history).waiting[1].eta_p50
        small = [job(100 + i, tenant=rng.choice(("acme", "globex")), gpus=rng.choice((1, 2, 4)),
                     minutes_ago=rng.uniform(0, 29),
                     expected_seconds=rng.choice((None, 300.0, 1500.0, 9000.0)),
                     max_run_seconds=rng.choice((None, 1200.0, 36000.0)))
                 for i in range(rng.randint(1, 12))]
        d = run(NODES, base + small, QUOTAS, history=history)
        assert d.waiting[1].eta_p50 is not None and before is not None
        assert d.waiting[1].eta_p50 <= before, trial
        assert d.waiting[1].position_in_pool == 1
