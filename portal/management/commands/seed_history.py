"""Thirty days of believable history for the demo: finished jobs (some preempted and
resumed), hourly and daily usage series, daily usage peaks, a rate card, and last
month's issued invoices. Runs once: it does nothing when history exists already.

Jobs are written with their JobTransitions (the billing source), so GPU-hours, invoices,
idle rates, wait-time charts and dynamic quota proposals all have data.
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from typing import Any

from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from billing import services as billing
from billing.models import RateCard
from billing.months import first_open_month_with_charges
from core.choices import PoolKind, Tier
from jobs.choices import JobState
from jobs.models import JobTransition, TrainingJob
from portal.management.commands.seed_demo import LOADGEN
from tenants.choices import PlatformRoleName, TenantStatus
from tenants.models import (
    JobUtilisation,
    PlatformRole,
    Pool,
    QuotaGrant,
    UsageDaily,
    UsageSeries,
)

PRICES = {  # purchase price per card, power in watts: every GPU model of the demo cluster
    "NVIDIA-A100-SXM4-80GB": (Decimal("17000"), 400),
    "NVIDIA-H800": (Decimal("32000"), 700),
    "NVIDIA-A10": (Decimal("3500"), 150),
    "NVIDIA-L4": (Decimal("2500"), 72),
    "NVIDIA-L40S": (Decimal("9000"), 350),
}


class Command(BaseCommand):
    requires_system_checks: list[str] = []  # run by demo_setup right after migrate
    help = "Create 30 days of demo history (idempotent: skipped when history exists)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--days", type=int, default=30)
        parser.add_argument("--seed", type=int, default=42)

    def handle(self, *args: Any, **options: Any) -> None:
        now = timezone.now().replace(minute=0, second=0, microsecond=0)
        if TrainingJob.objects.filter(submitted_at__lt=now - dt.timedelta(days=1)).exists():
            self.stdout.write("Demo history exists already.")
            return
        jobs, series = self.history(now=now, days=options["days"], seed=options["seed"])
        self.stdout.write(f"Demo history: {jobs} finished jobs, {series} usage rows.")
        self._invoices(now)

    def history(self, *, now: dt.datetime, days: int, seed: int) -> tuple[int, int]:
        """The history itself (no invoices): the grants made to cover it, the finished
        jobs with their transitions and measured utilisation, the usage series."""
        rng = random.Random(seed)
        with transaction.atomic():
            self._grants_since(now - dt.timedelta(days=days + 1))
            jobs = self._jobs(rng, now, days)
            series = self._series(rng, now, days)
        return jobs, series

    def _grants_since(self, start: dt.datetime) -> None:
        """The demo's grants were made a moment ago, but the history's jobs ran under
        them: date them from before the history, so the quota held over the seeded days
        (``tenants.utilisation``: grants x the hours they were in force) is the grant,
        not the minutes since ``seed_demo``. Only pools whose grants never changed."""
        changed = QuotaGrant.objects.filter(superseded_at__isnull=False).values("pool_id")
        QuotaGrant.objects.filter(superseded_at__isnull=True, created_at__gt=start).exclude(
            pool_id__in=changed).update(created_at=start)

    def _pools(self) -> list[tuple[Pool, dict[str, Decimal]]]:
        out = []
        for pool in Pool.objects.select_related("tenant").filter(
                tenant__status=TenantStatus.ACTIVE):
            grants = dict(QuotaGrant.objects.filter(pool=pool, superseded_at__isnull=True,
                                                    resource__startswith="gpu:")
                          .values_list("resource", "amount"))
            if grants:
                out.append((pool, grants))
        return out

    def _jobs(self, rng: random.Random, now: dt.datetime, days: int) -> int:
        created = 0
        # The minute sampler's measured GPU use of each job (what the dashboards' and job
        # lists' "Mean GPU utilisation" read), from its own generator so the jobs, series
        # and invoices stay what they were.
        util_rng = random.Random(rng.getstate()[1][0])
        measured: list[JobUtilisation] = []
        for pool, grants in self._pools():
            # the load generator's history where it is a member (seed_demo), so the
            # researchers' own jobs are theirs alone; else the tenant's first member
            members = pool.tenant.memberships.select_related("user")
            user = members.filter(user__username=LOADGEN).first() or members.first()
            for day in range(days, 0, -1):
                for n in range(rng.randint(2, 6)):
                    key, amount = rng.choice(list(grants.items()))
                    gpus = rng.choice([1, 2, 4, 8])
                    gpus = min(gpus, int(amount))
                    submitted = now - dt.timedelta(days=day, hours=rng.uniform(0, 20))
                    wait = dt.timedelta(minutes=rng.lognormvariate(2.5, 1.0))
                    run = dt.timedelta(minutes=rng.lognormvariate(4.5, 0.7))
                    tier = Tier.PRODUCTION if pool.kind == PoolKind.PROD else rng.choice(
                        [Tier.DEVELOPMENT, Tier.DEVELOPMENT, Tier.BATCH])
                    job = TrainingJob.objects.create(
                        tenant=pool.tenant, pool=pool, submitted_by=user.user if user else None,
                        name=f"hist-{pool.kind}-{day:02d}-{n}-{rng.randrange(16**4):04x}",
                        image="registry.example.org/research/trainer:2.3", tier=tier,
                        workers=1, gpus_per_worker=gpus, gpu_model=key[4:],
                        max_run_seconds=86400, state=JobState.SUCCEEDED)
                    TrainingJob.objects.filter(pk=job.pk).update(
                        submitted_at=submitted, admitted_at=submitted + wait,
                        started_at=submitted + wait, finished_at=submitted + wait + run,
                        k8s_name=f"tj-{job.pk}")
                    steps = [("", JobState.QUEUED, "Submitted", submitted),
                             (JobState.QUEUED, JobState.ADMITTED, "Admitted", submitted + wait),
                             (JobState.ADMITTED, JobState.RUNNING, "Running", submitted + wait)]
                    end = submitted + wait + run
                    if tier != Tier.PRODUCTION and rng.random() < 0.15:  # preempted, resumed
                        cut = submitted + wait + run / 2
                        back = cut + dt.timedelta(minutes=rng.uniform(5, 60))
                        steps += [(JobState.RUNNING, JobState.PREEMPTING, "Preempted", cut),
                                  (JobState.PREEMPTING, JobState.QUEUED, "Requeued",
                                   cut + dt.timedelta(minutes=5)),
                                  (JobState.QUEUED, JobState.ADMITTED, "Admitted", back),
                                  (JobState.ADMITTED, JobState.RUNNING, "Running", back)]
                        end = back + run / 2
                        TrainingJob.objects.filter(pk=job.pk).update(restart_count=1,
                                                                     finished_at=end)
                    steps.append((JobState.RUNNING, JobState.SUCCEEDED, "Succeeded", end))
                    JobTransition.objects.bulk_create(
                        JobTransition(job=job, from_state=a, to_state=b, reason=r, at=at)
                        for a, b, r, at in steps)
                    minutes = max(1, int(run.total_seconds() // 60))
                    mean = (util_rng.uniform(2, 9) if util_rng.random() < 0.08
                            else util_rng.uniform(45, 97))
                    measured.append(JobUtilisation(
                        namespace=pool.namespace, job=str(job.pk), gpu_samples=gpus * minutes,
                        util_sum=mean * gpus * minutes, last_util=mean,
                        fb_used_sum_mib=util_rng.uniform(20000, 70000) * gpus * minutes,
                        first_sampled_at=submitted + wait, last_sampled_at=end))
                    created += 1
        JobUtilisation.objects.bulk_create(measured, batch_size=2000, ignore_conflicts=True)
        return created

    def _series(self, rng: random.Random, now: dt.datetime, days: int) -> int:
        rows: list[UsageSeries] = []
        dailies: list[UsageDaily] = []
        for pool, grants in self._pools():
            for key, amount in grants.items():
                quota = float(amount)
                busy = rng.uniform(0.3, 0.9)
                hourly: list[UsageSeries] = []
                for hour in range(days * 24, 0, -1):
                    start = now - dt.timedelta(hours=hour)
                    diurnal = 0.55 + 0.45 * (1 if 8 <= start.hour <= 20 else 0.3)
                    allocated = min(quota, max(0.0, quota * busy * diurnal
                                                + rng.uniform(-1, 1)))
                    hourly.append(UsageSeries(pool=pool, resource=key, resolution="h",
                                            start=start, allocated=allocated,
                                            peak=min(quota, allocated + rng.uniform(0, 1)),
                                            utilised=allocated * rng.uniform(0.55, 0.95),
                                            quota=quota, samples=60))
                rows.extend(hourly)
                for i, day in enumerate(range(days, 0, -1)):
                    day_rows = hourly[i * 24:(i + 1) * 24]
                    start = (now - dt.timedelta(days=day)).replace(hour=0)
                    mean = sum(r.allocated for r in day_rows) / max(1, len(day_rows))
                    util = sum(r.utilised or 0 for r in day_rows) / max(1, len(day_rows))
                    peak = max((r.peak for r in day_rows), default=0.0)
                    rows.append(UsageSeries(pool=pool, resource=key, resolution="d",
                                            start=start, allocated=mean, peak=peak,
                                            utilised=util, quota=quota, samples=1440))
                    dailies.append(UsageDaily(
                        pool=pool, resource=key, day=start.date(),
                        peak=Decimal(f"{peak:.3f}"), total=Decimal(f"{mean * 288:.3f}"),
                        samples=288, utilised_total=Decimal(f"{util * 288:.3f}"),
                        utilised_samples=288))
        UsageSeries.objects.bulk_create(rows, batch_size=2000, ignore_conflicts=True)
        UsageDaily.objects.bulk_create(dailies, batch_size=2000, ignore_conflicts=True)
        return len(rows)

    def _invoices(self, now: dt.datetime) -> None:
        """A rate card from before the history, and its ended months closed by finance."""
        roles = PlatformRole.objects.select_related("user")
        admin = roles.filter(role=PlatformRoleName.PLATFORM_ADMIN).first()
        finance = roles.filter(role=PlatformRoleName.FINANCE).first()
        if admin is None or finance is None or RateCard.objects.exists():
            return
        first = (now - dt.timedelta(days=70)).date().replace(day=1)
        try:
            billing.rate_card_create(
                actor=admin.user, effective_from=first, egress_gib=Decimal("0.08"),
                # CPU and memory of the GPU nodes are billed too (the preview adds them)
                cpu_core_hour=Decimal("0.02"), memory_gib_hour=Decimal("0.002"),
                gpus=[{"gpu_model": model, "purchase_price": price, "depreciation_months": 48,
                       "power_watts": watts, "pue": Decimal("1.3"),
                       "electricity_kwh": Decimal("0.15"), "operations_month": Decimal("400")}
                      for model, (price, watts) in PRICES.items()],
                storage=[{"storage_class": "fast-ssd", "gib_month": Decimal("0.10")},
                         {"storage_class": "shared-nfs", "gib_month": Decimal("0.05")},
                         {"storage_class": "object-cache", "gib_month": Decimal("0.02")}])
            billing.ledger_ingest_gpu(now=now)
            # every ended month with charges, oldest first (months are closed in order);
            # a model the cluster gains later is unpriced until a card prices it: its
            # lines say "billed 0" (finance confirms it, as on the month page)
            while (month := first_open_month_with_charges(now.date().replace(day=1))):
                billing.month_close(actor=finance.user, period=month, now=now,
                                    confirm_unpriced=True)
                self.stdout.write(f"Closed {month:%Y-%m}: invoices issued.")
            billing.drafts_refresh(now=now)  # this month's drafts, as the ingest keeps them
        except Exception as exc:  # the demo still runs without invoices
            self.stderr.write(f"demo invoices skipped: {exc}")
