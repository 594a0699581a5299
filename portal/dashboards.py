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
* :func:`allocation_by_hour`, :func:`abnormal_jobs` - the cluster page (its allocation
  and capacity figures, the busyness banner's included: ``portal.cluster_figures``).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeVar, cast

from django.core.cache import cache
from django.db.models import F, Min, Q
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from billing.selectors import job_costs, quarter_start, tenant_utilisation_by_kind
from core.texts import message
from core.texts import render as render_text
from jobs.choices import JobState
from jobs.models import JobTransition, TrainingJob
from jobs.selectors import stuck_jobs
from jobs.timeline import running_intervals
from k8s_sync.models import ObservedNode
from k8s_sync.naming import namespace_name
from k8s_sync.selectors import CapacityReport
from portal import charts
from tenants.access import AnyUser
from tenants.catalog import Resource
from tenants.models import JobUtilisation, Pool, QuotaGrant, Tenant
from tenants.selectors import quota_overview
from tenants.series import (
    LOW_UTIL_PCT,
    allocation_heatmap,
    series_for_pools,
    tracked,
)
from tenants.utilisation import Utilisation

HEATMAP_TTL = 60  # hourly rows change once a minute at most
PER_TENANT_TTL = 60  # trends and the job table: rows change once a minute at most
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


# --- cluster: waits, heatmap, abnormal jobs (its figures: portal/cluster_figures.py) ------


def humanize_minutes(minutes: float) -> str:
    if minutes < 1:
        return _("under a minute")
    if minutes < 90:
        return _("%(n)d min") % {"n": round(minutes)}
    if minutes < 48 * 60:
        return _("%(n).1f h") % {"n": minutes / 60}
    return _("%(n).1f days") % {"n": minutes / 1440}


def allocation_by_hour(*, report: CapacityReport, days: int = 7,
                       now: dt.datetime | None = None) -> list[dict[str, Any]]:
    """Per GPU model, a day x hour heatmap of the share of cards allocated (one query;
    the hourly rows are cached for a minute, they change once a minute at most)."""
    key = f"portal:heatmap:{days}"
    if now is None:
        now = timezone.now()
        data = _cached(key, lambda: allocation_heatmap(days=days, now=now),
                                HEATMAP_TTL)
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
