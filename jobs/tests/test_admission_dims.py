"""Admission checks every dimension a job consumes (cpu, memory, GPU memory, shared GPUs),
the whole gang against one bucket. Pure: no database."""

from __future__ import annotations

import random
from collections import defaultdict
from decimal import Decimal

from django.utils.html import escape

from core.texts import english, text_code
from jobs.admission import NodeView, Policy, PoolQuota
from tenants.demand import CardFacts, engine_demand, job_demand

from .test_admission_helpers import H800, admitted, job, node, preempted, run

L40S = "NVIDIA-L40S"
FACTS = CardFacts(card_memory_gib={H800: Decimal(80)}, share_memory_gib={L40S: Decimal(12)})


def need(*, workers: int = 1, cpu: float = 8, memory: float = 64, gpus: int = 1,
         model: str = H800, mig: str = "", shared: bool = False,
         per_card: float | None = None) -> dict[str, int]:
    """A job's demand in engine units, by the one definition (tenants.demand)."""
    return engine_demand(job_demand(
        workers=workers, cpu_per_worker=cpu, memory_gib_per_worker=memory,
        gpus_per_worker=gpus, gpu_model=model, mig_profile=mig, gpu_shared=shared,
        gpu_memory_gib_per_card=per_card, facts=FACTS))


def pool_quota(tenant: str = "acme", pool: str = "dev", **amounts: int | tuple[int, int]
               ) -> PoolQuota:
    """Quota in catalog units (cpu cores, memory GiB ...); a tuple is (nominal, ceiling)."""
    nominal, ceiling = {}, {}
    for name, value in amounts.items():
        key = {"gpu": f"gpu:{H800}", "gpu_memory": "gpu-memory", "gpu_shared": "gpu-shared",
               "cpu": "cpu", "memory": "memory"}[name]
        nom, ceil = value if isinstance(value, tuple) else (value, value)
        scale = 1000 if key in ("cpu", "memory", "gpu-memory") else 1
        nominal[key], ceiling[key] = nom * scale, ceil * scale
    return PoolQuota(tenant=tenant, pool=pool, nominal=nominal, ceiling=ceiling)


def test_the_demand_counts_requests_for_the_whole_gang():
    # 2 workers of 8 cores (request 4 each) and 64 GiB (request 57.6 each), 4 H800 each
    assert need(workers=2, gpus=4) == {"cpu": 8000, "memory": 115200, f"gpu:{H800}": 8,
                                       "gpu-memory": 640000}
    assert need(gpus=3, mig="1g.10gb", cpu=0.5, memory=0)["gpu-memory"] == 30000
    assert need(gpus=2, shared=True, model=L40S)["gpu-memory"] == 24000   # 12 GiB a share
    assert need(gpus=2, per_card=20)["gpu-memory"] == 40000   # HAMi's limit per card
    assert "gpu-memory" not in need(model="UNKNOWN")   # memory unknown: counts nothing


def test_within_gpu_quota_but_over_cpu_quota_waits_with_a_cpu_reason():
    jobs = [job(10, state="running", gpus=2, on="n1", resources=need(gpus=2, cpu=16)),
            job(1, gpus=2, resources=need(gpus=2, cpu=16))]   # 8 cores requested each
    d = run([node("n1")], jobs, [pool_quota(gpu=8, cpu=12, memory=1000)])
    assert admitted(d) == {}
    # a ceiling equal to the quota: a platform admin capped borrowing, and it says so
    assert text_code(d.waiting[1].reason) == "jobs.wait.borrow_cap_dim"
    assert english(d.waiting[1].reason) == (
        "CPU: needs 8 CPU cores, 8 CPU cores in use, above the borrowing cap of 12 CPU cores a "
        "platform admin set for your dev pool: waits for your jobs to finish, or ask for more "
        "quota")
    assert d.waiting[1].eta_p50 is not None   # it starts when the running job ends


def test_memory_quota_binds_too():
    jobs = [job(1, gpus=1, resources=need(gpus=1, memory=100)),    # 90 GiB requested
            job(2, gpus=1, resources=need(gpus=1, memory=100))]
    d = run([node("n1")], jobs, [pool_quota(gpu=8, cpu=64, memory=150)])
    assert admitted(d) == {1: ("n1",)}
    assert english(d.waiting[2].reason).startswith(
        "memory: needs 90 GiB of memory, 90 GiB of memory in use, above the borrowing cap of "
        "150 GiB")


def test_gpu_memory_quota_binds_whole_cards_by_their_memory():
    jobs = [job(1, gpus=2, resources=need(gpus=2)), job(2, gpus=2, resources=need(gpus=2))]
    d = run([node("n1")], jobs, [pool_quota(gpu=8, cpu=64, memory=1000, gpu_memory=200)])
    assert admitted(d) == {1: ("n1",)}   # 160 GiB of the 200: the second would be 320
    assert english(d.waiting[2].reason).startswith(
        "GPU memory: needs 160 GiB of GPU memory, 160 GiB of GPU memory in use, above the "
        "borrowing cap of 200 GiB of GPU memory")


def test_gpu_memory_binds_only_pools_granted_it():
    jobs = [job(1, gpus=2, resources=need(gpus=2)), job(2, gpus=2, resources=need(gpus=2))]
    d = run([node("n1")], jobs, [pool_quota(gpu=8, cpu=64, memory=1000)])
    assert admitted(d) == {1: ("n1",), 2: ("n1",)}


def test_cpu_only_jobs_queue_for_cpu_quota():
    nodes = [node("c1", model="", gpus=0)]
    jobs = [job(10, state="running", gpus=0, model="", on="c1",
                resources=need(gpus=0, cpu=16, memory=8)),
            job(1, gpus=0, model="", resources=need(gpus=0, cpu=16, memory=8))]
    quotas = [pool_quota(cpu=12, memory=100)]
    d = run(nodes, jobs, quotas)
    assert admitted(d) == {}
    assert text_code(d.waiting[1].reason) == "jobs.wait.borrow_cap_dim"
    d = run(nodes, jobs[1:], quotas)
    assert admitted(d) == {1: ("c1",)}


def test_a_cpu_only_job_without_cpu_quota_never_starts_and_says_so():
    d = run([node("c1", model="", gpus=0)],
            [job(1, gpus=0, model="", resources=need(gpus=0, cpu=2, memory=1))], [])
    assert english(d.waiting[1].reason) == (
        "your tenant has no dev quota for CPU and a platform admin capped borrowing: ask for "
        "quota")
    assert d.waiting[1].eta_p50 is None


def test_a_job_above_a_dimension_it_may_ever_hold_never_starts():
    d = run([node("n1")], [job(1, gpus=1, resources=need(gpus=1, cpu=64))],
            [pool_quota(gpu=8, cpu=16, memory=1000)])
    assert english(d.waiting[1].reason) == (
        "asks for 32 CPU cores, more than the borrowing cap of 16 CPU cores a platform admin "
        "set for your dev pool: ask for more quota or make the job smaller")


def test_borrowing_on_cpu_up_to_the_ceiling():
    d = run([node("n1")], [job(1, gpus=1, resources=need(gpus=1, cpu=24))],
            [pool_quota(gpu=8, cpu=(8, 16), memory=1000)])
    assert [(a.job_id, a.borrowing) for a in d.admit] == [(1, True)]


def test_batch_jobs_count_against_the_ceiling_of_every_dimension():
    jobs = [job(1, tier="batch", gpus=1, resources=need(gpus=1, cpu=24)),
            job(2, tier="batch", gpus=1, resources=need(gpus=1, cpu=24))]
    d = run([node("n1")], jobs, [pool_quota(gpu=8, cpu=(8, 16), memory=1000)],
            policy=Policy(watermark=1.0))
    assert admitted(d) == {1: ("n1",)}
    assert text_code(d.waiting[2].reason) == "jobs.wait.borrow_cap_dim"


def test_preemption_frees_the_dimension_that_is_short():
    # GPUs are plentiful; the pool's CPU is held by a lower-priority job of its own.
    jobs = [job(10, state="running", gpus=1, on="n1", priority=10,
                resources=need(gpus=1, cpu=16)),
            job(1, gpus=1, priority=100, resources=need(gpus=1, cpu=16))]
    policy = Policy(preempt_lower_priority_within_tenant=True, watermark=1.0)
    d = run([node("n1")], jobs, [pool_quota(gpu=8, cpu=8, memory=1000)], policy=policy)
    assert preempted(d) == [10]
    assert admitted(d) == {}


def test_a_victim_of_another_pool_does_not_free_this_pools_cpu():
    jobs = [job(10, tenant="globex", state="running", gpus=8, on="n1", borrowing=True,
                resources=need(gpus=8, cpu=16)),
            job(11, pool="prod", state="running", gpus=0, model="", on="n1",
                resources=need(gpus=0, cpu=16, memory=1)),   # 8 cores of the prod pool
            job(1, pool="prod", gpus=8, resources=need(gpus=8, cpu=16))]   # 8 more cores
    others = [pool_quota("globex", gpu=(0, 8), cpu=8, memory=1000)]
    policy = Policy(watermark=1.0)
    d = run([node("n1")], jobs, [pool_quota(pool="prod", gpu=8, cpu=16, memory=1000),
                                 *others], policy=policy)
    assert preempted(d) == [10]   # the prod pool's CPU fits: globex returns the GPUs
    d = run([node("n1")], jobs, [pool_quota(pool="prod", gpu=8, cpu=8, memory=1000),
                                 *others], policy=policy)
    assert preempted(d) == [] and admitted(d) == {}   # its GPUs would not give it CPU
    assert text_code(d.waiting[1].reason) == "jobs.wait.over_quota_dim"


def test_shared_gpus_are_placed_on_shares_and_count_against_gpu_shared():
    shared_node = NodeView(name="s1", gpu_model=L40S, switch="s1", gpus=0, gpus_used=0,
                           mig={}, mig_used={}, schedulable=True, shared=8, shared_used=0)
    jobs = [job(1, model=L40S, gpus=2, gpu_shared=True,
                resources=need(gpus=2, shared=True, model=L40S)),
            job(2, model=L40S, gpus=4, gpu_shared=True,
                resources=need(gpus=4, shared=True, model=L40S))]
    d = run([shared_node], jobs, [pool_quota(gpu_shared=4, cpu=64, memory=1000)])
    assert admitted(d) == {1: ("s1",)}
    assert english(d.waiting[2].reason).startswith(
        "shared GPUs: needs 4 shared GPUs, 2 shared GPUs in use, above the borrowing cap of 4 "
        "shared GPUs")


def test_cpu_only_replicas_need_a_node_with_room():
    small = NodeView(name="c1", gpu_model="", switch="", gpus=0, gpus_used=0, mig={},
                     mig_used={}, schedulable=True, cpu=8000, cpu_used=6000,
                     memory=64000, memory_used=0)
    d = run([small], [job(1, gpus=0, model="", resources=need(gpus=0, cpu=8, memory=8))],
            [pool_quota(cpu=100, memory=100)])
    assert admitted(d) == {}
    assert text_code(d.waiting[1].reason) == "jobs.wait.cpu_room"
    roomy = NodeView(**{**small.__dict__, "cpu_used": 0})
    d = run([roomy], [job(1, gpus=0, model="", resources=need(gpus=0, cpu=8, memory=8))],
            [pool_quota(cpu=100, memory=100)])
    assert admitted(d) == {1: ("c1",)}


# -- the property: admitted demand never exceeds any dimension's ceiling ------------------


def _random_case(seed: int):
    rng = random.Random(seed)
    nodes = [node(f"n{i}", gpus=8, switch=f"s{i % 2}") for i in range(rng.randint(1, 6))]
    nodes.append(node("c0", model="", gpus=0))
    tenants = ("acme", "globex", "initech")
    quotas = []
    for tenant in tenants:
        for pool in ("prod", "dev"):
            amounts: dict[str, int | tuple[int, int]] = {}
            for name, choices in (("gpu", (0, 4, 8, 16)), ("cpu", (0, 8, 16, 64)),
                                  ("memory", (0, 64, 256, 1024)),
                                  ("gpu_memory", (None, 160, 640))):
                value = rng.choice(choices)
                if value is None:
                    continue
                extra = rng.choice((0, 0, value // 2, value))
                amounts[name] = (value, value + extra)
            quotas.append(pool_quota(tenant, pool, **amounts))
    jobs = []
    for i in range(rng.randint(1, 40)):
        tenant, pool = rng.choice(tenants), rng.choice(("prod", "dev"))
        tier = rng.choice(({"prod": "production", "dev": "development"}[pool], "batch"))
        workers, gpus = rng.choice(((1, 0), (1, 1), (1, 2), (2, 4), (1, 8), (2, 0)))
        cpu, memory = rng.choice((1, 4, 8, 16, 32)), rng.choice((4, 32, 128, 512))
        jobs.append(job(i + 1, tenant=tenant, pool=pool, tier=tier, replicas=workers,
                        gpus=gpus, model=H800 if gpus else "",
                        priority=rng.choice((0, 50, 100)),
                        resources=need(workers=workers, cpu=cpu, memory=memory, gpus=gpus)))
    return nodes, jobs, quotas


def test_admitted_demand_never_exceeds_any_dimensions_ceiling_in_any_pool():
    checked = 0
    for seed in range(400):
        nodes, jobs, quotas = _random_case(seed)
        d = run(nodes, jobs, quotas, policy=Policy(watermark=1.0))
        by_id = {j.id: j for j in jobs}
        limits = {(q.tenant, q.pool): q for q in quotas}
        used: dict[tuple[str, str, str], int] = defaultdict(int)
        for a in d.admit:
            j = by_id[a.job_id]
            for key, amount in j.resources.items():
                used[(j.tenant, j.pool, key)] += amount
        for (tenant, pool, key), amount in used.items():
            q = limits[(tenant, pool)]
            if key == "gpu-memory" and key not in q.ceiling:
                continue   # binds only pools granted it
            assert amount <= q.ceiling.get(key, 0), (seed, tenant, pool, key, amount)
            checked += 1
        for j in jobs:   # every job is decided once: admitted, or waiting with a reason
            assert (j.id in admitted(d)) != (j.id in d.waiting)
    assert checked > 500


def test_the_preview_reports_fit_per_dimension(login, bob, quota):
    """The job form's live preview: one row per dimension the job consumes, in catalog
    units, and a job over the pool's CPU quota does not 'start now'."""
    form = {"name": "probe", "pool": "dev", "tier": "development", "image": "trainer:1",
            "workers": "2", "gpus_per_worker": "2", "gpu_model": H800, "cpu_per_worker": "8",
            "memory_gib_per_worker": "64", "max_run_hours": "10", "checkpoint_path": "/c"}
    preview = login(bob).post("/t/acme/jobs/preview/", form).json()["preview"]
    rows = {row["key"]: row for row in preview["dimensions"]}
    # no borrowing cap: development work may borrow any idle capacity (ceiling None)
    assert rows["cpu"] == {"key": "cpu", "label": "CPU", "unit": "cores", "wanted": 8,
                           "in_use": 0, "ahead": 0, "quota": 256, "ceiling": None,
                           "fits_quota": True, "fits_ceiling": True}
    assert rows[f"gpu:{H800}"]["label"] == f"GPUs · {H800}"
    assert rows["memory"]["wanted"] == 115.2 and rows[f"gpu:{H800}"]["wanted"] == 4
    assert "gpu-memory" not in rows   # not granted: it does not bind this pool
    assert preview["starts_now"]
    # Over the pool's CPU ceiling (a borrowing cap of 1: its quota) the job could never
    # start: the preview refuses it with the words a submit answers (one check, issue 15).
    quota.borrowing_cap = 1
    quota.save(update_fields=["borrowing_cap", "updated_at"])
    capped = {row["key"]: row for row in login(bob).post(
        "/t/acme/jobs/preview/", form).json()["preview"]["dimensions"]}
    assert capped["cpu"]["ceiling"] == 256
    client = login(bob)
    big = {**form, "cpu_per_worker": "192", "workers": "3"}
    refused = client.post("/t/acme/jobs/preview/", big).json()
    assert refused["preview"]["verdict"] == "refused"
    assert refused["preview"]["field"] == "cpu_per_worker"
    assert "could never start" in refused["errors"]["cpu_per_worker"]
    submitted = client.post("/t/acme/jobs/new/", big)
    assert submitted.status_code == 400
    assert escape(refused["errors"]["cpu_per_worker"]) in submitted.content.decode()
