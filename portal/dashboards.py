"""Dashboard widgets: each pairs one read with the numbers (and figures) a page shows.

They compose tenants (quota, usage series), jobs (jobs, transitions, the admission
engine's positions) and k8s_sync (capacity), which is why they live in portal/. Every
function reads a bounded number of rows with a constant number of queries, whatever
the number of jobs or samples (the tests pin the counts):

* :func:`tenant_gauges` - used against quota per resource, guaranteed and borrowed part;
* :func:`tenant_trends` - allocated, utilised and quota per resource, hourly (7 days)
  or daily (30 days) rows;
* :func:`job_consumption` - GPU-hours (JobTransition running intervals), mean GPU
  utilisation (DCGM), cost when ``billing.selectors.job_costs`` exists;
* :func:`waiting_jobs`, :func:`wait_times` - the user's waiting jobs and recent waits;
* :func:`busyness` - per GPU model: allocated against capacity, demand waiting, typical
  wait (cached for a minute: the same for everyone);
* :func:`cluster_capacity`, :func:`allocation_by_hour`, :func:`tenant_allocation`,
  :func:`abnormal_jobs` - the cluster page.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeVar, cast

from django.core.cache import cache
from django.db.models import Count, F, Max, Min, Q
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from billing.selectors import job_costs, quarter_start, tenant_utilisation_by_kind
from core.models import Policy
from core.texts import message
from core.texts import render as render_text
from jobs.choices import JobState
from jobs.models import JobTransition, TrainingJob
from jobs.selectors import stuck_jobs
from jobs.timeline import running_intervals
from k8s_sync.models import ObservedKind, ObservedNode, ObservedPod
from k8s_sync.naming import namespace_name
from k8s_sync.physical import last_framebuffer_mib, physical_use
from k8s_sync.selectors import CapacityReport, capacity_report
from portal import charts
from tenants.access import AnyUser
from tenants.catalog import Resource
from tenants.choices import TenantStatus
from tenants.models import JobUtilisation, Pool, QuotaGrant, Tenant
from tenants.selectors import granted_totals, quota_overview
from tenants.series import (
    LOW_UTIL_PCT,
    allocation_heatmap,
    latest_minute,
    latest_minute_by_tenant,
    series_for_pools,
    tracked,
)
from tenants.usage import in_use_by_pool
from tenants.utilisation import Utilisation

BUSYNESS_CACHE_KEY = "portal:busyness:v1"
BUSYNESS_TTL = 60
PER_TENANT_TTL = 60  # trends and the job table: rows change once a minute at most
CAPACITY_TTL = 10  # keyed by the observed rows' count and latest write (cluster_capacity)
TENANT_ALLOCATION_TTL = 5  # keyed by the latest minute; bounds a re-sampled minute
JOB_TABLE_WINDOW_DAYS = 30
JOB_TABLE_SCAN = 2000  # most recent jobs considered for "most expensive first"
LONG_RUN = dt.timedelta(days=5)
LOW_UTIL_FOR = dt.timedelta(hours=1)

T = TypeVar("T")


def _cached(key: str, compute: Callable[[], T], ttl: int) -> T:
    """``compute()``, kept under ``key`` for ``ttl`` seconds (Django's get_or_set)."""
    return cast(T, cache.get_or_set(key, compute, ttl))


def short_model(model: str) -> str:
    """``NVIDIA-H800`` -> ``H800`` (what people call the card)."""
    return model.removeprefix("NVIDIA-").removeprefix("NVIDIA ") or model


def resource_label(key: str) -> tuple[str, str]:
    """(label, unit) of a catalog resource key, tolerant of unknown keys."""
    try:
        res = Resource.parse(key)
    except ValueError:
        return key, ""
    return res.label(), res.unit


def counted_unit(key: str, amount: Decimal | float, unit: str) -> str:
    """The unit for ``amount`` of ``key`` ("1 card", "2 cards"); ``unit`` for unknown keys."""
    try:
        return Resource.parse(key).unit_for(amount)
    except ValueError:
        return unit


def _order(key: str) -> tuple[int, str]:
    rank = 0 if key.startswith("gpu:") else 1 if key.startswith("mig:") else \
        2 if key in ("gpu-shared", "gpu-memory") else 3
    return rank, key


# --- tenant: gauges -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Gauge:
    key: str
    label: str
    unit: str
    used: Decimal
    quota: Decimal
    guaranteed: Decimal | None
    borrowed: Decimal
    limited: bool = True  # False: no quota is set for the resource, only its use is shown

    @property
    def within(self) -> Decimal:
        return self.used - self.borrowed

    @property
    def percent(self) -> int | None:
        return round(100 * self.used / self.quota) if self.quota else None

    @property
    def state(self) -> str:
        """``charts.gauge_state``: "over" (amber), "full", "near", "ok" or "unlimited"."""
        return charts.gauge_state(used=float(self.used), quota=float(self.quota),
                                  limited=self.limited)

    @property
    def meter(self) -> dict[str, Any]:
        """The page's ``<meter>``: its scale reaches the use when that is above the quota
        (a meter clamps its value to ``max``); ``low`` and ``high`` are both the quota and
        ``optimum`` 0, so use up to the quota (full included) is the meter's optimum
        region and use above it its "even less good" one, which the stylesheet colours
        as the chart does: in-use blue, and amber only above the quota."""
        quota = float(self.quota)
        return {"max": max(quota, float(self.used)), "low": quota,
                "high": quota, "optimum": 0, "value": float(self.used)}

    def figure(self) -> charts.Figure:
        return charts.gauge(self.label, used=float(self.used), quota=float(self.quota),
                            unit=counted_unit(self.key, self.used, self.unit),
                            borrowed=float(self.borrowed), limited=self.limited,
                            guaranteed=float(self.guaranteed)
                            if self.guaranteed is not None else None)

    def as_json(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "unit": self.unit,
                "used": float(self.used), "quota": float(self.quota), "limited": self.limited,
                "state": self.state, "meter": self.meter,
                "borrowed": float(self.borrowed), "percent": self.percent,
                "guaranteed": float(self.guaranteed) if self.guaranteed is not None else None,
                "figure": self.figure()}


def tenant_utilisation(tenant: Tenant, today: dt.date | None = None) -> list[Utilisation]:
    """The tenant's utilisation figures this quarter so far, per GPU kind
    (``billing.selectors.utilisation_figures``, the one computation every page uses)."""
    today = today or timezone.localdate()
    return tenant_utilisation_by_kind(tenant, quarter_start(today),
                                      today + dt.timedelta(days=1))


def tenant_gauges(tenant: Tenant) -> list[Gauge]:
    """Per compute resource, summed over the tenant's pools: in use now against the
    effective quota; the part above the quota is borrowed (elastic), the guaranteed part
    is shown for overcommitted-mode tenants."""
    used: dict[str, Decimal] = defaultdict(Decimal)
    quota: dict[str, Decimal] = defaultdict(Decimal)
    guaranteed: dict[str, Decimal] = {}
    borrowed: dict[str, Decimal] = defaultdict(Decimal)
    limited: set[str] = set()
    for block in quota_overview(tenant):
        for row in block["rows"]:
            key = row["key"]
            if not tracked(key):
                continue
            used[key] += row["used"]
            quota[key] += row["effective"]
            if row["limited"]:   # the quota page's answer (tenants.demand.quota_limits)
                limited.add(key)
                # Use above a pool's quota is borrowed (not granted is 0); a pool whose
                # quota does not limit the resource borrows nothing (its use is simply
                # not limited).
                borrowed[key] += max(Decimal(0), row["used"] - row["effective"])
            if row["guaranteed"] is not None:
                guaranteed[key] = guaranteed.get(key, Decimal(0)) + row["guaranteed"]
    out = []
    for key in sorted(set(used) | set(quota), key=_order):
        if not used[key] and not quota[key]:
            continue
        label, unit = resource_label(key)
        out.append(Gauge(key=key, label=label, unit=unit, used=used[key], quota=quota[key],
                         guaranteed=guaranteed.get(key), borrowed=borrowed[key],
                         limited=key in limited))
    return out


# --- tenant: trends ------------------------------------------------------------------------------


def tenant_trends(tenant: Tenant, *, days: int, now: dt.datetime | None = None
                  ) -> list[dict[str, Any]]:
    """Per resource: a trend figure of allocated, utilised and quota (one query, or none
    within a minute of the last computation: rows change once a minute at most)."""
    if now is not None:
        return _tenant_trends(tenant, days=days, now=now)
    return _cached(f"portal:trends:{tenant.pk}:{days}:{translation.get_language()}",
                            lambda: _tenant_trends(tenant, days=days, now=None), PER_TENANT_TTL)


def _observed_gpu_keys() -> set[str]:
    """``gpu:<model>`` of every GPU model an observed node carries (one query)."""
    return {f"gpu:{m}" for m in ObservedNode.objects.exclude(gpu_model="")
            .values_list("gpu_model", flat=True).distinct()}


def _tenant_trends(tenant: Tenant, *, days: int, now: dt.datetime | None
                   ) -> list[dict[str, Any]]:
    pool_ids = list(Pool.objects.filter(tenant=tenant).values_list("id", flat=True))
    now = now or timezone.now()
    series = series_for_pools(pool_ids, days=days, now=now)
    period = (now - dt.timedelta(days=days), now)   # every chart's x axis, data or not
    labels = {"allocated": _("allocated"), "utilised": _("utilised"), "quota": _("quota")}
    # A GPU key no node offers and the tenant holds no grant of (e.g. the ``gpu:unknown``
    # older samplers wrote for cards without a model label) is no resource: no chart.
    known = _cached("portal:gpu-keys", _observed_gpu_keys, PER_TENANT_TTL) | set(
        QuotaGrant.objects.filter(pool_id__in=pool_ids, superseded_at__isnull=True)
        .values_list("resource", flat=True))
    out = []
    for key in sorted(series, key=_order):
        if key.startswith("gpu:") and key not in known:
            continue
        rows = series[key]
        label, unit = resource_label(key)
        out.append({"key": key, "label": label, "unit": unit, "points": len(rows),
                    "figure": charts.trend(label, x=[r[0] for r in rows],
                                           allocated=[r[1] for r in rows],
                                           utilised=[r[2] for r in rows],
                                           quota=[r[3] for r in rows], unit=unit,
                                           labels=labels, period=period)})
    return out


# --- tenant: per-job consumption ---------------------------------------------------------------


@dataclass(frozen=True)
class JobUse:
    id: int
    name: str
    state: str
    pool: str
    resource: str
    gpus: int
    gpu_hours: float
    mean_util: float | None
    cost: Any = None

    @property
    def state_label(self) -> str:
        return str(JobState(self.state).label)


def job_consumption(tenant: Tenant, *, now: dt.datetime | None = None, limit: int = 25
                    ) -> tuple[list[JobUse], bool]:
    """Cached per tenant for a minute (see :func:`_job_consumption`)."""
    if now is not None:
        return _job_consumption(tenant, now=now, limit=limit)
    return _cached(f"portal:jobuse:{tenant.pk}:{limit}",
                            lambda: _job_consumption(tenant, now=None, limit=limit),
                            PER_TENANT_TTL)


def _job_consumption(tenant: Tenant, *, now: dt.datetime | None, limit: int
                     ) -> tuple[list[JobUse], bool]:
    """The tenant's most expensive recent jobs (ran in the last 30 days), and whether a
    cost column exists. GPU-hours = GPUs x running time (JobTransition intervals).

    Three queries (jobs, transitions, utilisation), plus billing's for the costs; considers
    the ``JOB_TABLE_SCAN`` most recently started jobs.
    """
    now = now or timezone.now()
    since = now - dt.timedelta(days=JOB_TABLE_WINDOW_DAYS)
    jobs = list(TrainingJob.objects.filter(tenant=tenant, gpus_per_worker__gt=0)
                .filter(Q(state__in=[JobState.RUNNING, JobState.PREEMPTING])
                        | Q(finished_at__gte=since)
                        | Q(state=JobState.QUEUED, restart_count__gt=0))
                .order_by("-submitted_at")
                .values_list("id", "name", "state", "workers", "gpus_per_worker", "gpu_model",
                             "mig_profile", "pool__kind")[:JOB_TABLE_SCAN])
    if not jobs:
        return [], True
    ids = [j[0] for j in jobs]
    transitions: dict[int, list[tuple[str, dt.datetime]]] = defaultdict(list)
    for job_id, state, at in (JobTransition.objects.filter(job_id__in=ids)
                              .order_by("job_id", "at", "id")
                              .values_list("job_id", "to_state", "at")):
        transitions[job_id].append((state, at))
    rows = []
    for j in jobs:
        seconds = sum((end - start).total_seconds()
                      for start, end in running_intervals(transitions.get(j[0], []), now))
        if seconds > 0:
            rows.append((j, seconds * j[3] * j[4] / 3600.0))
    rows.sort(key=lambda r: -r[1])
    rows = rows[:limit]
    namespaces = {namespace_name(tenant.slug, j[7]) for j, _h in rows}
    utils = {job: (total / n if n else None) for job, total, n in JobUtilisation.objects.filter(
        namespace__in=namespaces, job__in=[str(j[0]) for j, _h in rows]).values_list(
        "job", "util_sum", "gpu_samples")}
    costs: Any = {}
    if rows:
        try:
            costs = job_costs(list(TrainingJob.objects.filter(pk__in=[j[0] for j, _h in rows])))
        except Exception:  # a billing failure must not break the dashboard
            costs = {}
    costs = costs if hasattr(costs, "get") else {}
    out = [JobUse(id=j[0], name=j[1], state=j[2], pool=j[7],
                  resource=short_model(j[6] or j[5]), gpus=j[3] * j[4],
                  gpu_hours=round(hours, 2), mean_util=_round(utils.get(str(j[0]))),
                  cost=costs.get(j[0]))
           for j, hours in rows]
    out.sort(key=lambda u: (-(float(u.cost) if u.cost is not None else -1), -u.gpu_hours))
    return out, True


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


# --- tenant: the queue ----------------------------------------------------------------------------


def waiting_jobs(tenant: Tenant, user: AnyUser, *, limit: int = 50) -> list[dict[str, Any]]:
    """The user's queued jobs in this tenant: positions, ETA and why they wait."""
    qs = (TrainingJob.objects.filter(tenant=tenant, state=JobState.QUEUED, submitted_by=user)
          .order_by(F("position_in_pool").asc(nulls_last=True), "submitted_at")
          .values("id", "name", "tier", "gpu_model", "mig_profile", "workers",
                  "gpus_per_worker", "position_in_pool", "position_in_model", "eta_p50",
                  "eta_p90", "wait_reason", "held", "submitted_at")[:limit])
    return [{**row, "gpus": row["workers"] * row["gpus_per_worker"],
             "resource": short_model(row["mig_profile"] or row["gpu_model"]) or _("CPU"),
             "wait_reason": render_text(row["wait_reason"])}   # a stored text, rendered
            for row in qs]


def wait_times(*, tenant: Tenant | None = None, days: int = 14,
               now: dt.datetime | None = None, limit: int = 2000) -> list[tuple[str, float]]:
    """(GPU model, minutes from submission to first start) of jobs submitted recently."""
    now = now or timezone.now()
    qs = JobTransition.objects.filter(to_state=JobState.RUNNING,
                                      job__submitted_at__gte=now - dt.timedelta(days=days))
    if tenant is not None:
        qs = qs.filter(job__tenant=tenant)
    rows = (qs.values("job_id").annotate(first=Min("at"), sub=Min("job__submitted_at"),
                                          model=Min("job__gpu_model"))
            .order_by("-job_id")[:limit])
    return [(r["model"] or "", max(0.0, (r["first"] - r["sub"]).total_seconds() / 60))
            for r in rows]


# --- cluster: busyness ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Busyness:
    model: str
    label: str
    allocatable: int
    allocated: int
    waiting_gpus: int
    waiting_jobs: int
    typical_wait_min: float | None

    @property
    def percent(self) -> int:
        return round(100 * self.allocated / self.allocatable) if self.allocatable else 0

    def sentence(self) -> str:
        if self.typical_wait_min is None:
            return _("%(m)s: %(p)s%% allocated") % {"m": self.label, "p": self.percent}
        return _("%(m)s: %(p)s%% allocated, typical wait %(w)s") % {
            "m": self.label, "p": self.percent, "w": humanize_minutes(self.typical_wait_min)}

    def as_json(self) -> dict[str, Any]:
        return {"model": self.model, "label": self.label, "allocatable": self.allocatable,
                "allocated": self.allocated, "percent": self.percent,
                "waiting_gpus": self.waiting_gpus, "waiting_jobs": self.waiting_jobs,
                "typical_wait_min": self.typical_wait_min, "sentence": self.sentence()}


def humanize_minutes(minutes: float) -> str:
    if minutes < 1:
        return _("under a minute")
    if minutes < 90:
        return _("%(n)d min") % {"n": round(minutes)}
    if minutes < 48 * 60:
        return _("%(n).1f h") % {"n": minutes / 60}
    return _("%(n).1f days") % {"n": minutes / 1440}


def queued_now(*, now: dt.datetime | None = None
               ) -> tuple[dict[str, dict[str, int]], dict[str, list[float]]]:
    """Per GPU model, in one query: the queued jobs and GPUs ({"jobs", "gpus"}), and the
    minutes each queued job is expected to wait in all (from its submission to its ETA
    p50, or to now when it has none or it is overdue)."""
    now = now or timezone.now()
    counts: dict[str, dict[str, int]] = defaultdict(lambda: {"jobs": 0, "gpus": 0})
    minutes: dict[str, list[float]] = defaultdict(list)
    rows = (TrainingJob.objects.filter(state=JobState.QUEUED).exclude(gpu_model="")
            .values_list("gpu_model", "workers", "gpus_per_worker", "submitted_at", "eta_p50"))
    for model, workers, gpus, submitted, eta in rows:
        counts[model]["jobs"] += 1
        counts[model]["gpus"] += workers * gpus
        until = max(eta or now, now)
        minutes[model].append(max(0.0, (until - submitted).total_seconds() / 60))
    return dict(counts), dict(minutes)


def typical_wait(recent: list[float], queued: list[float]) -> float | None:
    """The wait a job submitted now should expect, in minutes: the median of the recent
    actual waits (submission to start) and, while jobs queue, of what the queued jobs are
    expected to wait in all (their ETA), whichever is longer; a queue with ETAs hours
    ahead never reads "under a minute". None when there is neither."""
    figures = [statistics.median(v) for v in (recent, queued) if v]
    return round(max(figures), 1) if figures else None


def busyness(*, report: CapacityReport | None = None, fresh: bool = False) -> list[Busyness]:
    """Per GPU model: whole cards allocated against capacity, GPUs waiting in the queue,
    the typical wait (:func:`typical_wait`: the last 7 days' waits and the queue's ETAs).
    Cached ``BUSYNESS_TTL`` seconds."""
    if not fresh:
        cached = cache.get(BUSYNESS_CACHE_KEY)
        if cached is not None:
            return cached
    report = report or capacity_report()
    waiting, queued = queued_now()
    waits: dict[str, list[float]] = defaultdict(list)
    for model, minutes in wait_times(days=7):
        waits[model].append(minutes)
    out = []
    capacity = report.resources
    for m in report.models:
        # Whole cards: the capacity of gpu:<model> (k8s_sync.selectors.resource_capacity,
        # the number every page shows); a model offered only as shares, its shares. MIG
        # instances are resources of their own (mig:<profile>), not cards of the model.
        allocatable = int(capacity.get(f"gpu:{m.gpu_model}", 0))
        allocated = m.whole_allocated
        if not allocatable:
            allocatable, allocated = m.shared_allocatable, m.shared_allocated
        if not allocatable:
            continue
        w: dict[str, Any] = dict(waiting.get(m.gpu_model) or {})
        out.append(Busyness(model=m.gpu_model, label=short_model(m.gpu_model),
                            allocatable=allocatable, allocated=allocated,
                            waiting_gpus=int(w.get("gpus") or 0),
                            waiting_jobs=int(w.get("jobs") or 0),
                            typical_wait_min=typical_wait(waits.get(m.gpu_model, []),
                                                          queued.get(m.gpu_model, []))))
    cache.set(BUSYNESS_CACHE_KEY, out, BUSYNESS_TTL)
    return out


# --- cluster: capacity ----------------------------------------------------------------------


def cluster_capacity() -> CapacityReport:
    """:func:`capacity_report`, recomputed only when the observed nodes or pods changed.

    The report folds every bound pod's requests into every node (hundreds of rows decoded
    per view); it is the same for every viewer until the watcher writes a node or a pod,
    and the watcher stamps ``observed_at`` on every row it writes. The rows' count and
    latest stamp, per table, and the last node list (three small queries, as many as the
    report itself) name the cached report, so a change is shown at the next view; the
    TTL bounds a row changed without a new stamp (``CAPACITY_TTL`` seconds).
    """
    pods = ObservedPod.objects.aggregate(n=Count("id"), at=Max("observed_at"))
    nodes = ObservedNode.objects.aggregate(n=Count("id"), at=Max("observed_at"))
    listed = (ObservedKind.objects.filter(kind="nodes")
              .values_list("last_list_at", flat=True).first())
    stamp = ":".join(str(v) for v in (pods["n"], pods["at"], nodes["n"], nodes["at"], listed))
    key = "portal:capacity:" + hashlib.blake2b(stamp.encode(), digest_size=12).hexdigest()
    return _cached(key, capacity_report, CAPACITY_TTL)


def resource_rows(*, report: CapacityReport) -> list[dict[str, Any]]:
    """Per quota resource the cluster has: its **capacity** (``report.resources``,
    ``k8s_sync.selectors.resource_capacity``), what the tenants' pools have **in use**
    (``tenants.usage.in_use_by_pool``, summed) and the total granted; the same two numbers
    the quota pages, the gauges and the API show."""
    pools = list(Pool.objects.exclude(tenant__status=TenantStatus.DELETED)
                 .select_related("tenant"))
    in_use: dict[str, Decimal] = defaultdict(Decimal)
    for used in in_use_by_pool(pools).values():
        for key, amount in used.items():
            in_use[key] += amount
    granted = granted_totals()
    rows = []
    for key, capacity in sorted(report.resources.items(), key=lambda kv: _order(kv[0])):
        label, unit = resource_label(key)
        rows.append({"key": key, "label": label, "unit": unit, "capacity": capacity,
                     "in_use": in_use.get(key, Decimal(0)),
                     "granted": granted.get(key, Decimal(0))})
    return rows


def watermark_use(*, report: CapacityReport) -> dict[str, Any]:
    """Per resource key (a GPU model's whole cards, its shares): physical use against the
    eviction watermark, measured as admission measures it (``k8s_sync.physical``: cards
    allocated, DCGM framebuffer on shared and HAMi cards as the admission loop last read
    it, node CPU and memory requested). Cached as the capacity report is."""

    stamp = f"{report.observed_at}:{sorted(report.totals.items())}"
    key = "portal:watermark:" + hashlib.blake2b(stamp.encode(), digest_size=12).hexdigest()
    return _cached(key, lambda: _watermark_use(report), CAPACITY_TTL)


def _watermark_use(report: CapacityReport) -> dict[str, Any]:
    watermark = float(Policy.current().eviction_watermark)
    rows = []
    for use in physical_use(report, last_framebuffer_mib()).values():
        rows.append({
            "key": use.key, "model": use.gpu_model, "shared": use.shared, "nodes": use.nodes,
            "percent": use.percent, "use": round(use.use, 3),
            "cards": round(100 * use.cards),
            "framebuffer": round(100 * use.framebuffer) if use.framebuffer is not None
            else None,
            "cpu": round(100 * use.cpu), "memory": round(100 * use.memory),
            "above": use.use > watermark + 1e-9})
    return {"watermark": watermark, "watermark_percent": round(100 * watermark), "rows": rows}


# --- cluster: heatmap, tenants, abnormal jobs ---------------------------------------------


def allocation_by_hour(*, report: CapacityReport, days: int = 7,
                       now: dt.datetime | None = None) -> list[dict[str, Any]]:
    """Per GPU model, a day x hour heatmap of the share of cards allocated (one query;
    the hourly rows are cached for a minute, they change once a minute at most)."""
    key = f"portal:heatmap:{days}"
    if now is None:
        now = timezone.now()
        data = _cached(key, lambda: allocation_heatmap(days=days, now=now),
                                BUSYNESS_TTL)
    else:
        data = allocation_heatmap(days=days, now=now)
    capacity = {k: int(v) for k, v in report.resources.items() if k.startswith("gpu:")}
    today = now.date()
    dates = [today - dt.timedelta(days=i) for i in range(days - 1, -1, -1)]
    out = []
    for key in sorted(set(data) | {k for k, v in capacity.items() if v}):
        cap = capacity.get(key) or 0
        hours = data.get(key, {})
        by_slot = {(t.date(), t.hour): v for t, v in hours.items()}
        z = [[(100.0 * by_slot[(d, h)] / cap) if cap and (d, h) in by_slot else None
              for h in range(24)] for d in dates]
        if not any(v is not None for row in z for v in row):
            continue  # never sampled: no chart rather than an empty grid
        label = short_model(key.removeprefix("gpu:"))
        out.append({"key": key, "label": label, "figure": charts.heatmap(
            _("%(m)s: share of cards allocated") % {"m": label}, z=z,
            x=[f"{h:02d}" for h in range(24)], y=[d.isoformat() for d in dates])})
    return out


def tenant_allocation(*, limit: int = 100) -> list[dict[str, Any]]:
    """Per tenant at the latest sampled minute: GPUs allocated, busy and idle.

    One indexed query finds the latest minute; the rows of that minute are summed per
    tenant once and cached under that minute (a new minute is a new key, so the table is
    never older than the latest sample; the short TTL bounds a re-sampled minute)."""
    latest = latest_minute()
    if latest is None:
        return []
    key = f"portal:tenant-allocation:{latest.isoformat()}:{limit}"
    return _cached(
        key, lambda: _tenant_allocation(latest_minute_by_tenant(latest), limit=limit),
        TENANT_ALLOCATION_TTL)


def _tenant_allocation(by_tenant: dict[str, dict[str, tuple[float, float | None]]], *,
                       limit: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for slug, resources in by_tenant.items():
        gpus = [(a, u) for key, (a, u) in resources.items()
                if key.startswith(("gpu:", "mig:")) or key == "gpu-shared"]
        allocated = sum(a for a, _u in gpus)
        measured = [u for _a, u in gpus if u is not None]
        busy = sum(measured) if measured else None
        rows.append({"tenant": slug, "gpus": round(allocated, 2),
                     "busy": round(busy, 2) if busy is not None else None,
                     "idle": round(max(0.0, allocated - busy), 2) if busy is not None else None,
                     "cpu": round(resources.get("cpu", (0.0, None))[0], 1),
                     "memory": round(resources.get("memory", (0.0, None))[0], 1)})
    rows.sort(key=lambda r: (-float(r["idle"] or 0), -float(r["gpus"]), str(r["tenant"])))
    return rows[:limit]


def abnormal_jobs(*, now: dt.datetime | None = None, limit: int = 25) -> list[dict[str, Any]]:
    """Jobs that do not progress as expected (``jobs.selectors.stuck_jobs``: the rule of
    ``jobs.health``, the same verdict their own page shows, with the cluster's reason and
    the next step), then running jobs whose GPUs sat under 10% for over an hour, or that
    run over 5 days."""
    now = now or timezone.now()
    out: list[dict[str, Any]] = [{"job": j, "tenant": j.tenant.slug, "gpus": j.total_gpus,
            "resource": short_model(j.mig_profile or j.gpu_model), "mean_util": None,
            "reasons": [], "health": verdict, "hold_reason": [message("jobs.hold.abnormal")],
            "low_util": False} for j, verdict in stuck_jobs(now=now, limit=limit)]
    low = {u.job: u for u in JobUtilisation.objects.filter(
        low_since__lte=now - LOW_UTIL_FOR, last_sampled_at__gte=now - dt.timedelta(minutes=15))
        .only("job", "namespace", "low_since", "last_util", "util_sum", "gpu_samples")}
    low_ids = [int(j) for j in low if j.isdigit()]
    # Only the columns the page and the hold action read (not the spec, placement and
    # stored texts of every row); the tenant's slug and the pool's kind come in the join.
    jobs = (TrainingJob.objects.filter(
                Q(state=JobState.RUNNING) & (Q(pk__in=low_ids) | Q(started_at__lte=now - LONG_RUN)))
            .exclude(pk__in=[a["job"].pk for a in out])
            .select_related("tenant", "pool")
            .only("id", "name", "state", "held", "workers", "gpus_per_worker", "gpu_model",
                  "mig_profile", "started_at", "admitted_at", "tenant__slug", "pool__kind")
            .order_by("started_at")[:max(0, limit - len(out))])
    for j in jobs:
        u = low.get(str(j.pk))
        if u is not None and u.namespace != namespace_name(j.tenant.slug, j.pool.kind):
            u = None
        reasons = []
        stored = [message("jobs.hold.abnormal")]   # the same, as a hold reason to store
        if u is not None:
            since = timezone.localtime(u.low_since).strftime("%H:%M")
            reasons.append(_("GPU utilisation %(u).0f%% since %(t)s") % {
                "u": u.last_util, "t": since})
            stored.append(message("jobs.hold.low_util", u=u.last_util, t=since))
        if j.started_at and j.started_at <= now - LONG_RUN:
            minutes = (now - j.started_at).total_seconds() / 60
            reasons.append(_("running for %(d)s") % {"d": humanize_minutes(minutes)})
            stored.append(message("jobs.hold.long_run",
                                  d=message("jobs.duration.days", n=minutes / 1440)))
        if not reasons:
            continue
        out.append({"job": j, "tenant": j.tenant.slug, "gpus": j.total_gpus,
                    "resource": short_model(j.mig_profile or j.gpu_model),
                    "mean_util": round(u.mean_util, 1) if u else None, "health": None,
                    "reasons": reasons, "hold_reason": stored, "low_util": u is not None})
    return out


LOW_UTIL_THRESHOLD = LOW_UTIL_PCT
