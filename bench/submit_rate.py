"""Submissions through the service layer (``jobs.services.job_submit``), per second and in
queries, on a database set up as ``bench/kueue_stack.py`` sets it (tenants with a dev pool
and GPU/CPU/memory grants, an overcommitting policy, observed GPU nodes and pool quotas).

Runs the same submissions twice in one process: first with the per-process submission
snapshot off (``jobs.submitcache``: every submission reads the observed nodes, storage
classes, policy, dedications and its pool's grants again, as before it), then on;
prints, for each, submissions per second (wall and CPU of the submitting thread), the
CPU per submission (mean, p99) and the queries per submission (``access_for`` included).
The on-commit tasks (``sync_job``, ``admission_cycle``) are counted, not run. Asserts
nothing about time.

    .venv/bin/python bench/submit_rate.py [--jobs 600] [--tenants 30] [--profile]
    TRAINYARD_ROOT=/path/to/older/checkout .venv/bin/python bench/submit_rate.py
        # another checkout's code (one run when it has no snapshot)
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/trainyard_bench_submit \\
        .venv/bin/python bench/submit_rate.py          # on Postgres (recreated)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from decimal import Decimal
from pathlib import Path

from harness import fresh_database, scratch_django

ROOT = Path(os.environ.get("TRAINYARD_ROOT") or Path(__file__).resolve().parent.parent)
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

MODELS = tuple(f"NVIDIA-GPU-{c}" for c in "ABCDE")
NODES_PER_MODEL = 15  # 120 GPUs of each model, 8 a node (kueue_stack's cluster)


def setup(tenants: int):  # type: ignore[no-untyped-def]
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from core.models import Policy
    from k8s_sync.models import ObservedNode, ObservedQuota
    from k8s_sync.naming import RESOURCE_QUOTA_NAME
    from tenants.models import Membership, Pool, QuotaGrant, Tenant

    now = timezone.now()
    ObservedNode.objects.bulk_create([ObservedNode(
        name=f"{model.lower()}-{i}", uid=f"{model}-{i}", resource_version="1",
        observed_at=now, gpu_product=model, gpu_model=model, gpu_count=8,
        gpu_memory_mib=81920, ready=True, switch=f"switch-{model.lower()}",
        allocatable={"cpu": "256", "memory": "2Ti", "nvidia.com/gpu": "8", "pods": "110"})
        for model in MODELS for i in range(NODES_PER_MODEL)])
    Policy.objects.update_or_create(pk=1, defaults={
        "development_grace_seconds": 0, "batch_grace_seconds": 0,
        "overcommit_factors": {"gpu": 1, "cpu": 100, "memory": 100}, "eviction_watermark": 1})
    user = get_user_model().objects.create_user("bench")
    rows = []
    for t in range(tenants):
        model = MODELS[t % len(MODELS)]
        tenant = Tenant.objects.create(slug=f"t{t}", name=f"t{t}", cost_center="b",
                                       contact_email="b@example.org",
                                       quota_mode="overcommitted", borrowing_cap=Decimal(5))
        Membership.objects.create(user=user, tenant=tenant, role="member")
        pool = Pool.objects.create(tenant=tenant, kind="dev")
        QuotaGrant.objects.bulk_create([
            QuotaGrant(pool=pool, resource=f"gpu:{model}", amount=20),
            QuotaGrant(pool=pool, resource="cpu", amount=500),
            QuotaGrant(pool=pool, resource="memory", amount=5000)])
        ObservedQuota.objects.create(namespace=pool.namespace, name=RESOURCE_QUOTA_NAME,
                                     uid=f"q-{t}", resource_version="1", observed_at=now)
        rows.append((tenant, model))
    return user, rows


def run(label: str, user, rows, jobs: int, *, offset: int, cached: bool,  # type: ignore[no-untyped-def]
        profile: bool) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from jobs import services
    from tenants.access import access_for

    try:
        from jobs import submitcache
    except ImportError:  # a checkout from before the snapshot (TRAINYARD_ROOT)
        submitcache = None
    if submitcache is not None:
        submitcache.set_enabled(cached)
    cpu_ms, queries = [], []
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile(time.thread_time)
    began, cpu_began = time.monotonic(), time.thread_time()
    for i in range(jobs):
        tenant, model = rows[i % len(rows)]
        cpu = time.thread_time()
        with CaptureQueriesContext(connection) as ctx:
            if profiler:
                profiler.enable()
            services.job_submit(access=access_for(user, tenant), actor=user, pool="dev", data={
                "name": f"j-{offset + i}", "image": "bench/trainer:1", "tier": "development",
                "workers": 1 + i % 4, "gpus_per_worker": 1 + i % 8, "gpu_model": model,
                "cpu_per_worker": 1, "memory_gib_per_worker": 1, "max_run_seconds": 3600,
                "expected_seconds": 60,
                "annotations": {"kubesim.trainyard.io/run-seconds": "60"}})
            if profiler:
                profiler.disable()
        cpu_ms.append((time.thread_time() - cpu) * 1000)
        queries.append(len(ctx.captured_queries))
    wall, cpu_total = time.monotonic() - began, time.thread_time() - cpu_began
    if profiler:
        import pstats

        print(f"--- profile, {label} (CPU of the submitting thread) ---")
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(35)
    ordered = sorted(cpu_ms)
    return {"label": label, "jobs": jobs, "per_s_wall": jobs / wall,
            "per_s_cpu": jobs / cpu_total, "cpu_mean": statistics.fmean(cpu_ms),
            "cpu_p99": ordered[int(0.99 * (len(ordered) - 1))],
            "queries": statistics.fmean(queries), "queries_max": max(queries)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=600, help="submissions per run")
    parser.add_argument("--tenants", type=int, default=30)
    parser.add_argument("--profile", action="store_true", help="cProfile each run")
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL")
    if url:
        fresh_database(url)
    scratch_django(url, prefix="trainyard-submit-")
    path = list(sys.path)
    from kueue_stack import _sqlite_for_threads

    sys.path[:] = path  # kueue_stack puts its own checkout first
    _sqlite_for_threads()  # SQLite as kueue_stack and make run use it: WAL, NORMAL sync
    from django.db import connection

    import jobs.tasks

    enqueued = {"sync_job": 0, "admission_cycle": 0}
    jobs.tasks.sync_job.delay = lambda job_id: enqueued.__setitem__(
        "sync_job", enqueued["sync_job"] + 1)
    jobs.tasks.admission_cycle.delay = lambda: enqueued.__setitem__(
        "admission_cycle", enqueued["admission_cycle"] + 1)
    user, rows = setup(args.tenants)
    print(f"job_submit: {args.jobs} submissions a run, {args.tenants} tenants, "
          f"{len(MODELS) * NODES_PER_MODEL} observed nodes; database {connection.vendor}; "
          f"code of {ROOT}")
    try:
        import jobs.submitcache
        runs = [("snapshot off", False), ("snapshot on", True)]
    except ImportError:
        runs = [("this checkout", False)]
    results = [run(label, user, rows, args.jobs, offset=i * args.jobs, cached=cached,
                   profile=args.profile) for i, (label, cached) in enumerate(runs)]
    print(f"{'':22} {'subm./s wall':>12} {'subm./s CPU':>12} {'CPU ms mean':>12} "
          f"{'CPU ms p99':>11} {'queries':>8}")
    for r in results:
        print(f"{r['label']:22} {r['per_s_wall']:12.0f} {r['per_s_cpu']:12.0f} "
              f"{r['cpu_mean']:12.2f} {r['cpu_p99']:11.2f} {r['queries']:8.1f}")
    print(f"on-commit enqueues: {enqueued['sync_job']} sync_job, "
          f"{enqueued['admission_cycle']} admission_cycle for {len(runs) * args.jobs} "
          "submissions")


if __name__ == "__main__":
    main()
