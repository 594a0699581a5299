"""Dashboards at scale: 500 tenants, 100,000 jobs, 30 days of per-minute usage for 50.

Loads (bulk_create, into a fresh SQLite file or ``--database-url``):

* 500 tenants with two pools each and GPU/CPU/memory grants; a member per tenant;
* 64 GPU nodes (512 H800 cards) and 8 A100 nodes, and running pods for the busy
  tenants (what the watcher records);
* 100,000 jobs (200 per tenant) over 30 days with their transitions (queued ->
  admitted -> running -> succeeded, or still running/queued), and per-job utilisation;
* 30 days of per-minute samples for 50 tenants (4 resources: H800 cards, GPU memory,
  CPU, memory), stored as the sampler and the retention policy leave them: the last
  ``--minute-days`` days (default 2, the retention) as minute rows, every hour and day
  of the 30 as hourly and daily rollups of those minutes.

Then prints the median and p95 server time (Django test client, in-process, so no
network) of the tenant dashboard, its JSON endpoints (``data.json``, ``trends.json``
7 and 30 days), the cluster page (as a platform admin) and its JSON, beside a trivial
view in the same run (``/healthz``: no session, one SELECT; and ``/account/``: a signed-in
page through the same base template, middleware and context processors), and the ratios
of the p95s. Prints figures;
asserts nothing about time.

    .venv/bin/python bench/dashboard_scale.py            # the issue's sizes (~2-3 min)
    .venv/bin/python bench/dashboard_scale.py --quick    # a tenth of the data, fewer runs
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import random
import statistics
import sys
import time
from pathlib import Path

from harness import scratch_django

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

H800, A100 = "NVIDIA-H800", "NVIDIA-A100-SXM4-80GB"
BATCH = 5000


def _chunks(rows: list, size: int = BATCH):
    for i in range(0, len(rows), size):
        yield rows[i:i + size]


def _bulk(model, rows: list) -> None:
    for chunk in _chunks(rows):
        model.objects.bulk_create(chunk)


def load(*, tenants: int, jobs: int, busy: int, days: int, minute_days: int, now: dt.datetime,
         seed: int = 7) -> dict:
    from django.contrib.auth import get_user_model
    from django.db import transaction

    from jobs.models import JobTransition, TrainingJob
    from k8s_sync.models import ObservedNode, ObservedPod
    from k8s_sync.naming import namespace_name
    from tenants.models import (
        JobUtilisation,
        Membership,
        PlatformRole,
        Pool,
        QuotaGrant,
        Tenant,
        UsageSeries,
    )

    rng = random.Random(seed)
    User = get_user_model()
    t0 = time.perf_counter()
    with transaction.atomic():
        _bulk(Tenant, [Tenant(slug=f"t{i:03d}", name=f"Team {i}", cost_center=f"CC{i}",
                              contact_email=f"lead{i}@example.org") for i in range(tenants)])
        tenant_rows = list(Tenant.objects.order_by("slug"))
        _bulk(Pool, [Pool(tenant=t, kind=k) for t in tenant_rows for k in ("prod", "dev")])
        pools = {(p.tenant_id, p.kind): p for p in Pool.objects.all()}
        grants = []
        for t in tenant_rows:
            for kind, scale in (("prod", 1), ("dev", 0.5)):
                pool = pools[(t.pk, kind)]
                for key, amount in ((f"gpu:{H800}", 8), ("gpu-memory", 640), ("cpu", 128),
                                    ("memory", 1024), (f"gpu:{A100}", 2)):
                    grants.append(QuotaGrant(pool=pool, resource=key, amount=amount * scale))
        _bulk(QuotaGrant, grants)
        users = [User(username=f"u{i:03d}", email=f"u{i}@example.org") for i in range(tenants)]
        _bulk(User, users)
        users = list(User.objects.filter(username__startswith="u").order_by("username"))
        _bulk(Membership, [Membership(user=u, tenant=t, role="admin")
                           for u, t in zip(users, tenant_rows, strict=True)])
        admin = User.objects.create(username="platform-admin")
        PlatformRole.objects.create(user=admin, role="platform_admin")

        nodes = []
        for i in range(72):
            model = H800 if i < 64 else A100
            nodes.append(ObservedNode(
                name=f"gpu-{i:02d}", uid=f"n{i}", resource_version="1", observed_at=now,
                gpu_product=model, gpu_model=model, gpu_count=8, gpu_memory_mib=81559,
                allocatable={"cpu": "192", "memory": "2Ti", "nvidia.com/gpu": "8"},
                capacity={"cpu": "192", "memory": "2Ti", "nvidia.com/gpu": "8"}, ready=True))
        _bulk(ObservedNode, nodes)

        # jobs: 200 per tenant over 30 days; the busy tenants run some right now
        job_rows, shapes = [], []
        per_tenant = max(1, jobs // tenants)
        for t in tenant_rows:
            for j in range(per_tenant):
                submitted = now - dt.timedelta(minutes=rng.uniform(0, days * 1440))
                wait = dt.timedelta(minutes=rng.expovariate(1 / 30))
                run = dt.timedelta(minutes=rng.uniform(10, 600))
                start, end = submitted + wait, submitted + wait + run
                state = "succeeded" if end < now else "running" if start < now else "queued"
                gpus = rng.choice((1, 2, 4, 8))
                job_rows.append(TrainingJob(
                    submitted_at=submitted, tenant=t,
                    pool=pools[(t.pk, rng.choice(("prod", "dev")))],
                    name=f"job-{j}", image="pytorch:2", tier="development", workers=1,
                    gpus_per_worker=gpus, gpu_model=H800, max_run_seconds=36000, state=state,
                    submitted_by=None,
                    started_at=start if state != "queued" else None,
                    finished_at=end if state == "succeeded" else None,
                    position_in_pool=j if state == "queued" else None,
                    wait_reason="Waiting for H800 GPUs" if state == "queued" else ""))
                shapes.append((submitted, start, end, state))
        submitted_field = TrainingJob._meta.get_field("submitted_at")
        submitted_field.auto_now_add = False  # keep the generated submission times
        try:
            _bulk(TrainingJob, job_rows)
        finally:
            submitted_field.auto_now_add = True
        ids = list(TrainingJob.objects.order_by("id").values_list("id", flat=True))
        transitions = []
        for job_id, (submitted, start, end, state) in zip(ids, shapes, strict=True):
            transitions.append(JobTransition(job_id=job_id, from_state="", to_state="queued",
                                             reason="Submitted", at=submitted))
            if state != "queued":
                transitions.append(JobTransition(job_id=job_id, from_state="admitted",
                                                 to_state="running", reason="Running", at=start))
            if state == "succeeded":
                transitions.append(JobTransition(job_id=job_id, from_state="running",
                                                 to_state="succeeded", reason="Succeeded",
                                                 at=end))
        _bulk(JobTransition, transitions)
        running = list(TrainingJob.objects.filter(state="running")
                       .values_list("id", "tenant__slug", "pool__kind", "gpus_per_worker"))
        _bulk(JobUtilisation, [JobUtilisation(
            namespace=namespace_name(slug, kind), job=str(i), gpu_samples=600,
            util_sum=600 * rng.uniform(0, 100), first_sampled_at=now, last_sampled_at=now,
            low_since=now - dt.timedelta(hours=2) if rng.random() < 0.05 else None)
            for i, slug, kind, _g in running])
        pods = []
        for n, (i, slug, kind, gpus) in enumerate(running[:600]):
            pods.append(ObservedPod(
                namespace=namespace_name(slug, kind), name=f"job-{i}-master-0", uid=f"p{i}",
                resource_version="1", observed_at=now, phase="Running",
                node_name=f"gpu-{n % 64:02d}", tenant=slug, pool=kind, job=str(i),
                requests={"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": str(gpus)}))
        _bulk(ObservedPod, pods)
    loaded_core = time.perf_counter() - t0

    # usage series of the busy tenants: a daily wave per minute, rolled up as the sampler does
    t1 = time.perf_counter()
    end = now.replace(second=0, microsecond=0)
    minutes = days * 1440
    resources = ((f"gpu:{H800}", 8.0, 1.0), ("gpu-memory", 640.0, 1.0), ("cpu", 128.0, None),
                 ("memory", 1024.0, None))
    rows = 0
    for t in tenant_rows[:busy]:
        pool = pools[(t.pk, "prod")]
        phase = rng.uniform(0, 2 * math.pi)
        # one wave (share of quota allocated) per minute; every resource follows it
        wave = [0.5 + 0.4 * math.sin(2 * math.pi * m / 1440 + phase) for m in range(minutes)]
        start = end - dt.timedelta(minutes=minutes - 1)
        keep_from = minutes - minute_days * 1440
        out = []
        for key, quota, util_share in resources:
            measured = util_share is not None
            for m in range(max(0, keep_from), minutes):
                allocated = quota * wave[m]
                out.append(UsageSeries(pool=pool, resource=key, resolution="m",
                                       start=start + dt.timedelta(minutes=m),
                                       allocated=allocated, peak=allocated,
                                       utilised=allocated * 0.7 if measured else None,
                                       quota=quota))
            for res, span in (("h", 60), ("d", 1440)):
                first = 0
                while first < minutes:
                    bucket_start = start + dt.timedelta(minutes=first)
                    floor = bucket_start.replace(minute=0) if res == "h" else \
                        bucket_start.replace(hour=0, minute=0)
                    last = min(minutes, first + span - int(
                        (bucket_start - floor).total_seconds() // 60))
                    chunk = wave[first:last]
                    mean = quota * sum(chunk) / len(chunk)
                    out.append(UsageSeries(pool=pool, resource=key, resolution=res,
                                           start=floor, allocated=mean,
                                           peak=quota * max(chunk),
                                           utilised=mean * 0.7 if measured else None,
                                           quota=quota, samples=len(chunk)))
                    first = last
        with transaction.atomic():
            _bulk(UsageSeries, out)
        rows += len(out)
    return {"tenants": tenant_rows, "admin": admin, "users": users, "core_s": loaded_core,
            "series_s": time.perf_counter() - t1, "series_rows": rows,
            "jobs": len(ids), "transitions": len(transitions)}


def timed(client, url: str, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        response = client.get(url)
        out.append((time.perf_counter() - t0) * 1000)
        if response.status_code != 200:
            raise SystemExit(f"{url}: HTTP {response.status_code}")
    return out


def p95(values: list[float]) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, math.ceil(0.95 * len(values)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="a tenth of the data, 10 runs")
    parser.add_argument("--tenants", type=int, default=500)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--busy", type=int, default=50, help="tenants with usage series")
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--minute-days", type=int, default=2,
                        help="days of minute rows kept (the retention policy: 2)")
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--profile", choices=["dashboard", "cluster"],
                        help="also print the top functions of five renders of that page")
    parser.add_argument("--database-url", default="",
                        help="e.g. postgres://... (default: a fresh SQLite file)")
    args = parser.parse_args()
    if args.quick:
        args.tenants, args.jobs, args.busy, args.runs = 50, 10_000, 5, 10

    database = scratch_django(args.database_url)
    from django.test import Client
    from django.utils import timezone

    now = timezone.now()
    print(f"loading {args.tenants} tenants, {args.jobs} jobs, {args.days} days of per-minute "
          f"usage for {args.busy} tenants ({args.minute_days} days kept as minute rows) "
          f"into {database.split('://')[0]} ...", flush=True)
    data = load(tenants=args.tenants, jobs=args.jobs, busy=args.busy, days=args.days,
                minute_days=args.minute_days, now=now)
    print(f"  core rows {data['core_s']:.1f} s ({data['jobs']} jobs, {data['transitions']} "
          f"transitions); usage series {data['series_s']:.1f} s ({data['series_rows']} rows)")

    busy_slug = data["tenants"][0].slug
    member = Client()
    member.force_login(data["users"][0])
    admin = Client()
    admin.force_login(data["admin"])
    cases = [
        ("trivial view /healthz", member, "/healthz"),
        ("trivial page /account/", member, "/account/"),
        ("tenant dashboard", member, f"/t/{busy_slug}/dashboard/"),
        ("  data.json (live)", member, f"/t/{busy_slug}/dashboard/data.json"),
        ("  trends.json 7 days", member, f"/t/{busy_slug}/dashboard/trends.json?days=7"),
        ("  trends.json 30 days", member, f"/t/{busy_slug}/dashboard/trends.json?days=30"),
        ("cluster page (admin)", admin, "/cluster/"),
        ("  cluster data.json", admin, "/cluster/data.json"),
    ]
    for _label, client, url in cases:  # warm up (and fill the one-minute busyness cache)
        timed(client, url, 2)
    results = {label: timed(client, url, args.runs) for label, client, url in cases}
    base = p95(results["trivial view /healthz"])
    page = p95(results["trivial page /account/"])
    print(f"\n{'view':28} {'median ms':>10} {'p95 ms':>10} {'p95/healthz':>12} "
          f"{'p95/account':>12}  ({args.runs} runs)")
    for label, values in results.items():
        print(f"{label:28} {statistics.median(values):10.1f} {p95(values):10.1f} "
              f"{p95(values) / base:12.1f} {p95(values) / page:12.1f}")

    from tenants.series import usage_rollup, usage_sample

    t0 = time.perf_counter()
    written = usage_sample(samples=[])
    t1 = time.perf_counter()
    usage_rollup()
    t2 = time.perf_counter()
    print(f"\nthe minute sampler over every pool: {(t1 - t0) * 1000:.0f} ms ({written} minute "
          f"rows, hour and day rows recomputed); the hourly rollup with retention: "
          f"{(t2 - t1) * 1000:.0f} ms")

    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        if args.profile == "cluster":
            timed(admin, "/cluster/", 5)
        else:
            timed(member, f"/t/{busy_slug}/dashboard/", 5)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)

    from django.core.cache import cache

    cache.clear()
    cold = timed(member, f"/t/{busy_slug}/dashboard/", 1)[0]
    print(f"\ntenant dashboard with the busyness cache cold: {cold:.1f} ms "
          "(recomputed at most once a minute for everyone)")


if __name__ == "__main__":
    main()
