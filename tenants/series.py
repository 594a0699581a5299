"""Usage time series: the minute sampler, hourly and daily rollups, retention, and reads.

Writes (called by the tasks in ``tenants/tasks.py``):

* :func:`usage_sample` - one sample per pool and compute resource: allocated (observed
  pods, :func:`tenants.usage.allocation_by_namespace`), utilised (DCGM through
  :class:`k8s_sync.metrics.MetricsSource`; ``None`` when the source is down), the
  effective quota. Upserts the minute row and recomputes the hour and day rows it
  falls in, so trends are current. Also folds per-job GPU utilisation into
  :class:`~tenants.models.JobUtilisation`. A constant number of queries, whatever the
  number of pools (bulk upserts).
* :func:`usage_rollup` - recompute recent hour and day rows (repairs a missed minute)
  and apply the retention policy.

Reads: :func:`series_for_pools` (summed over the given pools, per resource and bucket)
and :func:`allocation_heatmap` (cluster-wide allocated GPUs per hour).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import Avg, Count, F, Max, Q, Sum
from django.utils import timezone

from k8s_sync.client import K8sError
from k8s_sync.metrics import GpuSample, MetricsSource
from k8s_sync.models import ObservedNode, ObservedPod
from k8s_sync.selectors import LIVE_PHASES
from tenants.choices import LoanStatus, TenantStatus
from tenants.models import JobUtilisation, Pool, QuotaGrant, QuotaLoan, UsageDaily, UsageSeries
from tenants.usage import allocation_by_namespace

log = logging.getLogger(__name__)

LOW_UTIL_PCT = 10.0
# Only compute resources are charted; storage has its own daily history (UsageDaily).
_TRACKED_PREFIXES = ("gpu:", "mig:")
_TRACKED = {"cpu", "memory", "gpu-memory", "gpu-shared"}
M, H, D = UsageSeries.MINUTE, UsageSeries.HOUR, UsageSeries.DAY


def tracked(resource: str) -> bool:
    return resource in _TRACKED or resource.startswith(_TRACKED_PREFIXES)


def _floor(at: dt.datetime, resolution: str) -> dt.datetime:
    at = at.replace(second=0, microsecond=0)
    if resolution in (H, D):
        at = at.replace(minute=0)
    if resolution == D:
        at = at.replace(hour=0)
    return at


def _span(resolution: str) -> dt.timedelta:
    return {M: dt.timedelta(minutes=1), H: dt.timedelta(hours=1), D: dt.timedelta(days=1)}[
        resolution]


# --- effective quota of every pool (two queries) ----------------------------------------------


def effective_quota_all(pool_ids: Iterable[int] | None = None) -> dict[int, dict[str, float]]:
    """pool id -> resource -> effective quota (grants -/+ active loans), in bulk."""
    grants = QuotaGrant.objects.filter(superseded_at__isnull=True)
    loans = QuotaLoan.objects.filter(status=LoanStatus.ACTIVE)
    if pool_ids is not None:
        ids = list(pool_ids)
        grants = grants.filter(pool_id__in=ids)
        loans = loans.filter(Q(lender_id__in=ids) | Q(borrower_id__in=ids))
    out: dict[int, dict[str, Decimal]] = defaultdict(dict)
    for pool_id, resource, amount in grants.values_list("pool_id", "resource", "amount"):
        out[pool_id][resource] = amount
    for lender, borrower, resource, amount in loans.values_list("lender_id", "borrower_id",
                                                                "resource", "amount"):
        for pool_id, sign in ((lender, -1), (borrower, 1)):
            amounts = out[pool_id]
            amounts[resource] = max(Decimal(0), amounts.get(resource, Decimal(0)) + sign * amount)
    return {p: {k: float(v) for k, v in a.items()} for p, a in out.items()}


# --- utilisation from DCGM samples -------------------------------------------------------------


@dataclass
class Measured:
    """What the metrics said, folded per namespace and per job."""

    by_namespace: dict[str, dict[str, float]] = field(default_factory=dict)
    by_job: dict[tuple[str, str], tuple[int, float, float]] = field(default_factory=dict)


def measure(samples: Sequence[GpuSample], *, node_models: dict[str, tuple[str, int]],
            pod_jobs: dict[tuple[str, str], str]) -> Measured:
    """Utilised amounts per namespace and resource, and (GPUs, util sum, MiB) per job.

    ``node_models``: node -> (GPU model label, replicas per shared GPU);
    ``pod_jobs``: (namespace, pod) -> trainyard.io/job label.
    """
    by_ns: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    by_job: dict[tuple[str, str], list[float]] = {}
    for s in samples:
        if s.idle or not s.namespace:
            continue
        model, replicas = node_models.get(s.node, ("", 0))
        busy = s.util_pct / 100.0
        usage = by_ns[s.namespace]
        if s.mig_profile:
            usage[f"mig:{s.mig_profile}"] += busy
        elif replicas and replicas > 1:
            usage["gpu-shared"] += busy
        elif model:   # a card of no known model is no catalog resource (no gpu:unknown)
            usage[f"gpu:{model}"] += busy
        usage["gpu-memory"] += s.fb_used_mib / 1024.0
        job = pod_jobs.get((s.namespace, s.pod))
        if job:
            acc = by_job.setdefault((s.namespace, job), [0, 0.0, 0.0])
            acc[0] += 1
            acc[1] += s.util_pct
            acc[2] += s.fb_used_mib
    return Measured(by_namespace={k: dict(v) for k, v in by_ns.items()},
                    by_job={k: (int(v[0]), v[1], v[2]) for k, v in by_job.items()})


def _read_metrics(source: MetricsSource | None) -> list[GpuSample] | None:
    try:
        source = source or MetricsSource.from_settings()
        return source.gpu_samples()
    except K8sError as exc:
        log.warning("usage sample without utilisation: %s", exc)
        return None


# --- the minute sampler --------------------------------------------------------------------


def usage_sample(*, now: dt.datetime | None = None, source: MetricsSource | None = None,
                 samples: Sequence[GpuSample] | None = None) -> int:
    """Record one minute for every live pool; returns the number of minute rows written.

    ``samples`` (tests, bench) bypasses the metrics source. Idempotent per minute: a
    second run in the same minute overwrites that minute's row.
    """
    now = now or timezone.now()
    minute = _floor(now, M)
    pools = list(Pool.objects.exclude(tenant__status=TenantStatus.DELETED).select_related("tenant")
                 .only("id", "kind", "tenant__slug"))
    by_ns = {p.namespace: p for p in pools}
    allocation = allocation_by_namespace(list(by_ns))
    quotas = effective_quota_all()
    if samples is None:
        samples = _read_metrics(source)
    measured = None
    if samples is not None:
        node_models = {n: (m or "", r or 0) for n, m, r in ObservedNode.objects.values_list(
            "name", "gpu_model", "gpu_replicas")}
        pod_jobs = {(ns, name): job for ns, name, job in ObservedPod.objects.exclude(job="")
                    .filter(phase__in=LIVE_PHASES)
                    .values_list("namespace", "name", "job")}
        measured = measure(samples, node_models=node_models, pod_jobs=pod_jobs)
    rows = []
    for namespace, pool in by_ns.items():
        used = allocation.get(namespace, {})
        quota = quotas.get(pool.pk, {})
        util = measured.by_namespace.get(namespace, {}) if measured else None
        keys = {k for k in set(used) | set(quota) if tracked(k)}
        for key in keys:
            amount = float(used.get(key, 0))
            utilised = None
            if util is not None and (key.startswith(_TRACKED_PREFIXES)
                                     or key in ("gpu-memory", "gpu-shared")):
                utilised = util.get(key, 0.0)
            rows.append(UsageSeries(pool_id=pool.pk, resource=key, resolution=M, start=minute,
                                    allocated=amount, peak=amount, utilised=utilised,
                                    quota=quota.get(key), samples=1))
    with transaction.atomic():
        if rows:
            UsageSeries.objects.bulk_create(
                rows, update_conflicts=True,
                unique_fields=["pool", "resource", "resolution", "start"],
                update_fields=["allocated", "peak", "utilised", "quota", "samples"])
        _rollup_bucket(_floor(minute, H), H)
        _rollup_bucket(_floor(minute, D), D)
        if measured is not None:
            _record_jobs(measured.by_job, now)
    return len(rows)


def _record_jobs(by_job: dict[tuple[str, str], tuple[int, float, float]],
                 now: dt.datetime) -> None:
    if not by_job:
        return
    jobs = {job for _, job in by_job}
    existing = {(u.namespace, u.job): u for u in JobUtilisation.objects.filter(job__in=jobs)}
    new, changed = [], []
    for key, (gpus, util_sum, mib) in by_job.items():
        mean = util_sum / gpus if gpus else 0.0
        row = existing.get(key)
        if row is None:
            row = JobUtilisation(namespace=key[0], job=key[1], first_sampled_at=now,
                                 last_sampled_at=now)
            new.append(row)
        elif row.last_sampled_at and _floor(row.last_sampled_at, M) == _floor(now, M):
            continue  # this minute is already counted
        else:
            changed.append(row)
        row.gpu_samples += gpus
        row.util_sum += util_sum
        row.fb_used_sum_mib += mib
        row.last_util = mean
        row.last_sampled_at = now
        row.low_since = (row.low_since or now) if mean < LOW_UTIL_PCT else None
    JobUtilisation.objects.bulk_create(new, ignore_conflicts=True)
    JobUtilisation.objects.bulk_update(changed, ["gpu_samples", "util_sum", "fb_used_sum_mib",
                                                 "last_util", "last_sampled_at", "low_since"])


# --- rollups and retention -----------------------------------------------------------------


def _rollup_bucket(start: dt.datetime, resolution: str) -> int:
    """Recompute every pool's rows of one hour (from minutes) or day (from hours)."""
    finer = M if resolution == H else H
    end = start + _span(resolution)
    src = UsageSeries.objects.filter(resolution=finer, start__gte=start, start__lt=end)
    if finer == M:
        agg = src.values("pool_id", "resource").annotate(
            a=Avg("allocated"), p=Max("peak"), u=Avg("utilised"), q=Max("quota"), n=Count("id"))
        rows = [UsageSeries(pool_id=r["pool_id"], resource=r["resource"], resolution=resolution,
                            start=start, allocated=r["a"] or 0, peak=r["p"] or 0, utilised=r["u"],
                            quota=r["q"], samples=r["n"]) for r in agg]
    else:  # weighted by the minutes behind each hour
        agg = src.values("pool_id", "resource").annotate(
            a=Sum(F("allocated") * F("samples")), p=Max("peak"),
            u=Sum(F("utilised") * F("samples")),
            un=Sum("samples", filter=Q(utilised__isnull=False)),
            q=Max("quota"), n=Sum("samples"))
        rows = [UsageSeries(pool_id=r["pool_id"], resource=r["resource"], resolution=resolution,
                            start=start, allocated=(r["a"] or 0) / (r["n"] or 1),
                            peak=r["p"] or 0,
                            utilised=(r["u"] / r["un"]) if r["un"] else None,
                            quota=r["q"], samples=r["n"] or 0) for r in agg]
    if rows:
        UsageSeries.objects.bulk_create(
            rows, update_conflicts=True, unique_fields=["pool", "resource", "resolution", "start"],
            update_fields=["allocated", "peak", "utilised", "quota", "samples"])
    return len(rows)


def usage_rollup(*, now: dt.datetime | None = None, hours: int = 3, days: int = 2
                 ) -> dict[str, int]:
    """Recompute the last ``hours`` hours and ``days`` days, then drop expired rows."""
    now = now or timezone.now()
    written = 0
    with transaction.atomic():
        for i in range(hours):
            written += _rollup_bucket(_floor(now, H) - dt.timedelta(hours=i), H)
        for i in range(days):
            written += _rollup_bucket(_floor(now, D) - dt.timedelta(days=i), D)
        for i in range(days):
            written += feed_usage_daily(_floor(now, D) - dt.timedelta(days=i))
    minute_days = getattr(settings, "TRAINYARD_USAGE_MINUTE_DAYS", 2)
    hourly_days = getattr(settings, "TRAINYARD_USAGE_HOURLY_DAYS", 35)
    dropped_m, _ = UsageSeries.objects.filter(
        resolution=M, start__lt=now - dt.timedelta(days=minute_days)).delete()
    dropped_h, _ = UsageSeries.objects.filter(
        resolution=H, start__lt=now - dt.timedelta(days=hourly_days)).delete()
    stale_jobs, _ = JobUtilisation.objects.filter(
        last_sampled_at__lt=now - dt.timedelta(days=max(hourly_days, 60))).delete()
    return {"written": written, "dropped_minutes": dropped_m, "dropped_hours": dropped_h,
            "dropped_jobs": stale_jobs}


def feed_usage_daily(day_start: dt.datetime) -> int:
    """Fill UsageDaily's measured utilisation for one day from the daily series row.

    UsageDaily's ``total``/``samples`` come from the 5-minute allocation sampler; so that
    ``utilised_total / total`` is the utilised share (what idle rates and quota
    recommendations read), ``utilised_total`` is the day's mean utilisation times that
    row's own ``samples``. Only resources DCGM measures; three queries.
    """
    day = day_start.date()  # UTC, like the allocation sampler's timezone.now().date()
    means = {(p, r): u for p, r, u in UsageSeries.objects.filter(
        resolution=D, start=day_start, utilised__isnull=False).values_list(
        "pool_id", "resource", "utilised")}
    if not means:
        return 0
    rows = list(UsageDaily.objects.filter(day=day, pool_id__in={p for p, _r in means},
                                          samples__gt=0))
    changed = []
    for row in rows:
        mean = means.get((row.pool_id, row.resource))
        if mean is None:
            continue
        row.utilised_total = Decimal(str(round(mean * row.samples, 3)))
        row.utilised_samples = row.samples
        changed.append(row)
    UsageDaily.objects.bulk_update(changed, ["utilised_total", "utilised_samples"])
    return len(changed)


# --- reads ------------------------------------------------------------------------------------


def resolution_for(days: int) -> str:
    """Hourly rows up to a week (168 per resource), daily beyond (30 for a month)."""
    return H if days <= 7 else D


def series_for_pools(pool_ids: Sequence[int], *, days: int, now: dt.datetime | None = None
                     ) -> dict[str, list[tuple[dt.datetime, float, float | None, float | None]]]:
    """resource -> [(bucket start, allocated, utilised, quota)] summed over the pools.

    One query; at most ``days * 24`` (hourly) or ``days`` (daily) rows per resource.
    """
    now = now or timezone.now()
    resolution = resolution_for(days)
    since = _floor(now, resolution) - dt.timedelta(days=days) + _span(resolution)
    rows = (UsageSeries.objects.filter(pool_id__in=list(pool_ids), resolution=resolution,
                                       start__gte=since)
            .values("resource", "start")
            .annotate(a=Sum("allocated"), u=Sum("utilised"), q=Sum("quota"))
            .order_by("resource", "start"))
    out: dict[str, list[tuple[dt.datetime, float, float | None, float | None]]] = {}
    for r in rows:
        out.setdefault(r["resource"], []).append((r["start"], r["a"] or 0.0, r["u"], r["q"]))
    return out


def allocation_heatmap(*, days: int = 7, now: dt.datetime | None = None
                       ) -> dict[str, dict[dt.datetime, float]]:
    """GPU model resource (``gpu:<model>``) -> hour -> cards allocated, cluster-wide."""
    now = now or timezone.now()
    since = _floor(now, H) - dt.timedelta(days=days) + _span(H)
    rows = (UsageSeries.objects.filter(resolution=H, start__gte=since,
                                       resource__startswith="gpu:")
            .values("resource", "start").annotate(a=Sum("allocated")).order_by("start"))
    out: dict[str, dict[dt.datetime, float]] = defaultdict(dict)
    for r in rows:
        out[r["resource"]][r["start"]] = r["a"] or 0.0
    return dict(out)


def latest_minute() -> dt.datetime | None:
    """The start of the latest sampled minute (one index-only query)."""
    return UsageSeries.objects.filter(resolution=M).aggregate(t=Max("start"))["t"]


def latest_minute_by_tenant(latest: dt.datetime | None = None
                            ) -> dict[str, dict[str, tuple[float, float | None]]]:
    """tenant slug -> resource -> (allocated, utilised) at the latest sampled minute
    (or at ``latest`` when the caller already knows it)."""
    latest = latest or latest_minute()
    if latest is None:
        return {}
    rows = (UsageSeries.objects.filter(resolution=M, start=latest)
            .values("pool__tenant__slug", "resource")
            .annotate(a=Sum("allocated"), u=Sum("utilised")))
    out: dict[str, dict[str, tuple[float, float | None]]] = defaultdict(dict)
    for r in rows:
        out[r["pool__tenant__slug"]][r["resource"]] = (r["a"] or 0.0, r["u"])
    return dict(out)
