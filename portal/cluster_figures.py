"""The cluster's allocation and capacity as the cluster page (``/cluster/``) and the
capacity page (``/platform/capacity/``) show them: every figure from ONE capacity report
(:func:`cluster_capacity`, ``k8s_sync.selectors.capacity_report``), so one load shows one
"as of" time and the same numbers in every table, each with its unit.

* :func:`busyness` - per GPU model: whole cards (or, on shared cards, shares) allocated
  against capacity, the physical cards apart, the queue and the typical wait;
* :func:`tenant_allocation` - the same allocation split per tenant, from the same report's
  pods (``CapacityReport.allocated_by_namespace``), with what no tenant's pool holds, so
  the rows add up to the per-model figures; busy and idle are the DCGM measurement of the
  latest sampled minute, named as such;
* :func:`resource_rows`, :func:`watermark_use` - per quota resource and per GPU pool.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import statistics
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.core.cache import cache
from django.db.models import Count, Max
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from core import numbers
from core.models import Policy
from jobs.choices import JobState
from jobs.models import TrainingJob
from k8s_sync.allocation import KINDS, allocated_devices, by_kind
from k8s_sync.models import ObservedKind, ObservedNode, ObservedPod
from k8s_sync.physical import last_framebuffer_mib, physical_use
from k8s_sync.quantity import parse_quantity
from k8s_sync.selectors import CapacityReport, capacity_report
from portal.dashboards import (
    _cached,
    _order,
    humanize_minutes,
    resource_label,
    short_model,
    wait_times,
)
from tenants.choices import TenantStatus
from tenants.models import Pool
from tenants.selectors import granted_totals
from tenants.series import latest_minute, latest_minute_by_tenant
from tenants.templatetags.quota_amounts import amount as amount_text
from tenants.usage import in_use_by_pool

WAITS_CACHE_KEY = "portal:waits:v1"
WAITS_TTL = 60  # the queue and the week's waits: the same for everyone for a minute
CAPACITY_TTL = 10  # keyed by the observed rows' count and latest write (cluster_capacity)
MEASURED_TTL = 5
_GIB = Decimal(1024**3)


# --- the one report ---------------------------------------------------------------------------


def cluster_capacity() -> CapacityReport:
    """:func:`capacity_report`, recomputed only when the observed nodes or pods changed.

    The report folds every bound pod's requests into every node (hundreds of rows decoded
    per view); it is the same for every viewer until the watcher writes a node or a pod,
    and the watcher stamps ``observed_at`` on every row it writes. The rows' count and
    latest stamp, per table, and the last node list (three small queries, as many as the
    report itself) name the cached report, so a change is shown at the next view; the
    TTL bounds a row changed without a new stamp (``CAPACITY_TTL`` seconds). Both cluster
    pages and the busyness banner read this one report.
    """
    pods = ObservedPod.objects.aggregate(n=Count("id"), at=Max("observed_at"))
    nodes = ObservedNode.objects.aggregate(n=Count("id"), at=Max("observed_at"))
    listed = (ObservedKind.objects.filter(kind="nodes")
              .values_list("last_list_at", flat=True).first())
    stamp = ":".join(str(v) for v in (pods["n"], pods["at"], nodes["n"], nodes["at"], listed))
    key = "portal:capacity:" + hashlib.blake2b(stamp.encode(), digest_size=12).hexdigest()
    return _cached(key, capacity_report, CAPACITY_TTL)


def devices_text(kind: str, amount: Decimal | int, of: Decimal | int | None = None) -> str:
    """An amount of a device kind with its unit: "2 cards", "3 / 16 shares",
    "1 MIG instance" (``gpu`` cards, ``mig`` instances, ``shared`` shares)."""
    figure = numbers.quantity(amount)
    if of is not None:
        figure = f"{figure} / {numbers.quantity(of)}"
    counted = Decimal(of if of is not None else amount)
    count = int(counted) if counted == counted.to_integral_value() else 2
    if kind == "gpu":
        unit = ngettext("card", "cards", count)
    elif kind == "mig":
        unit = ngettext("MIG instance", "MIG instances", count)
    else:
        unit = ngettext("share", "shares", count)
    return f"{figure} {unit}"


# --- busyness ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Busyness:
    """One GPU model: its whole cards allocated and allocatable (a card split into MIG
    instances is not a whole card), its shares of time-sliced or MPS cards, the physical
    cards, and the queue. The meter and the percent are of the cards, or of the shares
    where the model is offered only as shares."""

    model: str
    label: str
    cards: int  # physical cards of the model
    whole_allocatable: int
    whole_allocated: int
    shared_allocatable: int
    shared_allocated: int
    waiting_gpus: int
    waiting_jobs: int
    typical_wait_min: float | None

    @property
    def kind(self) -> str:
        return "gpu" if self.whole_allocatable else "shared"

    @property
    def allocatable(self) -> int:
        return self.whole_allocatable or self.shared_allocatable

    @property
    def allocated(self) -> int:
        return self.whole_allocated if self.whole_allocatable else self.shared_allocated

    @property
    def percent(self) -> int:
        return round(100 * self.allocated / self.allocatable) if self.allocatable else 0

    def alloc_text(self) -> str:
        """E.g. "2 / 8 cards (25%)", "3 / 16 shares (19%) on 8 physical cards"."""
        text = f"{devices_text(self.kind, self.allocated, self.allocatable)} ({self.percent}%)"
        if self.kind == "shared":
            text += " " + ngettext("on %(n)s physical card", "on %(n)s physical cards",
                                   self.cards) % {"n": self.cards}
        elif self.shared_allocatable:
            text += "; " + devices_text("shared", self.shared_allocated,
                                        self.shared_allocatable)
        return text

    def sentence(self) -> str:
        if self.typical_wait_min is None:
            return _("%(m)s: %(p)s%% allocated") % {"m": self.label, "p": self.percent}
        return _("%(m)s: %(p)s%% allocated, typical wait %(w)s") % {
            "m": self.label, "p": self.percent, "w": humanize_minutes(self.typical_wait_min)}

    def as_json(self) -> dict[str, Any]:
        return {"model": self.model, "label": self.label, "allocatable": self.allocatable,
                "allocated": self.allocated, "percent": self.percent, "kind": self.kind,
                "cards": self.cards, "alloc_text": self.alloc_text(),
                "waiting_gpus": self.waiting_gpus, "waiting_jobs": self.waiting_jobs,
                "typical_wait_min": self.typical_wait_min, "sentence": self.sentence()}


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


def _waits() -> tuple[dict[str, dict[str, int]], dict[str, float | None]]:
    """Per GPU model: the queue now and the typical wait (:func:`typical_wait`)."""
    waiting, queued = queued_now()
    recent: dict[str, list[float]] = defaultdict(list)
    for model, minutes in wait_times(days=7):
        recent[model].append(minutes)
    models = set(recent) | set(queued)
    return waiting, {m: typical_wait(recent.get(m, []), queued.get(m, [])) for m in models}


def busyness(*, report: CapacityReport | None = None, fresh: bool = False) -> list[Busyness]:
    """Per GPU model with whole cards or shares: what the report counts allocated against
    capacity (the same figures as the capacity page and the per-tenant table), the queue
    and the typical wait (those cached ``WAITS_TTL`` seconds unless ``fresh``)."""
    report = report or cluster_capacity()
    waits = None if fresh else cache.get(WAITS_CACHE_KEY)
    if waits is None:
        waits = _waits()
        cache.set(WAITS_CACHE_KEY, waits, WAITS_TTL)
    waiting, typical = waits
    capacity = report.resources
    out = []
    for m in report.models:
        # Whole cards: the capacity of gpu:<model> (k8s_sync.selectors.resource_capacity,
        # the number every page shows). MIG instances are resources of their own
        # (mig:<profile>), not cards of the model.
        whole = int(capacity.get(f"gpu:{m.gpu_model}", 0))
        if not whole and not m.shared_allocatable:
            continue
        w: dict[str, Any] = dict(waiting.get(m.gpu_model) or {})
        out.append(Busyness(model=m.gpu_model, label=short_model(m.gpu_model), cards=m.cards,
                            whole_allocatable=whole, whole_allocated=m.whole_allocated,
                            shared_allocatable=m.shared_allocatable,
                            shared_allocated=m.shared_allocated,
                            waiting_gpus=int(w.get("gpus") or 0),
                            waiting_jobs=int(w.get("jobs") or 0),
                            typical_wait_min=typical.get(m.gpu_model)))
    return out


# --- per tenant -------------------------------------------------------------------------------


def _requests_by_namespace(report: CapacityReport) -> dict[str, tuple[Decimal, Decimal]]:
    """namespace -> (CPU cores, memory GiB) its bound, unfinished pods request."""
    out: dict[str, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
    for _node, namespace, requests in report.bound:
        for i, resource in enumerate(("cpu", "memory")):
            try:
                out[namespace][i] += parse_quantity((requests or {}).get(resource) or 0)
            except ValueError:
                continue
    return {ns: (cpu, memory / _GIB) for ns, (cpu, memory) in out.items()}


def tenant_allocation(*, report: CapacityReport | None = None, limit: int = 100
                      ) -> dict[str, Any]:
    """Per tenant, from the report's pods: whole cards, MIG instances and shares held
    (never added across kinds), CPU cores and memory GiB requested; ``other``: what pods
    of no tenant's pool hold; ``total``: both, the per-model tables' figures. ``busy`` and
    ``idle`` (GPU-equivalents) are the DCGM measurement of the latest sampled minute
    (``measured_at``), against what was allocated in that minute. Three queries."""
    report = report or cluster_capacity()
    latest = latest_minute()
    return _tenant_allocation(report, latest, limit)


def _cells(kinds: dict[str, Decimal]) -> dict[str, str]:
    return {kind: devices_text(kind, amount) if amount else "—"
            for kind, amount in kinds.items()}


def _tenant_allocation(report: CapacityReport, latest: dt.datetime | None,
                       limit: int) -> dict[str, Any]:
    tenant_of = {pool.namespace: pool.tenant.slug for pool in Pool.objects.exclude(
        tenant__status=TenantStatus.DELETED).select_related("tenant").only(
        "id", "kind", "tenant__slug")}
    # the minute's rows summed per tenant once, kept under that minute (a new minute is a
    # new key; the short TTL bounds a re-sampled minute)
    measured = {} if latest is None else _cached(
        f"portal:tenant-measured:{latest.isoformat()}",
        lambda: latest_minute_by_tenant(latest), MEASURED_TTL)
    requests = _requests_by_namespace(report)
    devices: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    cpu: dict[str, Decimal] = defaultdict(Decimal)
    memory: dict[str, Decimal] = defaultdict(Decimal)
    other: dict[str, Decimal] = defaultdict(Decimal)
    for namespace, held in report.allocated_by_namespace.items():
        slug = tenant_of.get(namespace)
        for key, amount in held.items():
            (devices[slug] if slug else other)[key] += amount
    for namespace, (cores, gib) in requests.items():
        slug = tenant_of.get(namespace)
        if slug:
            cpu[slug] += cores
            memory[slug] += gib
    rows: list[dict[str, Any]] = []
    for slug in set(devices) | set(cpu) | set(measured):
        kinds = by_kind(devices.get(slug, {}))
        sampled = [(a, u) for key, (a, u) in measured.get(slug, {}).items()
                   if key.startswith(("gpu:", "mig:")) or key == "gpu-shared"]
        used = [u for _a, u in sampled if u is not None]
        busy = round(sum(used), 2) if used else None
        idle = round(max(0.0, sum(a for a, _u in sampled) - sum(used)), 2) if used else None
        rows.append({"tenant": slug, **{k: float(v) for k, v in kinds.items()},
                     "cells": _cells(kinds), "busy": busy, "idle": idle,
                     "cpu": numbers.quantity(cpu.get(slug, 0), 1),
                     "memory": amount_text(memory.get(slug, 0), "memory")})
    rows.sort(key=lambda r: (-float(r["idle"] or 0), -sum(float(r[k]) for k in KINDS),
                             str(r["tenant"])))
    total = by_kind(allocated_devices(report))
    return {"rows": rows[:limit], "other": _cells(by_kind(other)),
            "other_amounts": {k: float(v) for k, v in by_kind(other).items()},
            "total": _cells(total), "total_amounts": {k: float(v) for k, v in total.items()},
            "measured_at": latest}


# --- per resource and per pool ------------------------------------------------------------------


def resource_rows(*, report: CapacityReport) -> list[dict[str, Any]]:
    """Per quota resource the cluster has: its **capacity** (``report.resources``,
    ``k8s_sync.selectors.resource_capacity``), what the tenants' pools have **in use**
    (``tenants.usage.in_use_by_pool``, summed: admitted jobs as their quota counts them),
    what the report's pods hold (**allocated**: the cluster page's figure; GPU memory
    as the per-model table counts it, CPU and memory as the nodes' requests) and the
    total granted; the same numbers the quota pages, the gauges, the
    cluster page and the API show."""
    pools = list(Pool.objects.exclude(tenant__status=TenantStatus.DELETED)
                 .select_related("tenant"))
    in_use: dict[str, Decimal] = defaultdict(Decimal)
    for used in in_use_by_pool(pools).values():
        for key, amount in used.items():
            in_use[key] += amount
    granted = granted_totals()
    held = allocated_devices(report)
    held["gpu-shared"] = sum((v for k, v in held.items() if k.startswith("shared:")),
                             Decimal(0))
    # the by-model table's GPU memory allocated; the nodes' CPU and memory requested
    held["gpu-memory"] = Decimal(report.totals.get("memory_allocated_mib", 0)) / 1024
    held["cpu"] = sum((n.cpu_requested for n in report.nodes), Decimal(0))
    held["memory"] = sum((n.memory_requested for n in report.nodes), Decimal(0)) / _GIB
    rows = []
    for key, capacity in sorted(report.resources.items(), key=lambda kv: _order(kv[0])):
        label, unit = resource_label(key)
        rows.append({"key": key, "label": label, "unit": unit, "capacity": capacity,
                     "in_use": in_use.get(key, Decimal(0)),
                     "allocated": held.get(key, Decimal(0)),
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
