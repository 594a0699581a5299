"""The per-pass shortcuts of the admission engine decide as the plain reading they replace.

* The victim index (``jobs.admission.victims.VictimIndex``): the victims a reclaim reads
  lazily from it are exactly the eligible candidates, in the candidates' order, that a
  scan of every candidate of the key finds (``Reclaim.eligible_victims``).
* A failing reclaim that stops early (``Reclaim.stop_early``) decides as one that reads
  every candidate.
* The incremental engine deciding without explaining on most passes (as the admission
  loop does), keeping run times and "can never start" verdicts between passes, decides as
  the full engine on every pass, and explains as it on the passes that explain.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.admission import Policy, PoolQuota, decide
from jobs.admission.engine import _Pass
from jobs.admission.explain import _BATCH, _BORROW, _NOMINAL, _OVER
from jobs.admission.incremental import Engine
from jobs.admission.reclaim import _MAX_VICTIMS

from .test_admission_helpers import NOW, job, node, quota, run
from .test_admission_incremental import EVENTS, World

# more submissions and applied decisions than the incremental test: running work to take
events_of = st.lists(st.tuples(st.sampled_from(EVENTS + ("apply", "bind", "submit") * 2),
                               st.integers(0, 2**31)), min_size=4, max_size=30)


def _world(seed: int, events: list[tuple[str, int]]) -> World:
    world = World.make(seed)
    for _ in range(world.rng.randint(6, 16)):
        world.on_submit(world.rng)
    world.last = decide(**world.inputs())
    for name, param in events:
        world.event(name, param)
        world.last = decide(**world.inputs())
    return world


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31), events=events_of)
def test_the_victim_index_reads_the_eligible_candidates_in_order(seed, events):
    world = _world(seed, events)
    rng = random.Random(seed)
    for job_id, view in list(world.jobs.items()):   # borrowed work and ended loans to read
        if view.state in ("running", "admitted") and rng.random() < 0.5:
            world.jobs[job_id] = replace(view, borrowing=True, loan_ended=rng.random() < 0.3)
    inputs = world.inputs()
    pass_ = _Pass(inputs["nodes"], inputs["jobs"], inputs["quotas"], inputs["policy"],
                  inputs["history"], inputs["now"], inputs["physical"])
    # some victims already taken this pass: they are never read again
    for cands in pass_.candidates.values():
        for victim in cands:
            if rng.random() < 0.2:
                pass_.victims[victim.id] = None  # type: ignore[assignment]
    for waiting in pass_.queued:
        key = waiting.resource_key
        if not key:
            continue
        for mode in (_NOMINAL, _BORROW, _BATCH, _OVER):
            for within_g in (False, True):
                for own_first in (False, True):
                    scan = [v for v in pass_.candidates.get(key, ())
                            if pass_.eligible_victim(v, waiting, mode, within_g)]
                    if own_first:
                        mine = (waiting.tenant, waiting.pool)
                        scan.sort(key=lambda v: 0 if (v.tenant, v.pool) == mine else 1)
                    read = list(pass_.eligible_victims(waiting, key, mode, within_g,
                                                       own_first=own_first))
                    assert [v.id for v in read] == [v.id for v in scan[:_MAX_VICTIMS]]


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31), events=events_of)
def test_a_reclaim_that_stops_early_decides_as_one_that_reads_every_candidate(seed, events):
    world = _world(seed, events)
    inputs = world.inputs()
    early = decide(**inputs)
    try:
        _Pass.stop_early = False
        to_the_end = decide(**inputs)
    finally:
        _Pass.stop_early = True
    assert (early.admit, early.preempt, early.waiting) == (
        to_the_end.admit, to_the_end.preempt, to_the_end.waiting)


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31), events=events_of,
       explain_every=st.integers(1, 4))
def test_deciding_without_explaining_between_explanations(seed, events, explain_every):
    """As the admission loop runs it: most passes decide only (no reasons worded, run
    times and verdicts kept); each equals the full engine, and an explaining pass
    explains every waiting job as the full engine does."""
    world = World.make(seed)
    for _ in range(world.rng.randint(3, 12)):
        world.on_submit(world.rng)
    engine = Engine(max_age=0)
    for n, (name, param) in enumerate(events):
        world.event(name, param)
        inputs = world.inputs()
        explain = n % explain_every == 0
        full = decide(**inputs, explain=explain)
        got = engine.decide(**inputs, explain=explain)
        assert (got.admit, got.preempt) == (full.admit, full.preempt)
        if explain:
            assert got.waiting == full.waiting
        else:
            assert got.waiting == {} == full.waiting
        world.last = full


def test_a_job_that_can_never_start_is_parked_until_its_quota_changes():
    """Above its pool's cap, a job can never start: the engine keeps that verdict between
    passes, and a larger quota (a new PoolQuota) takes it back at once."""
    world = World.make(11)
    world.jobs.clear()
    world.nodes = {"a1": {"model": "A", "switch": "s0", "gpus": 8, "mig": {}, "shared": 0,
                          "cpu": 0, "memory": 0, "schedulable": True, "dedicated": "",
                          "outside": 0}}
    world.quotas = {("t0", "dev"): PoolQuota("t0", "dev", {"gpu:A": 2}, {"gpu:A": 2})}
    world.on_submit(random.Random(0))
    job = next(iter(world.jobs.values()))
    world.jobs[job.id] = replace(job, tenant="t0", pool="dev", tier="development",
                                 gpu_model="A", mig_profile="", gpu_shared=False,
                                 replicas=1, gpus_per_replica=4, resources={}, held=False)
    engine = Engine()
    for _ in range(2):
        got = engine.decide(**world.inputs())
        assert got.admit == []
        assert got.waiting[job.id].reason["code"] == "jobs.never.above_cap"
    assert engine._verdicts["gpu:A"]
    world.quotas = {("t0", "dev"): PoolQuota("t0", "dev", {"gpu:A": 4}, {"gpu:A": 8})}
    got = engine.decide(**world.inputs())
    assert [a.job_id for a in got.admit] == [job.id]
    assert got == decide(**world.inputs())


def test_a_reclaim_whose_first_victims_are_not_enough_reads_on():
    """Batch jobs of one GPU, the most recent alternating between two nodes: the first
    four free four GPUs but on two nodes, too few for a 4-GPU job; the seventh frees a
    whole node. The early stop must not give up on the first placement that failed."""
    nodes = [node("n1", gpus=4, switch="s0"), node("n2", gpus=4, switch="s1")]
    running = [job(10 + i, tenant="other", tier="batch", state="running",
                   on="n1" if i % 2 == 0 else "n2",
                   admitted_at=NOW - timedelta(minutes=60 - i)) for i in range(8)]
    # n1 is the less recently admitted: most recent first reads n2, n1, n2, n1, ...
    waiting = job(1, tenant="acme", gpus=4)
    quotas = [quota("acme", 8), quota("other", 0, 8)]
    policy = Policy(watermark=1.0)   # no watermark eviction: only this job's victims
    early = run(nodes, [*running, waiting], quotas, policy=policy)
    try:
        _Pass.stop_early = False
        to_the_end = run(nodes, [*running, waiting], quotas, policy=policy)
    finally:
        _Pass.stop_early = True
    assert early.preempt == to_the_end.preempt
    # read past the first four: n2's four batch jobs are among the victims
    assert {11, 13, 15, 17} <= {p.job_id for p in early.preempt}
    assert all(p.for_job == 1 for p in early.preempt)
