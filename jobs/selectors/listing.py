"""Jobs and queues as pages list them: a tenant's jobs, the platform queue, one job."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from django.db.models import F, Q, QuerySet
from django.http import Http404

from core.choices import PoolKind, Tier
from jobs.choices import ACTIVE_STATES
from jobs.models import JobTransition, TrainingJob
from tenants.choices import TenantStatus
from tenants.models import Tenant
from tenants.selectors import (
    effective_grants,
)


def jobs_for_tenant(tenant, *, state: str = "", tier: str = "", pool: str = "",  # type: ignore[no-untyped-def]
                    query: str = "") -> QuerySet[TrainingJob]:
    qs = TrainingJob.objects.filter(tenant=tenant).select_related("pool", "submitted_by")
    if state == "active":
        qs = qs.filter(state__in=ACTIVE_STATES)
    elif state:
        qs = qs.filter(state=state)
    if tier:
        qs = qs.filter(tier=tier)
    if pool:
        qs = qs.filter(pool__kind=pool)
    if query:
        qs = qs.filter(name__icontains=query)
    return qs


# --- the platform queue -------------------------------------------------------------------

QUEUE_SORTS = {
    # name: (ascending order, descending order); ties by submission and id
    "position": (("position_in_model", "submitted_at", "id"),
                 ("-position_in_model", "-submitted_at", "-id")),
    "submitted": (("submitted_at", "id"), ("-submitted_at", "-id")),
    "gpus": (("gpus", "submitted_at", "id"), ("-gpus", "submitted_at", "id")),
    # the longest wait first is the earliest submission
    "wait": (("-submitted_at", "-id"), ("submitted_at", "id")),
    "priority": (("priority", "submitted_at", "id"), ("-priority", "submitted_at", "id")),
}
QUEUE_FILTERS = ("tenant", "pool", "tier", "state", "gpu_model", "held")


@dataclass
class PlatformQueue:
    """The platform queue as a query string asks for it: the jobs (filtered, sorted, not
    yet paginated), the filters that were understood, and what was not."""

    jobs: QuerySet[TrainingJob]
    filters: dict[str, str]
    sort: str
    descending: bool
    ignored: list[str] = field(default_factory=list)  # parameter names with a bad value
    tenants: list[tuple[str, str]] = field(default_factory=list)  # (slug, name)
    gpu_models: list[str] = field(default_factory=list)


def platform_queue(params: Mapping[str, str]) -> PlatformQueue:
    """Every active job of every tenant, filtered by tenant (slug), pool kind, tier, state,
    GPU model (a MIG profile counts as its own value) and held (``yes``/``no``), sorted by
    ``sort`` (:data:`QUEUE_SORTS`; ``-name`` descending). A value that is not one of the
    choices is ignored and named in ``ignored``; the page says so, and never fails."""
    qs = (TrainingJob.objects.filter(state__in=ACTIVE_STATES)
          .select_related("tenant", "pool")
          .annotate(gpus=F("workers") * F("gpus_per_worker")))
    tenants = list(Tenant.objects.exclude(status=TenantStatus.DELETED).order_by("name")
                   .values_list("slug", "name"))
    models = sorted({m for pair in qs.values_list("gpu_model", "mig_profile").distinct()
                     for m in pair if m})
    choices: dict[str, set[str]] = {
        "tenant": {slug for slug, _name in tenants}, "pool": set(PoolKind.values),
        "tier": set(Tier.values), "state": {str(s) for s in ACTIVE_STATES},
        "gpu_model": set(models), "held": {"yes", "no"},
    }
    filters: dict[str, str] = {}
    ignored: list[str] = []
    for name in QUEUE_FILTERS:
        value = (params.get(name) or "").strip()
        if not value:
            continue
        if value not in choices[name]:
            ignored.append(name)
            continue
        filters[name] = value
    lookups = {"tenant": "tenant__slug", "pool": "pool__kind", "tier": "tier",
               "state": "state"}
    for name, lookup in lookups.items():
        if name in filters:
            qs = qs.filter(**{lookup: filters[name]})
    if "gpu_model" in filters:
        qs = qs.filter(Q(gpu_model=filters["gpu_model"]) | Q(mig_profile=filters["gpu_model"]))
    if "held" in filters:
        qs = qs.filter(held=filters["held"] == "yes")
    raw_sort = (params.get("sort") or "").strip()
    descending = raw_sort.startswith("-")
    sort = raw_sort.removeprefix("-")
    if sort not in QUEUE_SORTS:
        if raw_sort:
            ignored.append("sort")
        sort, descending = "position", False
    ascending_order, descending_order = QUEUE_SORTS[sort]
    order = descending_order if descending else ascending_order
    if sort == "position":  # waiting jobs in the engine's order first, then the others
        qs = qs.order_by(F("position_in_model").desc(nulls_last=True) if descending
                         else F("position_in_model").asc(nulls_last=True), *order[1:])
    else:
        qs = qs.order_by(*order)
    return PlatformQueue(jobs=qs, filters=filters, sort=sort, descending=descending,
                         ignored=ignored, tenants=tenants, gpu_models=models)


def job_or_404(tenant, pk: int) -> TrainingJob:  # type: ignore[no-untyped-def]
    job = TrainingJob.objects.select_related("pool", "tenant", "submitted_by").filter(
        tenant=tenant, pk=pk).first()
    if job is None:
        raise Http404("No such job")
    return job


def transitions_of(job: TrainingJob) -> QuerySet[JobTransition]:
    return job.transitions.select_related("actor").order_by("at", "id")


def granted_gpu_models(tenant: Tenant) -> set[str]:
    """The GPU models either of ``tenant``'s pools holds quota for (effective grants)."""
    return {key.removeprefix("gpu:") for pool in tenant.pools.all()
            for key, amount in effective_grants(pool).items()
            if key.startswith("gpu:") and amount > 0}
