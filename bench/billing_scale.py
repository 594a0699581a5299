"""Closing a billing month at scale: N tenants, M jobs, ~3 running intervals each.

Builds a fresh database (SQLite file by default, or ``--database-url``) with every job's
JobTransitions in October 2026 (some crossing into September and November, each job
preempted and resumed twice; September is closed first, as months close in order, so
its part is October's late usage), then times ``billing.services.month_close`` (ledger ingest
from the transitions, a month's lines for every tenant, invoices numbered and issued)
and, in the same run, one SQL aggregate over the same transition rows (running seconds
x GPUs per tenant, with a window function): the floor no Python pass can beat.

The close is timed twice over: as production runs it, after the beat's ten-minute ingest
has kept the ledger current all month (the close takes in only what is new), and from
an empty ledger (the first close after installing Trainyard: the whole month's ledger is
written at close). The ingest's own figures are printed beside them. Each is timed
``--repeat`` times (the trial closes rolled back) and the best kept, so a busy machine
disturbs the ratio less. Prints figures; asserts nothing about time.

    .venv/bin/python bench/billing_scale.py            # 500 tenants, 100,000 jobs
    .venv/bin/python bench/billing_scale.py --quick    # 50 tenants, 10,000 jobs
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import sys
import time
from pathlib import Path
from typing import Any

from harness import scratch_django

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

UTC = dt.UTC
MODELS = [("NVIDIA-A100-SXM4-80GB", 80), ("NVIDIA-H800", 80), ("NVIDIA-L40S", 48)]


def _history(rng: random.Random) -> list[tuple[str, dt.datetime]]:
    """queued, then three running stretches with preemption between them."""
    roll = rng.random()
    if roll < 0.05:      # started in September, runs across the boundary
        start = dt.datetime(2026, 9, 30, 20, tzinfo=UTC)
    elif roll < 0.10:    # ends in November
        start = dt.datetime(2026, 10, 31, 18, tzinfo=UTC)
    else:
        start = dt.datetime(2026, 10, 1, tzinfo=UTC) + dt.timedelta(
            seconds=rng.randrange(0, 29 * 86400))
    history = [("queued", start - dt.timedelta(minutes=rng.randrange(1, 60)))]
    at = start
    for stretch in range(3):
        history.append(("running", at))
        at += dt.timedelta(seconds=rng.randrange(600, 8 * 3600))
        if stretch < 2:
            history.append(("preempting", at))
            at += dt.timedelta(seconds=rng.randrange(30, 300))
            history.append(("queued", at))
            at += dt.timedelta(seconds=rng.randrange(300, 7200))
    history.append(("succeeded", at))
    return history


class _RolledBack(Exception):
    """Undoes a trial month close."""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tenants", type=int, default=500)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="50 tenants, 10,000 jobs")
    parser.add_argument("--profile", choices=["warm", "cold"], default="",
                        help="print where the month close spends its time (cProfile): "
                             "with the ledger kept current (warm) or from an empty one")
    parser.add_argument("--profile-sort", default="cumulative",
                        help="the profile's order: cumulative (default) or tottime")
    parser.add_argument("--profile-callers", default="",
                        help="with --profile: also print who calls functions matching this")
    parser.add_argument("--repeat", type=int, default=3,
                        help="time each side this many times and keep the best (the close's "
                             "trials are rolled back; default 3)")
    parser.add_argument("--database-url", default="",
                        help="e.g. postgres://... (default: a fresh SQLite file)")
    args = parser.parse_args()
    if args.quick:
        args.tenants, args.jobs = 50, 10_000

    scratch_django(args.database_url, TIME_ZONE="UTC")
    from decimal import Decimal

    from django.contrib.auth import get_user_model
    from django.db import connection, transaction

    from billing import services
    from billing.models import GpuUsage, Invoice, InvoiceLine
    from jobs.models import JobTransition, TrainingJob
    from tenants.models import PlatformRole, Pool, Tenant

    started = time.perf_counter()
    rng = random.Random(8)
    Tenant.objects.bulk_create(Tenant(slug=f"t{i:04d}", name=f"Tenant {i:04d}",
                                      cost_center=f"CC-{i:04d}",
                                      contact_email=f"lead@t{i}.example.org")
                               for i in range(args.tenants))
    tenants = list(Tenant.objects.order_by("pk"))
    Pool.objects.bulk_create(Pool(tenant=t, kind=k) for t in tenants for k in ("prod", "dev"))
    pools = {(p.tenant_id, p.kind): p.pk for p in Pool.objects.all()}
    user = get_user_model().objects.create_user("fran", "fran@example.org", "x")
    PlatformRole.objects.create(user=user, role="finance")
    admin = get_user_model().objects.create_superuser("pat", "pat@example.org", "x")
    services.rate_card_create(actor=admin, effective_from=dt.date(2026, 1, 1), gpus=[
        {"gpu_model": model, "memory_gib": mem, "purchase_price": Decimal(20000 + 5000 * i),
         "depreciation_months": 36, "power_watts": Decimal(400 + 100 * i), "pue": Decimal("1.4"),
         "electricity_kwh": Decimal("0.21"), "operations_month": Decimal(300)}
        for i, (model, mem) in enumerate(MODELS)])
    # a price change mid-month, so the close splits lines per rate period
    services.rate_card_create(actor=admin, effective_from=dt.date(2026, 10, 16), gpus=[
        {"gpu_model": model, "memory_gib": mem, "purchase_price": Decimal(21000 + 5000 * i),
         "depreciation_months": 36, "power_watts": Decimal(400 + 100 * i), "pue": Decimal("1.4"),
         "electricity_kwh": Decimal("0.23"), "operations_month": Decimal(310)}
        for i, (model, mem) in enumerate(MODELS)])

    intervals = transitions = 0
    batch = 5000
    for first in range(0, args.jobs, batch):
        jobs, histories = [], []
        for n in range(first, min(args.jobs, first + batch)):
            tenant = tenants[n % len(tenants)]
            model, _mem = MODELS[n % 3]
            mig = "1g.10gb" if n % 10 == 0 and model != "NVIDIA-L40S" else ""
            kind = "prod" if n % 2 else "dev"
            jobs.append(TrainingJob(
                tenant_id=tenant.pk, pool_id=pools[(tenant.pk, kind)], name=f"job-{n}",
                image="trainer:1", tier="production" if kind == "prod" else "development",
                max_run_seconds=86400, workers=1 + n % 4, gpus_per_worker=1 if mig else 8,
                gpu_model=model, mig_profile=mig, state="succeeded"))
            histories.append(_history(rng))
        TrainingJob.objects.bulk_create(jobs, batch_size=1000)
        rows = []
        for job, history in zip(jobs, histories, strict=True):
            previous = ""
            for state, at in history:
                rows.append(JobTransition(job_id=job.pk, from_state=previous, to_state=state,
                                          reason="bench", at=at))
                previous = state
            intervals += sum(1 for s, _ in history if s == "running")
        transitions += len(rows)
        with transaction.atomic(), connection.cursor() as cursor:  # plain inserts (untimed)
            cursor.executemany(
                "INSERT INTO jobs_jobtransition (job_id, from_state, to_state, reason, message,"
                " at) VALUES (%s, %s, %s, %s, '\"\"', %s)",  # message: JSON "" (no text)
                [(r.job_id, r.from_state, r.to_state, r.reason, r.at) for r in rows])
    setup = time.perf_counter() - started
    print(f"setup: {args.tenants} tenants, {args.jobs} jobs, {intervals} running intervals, "
          f"{transitions} transitions in {setup:.1f} s ({connection.vendor})")

    # --- the floor: one SQL aggregate over the same transition rows ---------------------
    if connection.vendor == "postgresql":
        seconds = "EXTRACT(EPOCH FROM (t.nxt - t.at))"
    else:
        seconds = "(julianday(t.nxt) - julianday(t.at)) * 86400.0"
    sql = f"""
        SELECT j.tenant_id, SUM(ROUND({seconds}) * j.workers * j.gpus_per_worker)
        FROM (SELECT job_id, to_state, at,
                     LEAD(at) OVER (PARTITION BY job_id ORDER BY at, id) AS nxt
              FROM jobs_jobtransition) t
        JOIN jobs_trainingjob j ON j.id = t.job_id
        WHERE t.to_state = 'running' AND t.nxt IS NOT NULL
        GROUP BY j.tenant_id"""
    floors: list[float] = []
    floor_cpus: list[float] = []  # this process's CPU: all of it on SQLite, none of Postgres
    for _ in range(args.repeat):
        start, cpu = time.perf_counter(), time.process_time()
        with connection.cursor() as cursor:
            cursor.execute(sql)
            floor_rows = cursor.fetchall()
        floors.append(time.perf_counter() - start)
        floor_cpus.append(time.process_time() - cpu)
    floor = min(floors)
    floor_total = round(sum(float(r[1]) for r in floor_rows))

    # --- the real thing ------------------------------------------------------------------
    now = dt.datetime(2026, 11, 2, tzinfo=UTC)
    period = dt.date(2026, 10, 1)
    # months close in order (issue 30): September, whose last evening some jobs ran in,
    # was closed before these transitions arrived, so its part is billed by October as
    # late usage ("usage from 2026-09"), and the ledger still adds up to the floor
    from billing.models import MonthClose

    MonthClose.objects.create(period=dt.date(2026, 9, 1), closed_at=dt.datetime(
        2026, 10, 1, 2, tzinfo=UTC), closed_by=user)

    def closes(*, keep_last: bool, profile: bool = False
               ) -> tuple[list[float], list[float], Any]:
        """Close October ``args.repeat`` times, each rolled back but (``keep_last``) the
        last: (wall times, CPU times, the last MonthClose)."""
        walls: list[float] = []
        cpus: list[float] = []
        closing = None
        for trial in range(args.repeat):
            last = trial == args.repeat - 1
            profiler = None
            if last and profile:
                import cProfile

                profiler = cProfile.Profile()
                profiler.enable()
            try:
                with transaction.atomic():
                    start, cpu = time.perf_counter(), time.process_time()
                    closing = services.month_close(actor=user, period=period, now=now)
                    walls.append(time.perf_counter() - start)
                    cpus.append(time.process_time() - cpu)
                    if not (last and keep_last):
                        raise _RolledBack
            except _RolledBack:
                pass
            if profiler is not None:
                import pstats

                profiler.disable()
                stats = pstats.Stats(profiler).sort_stats(args.profile_sort)
                stats.print_stats(30)
                if args.profile_callers:
                    stats.print_callers(args.profile_callers)
        return walls, cpus, closing

    # the first close after installing Trainyard: the whole month's ledger written at close
    cold, cold_cpus, _closing = closes(keep_last=False, profile=args.profile == "cold")
    # production: the beat's ingest (every ten minutes) keeps the ledger current all month;
    # its first run here takes the whole month in, the next one only what is new
    start = time.perf_counter()
    first_ingest_rows = services.ledger_ingest_gpu(now=now - dt.timedelta(minutes=10))
    first_ingest = time.perf_counter() - start
    start = time.perf_counter()
    quiet_rows = services.ledger_ingest_gpu(now=now - dt.timedelta(minutes=5))
    quiet_ingest = time.perf_counter() - start
    warm, warm_cpus, closing = closes(keep_last=True, profile=args.profile == "warm")
    close, cold_close = min(warm), min(cold)
    ledger_total = sum(s * d for s, d in GpuUsage.objects.values_list("seconds", "devices"))

    start = time.perf_counter()
    again = services.ledger_ingest_gpu(now=now)  # November's rows only (October is frozen)
    reingest = time.perf_counter() - start

    def runs(times: list[float]) -> str:
        return ", ".join(f"{t:.2f}" for t in times)

    print(f"floor, one SQL aggregate of running seconds x GPUs per tenant, best of "
          f"{args.repeat}: {floor:.2f} s (all: {runs(floors)}; {len(floor_rows)} tenants)")
    print(f"ten-minute ingest: taking the whole month in {first_ingest:.2f} s "
          f"({first_ingest_rows} rows); the next with nothing new {quiet_ingest:.2f} s "
          f"({quiet_rows} rows)")
    print(f"month close with the ledger kept current (production), best of {args.repeat}: "
          f"{close:.2f} s (all: {runs(warm)}) -> {closing.invoices} invoices, "
          f"{InvoiceLine.objects.count()} lines, {GpuUsage.objects.count()} ledger rows, "
          f"total {closing.total}")
    print(f"month close from an empty ledger (the first after installing), best of "
          f"{args.repeat}: {cold_close:.2f} s (all: {runs(cold)})")
    ratio = close / floor if floor else float("nan")
    cold_ratio = cold_close / floor if floor else float("nan")
    print(f"ratio close / floor: {ratio:.1f}x (from an empty ledger: {cold_ratio:.1f}x)")
    if connection.vendor == "sqlite":  # the database runs in this process: CPU time is all
        floor_cpu = min(floor_cpus)
        print(f"CPU time (unaffected by other processes waiting for the CPU): floor "
              f"{floor_cpu:.2f} s, close {min(warm_cpus):.2f} s "
              f"({min(warm_cpus) / floor_cpu:.1f}x), from an empty ledger "
              f"{min(cold_cpus):.2f} s ({min(cold_cpus) / floor_cpu:.1f}x)")
    print(f"GPU-seconds: ledger {ledger_total}, SQL {floor_total} "
          f"({'equal' if ledger_total == floor_total else 'DIFFERENT'})")
    print(f"re-ingest after the close (open months only): {reingest:.2f} s, {again} rows")
    print(f"issued invoices: {Invoice.objects.filter(status='issued').count()}")


if __name__ == "__main__":
    main()
