"""Work-conserving admission (issue 27): no GPU idles while a job that fits it waits behind
a soft limit. Production runs within its pool's grant and never borrows; development and
batch borrow any idle capacity unless a platform admin capped it, and are reclaimed,
with their tier's grace, when an owner needs its own quota back. Pure: no database."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import replace
from datetime import timedelta

from core.texts import english
from jobs.admission import History, JobView, Policy, PoolQuota, decide
from jobs.admission.waste import cause_of, idle_while_waiting
from tenants.demand import UNLIMITED

from .test_admission_helpers import (
    A100,
    H800,
    NOW,
    admitted,
    job,
    node,
    preempted,
    run,
    with_usage,
)

GPU = f"gpu:{H800}"


def pool(tenant: str = "acme", kind: str = "dev", *, cap: int | None = None,
         **grants: int) -> PoolQuota:
    """A pool as ``jobs.selectors`` builds it: GPU grants by model (``H800=4``); no cap
    (``cap`` None): development and batch may borrow any idle capacity; a cap: its
    ceiling is ``cap`` x the grant, and what it was not granted it may not borrow."""
    nominal = {f"gpu:{A100 if name == 'A100' else H800}": amount
               for name, amount in grants.items()}
    if cap is None:
        return PoolQuota(tenant=tenant, pool=kind, nominal=nominal,
                         ceiling=dict.fromkeys(nominal, UNLIMITED), ceiling_default=UNLIMITED)
    return PoolQuota(tenant=tenant, pool=kind, nominal=nominal,
                     ceiling={k: v * cap for k, v in nominal.items()})


def test_development_borrows_idle_cards_beyond_its_grant_without_a_factor():
    """No overcommitted mode, no elastic factor: a static tenant's dev job larger than its
    grant runs on idle cards, marked borrowing."""
    d = run([node("n1"), node("n2")], [job(1, gpus=8), job(2, gpus=4)], [pool(H800=4)])
    # job 2 fits the grant, so it goes first (work within quota before borrowing work);
    # job 1, 8 cards on a grant of 4, borrows the other node
    assert admitted(d) == {1: ("n2",), 2: ("n1",)}
    assert {a.job_id: a.borrowing for a in d.admit} == {1: True, 2: False}


def test_work_within_quota_goes_before_borrowing_work_of_the_same_tier():
    """A tenant with no quota (its fair share always the smallest) cannot take back the
    cards an owner has just reclaimed from it: the owner's job within its quota goes
    first (as Kueue orders the workloads that do not borrow first)."""
    jobs = [job(1, tenant="globex", gpus=4, minutes_ago=90),   # older, no quota: borrows
            job(2, tenant="acme", gpus=4, minutes_ago=5)]
    d = run([node("n1", gpus=4)], jobs, [pool("acme", H800=4), pool("globex", H800=0)])
    assert admitted(d) == {2: ("n1",)}
    assert d.waiting[1].position_in_pool == 1


def test_development_borrows_a_model_it_was_not_granted():
    d = run([node("a1", model=A100)], [job(1, model=A100, gpus=2)], [pool(H800=4)])
    assert admitted(d) == {1: ("a1",)} and d.admit[0].borrowing


def test_batch_runs_on_any_idle_capacity_with_no_ceiling():
    nodes = [node("n1"), node("n2")]
    jobs = [job(1, tier="batch", gpus=8), job(2, tier="batch", gpus=8, pool="prod")]
    d = run(nodes, jobs, [pool(H800=0), pool(kind="prod", H800=1)],
            policy=Policy(watermark=1.0))
    assert sorted(admitted(d)) == [1, 2]


def test_production_never_borrows_even_beside_idle_cards():
    """Production runs within its grant and is never preempted, so it may not take cards
    that would have to be reclaimed: above its quota it waits, and says so."""
    nodes = [node("n1"), node("n2")]
    jobs = [job(10, pool="prod", state="running", gpus=4, on="n1"),
            job(1, pool="prod", gpus=4)]
    uncapped_ceiling = replace(pool(kind="prod", H800=4), ceiling={GPU: 16})
    d = run(nodes, jobs, [uncapped_ceiling])
    assert admitted(d) == {}
    assert english(d.waiting[1].reason).startswith("above your prod quota of 4 NVIDIA-H800")
    # a production job larger than its grant could never start
    d = run(nodes, [job(2, pool="prod", gpus=8)], [uncapped_ceiling])
    assert english(d.waiting[2].reason).startswith(
        "asks for 8 NVIDIA-H800, more than your prod quota of 4")


def test_the_owner_gets_its_quota_back_within_the_borrowers_grace():
    """globex borrows the whole node; acme's job within its own quota reclaims what it
    needs: the most recently admitted borrower first, each with its tier's grace."""
    nodes = [node("n1")]
    jobs = [job(10, tenant="globex", state="running", gpus=4, on="n1", borrowing=True,
                admitted_at=NOW - timedelta(minutes=30)),
            job(11, tenant="globex", state="running", gpus=4, on="n1", borrowing=True,
                admitted_at=NOW - timedelta(minutes=5)),
            job(1, tenant="acme", gpus=4)]
    d = run(nodes, jobs, [pool("acme", H800=4), pool("globex", H800=0)],
            policy=Policy(watermark=1.0))   # the reclaim rule alone
    [p] = d.preempt
    assert (p.job_id, p.for_job, p.grace_seconds) == (11, 1, 300)
    assert "returning borrowed NVIDIA-H800" in english(p.reason)


def test_batch_is_reclaimed_before_borrowing_development_work():
    nodes = [node("n1")]
    jobs = [job(10, tenant="globex", state="running", gpus=4, on="n1", borrowing=True,
                admitted_at=NOW - timedelta(minutes=1)),
            job(11, tenant="initech", tier="batch", state="running", gpus=4, on="n1",
                admitted_at=NOW - timedelta(minutes=30)),
            job(1, tenant="acme", gpus=4)]
    d = run(nodes, jobs, [pool("acme", H800=4), pool("globex", H800=0),
                          pool("initech", H800=0)], policy=Policy(watermark=1.0))
    assert preempted(d) == [11] and d.preempt[0].grace_seconds == 30


def test_a_capped_tenant_waits_with_the_cap_named():
    nodes = [node("n1"), node("n2")]
    jobs = [job(10, state="running", gpus=6, on="n1"), job(1, gpus=4)]
    d = run(nodes, jobs, [pool(cap=2, H800=4)])   # may hold 8: 6 + 4 is above
    assert admitted(d) == {}
    assert d.waiting[1].reason["code"] == "jobs.wait.borrow_cap"
    assert english(d.waiting[1].reason) == (
        "above your dev quota of 4 NVIDIA-H800 and the borrowing cap of 8 NVIDIA-H800 a "
        "platform admin set (6 in use): waits for your jobs to finish, or ask for more quota")


def test_the_guaranteed_part_of_an_overcommitted_tenant_is_never_lent():
    """acme's guarantee (3 of its 4) is protected: its job within the guarantee reclaims
    from a borrower even when the borrower's pool is within its own nominal quota."""
    nodes = [node("n1", gpus=4)]
    acme = replace(pool("acme", H800=4), guaranteed={GPU: 3})
    globex = replace(pool("globex", H800=4), guaranteed={GPU: 1})
    jobs = [job(10, tenant="globex", state="running", gpus=4, on="n1"),
            job(1, tenant="acme", gpus=3)]
    d = run(nodes, jobs, [acme, globex], policy=Policy(watermark=1.0))
    assert preempted(d) == [10]


# -- the properties -------------------------------------------------------------------------


def _case(seed: int):
    """A random cluster, grants that fit it (no overcommit) and a queue; no borrowing cap."""
    rng = random.Random(seed)
    nodes = [node(f"n{i}", gpus=8, switch=f"s{i % 2}") for i in range(rng.randint(1, 5))]
    if rng.random() < 0.5:
        nodes.append(node("a0", model=A100, gpus=8))
    capacity = 8 * sum(1 for n in nodes if n.gpu_model == H800)
    tenants = ("acme", "globex", "initech")
    left = capacity
    quotas = []
    for tenant in tenants:
        for kind in ("prod", "dev"):
            grant = rng.randint(0, max(0, min(left, 8)))
            left -= grant
            quotas.append(pool(tenant, kind, H800=grant))
    jobs: list[JobView] = []
    for i in range(rng.randint(1, 30)):
        tenant, kind = rng.choice(tenants), rng.choice(("prod", "dev"))
        tier = rng.choice(({"prod": "production", "dev": "development"}[kind], "batch"))
        replicas, gpus = rng.choice(((1, 1), (1, 2), (1, 4), (2, 4), (1, 8)))
        model = A100 if rng.random() < 0.2 else H800
        jobs.append(job(i + 1, tenant=tenant, pool=kind, tier=tier, replicas=replicas,
                        gpus=gpus, model=model, priority=rng.choice((0, 50))))
    return nodes, jobs, quotas


def test_no_pass_leaves_a_soft_limited_fitting_job_beside_idle_capacity():
    """Over random queues and grants: after a pass, no waiting job that fits the idle
    capacity waits because of a soft limit, and production never exceeds its grant."""
    checked = 0
    for seed in range(300):
        nodes, jobs, quotas = _case(seed)
        d = run(nodes, jobs, quotas, policy=Policy(watermark=1.0))
        fig = idle_while_waiting(nodes=with_usage(nodes, jobs), jobs=jobs, decisions=d)
        for key, idle in fig.items():
            assert idle.waiting.get("soft_limit", 0) == 0, (seed, key, idle)
            assert idle.waiting.get("cap", 0) == 0, (seed, key, idle)
        by_id = {j.id: j for j in jobs}
        held: dict[tuple[str, str], int] = defaultdict(int)
        for a in d.admit:
            j = by_id[a.job_id]
            if j.tier == "production":
                held[(j.tenant, j.pool, j.resource_key)] += j.demand
        grants = {(q.tenant, q.pool): q.nominal for q in quotas}
        for (tenant, kind, key), units in held.items():
            assert units <= grants[(tenant, kind)].get(key, 0), (seed, tenant, kind, key)
        for job_id, info in d.waiting.items():
            tier = by_id[job_id].tier
            assert cause_of(info.reason, tier) != "soft_limit", (seed, job_id, info.reason)
            checked += 1
    assert checked > 300


def _simulate(seed: int) -> list[tuple[float, float]]:
    """Borrowers fill the cluster, then an owner's job within its own quota arrives; the
    passes run every 10 s, a preempted job stops at its deadline, an admitted one runs.
    Returns (owner's wait, the largest grace of the tiers that held its room) per case."""
    rng = random.Random(seed)
    nodes = [node(f"n{i}", gpus=8) for i in range(rng.randint(1, 3))]
    capacity = 8 * len(nodes)
    owner_grant = rng.choice((2, 4, 8))
    quotas = [pool("acme", H800=owner_grant), pool("globex", H800=0),
              pool("initech", kind="prod", H800=0)]
    policy = Policy(watermark=1.0)
    history = History()
    running: list[JobView] = []
    next_id = 100
    free = {n.name: 8 for n in nodes}
    while sum(free.values()) > 0:   # borrowers: development (globex) and batch (initech)
        name = max(free, key=lambda k: free[k])
        gpus = min(free[name], rng.choice((1, 2, 4, 8)))
        batch = rng.random() < 0.4
        running.append(job(next_id, tenant="initech" if batch else "globex",
                           pool="prod" if batch else "dev",
                           tier="batch" if batch else "development", state="running",
                           gpus=gpus, on=name, borrowing=not batch,
                           admitted_at=NOW - timedelta(minutes=rng.randint(1, 60)),
                           expected_seconds=86400.0))
        free[name] -= gpus
        next_id += 1
    owner = replace(job(1, tenant="acme", gpus=min(owner_grant, 8)), submitted_at=NOW)
    now = NOW
    grace = {"development": 300, "batch": 30}
    worst = 0.0
    for _ in range(60):
        jobs = [*running, owner]
        d = decide(nodes=with_usage(nodes, jobs), jobs=jobs, quotas=quotas, policy=policy,
                   history=history, now=now)
        if any(a.job_id == 1 for a in d.admit):
            return [((now - NOW).total_seconds(), worst)]
        for p in d.preempt:
            victim = next(j for j in running if j.id == p.job_id)
            worst = max(worst, float(grace[victim.tier]))
            running = [replace(j, state="preempting",
                               preempt_deadline=now + timedelta(seconds=p.grace_seconds))
                       if j.id == p.job_id else j for j in running]
        now += timedelta(seconds=10)
        running = [j for j in running
                   if not (j.state == "preempting" and j.preempt_deadline <= now)]
    raise AssertionError(f"seed {seed}: the owner never started ({capacity} cards)")


def test_a_job_within_its_quota_waits_for_borrowers_no_longer_than_their_grace():
    for seed in range(60):
        for waited, grace in _simulate(seed):
            # the grace, and one pass to notice the room is free
            assert waited <= grace + 20, (seed, waited, grace)


def test_production_starts_on_idle_cards_beside_its_pools_borrowing_batch_work():
    """The prod pool's batch work borrows beyond the grant; production within its grant
    starts on the idle cards at once (its pods are held to the grant by their own scoped
    quota), without waiting for the batch work to be preempted. Under a cap of 1, the
    pool's pods together may hold the grant alone: then the batch work yields."""
    nodes = [node("n1"), node("n2")]
    jobs = [job(10, pool="prod", tier="batch", state="running", gpus=8, on="n1"),
            job(1, pool="prod", gpus=4)]
    d = run(nodes, jobs, [pool(kind="prod", H800=8)], policy=Policy(watermark=1.0))
    assert admitted(d) == {1: ("n2",)} and preempted(d) == []
    d = run(nodes, jobs, [pool(kind="prod", cap=1, H800=8)], policy=Policy(watermark=1.0))
    assert admitted(d) == {} and preempted(d) == [10]
