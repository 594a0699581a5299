"""Reads behind the GPU utilisation figures (``tenants.utilisation`` defines them, pure):
quota held, device-hours allocated from the ledger, and the minute sampler's busy share.
Imports no other selectors module but :mod:`billing.selectors_rates`
(``billing.selectors`` re-exports these names)."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from decimal import Decimal

from django.db import connection
from django.db.models import F, Q, Sum
from django.utils import timezone

from billing import ledger
from billing.models import GpuUsage
from billing.selectors_rates import tz
from core.choices import Tier
from core.db import epoch_seconds_sql
from jobs.choices import JobState
from tenants import utilisation
from tenants.models import JobUtilisation, Pool, QuotaGrant, QuotaLoan, Tenant
from tenants.utilisation import Utilisation


def running_stretches(*, first_job: int, last_job: int, job_ids: Iterable[int] | None = None
                      ) -> dict[int, list[tuple[int, int | None]]]:
    """Each job's stretches in state "running" as (start, end) in whole epoch seconds (end
    None: still running), for jobs ``first_job``..``last_job`` (or only ``job_ids`` of
    them), in time order.

    The database pairs each transition with the next one (a window over the job's
    history), so only the running stretches travel to Python, as integers. The same
    stretches as :func:`jobs.timeline.running_intervals` of the (to_state, at) history:
    a stretch ends at the job's next transition (tested against it).
    """
    vendor = connection.vendor
    start_sql, start_params = epoch_seconds_sql("at", vendor)
    end_sql, end_params = epoch_seconds_sql("nxt", vendor)
    wanted = "" if job_ids is None else " AND job_id IN ({})".format(
        ", ".join(["%s"] * len(ids := list(job_ids))))
    # only fixed SQL and placeholders are formatted in
    sql = f"""
        SELECT job_id, {start_sql}, {end_sql} FROM (
            SELECT job_id, to_state, at,
                   LEAD(at) OVER (PARTITION BY job_id ORDER BY at, id) AS nxt
            FROM jobs_jobtransition WHERE job_id >= %s AND job_id <= %s{wanted}) t
        WHERE to_state = %s ORDER BY job_id, at"""  # noqa: S608
    params = [*start_params, *end_params, first_job, last_job,
              *(ids if job_ids is not None else ()), JobState.RUNNING]
    stretches: dict[int, list[tuple[int, int | None]]] = defaultdict(list)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for job_id, start, end in cursor.fetchall():
            stretches[job_id].append((start, end))
    return stretches


def quarter_start(day: dt.date) -> dt.date:
    return day.replace(month=(day.month - 1) // 3 * 3 + 1, day=1)


_PoolKind = tuple[int, int, str]   # (tenant id, pool id, GPU kind)


def _quota_held_hours(lo: dt.datetime, hi: dt.datetime, tenant_ids: list[int] | None
                      ) -> dict[_PoolKind, Decimal]:
    """Device-hours of quota each pool held per GPU kind over [lo, hi): every grant row
    times the hours it was in force (the table is the history), plus the hours of the
    loans it borrowed, minus the ones it lent."""
    out: dict[_PoolKind, Decimal] = defaultdict(Decimal)
    gpu = Q(resource__startswith="gpu:") | Q(resource__startswith="mig:") | Q(
        resource=utilisation.GPU_SHARED)
    grants = QuotaGrant.objects.filter(gpu, created_at__lt=hi).filter(
        Q(superseded_at__isnull=True) | Q(superseded_at__gt=lo))
    if tenant_ids is not None:
        grants = grants.filter(pool__tenant_id__in=tenant_ids)
    for tenant_id, pool_id, resource, amount, since, until in grants.values_list(
            "pool__tenant_id", "pool_id", "resource", "amount", "created_at", "superseded_at"):
        out[(tenant_id, pool_id, resource)] += utilisation.held_hours(amount, since, until,
                                                                      lo, hi)
    loans = QuotaLoan.objects.filter(gpu, started_at__isnull=False, started_at__lt=hi).filter(
        Q(ended_at__isnull=True) | Q(ended_at__gt=lo))
    for l_tenant, l_pool, b_tenant, b_pool, resource, amount, began, ended in loans.values_list(
            "lender__tenant_id", "lender_id", "borrower__tenant_id", "borrower_id", "resource",
            "amount", "started_at", "ended_at"):
        held = utilisation.held_hours(amount, began, ended, lo, hi)
        if tenant_ids is None or l_tenant in tenant_ids:
            out[(l_tenant, l_pool, resource)] -= held
        if tenant_ids is None or b_tenant in tenant_ids:
            out[(b_tenant, b_pool, resource)] += held
    return out


def _allocated_hours(start: dt.date, end: dt.date, tenant_ids: list[int] | None
                     ) -> dict[_PoolKind, dict[int, tuple[Decimal, bool]]]:
    """(tenant, pool, GPU kind) -> job id -> (device-hours billed over the days [start,
    end), beyond quota): the ledger's rows (``GpuUsage``), a job beyond quota when the
    engine admitted it borrowing or in the batch tier."""
    rows = GpuUsage.objects.filter(day__gte=start, day__lt=end, devices__gt=0).exclude(
        gpu_model="", mig_profile="")
    if tenant_ids is not None:
        rows = rows.filter(tenant_id__in=tenant_ids)
    out: dict[_PoolKind, dict[int, tuple[Decimal, bool]]] = defaultdict(dict)
    for tenant_id, pool_id, job_id, model, profile, shared, borrowing, tier, ds in (
            rows.values("tenant_id", "pool_id", "job_id", "gpu_model", "mig_profile",
                        "job__gpu_shared", "job__borrowing", "job__tier")
            .annotate(ds=Sum(F("devices") * F("seconds")))
            .values_list("tenant_id", "pool_id", "job_id", "gpu_model", "mig_profile",
                         "job__gpu_shared", "job__borrowing", "job__tier", "ds")):
        key = (tenant_id, pool_id, utilisation.job_kind(model, profile, shared))
        hours = out[key].get(job_id, (Decimal(0), False))[0] + Decimal(ds or 0) / 3600
        out[key][job_id] = (hours, bool(borrowing) or tier == Tier.BATCH)
    return out


def _job_utilisation(job_ids: set[int], lo: dt.datetime, hi: dt.datetime,
                     tenant_ids: list[int] | None) -> dict[int, float]:
    """Job id -> its mean GPU utilisation (0..100) as the minute sampler measured it
    (``JobUtilisation``), for the jobs sampled around [lo, hi)."""
    out: dict[int, float] = {}
    rows = JobUtilisation.objects.filter(gpu_samples__gt=0, last_sampled_at__gte=lo,
                                         first_sampled_at__lt=hi)
    if tenant_ids is not None:
        rows = rows.filter(namespace__in=[p.namespace for p in Pool.objects.filter(
            tenant_id__in=tenant_ids).select_related("tenant")])
    for job, total, samples in rows.values_list("job", "util_sum", "gpu_samples").iterator():
        if job.isdigit() and int(job) in job_ids:
            out[int(job)] = total / samples
    return out


def utilisation_figures(start: dt.date, end: dt.date, tenant_ids: Iterable[int] | None = None,
                        *, by_pool: bool = False, now: dt.datetime | None = None
                        ) -> dict[int, dict[str, Utilisation]]:
    """**The utilisation figures** (``tenants.utilisation``) over the days [start, end),
    up to ``now``: tenant id (pool id with ``by_pool``) -> GPU kind (``gpu:<model>``,
    ``mig:<profile>``, ``gpu-shared``) -> quota held, allocated (within quota, borrowed),
    busy, quota use and idle rate. The one computation behind the tenant dashboard, the
    request facts, the invoice, finance's month, the API, ``/metrics`` and the quarterly
    review. Keys with quota held or allocated hours."""
    ids = list(tenant_ids) if tenant_ids is not None else None
    zone = tz()
    lo = ledger.local_midnight(start, zone)
    hi = min(ledger.local_midnight(end, zone), now or timezone.now())
    quota = _quota_held_hours(lo, hi, ids) if hi > lo else {}
    allocated = _allocated_hours(start, end, ids)
    util = _job_utilisation({j for jobs in allocated.values() for j in jobs}, lo,
                            ledger.local_midnight(end, zone), ids) if allocated else {}
    out: dict[int, dict[str, Utilisation]] = defaultdict(dict)
    for key in set(allocated) | {k for k, v in quota.items() if v > 0}:
        tenant_id, pool_id, kind = key
        jobs = [utilisation.JobHours(hours, beyond, util.get(job_id))
                for job_id, (hours, beyond) in allocated.get(key, {}).items()]
        figure = utilisation.figures(kind, quota_held=quota.get(key, Decimal(0)), jobs=jobs)
        group = out[pool_id if by_pool else tenant_id]
        group[kind] = group[kind] + figure if kind in group else figure
    return dict(out)


def utilisation_totals(start: dt.date, end: dt.date, tenant_ids: Iterable[int] | None = None
                       ) -> dict[int, Utilisation]:
    """Tenant id -> the figures of all its GPU kinds together over the days [start, end)."""
    return {tenant_id: utilisation.total(kinds.values())
            for tenant_id, kinds in utilisation_figures(start, end, tenant_ids).items()}


def tenant_utilisation(tenant: Tenant, today: dt.date | None = None
                       ) -> dict[str, Utilisation | None]:
    """One tenant's figures, all GPU kinds, this month and this quarter so far."""
    today = today or timezone.localdate()
    tomorrow = today + dt.timedelta(days=1)
    month = utilisation_totals(ledger.month_start(today), tomorrow, [tenant.pk]).get(tenant.pk)
    quarter = utilisation_totals(quarter_start(today), tomorrow, [tenant.pk]).get(tenant.pk)
    return {"month": month, "quarter": quarter}


def tenant_utilisation_by_kind(tenant: Tenant, start: dt.date, end: dt.date
                               ) -> list[Utilisation]:
    """One tenant's figures per GPU kind over the days [start, end), by kind."""
    kinds = utilisation_figures(start, end, [tenant.pk]).get(tenant.pk, {})
    return [kinds[k] for k in sorted(kinds)]
