"""Invariants over random clusters and queues (seeded), determinism, and scale smoke."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import replace
from datetime import timedelta

import pytest

from core.texts import english
from jobs.admission import TIERS, Decisions, History, JobView, NodeView, Policy, PoolQuota, decide

from .test_admission_helpers import A100, H800, NOW, run, with_usage

MODELS = (H800, A100)
TENANTS = ("acme", "globex", "initech", "umbrella")


def random_case(seed: int) -> tuple[list[NodeView], list[JobView], list[PoolQuota], Policy]:
    """A consistent random cluster: running jobs fit their nodes and their pool's ceiling."""
    rng = random.Random(seed)
    nodes: list[NodeView] = []
    for i in range(rng.randint(2, 14)):
        model = rng.choice(MODELS)
        gpus = rng.choice((4, 8, 8))
        nodes.append(NodeView(
            name=f"n{i:02d}", gpu_model=model, switch=f"s{rng.randint(0, 2)}", gpus=gpus,
            gpus_used=rng.choice((0, 0, 0, 1)), mig={}, mig_used={},
            schedulable=rng.random() > 0.1,
            dedicated_to=rng.choice(("",) * 6 + TENANTS[:1])))
    quotas = []
    for tenant in TENANTS:
        for pool in ("prod", "dev"):
            nominal = {f"gpu:{m}": rng.choice((0, 4, 8, 16)) for m in MODELS}
            ceiling = {k: v + rng.choice((0, 0, 8, 32)) for k, v in nominal.items()}
            quotas.append(PoolQuota(tenant, pool, nominal, ceiling))
    limits = {(q.tenant, q.pool): q for q in quotas}
    free = {n.name: n.gpus - n.gpus_used for n in nodes}
    use: dict[tuple[str, str, str], int] = defaultdict(int)
    use_nb: dict[tuple[str, str, str], int] = defaultdict(int)
    jobs: list[JobView] = []
    next_id = 1
    for _ in range(rng.randint(0, 30)):   # active jobs, placed where they fit
        tenant, pool = rng.choice(TENANTS), rng.choice(("prod", "dev"))
        tier = rng.choice(({"prod": "production", "dev": "development"}[pool], "batch"))
        model = rng.choice(MODELS)
        replicas, per = rng.choice(((1, 1), (1, 2), (1, 4), (2, 4), (1, 8)))
        key = f"gpu:{model}"
        q = limits[(tenant, pool)]
        if use[(tenant, pool, key)] + replicas * per > q.ceiling[key]:
            continue
        placement = []
        for _r in range(replicas):
            spots = [n for n in nodes if n.gpu_model == model and free[n.name] >= per
                     and n.dedicated_to in ("", tenant)]
            if not spots:
                break
            spot = rng.choice(spots)
            free[spot.name] -= per
            placement.append(spot.name)
        if len(placement) < replicas:
            for name in placement:
                free[name] += per
            continue
        state = rng.choice(("running", "running", "admitted", "preempting"))
        over = use_nb[(tenant, pool, key)] + replicas * per > q.nominal[key]
        use[(tenant, pool, key)] += replicas * per
        if tier != "batch":
            use_nb[(tenant, pool, key)] += replicas * per
        jobs.append(JobView(
            id=next_id, tenant=tenant, pool=pool, tier=tier, gpu_model=model, mig_profile="",
            replicas=replicas, gpus_per_replica=per, state=state,
            submitted_at=NOW - timedelta(hours=2),
            admitted_at=NOW - timedelta(minutes=rng.randint(1, 100)),
            started_at=NOW - timedelta(minutes=rng.randint(1, 100)),
            expected_seconds=rng.choice((None, 600.0, 7200.0)),
            borrowing=over and tier != "batch", placement=tuple(placement),
            preempt_deadline=NOW + timedelta(minutes=2) if state == "preempting" else None))
        next_id += 1
    for _ in range(rng.randint(0, 40)):   # queued jobs
        tenant, pool = rng.choice(TENANTS), rng.choice(("prod", "dev"))
        tier = rng.choice(({"prod": "production", "dev": "development"}[pool], "batch"))
        replicas, per = rng.choice(((1, 1), (1, 2), (1, 4), (2, 4), (2, 8), (3, 8), (1, 16)))
        jobs.append(JobView(
            id=next_id, tenant=tenant, pool=pool, tier=tier, gpu_model=rng.choice(MODELS),
            mig_profile="", replicas=replicas, gpus_per_replica=per, state="queued",
            submitted_at=NOW - timedelta(minutes=rng.randint(0, 300)),
            expected_seconds=rng.choice((None, 300.0, 3600.0)),
            priority=rng.choice((0, 0, 0, 5)), held=rng.random() < 0.05))
        next_id += 1
    policy = Policy(watermark=rng.choice((0.85, 0.85, 1.0)),
                    preempt_lower_priority_within_tenant=rng.random() < 0.5)
    rng.shuffle(jobs)
    return nodes, jobs, quotas, policy


def check_invariants(nodes: list[NodeView], jobs: list[JobView], quotas: list[PoolQuota],
                     d: Decisions) -> None:
    by_id = {j.id: j for j in jobs}
    by_node = {n.name: n for n in nodes}
    # at most one decision per job; every waiting or admitted job was queued
    ids = [a.job_id for a in d.admit] + [p.job_id for p in d.preempt] + list(d.waiting)
    assert len(ids) == len(set(ids))
    queued = {j.id for j in jobs if j.state == "queued"}
    assert {a.job_id for a in d.admit} | set(d.waiting) == queued
    # no node over-allocated: gpus_used (bound pods) + admitted placements + new admissions
    load: dict[str, int] = defaultdict(int)
    for j in jobs:
        if j.state == "admitted":
            for name in j.placement:
                load[name] += j.gpus_per_replica
    for a in d.admit:
        j = by_id[a.job_id]
        # no admitted job without a full placement on allowed, schedulable nodes of its model
        assert len(a.placement) == j.replicas
        assert not j.held
        for name in a.placement:
            n = by_node[name]
            assert n.schedulable and n.gpu_model == j.gpu_model
            assert n.dedicated_to in ("", j.tenant)
            load[name] += j.gpus_per_replica
        if len(set(a.placement)) > 1:
            assert len({by_node[name].switch for name in a.placement}) == 1
    for n in nodes:
        assert n.gpus_used + load[n.name] <= n.gpus, n.name
    # no pool above its ceiling; non-borrowing admissions within nominal
    limits = {(q.tenant, q.pool): q for q in quotas}
    use: dict[tuple[str, str, str], int] = defaultdict(int)
    for j in jobs:
        if j.state in ("running", "preempting", "admitted"):
            use[(j.tenant, j.pool, f"gpu:{j.gpu_model}")] += j.replicas * j.gpus_per_replica
    for a in d.admit:
        j = by_id[a.job_id]
        use[(j.tenant, j.pool, f"gpu:{j.gpu_model}")] += j.replicas * j.gpus_per_replica
    for (tenant, pool, key), amount in use.items():
        assert amount <= limits[(tenant, pool)].ceiling[key]
    # preemptions: never production, never twice, only running or admitted jobs
    for p in d.preempt:
        victim = by_id[p.job_id]
        assert victim.tier != "production"
        assert victim.state in ("running", "admitted")
        assert p.grace_seconds >= 0
        if p.for_job is not None:
            assert p.for_job in d.waiting
    # waiting info is sane
    for tier_pool in ("prod", "dev"):
        positions = sorted(w.position_in_pool for i, w in d.waiting.items()
                           if by_id[i].pool == tier_pool)
        assert positions == list(range(1, len(positions) + 1))
    for model in MODELS:
        positions = sorted(w.position_in_model for i, w in d.waiting.items()
                           if by_id[i].gpu_model == model)
        assert positions == list(range(1, len(positions) + 1))
    for i, w in d.waiting.items():
        assert english(w.reason)
        if by_id[i].held:
            assert english(w.reason) == "held by a platform admin" and w.eta_p50 is None
        if w.eta_p50 is not None:
            assert w.eta_p90 is not None and NOW <= w.eta_p50 <= w.eta_p90
    assert set(TIERS) >= {by_id[i].tier for i in d.waiting}


@pytest.mark.parametrize("seed", range(300))
def test_invariants_hold_on_random_clusters(seed):
    nodes, jobs, quotas, policy = random_case(seed)
    d = run(nodes, jobs, quotas, policy=policy)
    check_invariants(with_usage(nodes, jobs), jobs, quotas, d)


@pytest.mark.parametrize("seed", range(150))
def test_invariants_hold_when_running_jobs_come_without_placement(seed):
    """The caller may not know where running pods are: reclaim then works in aggregate."""
    nodes, jobs, quotas, policy = random_case(seed)
    nodes = with_usage(nodes, jobs)
    jobs = [j if j.state in ("queued", "admitted") else replace(j, placement=())
            for j in jobs]
    d = decide(nodes=nodes, jobs=jobs, quotas=quotas, policy=policy, history=History(),
               now=NOW)
    check_invariants(nodes, jobs, quotas, d)


@pytest.mark.parametrize("seed", range(20))
def test_deterministic_whatever_the_input_order(seed):
    nodes, jobs, quotas, policy = random_case(seed)
    first = run(nodes, jobs, quotas, policy=policy)
    rng = random.Random(seed + 1000)
    for _ in range(3):
        rng.shuffle(nodes)
        rng.shuffle(jobs)
        rng.shuffle(quotas)
        again = run(list(nodes), list(jobs), list(quotas), policy=policy)
        assert again == first


def test_some_random_cases_admit_preempt_and_wait():
    """Guard against a generator that never exercises the engine."""
    totals = defaultdict(int)
    for seed in range(300):
        nodes, jobs, quotas, policy = random_case(seed)
        d = run(nodes, jobs, quotas, policy=policy)
        totals["admit"] += len(d.admit)
        totals["preempt"] += len(d.preempt)
        totals["reclaim"] += sum(1 for p in d.preempt if p.for_job is not None)
        totals["wait"] += len(d.waiting)
    assert min(totals.values()) > 20, totals


def test_a_thousand_job_queue_on_a_hundred_nodes_is_decided():
    rng = random.Random(7)
    nodes = [NodeView(f"n{i:03d}", MODELS[i % 2], f"s{i % 10}", 8, 0, {}, {}, True)
             for i in range(100)]
    jobs = [JobView(i, TENANTS[i % 4], "dev", "development", MODELS[i % 2], "",
                    rng.choice((1, 2, 4)), rng.choice((1, 2, 4, 8)), "queued",
                    NOW - timedelta(seconds=i)) for i in range(1, 3001)]
    quotas = [PoolQuota(t, "dev", {f"gpu:{m}": 100 for m in MODELS},
                        {f"gpu:{m}": 400 for m in MODELS}) for t in TENANTS]
    d = run(nodes, jobs, quotas)
    assert sum(len(a.placement) for a in d.admit) > 0
    assert len(d.admit) + len(d.waiting) == 3000
