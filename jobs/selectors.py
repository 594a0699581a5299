"""Reads of the jobs app: tenant-scoped job lists, the inventory, admission inputs."""

from __future__ import annotations

import datetime as dt
import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, F, OuterRef, Q, QuerySet, Subquery
from django.http import Http404
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from core.choices import PoolKind, Tier
from core.models import Policy
from core.texts import message as stored_text
from core.texts import render, text_code
from jobs import submitcache
from jobs.admission import ACTIVE_STATES as HOLDING_STATES
from jobs.admission import History, JobView, NodeView, PoolQuota, decide
from jobs.admission import Policy as EnginePolicy
from jobs.admission.incremental import loop_engine
from jobs.choices import ACTIVE_STATES, JobKind, JobState
from jobs.health import NOT_CREATED_AFTER, NOT_STARTED_AFTER, JobFacts, Verdict, classify
from jobs.models import JobTransition, MaintenanceWindow, TrainingJob
from jobs.podstart import Seen
from jobs.validation import Inventory
from k8s_sync.client import K8sError, get_client
from k8s_sync.metrics import MetricsSource
from k8s_sync.models import (
    ClusterEvent,
    ObservedNode,
    ObservedPod,
    ObservedQuota,
    ObservedStorageClass,
)
from k8s_sync.physical import last_framebuffer_mib, physical_use, shared_framebuffer_mib
from k8s_sync.placement import dedicated_placement, switch_label
from k8s_sync.placement import topology_levels as topology_levels_in_force
from k8s_sync.quantity import parse_quantity
from k8s_sync.selectors import capacity_report, node_capacity
from k8s_sync.specs import JobSpec
from k8s_sync.templatetags.k8s_sync import mib, sharing
from tenants import demand
from tenants.catalog import Resource
from tenants.choices import LoanStatus, QuotaMode, TenantStatus
from tenants.demand import (
    card_facts,
    dimension_only_when_granted,
    engine_amount,
    engine_demand,
    from_engine,
    job_demand,
    pool_limits,
)
from tenants.models import JobUtilisation, NodeDedication, Pool, QuotaLoan, Tenant
from tenants.quota import guaranteed_amount
from tenants.selectors import (
    effective_grants,
    effective_grants_by_pool,
    guaranteed_shares,
    node_dedications,
    pools_not_in_cluster,
)
from tenants.tiers import reclaim_grace_seconds, tier_rules

GIB = Decimal(1024**3)


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


def inventory() -> Inventory:
    """The largest node per GPU model and MIG profile, and the largest node's CPU/memory.

    Every submission checks against it: the nodes' part is computed again only when an
    observed node changed (its id, resourceVersion or observation time; one small query),
    so a burst of submissions does not re-read every node's labels each time."""
    signature = tuple(ObservedNode.objects.order_by("pk").values_list(
        "pk", "resource_version", "observed_at"))
    cached = _NODE_SHAPES.get("last")
    if cached is None or cached[0] != signature:
        cached = (signature, _node_shapes())
        _NODE_SHAPES["last"] = cached
    classes = dict(ObservedStorageClass.objects.values_list("name", "is_default"))
    return replace(cached[1], storage_classes=classes)


_NODE_SHAPES: dict[str, tuple[tuple[Any, ...], Inventory]] = {}


def _node_shapes() -> Inventory:
    gpus: dict[str, int] = defaultdict(int)
    mig: dict[str, int] = defaultdict(int)
    shared: dict[str, int] = defaultdict(int)
    share_mib: dict[str, int] = {}
    strategies: dict[str, set[str]] = defaultdict(set)
    hami: dict[str, int] = defaultdict(int)
    max_cpu, max_mem = Decimal(0), Decimal(0)
    for node in ObservedNode.objects.defer("raw", "capacity", "taints"):
        model, alloc = node.gpu_model, node.allocatable or {}
        cap = node_capacity(node, {})
        whole = cap.whole_allocatable  # HAMi: cards (its vGPUs of one pod are on distinct cards)
        if model and whole:
            gpus[model] = max(gpus[model], whole)
        if model and cap.hami and node.gpu_memory_mib:
            hami[model] = max(hami[model], node.gpu_memory_mib)
        if model and cap.shared_allocatable:
            shared[model] = max(shared[model], cap.shared_allocatable)
            share_mib[model] = min(share_mib.get(model, cap.shared_memory_mib),
                                   cap.shared_memory_mib)
            strategies[model].add(cap.sharing_strategy)
        for key, value in alloc.items():
            if key.startswith("nvidia.com/mig-"):
                profile = key.removeprefix("nvidia.com/mig-")
                mig[profile] = max(mig[profile], _int(value))
        max_cpu = max(max_cpu, _dec(alloc.get("cpu")))
        max_mem = max(max_mem, _dec(alloc.get("memory")) / GIB)
    return Inventory(dict(gpus), dict(mig), max_cpu, max_mem.quantize(Decimal("0.001")),
                     {}, shared_per_node=dict(shared), shared_memory_mib=share_mib,
                     shared_strategies={m: tuple(sorted(v)) for m, v in strategies.items()},
                     hami_memory_mib=dict(hami))


def gpu_kind_label(clean: Any, inv: Inventory | None = None) -> str:
    """The kind of GPU a job (or a cleaned submission) asks for, in words: whole cards, a
    MIG slice, shares of a time-sliced/MPS card with their memory, or HAMi-limited cards."""
    get = clean.get if isinstance(clean, dict) else lambda k: getattr(clean, k)
    gpus, model = get("gpus_per_worker") or 0, get("gpu_model") or ""
    if not gpus:
        return _("CPU only")
    if get("mig_profile"):
        return _("MIG slices %(p)s") % {"p": get("mig_profile")}
    if get("gpu_shared"):
        inv = inv or inventory()
        share = inv.shared_memory_mib.get(model)
        how = ", ".join(sharing(s) for s in inv.shared_strategies.get(model, ())) or "—"
        return _("shared %(model)s (%(how)s): %(n)s × %(share)s of GPU memory per worker") % {
            "model": model, "how": how, "n": gpus, "share": mib(share)}
    limit = get("gpu_memory_gib_per_card")
    if limit:
        return _("%(model)s vGPUs (HAMi), %(gib)s GiB of GPU memory per card") % {
            "model": model, "gib": format(Decimal(limit).normalize(), "f")}
    return _("whole %(model)s GPUs") % {"model": model}


def storage_left(pool: Any, storage_class: str) -> Decimal | None:
    """GiB a new claim of ``storage_class`` may still take in the pool's namespace, by its
    observed ResourceQuotas (the class's own limit, the total, and the claim counts);
    ``None`` when no quota has been observed there yet."""
    quotas = list(ObservedQuota.objects.filter(namespace=pool.namespace))
    if not quotas:
        return None
    prefix = f"{storage_class}.storageclass.storage.k8s.io/"
    left: Decimal | None = None
    for quota in quotas:
        hard, used = quota.hard or {}, quota.used or {}
        for key in (f"{prefix}persistentvolumeclaims", "persistentvolumeclaims"):
            if key in hard and _dec(hard[key]) - _dec(used.get(key)) < 1:
                return Decimal(0)
        for key in (f"{prefix}requests.storage", "requests.storage"):
            if key in hard:
                room = (_dec(hard[key]) - _dec(used.get(key))) / GIB
                left = room if left is None else min(left, room)
    return left.quantize(Decimal("0.001")) if left is not None else None


def _dec(value: object) -> Decimal:
    try:
        return parse_quantity(value or 0)  # type: ignore[arg-type]
    except ValueError:
        return Decimal(0)


def _int(value: object) -> int:
    return int(_dec(value))


# --- admission inputs -------------------------------------------------------------------


def admission_inputs(now):  # type: ignore[no-untyped-def]
    """Everything ``jobs.admission.decide`` needs, from the database and the observed
    cluster (no cluster calls): nodes, active jobs, pool quotas, policy, history."""
    return _admission_inputs(now)[0]


def _admission_inputs(now):  # type: ignore[no-untyped-def]
    """:func:`admission_inputs` and the card facts they were counted with (the preview
    counts its hypothetical job with the same ones, from the same capacity report)."""
    dedicated = node_dedications()
    held = maintenance_held_nodes(now)  # cordoned for a window, even before it is observed
    policy = Policy.current()
    # NodeView.switch: the node's value of the policy's last topology level.
    report = capacity_report(topology_levels_in_force(policy.topology_levels))
    report_nodes = report.nodes
    facts = card_facts(report_nodes)
    nodes = [NodeView(name=n.name, gpu_model=n.gpu_model, switch=n.switch,
                      gpus=n.whole_allocatable, gpus_used=n.whole_allocated,
                      mig={m.profile: m.allocatable for m in n.mig},
                      mig_used={m.profile: m.allocated for m in n.mig},
                      schedulable=n.schedulable and n.name not in held,
                      dedicated_to=dedicated.get(n.name, ""),
                      shared=n.shared_allocatable, shared_used=n.shared_allocated,
                      **_node_cpu_memory(n))
             for n in report_nodes]
    # Every active job, every pass: the columns a decision reads, as tuples (no model
    # instances: on a long queue building them was most of the pass's reading).
    active = list(TrainingJob.objects.filter(state__in=ACTIVE_STATES).values_list(
        *_VIEW_FIELDS, named=True))
    bound = _bound_nodes([j.id for j in active if j.state != JobState.QUEUED])
    shapes: dict[tuple[Any, ...], dict[str, int]] = {}

    def resources(job: Any) -> dict[str, int]:
        # jobs of one shape demand the same (many in a queue): computed once a pass
        shape = tuple(getattr(job, name) for name in _SHAPE)
        found = shapes.get(shape)
        if found is None:
            found = shapes[shape] = job_resources(dict(zip(_SHAPE, shape, strict=True)), facts)
        return found

    # A job whose columns and placement are as the last pass of this process read them
    # keeps its JobView (most of a long queue, pass after pass): the same object, so
    # nothing derived from it is computed again. Card facts that changed rebuild all.
    last = _VIEWS.get("last")
    previous = last[1] if last is not None and last[0] == facts else {}
    views: dict[int, tuple[Any, tuple[str, ...], JobView]] = {}
    jobs = []
    for j in active:
        placement = _placement(j.state, j.placement, bound.get(str(j.id), []))
        hit = previous.get(j.id)
        if hit is not None and hit[0] == j and hit[1] == placement:
            view = hit[2]
        else:
            view = JobView(
                id=j.id, tenant=j.tenant__slug, pool=j.pool__kind, tier=j.tier,
                gpu_model=j.gpu_model, mig_profile=j.mig_profile, replicas=j.workers,
                gpus_per_replica=j.gpus_per_worker, state=j.state,
                submitted_at=j.submitted_at, admitted_at=j.admitted_at,
                started_at=j.started_at,
                expected_seconds=float(j.expected_seconds) if j.expected_seconds else None,
                max_run_seconds=float(j.max_run_seconds) if j.max_run_seconds else None,
                template=j.template, priority=j.priority, held=j.held, borrowing=j.borrowing,
                **_loan_fields(j), placement=placement,
                preempt_deadline=j.preempt_deadline, gpu_shared=j.gpu_shared,
                resources=resources(j))
        views[j.id] = (j, placement, view)
        jobs.append(view)
    _VIEWS["last"] = (facts, views)
    # The pools' quotas change rarely: kept while the snapshot's marker (one query) says
    # that nothing they are computed from changed (jobs.submitcache).
    quotas = submitcache.snapshot().memo(
        "admission_quotas", lambda: _pool_quotas(policy, report))
    physical = physical_use_now(report)
    engine_policy = EnginePolicy(
        watermark=float(policy.eviction_watermark),
        exclusive_keys=frozenset({k for k, u in physical.items() if u.exclusive} | {
            f"mig:{m.profile}" for n in report.nodes for m in n.mig}),
        grace_seconds={str(tier): rules.preemption_grace_seconds
                       for tier, rules in tier_rules(policy).items()})
    return {"nodes": nodes, "jobs": jobs, "quotas": quotas, "policy": engine_policy,
            "history": recent_history(now), "now": now,
            "physical": {k: u.use for k, u in physical.items()}}, facts


_VIEWS: dict[str, tuple[Any, dict[int, tuple[Any, tuple[str, ...], JobView]]]] = {}
"""The last pass's JobViews in this process, with the columns they were built from."""
_SHAPE = ("workers", "cpu_per_worker", "memory_gib_per_worker", "gpus_per_worker", "gpu_model",
          "mig_profile", "gpu_shared", "gpu_memory_gib_per_card")
"""What :func:`job_demand_of` reads of a TrainingJob."""
_VIEW_FIELDS = tuple(dict.fromkeys((
    "id", "tenant__slug", "pool__kind", "tier", "state", "submitted_at", "admitted_at",
    "started_at", "expected_seconds", "max_run_seconds", "template", "priority", "held",
    "borrowing", "placement", "preempt_deadline", "loan_id", "loan__lender__tenant__slug",
    "loan__lender__kind", "loan__status", *_SHAPE)))
"""The columns of an active job the admission pass reads (``JobView``)."""


def _pool_quotas(policy: Policy, report) -> list:  # type: ignore[no-untyped-def]
    """Every live pool's ``PoolQuota``: grants and loans, the borrowing cap (the tenant's,
    else the policy's, else none: ``tenants.demand.pool_limits``), guarantees from the
    capacity of ``report``."""
    loans_in = _loans_in()
    grants_of = effective_grants_by_pool()
    quotas = []
    for pool in Pool.objects.select_related("tenant").exclude(
            tenant__status__in=[TenantStatus.DELETING, TenantStatus.DELETED]):
        grants = grants_of.get(pool.pk, {})
        nominal, ceiling, default = pool_limits(
            grants, factor=pool.tenant.borrowing_factor(policy))
        quotas.append(PoolQuota(
            tenant=pool.tenant.slug, pool=pool.kind, nominal=nominal, ceiling=ceiling,
            ceiling_default=default, loans_in=loans_in.get(pool.pk)))
    return _with_guarantees(quotas, report)


def _loans_in() -> dict[int, dict[str, tuple[tuple[int, int], ...]]]:
    """Borrower pool pk -> GPU/MIG key -> its active loans as (loan id, whole units)
    (``PoolQuota.loans_in``), stacked on the pool's grant from the one ending last to the
    one ending first: the work on top of a pool's quota is the first to lose it."""
    out: dict[int, dict[str, list[tuple[int, int]]]] = defaultdict(lambda: defaultdict(list))
    for loan_id, pool_id, resource, amount in QuotaLoan.objects.filter(
            status=LoanStatus.ACTIVE, resource__regex=r"^(gpu|mig):").order_by(
            "-ends_at", "-id").values_list("pk", "borrower_id", "resource", "amount"):
        if int(amount) > 0:
            out[pool_id][resource].append((loan_id, int(amount)))
    return {pk: {k: tuple(v) for k, v in keys.items()} for pk, keys in out.items()}


def _loan_fields(job: Any) -> dict[str, Any]:
    """A quota-holding job's loan for its JobView (from a row of :data:`_VIEW_FIELDS`): id,
    lender, whether it has ended. A queued job's stale mark is left out (admission marks
    it anew)."""
    if job.loan_id is None or job.state not in HOLDING_STATES:
        return {}
    return {"loan": job.loan_id,
            "loan_lender": f"{job.loan__lender__tenant__slug}/{job.loan__lender__kind}",
            "loan_ended": job.loan__status != LoanStatus.ACTIVE}


def _with_guarantees(quotas: list, report=None) -> list:  # type: ignore[no-untyped-def]
    """Each overcommitted-mode tenant's pool quotas with their guaranteed part per GPU/MIG
    key (``tenants.quota.guaranteed_amount``: the number its quota pages show); other
    pools are guaranteed their whole nominal quota (the engine's default)."""
    over = set(Tenant.objects.filter(quota_mode=QuotaMode.OVERCOMMITTED)
               .values_list("slug", flat=True))
    if not over:
        return quotas
    shares = guaranteed_shares(report)
    out = []
    for q in quotas:
        if q.tenant in over:
            q = replace(q, guaranteed={
                k: int(guaranteed_amount(k, Decimal(v), shares.get(k, Decimal(1))))
                for k, v in q.nominal.items() if k.startswith(("gpu:", "mig:"))
                or k == "gpu-shared"})
        out.append(q)
    return out


def physical_use_now(report=None):  # type: ignore[no-untyped-def]
    """Physical use per resource key (``k8s_sync.physical``) as the engine holds it against
    the eviction watermark: the observed cluster, plus DCGM framebuffer on shared and
    HAMi cards read now, or the last reading (at most 5 minutes old) when the metrics
    source cannot answer; the cluster page shows the same last reading."""
    report = report or capacity_report()
    framebuffer = shared_framebuffer_mib(report)
    if framebuffer is None:
        framebuffer = last_framebuffer_mib()
    return physical_use(report, framebuffer)


def job_demand_of(job: Any, facts: Any) -> dict[str, Decimal]:
    """The whole job's demand per catalog key (``tenants.demand``, the one definition)
    from a TrainingJob, or from a cleaned submission (a dict)."""
    get = job.get if isinstance(job, dict) else lambda name, default=None: getattr(
        job, name, default)
    return job_demand(workers=get("workers") or 0, cpu_per_worker=get("cpu_per_worker") or 0,
                      memory_gib_per_worker=get("memory_gib_per_worker") or 0,
                      gpus_per_worker=get("gpus_per_worker") or 0,
                      gpu_model=get("gpu_model") or "", mig_profile=get("mig_profile") or "",
                      gpu_shared=bool(get("gpu_shared", False)),
                      gpu_memory_gib_per_card=get("gpu_memory_gib_per_card", None),
                      facts=facts)


def job_resources(job: Any, facts: Any) -> dict[str, int]:
    """``JobView.resources``: :func:`job_demand_of` in the engine's units."""
    return engine_demand(job_demand_of(job, facts))


def holding_use(jobs: Any) -> dict[tuple[str, str], dict[str, int]]:
    """(tenant slug, pool kind) -> resource key -> **in use**, in the engine's units: the
    summed ``resources`` of the JobViews in a state that holds quota (admitted, running,
    preempting: ``jobs.admission.ACTIVE_STATES``), as admission counts them. Pure; the
    preview and :func:`in_use_by_pool` both count with it."""
    out: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for job in jobs:
        if job.state in HOLDING_STATES:
            for key, amount in job.resources.items():
                out[(job.tenant, job.pool)][key] += amount
    return out


def in_use_by_pool(pools: Any, *, facts: Any = None) -> dict[int, dict[str, Decimal]]:
    """Pool pk -> resource key -> **in use**, in catalog units: the demand
    (``tenants.demand``, through :func:`job_resources`) of the pool's admitted, running
    and preempting jobs, what admission counts against its quota. The one definition
    behind the quota page, the gauges (``tenants.usage.in_use_by_pool``), the preview
    and the wait reasons. Two queries (the jobs, the card facts)."""
    by_id = [p.pk for p in pools]
    facts = facts if facts is not None else observed_card_facts()
    use: dict[int, dict[str, int]] = {pk: defaultdict(int) for pk in by_id}
    for job in TrainingJob.objects.filter(pool_id__in=by_id, state__in=list(HOLDING_STATES)):
        for key, amount in job_resources(job, facts).items():
            use[job.pool_id][key] += amount
    return {pk: {key: Decimal(str(from_engine(key, amount)))
                 for key, amount in sorted(amounts.items()) if amount}
            for pk, amounts in use.items()}


def observed_card_facts():  # type: ignore[no-untyped-def]
    """Per-card GPU memory by model, from the observed nodes (``tenants.demand``); one
    query: the facts depend on what nodes offer, not on what pods hold."""
    return card_facts([node_capacity(n, {}, ()) for n in ObservedNode.objects.defer(
        "raw", "capacity", "taints")])


def _node_cpu_memory(node: Any) -> dict[str, int]:
    """A node's allocatable CPU (millicores) and memory (1/1000 GiB) and what its bound,
    unfinished pods request, as ``NodeView`` keyword arguments (none when the node does
    not report them: the engine then does not check its CPU)."""
    if node.cpu_allocatable <= 0 or node.memory_allocatable <= 0:
        return {}
    return {"cpu": engine_amount("cpu", node.cpu_allocatable, demand=False),
            "cpu_used": engine_amount("cpu", node.cpu_requested),
            "memory": engine_amount("memory", node.memory_allocatable / GIB, demand=False),
            "memory_used": engine_amount("memory", node.memory_requested / GIB)}


def _bound_nodes(job_ids: list[int]) -> dict[str, list[str]]:
    """Job id (as labelled) -> the node of each of its observed, bound, unfinished pods."""
    out: dict[str, list[str]] = defaultdict(list)
    rows = (ObservedPod.objects.filter(job__in=[str(i) for i in job_ids])
            .exclude(node_name="").exclude(phase__in=["Succeeded", "Failed"])
            .values_list("job", "node_name"))
    for job, node in rows:
        out[job].append(node)
    return out


def _placement(state: str, planned: list[str] | None, bound: list[str]) -> tuple[str, ...]:
    """What the engine needs per state (see jobs.admission.types.JobView): running and
    preempting jobs, the nodes their pods are on; admitted jobs, the planned nodes of the
    replicas whose pods are not bound yet (bound ones are already in the node's use)."""
    if state in (JobState.RUNNING, JobState.PREEMPTING):
        return tuple(sorted(bound))
    if state == JobState.ADMITTED:
        pending = list(planned or ())
        for node in bound:
            if node in pending:
                pending.remove(node)
        return tuple(pending)
    return ()


_HISTORY: dict[str, tuple[dt.datetime, Any]] = {}


def recent_history(now):  # type: ignore[no-untyped-def]
    """:func:`job_history` as admission reads it: computed again once it is
    ``TRAINYARD_HISTORY_SECONDS`` old (or the clock went back), else the same
    ``History`` as the last pass of this process. It reads every job started in 30
    days, which on a busy cluster is most of a pass; what it holds (usage decayed with a
    7-day half-life, run times over 30 days) moves little in a minute, and what runs now
    is counted live by every pass (Kueue samples usage for fair sharing every 5 minutes)."""
    every = settings.TRAINYARD_HISTORY_SECONDS
    if every > 0:
        last = _HISTORY.get("last")
        if last is not None and 0 <= (now - last[0]).total_seconds() < every:
            return last[1]
    history = job_history(now)
    if every > 0:
        _HISTORY["last"] = (now, history)
    return history


def job_history(now, *, days: int = 30, half_life_days: float = 7.0):  # type: ignore[no-untyped-def]
    """Decayed GPU-seconds per tenant and recent run durations of succeeded jobs, from jobs
    that ran in the last ``days`` days, keyed (tenant, tier, template, GPU model),
    (tenant, tier, GPU model) and (tenant, tier) (``jobs.admission.History``)."""
    since = now - dt.timedelta(days=days)
    usage: dict[str, float] = defaultdict(float)
    durations: dict[tuple[str, ...], list[float]] = defaultdict(list)
    rows = (TrainingJob.objects.filter(started_at__isnull=False, started_at__gte=since)
            .values_list("tenant__slug", "tier", "workers", "gpus_per_worker", "started_at",
                         "finished_at", "state", "template", "gpu_model"))
    for tenant, tier, workers, gpus, started, finished, state, template, model in rows:
        if started is None:
            continue
        end = finished or now
        seconds = max(0.0, (end - started).total_seconds())
        age_days = (now - end).total_seconds() / 86400
        usage[tenant] += workers * gpus * seconds * math.pow(0.5, age_days / half_life_days)
        if finished is not None and state == JobState.SUCCEEDED:
            durations[(tenant, tier)].append(seconds)
            durations[(tenant, tier, model)].append(seconds)
            if template:
                durations[(tenant, tier, template, model)].append(seconds)
    return History(usage=dict(usage),
                   durations={k: tuple(sorted(v)[-200:]) for k, v in durations.items()})


def job_spec(job: TrainingJob, *, policy: Policy | None = None,  # type: ignore[no-untyped-def]
             dedicated: bool | None = None):
    """The plain spec of the job's PyTorchJob or TrainJob (k8s_sync builds the manifest);
    also of an unsaved job, which is how submission proves it can be built
    (``jobs.contract``). ``policy`` and ``dedicated`` (whether the tenant has a dedicated
    node) when the caller has them already (a submission: ``jobs.submitcache``)."""
    policy = policy if policy is not None else Policy.current()
    rules = tier_rules(policy)[Tier(job.tier)]
    if dedicated is None:
        dedicated = NodeDedication.objects.filter(tenant=job.tenant).exists()
    placement = dedicated_placement(job.tenant.slug) if dedicated else {}
    return JobSpec(
        # An unsaved job (submission checks it with this same code: jobs.contract) has no
        # id yet; 0 stands in for it.
        job_id=job.pk if job.pk is not None else 0, tenant_slug=job.tenant.slug,
        pool=job.pool.kind,  # type: ignore[arg-type]
        tier=Tier(job.tier), name_hint=job.name, image=job.image,
        command=tuple(job.command), args=tuple(job.args), env=dict(job.env),
        worker_replicas=job.workers - 1, gpus_per_replica=job.gpus_per_worker,
        gpu_product=job.gpu_model if not job.mig_profile else "",
        mig_profile=job.mig_profile,
        gpu_shared=bool(job.gpu_shared and job.gpus_per_worker and not job.mig_profile),
        gpu_memory_mib_per_card=(int(job.gpu_memory_gib_per_card * 1024)
                                 if job.gpu_memory_gib_per_card else None),
        # requests as tenants.demand defines them: what quota, admission and gauges count
        cpu_request=demand.cpu_request(job.cpu_per_worker),
        cpu_limit=job.cpu_per_worker,
        memory_request_gib=demand.memory_request_gib(job.memory_gib_per_worker),
        memory_limit_gib=job.memory_gib_per_worker,
        grace_seconds=rules.termination_grace_seconds, max_run_seconds=job.max_run_seconds,
        checkpoint_claim=job.checkpoint_claim,
        checkpoint_path=job.checkpoint_path,
        checkpoint_storage_class=job.checkpoint_storage_class if not job.checkpoint_claim
        else "",
        checkpoint_size_gib=job.checkpoint_size_gib if not job.checkpoint_claim else None,
        checkpoint_interval_seconds=rules.checkpoint_interval_seconds,
        resume=job.restart_count > 0, restart_count=job.restart_count,
        switch=job.switch if job.workers > 1 else "",
        switch_label=switch_label(policy.topology_levels),
        # Admitted: the nodes the engine counted the replicas on (pinned by node name, so
        # kube-scheduler cannot put them elsewhere); a resume re-renders the new ones.
        nodes=tuple(job.placement or ()) if job.state == JobState.ADMITTED else (),
        placement=placement, annotations=dict(job.annotations),
        suspend=job.state not in (JobState.ADMITTED, JobState.RUNNING),
        kind=job.kind or JobKind.PYTORCHJOB,
        runtime=job.runtime if job.kind == JobKind.TRAINJOB else "",
    )


def decide_with_pools_absent(inputs: dict, *, incremental: bool = False, explain: bool = True,
                             ) -> tuple[Any, dict[int, Pool]]:
    """:func:`decide` on ``inputs`` as the admission loop and the preview run it: a queued
    job whose pool's namespace and quota the cluster does not show (observed) is held out
    of the pass (it would hold quota with no namespace to create its PyTorchJob in) and
    waits with that reason, no ETA. Also the pools it waits for, by job id.

    ``incremental``: decided by this process's incremental engine
    (``jobs.admission.incremental.loop_engine``: the same decisions, from the work of what
    changed since its last pass), as the admission loop does; the preview, whose job is
    hypothetical, decides in full. ``explain=False``: decisions only, no WaitInfo
    (``jobs.admission.decide``)."""
    absent = {(p.tenant.slug, p.kind): p for p in pools_not_in_cluster()}
    waiting_for_pool = {j.id: absent[(j.tenant, j.pool)] for j in inputs["jobs"]
                        if j.state == JobState.QUEUED and (j.tenant, j.pool) in absent}
    jobs = [replace(j, held=True) if j.id in waiting_for_pool else j for j in inputs["jobs"]]
    decide_now = loop_engine().decide if incremental else decide
    decisions = decide_now(**{**inputs, "jobs": jobs}, explain=explain)
    for job_id, pool in waiting_for_pool.items():
        if job_id in decisions.waiting:
            decisions.waiting[job_id] = replace(
                decisions.waiting[job_id], eta_p50=None, eta_p90=None,
                reason=stored_text("jobs.wait.pool_absent", namespace=pool.namespace))
    return decisions, waiting_for_pool


def reclaim_grace(job: TrainingJob) -> int | None:
    """The seconds an admitted or running job on borrowed idle capacity gets to checkpoint
    when the owner needs its quota back (``tenants.tiers.reclaim_grace_seconds``); None
    for a job on its own quota, or not holding anything."""
    if job.state not in (JobState.ADMITTED, JobState.RUNNING):
        return None
    return reclaim_grace_seconds(job.tier, job.borrowing, Policy.current())


def preview(tenant, pool_kind: str, clean: dict, now):  # type: ignore[no-untyped-def]
    """What would happen if this job were submitted now: quota fit, placement, start.

    Runs the admission engine on the current state plus this hypothetical job (id -1);
    nothing is written. ``reason`` is in the active language, ``reason_code`` its code.
    """
    inputs, facts = _admission_inputs(now)
    job = JobView(id=-1, tenant=tenant.slug, pool=pool_kind, tier=clean["tier"],
                  gpu_model=clean["gpu_model"], mig_profile=clean["mig_profile"],
                  replicas=clean["workers"], gpus_per_replica=clean["gpus_per_worker"],
                  state=JobState.QUEUED, submitted_at=now,
                  expected_seconds=(float(clean["expected_seconds"])
                                    if clean.get("expected_seconds") else None),
                  max_run_seconds=float(clean["max_run_seconds"]),
                  template=str(clean.get("template") or ""),
                  gpu_shared=bool(clean.get("gpu_shared")),
                  resources=job_resources(clean, facts))
    # as the admission loop decides: a pool the cluster does not show yet admits nothing
    decisions, _absent = decide_with_pools_absent({**inputs, "jobs": [*inputs["jobs"], job]})
    admitted = next((a for a in decisions.admit if a.job_id == -1), None)
    waiting = decisions.waiting.get(-1)
    dimensions = _preview_dimensions(inputs, tenant.slug, pool_kind, job)
    # The GPU summary (the API's older fields) is the accelerator's row of ``dimensions``.
    key = "gpu-shared" if job.gpu_shared and job.resource_key else job.resource_key
    gpu = next((d for d in dimensions if d["key"] == key), None)
    return {
        "resource": key, "gpus": job.demand,
        "quota": gpu["quota"] if gpu else None, "in_use": gpu["in_use"] if gpu else 0,
        "fits_quota": gpu["fits_quota"] if gpu else True,
        "nodes": len(set(admitted.placement)) if admitted else None,
        "starts_now": admitted is not None,
        "borrowing": bool(admitted and admitted.borrowing),
        "eta_p50": waiting.eta_p50 if waiting else (now if admitted else None),
        "eta_p90": waiting.eta_p90 if waiting else (now if admitted else None),
        "reason": render(waiting.reason) if waiting else "",
        "reason_code": text_code(waiting.reason) if waiting else None,
        "position_in_pool": waiting.position_in_pool if waiting else None,
        "notes": _preview_notes(clean),
        "dimensions": dimensions,
    }


def _preview_dimensions(inputs: dict, tenant: str, pool_kind: str, job: Any) -> list[dict]:
    """Per dimension the job consumes: what it wants, what its pool holds now (admitted,
    running and preempting jobs, counted as admission counts them), the quota, the
    ceiling and whether it fits, in catalog units (the job form shows them)."""
    quota = next((q for q in inputs["quotas"] if (q.tenant, q.pool) == (tenant, pool_kind)),
                 None)
    used: dict[str, int] = defaultdict(int, holding_use(inputs["jobs"]).get(
        (tenant, pool_kind), {}))
    out = []
    for key, wanted in sorted(job.resources.items()):
        granted = quota is not None and key in quota.nominal
        if not granted and dimension_only_when_granted(key):
            continue
        nominal, ceiling = quota.limits(key, job.tier) if quota is not None else (0, 0)
        unlimited = ceiling >= demand.UNLIMITED
        resource = Resource.parse(key)
        out.append({"key": key, "label": resource.label(),
                    "unit": resource.unit_for(from_engine(key, max(nominal, wanted)
                                                          if unlimited else ceiling)),
                    "wanted": from_engine(key, wanted),
                    "in_use": from_engine(key, used[key]), "quota": from_engine(key, nominal),
                    "ceiling": None if unlimited else from_engine(key, ceiling),
                    "fits_quota": used[key] + wanted <= nominal,
                    "fits_ceiling": unlimited or used[key] + wanted <= ceiling})
    return out


def _preview_notes(clean: dict) -> list[str]:
    """Warnings about the submission itself, in the active language."""
    notes = []
    if (clean["tier"] != Tier.PRODUCTION and not clean.get("checkpoint_claim")
            and not clean.get("checkpoint_storage_class")):
        notes.append(_("This job can be preempted, and without a checkpoint volume it starts "
                       "again from the beginning after a preemption: give a volume, or a "
                       "class for a new one."))
    if clean.get("checkpoint_storage_class") and clean["workers"] > 1:
        notes.append(_("Several workers share the new checkpoint volume: its class must "
                       "mount on many nodes at once (ReadWriteMany), e.g. NFS or CephFS."))
    return notes


def pods_of(job: TrainingJob) -> list[ObservedPod]:
    """The job's pods as last observed (name, phase, node, reason), the Master first, then
    the Workers by index. ``terminating``: the pod is being deleted (``kubectl``'s
    Terminating; its phase stays Running through the grace period)."""
    pods = list(ObservedPod.objects.filter(namespace=job.pool.namespace, job=str(job.pk)))
    for pod in pods:
        meta = (pod.raw or {}).get("metadata") or {}
        pod.terminating = bool(meta.get("deletionTimestamp"))  # type: ignore[attr-defined]
    return sorted(pods, key=lambda p: _pod_order(job, p.name))


def _pod_order(job: TrainingJob, name: str) -> tuple[int, int, str]:
    match = _POD_NAME.fullmatch(name[len(job.k8s_name) + 1:]) if job.k8s_name else None
    if match is None:
        return (2, 0, name)
    return (0 if match.group(1) == "master" else 1, int(match.group(2)), name)


_POD_NAME = re.compile(r"(master|worker)-(\d+)")


def log_pods(job: TrainingJob, pods: list[ObservedPod]) -> list[str]:
    """The pods whose logs the job page offers: those observed, else the names the
    operator gives the job's replicas (the Master, then each Worker)."""
    if pods:
        return [p.name for p in pods]
    if not job.k8s_name:
        return []
    return [f"{job.k8s_name}-master-0"] + [f"{job.k8s_name}-worker-{i}"
                                            for i in range(max(0, job.workers - 1))]


def job_pod_or_404(job: TrainingJob, pod: str) -> str:
    """``pod`` if it is one of the job's pods (observed with the job's label, or named as
    the operator names the job's replicas, so a pod already gone still answers), else 404."""
    if job.k8s_name and pod.startswith(job.k8s_name + "-") and _POD_NAME.fullmatch(
            pod[len(job.k8s_name) + 1:]):
        return pod
    if pod and ObservedPod.objects.filter(namespace=job.pool.namespace, job=str(job.pk),
                                          name=pod).exists():
        return pod
    raise Http404


# --- GPU utilisation (DCGM) ----------------------------------------------------------------

POD_UTIL_CACHE_SECONDS = 15


def pod_gpu_utilisation(job: TrainingJob, pods: list[ObservedPod]) -> dict[str, dict[str, Any]]:
    """Per running pod of the job, its GPUs' utilisation now: ``{pod: {"gpus", "util",
    "fb_gib"}}`` from the metrics source (DCGM), read at most every 15 s per namespace.
    Empty when the job has no running GPU pod or the metrics cannot be read."""
    running = {p.name for p in pods if p.phase == "Running"}
    if not running or not (job.gpus_per_worker or job.mig_profile):
        return {}
    key = f"jobs:podutil:{job.pool.namespace}"
    per_pod = cache.get(key)
    if per_pod is None:
        try:
            samples = MetricsSource.from_settings().gpu_samples()
        except K8sError:
            samples = None
        per_pod = {}
        for sample in samples or []:
            if sample.idle or sample.namespace != job.pool.namespace:
                continue
            acc = per_pod.setdefault(sample.pod, [0, 0.0, 0.0])
            acc[0] += 1
            acc[1] += sample.util_pct
            acc[2] += sample.fb_used_mib
        cache.set(key, per_pod, POD_UTIL_CACHE_SECONDS if samples is not None else 5)
    return {name: {"gpus": n, "util": round(total / n, 1), "fb_gib": round(mib / 1024, 1)}
            for name, (n, total, mib) in per_pod.items() if name in running and n}


def mean_gpu_utilisation(jobs: list[TrainingJob]) -> dict[int, float]:
    """The mean GPU utilisation (DCGM, minute samples) of each job that has been measured,
    by job id (one query)."""
    if not jobs:
        return {}
    rows = JobUtilisation.objects.filter(
        namespace__in={j.pool.namespace for j in jobs},
        job__in=[str(j.pk) for j in jobs]).values_list("namespace", "job", "util_sum",
                                                       "gpu_samples")
    wanted = {(j.pool.namespace, str(j.pk)): j.pk for j in jobs}
    return {wanted[(ns, job)]: round(total / n, 1) for ns, job, total, n in rows
            if n and (ns, job) in wanted}


# --- pod logs (read from the cluster) ------------------------------------------------------

LOG_TAIL_LINES = 2000  # what the log panel first shows
LOG_VIEW_BYTES = 512 * 1024  # at most this much per read of the panel or the API
LOG_DOWNLOAD_BYTES = 16 * 1024 * 1024  # a download's cap
# What a person reads when there is no log to show; the cluster's own words go beside it.
LOG_PROBLEMS = {
    "not_started": gettext_lazy("This pod has not started yet, so it has no log."),
    "no_previous": gettext_lazy("This pod's container has not restarted: there is no "
                                "previous container."),
    "gone": gettext_lazy("This pod no longer exists; its log went with it."),
    "unreachable": gettext_lazy("The cluster cannot be reached right now; try again in a "
                                "moment."),
    "refused": gettext_lazy("The cluster did not give this log."),
}


@dataclass(frozen=True)
class PodLog:
    """One read of a pod's log: the lines (timestamp, text) or why there are none."""

    pod: str
    previous: bool
    lines: list[tuple[str, str]]
    problem: str = ""  # a key of LOG_PROBLEMS
    detail: str = ""  # the cluster's words
    truncated: bool = False  # the byte cap cut it

    @property
    def text(self) -> str:
        return "".join(text + "\n" for _stamp, text in self.lines)

    @property
    def last(self) -> str:
        return self.lines[-1][0] if self.lines else ""

    @property
    def message(self) -> str:
        return str(LOG_PROBLEMS[self.problem]) if self.problem else ""


def pod_log(job: TrainingJob, *, pod: str, previous: bool = False,
            tail: int | None = LOG_TAIL_LINES, after: str = "",
            limit_bytes: int = LOG_VIEW_BYTES) -> PodLog:
    """The log of one of the job's pods, from the cluster (``pod`` checked by the caller
    with :func:`job_pod_or_404`). ``after``: the timestamp of the last line already shown
    (following a log by polling): only newer lines come back. Never raises for what the
    cluster says; a problem is named in ``problem``."""
    since_time = None
    if after:
        since_time = after[:19] + "Z"  # whole seconds; finer lines are dropped below
        tail = None
    try:
        raw = get_client().pod_log(job.pool.namespace, pod, previous=previous,
                                   tail_lines=tail, since_time=since_time,
                                   limit_bytes=limit_bytes, timestamps=True)
    except K8sError as exc:
        return PodLog(pod, previous, [], _log_problem(exc), exc.message[:500])
    assert isinstance(raw, str)  # not followed
    truncated = len(raw.encode()) >= limit_bytes
    lines = []
    for line in raw.splitlines():
        stamp, sep, text = line.partition(" ")
        if not sep or not stamp[:4].isdigit():
            stamp, text = "", line
        if after and stamp and stamp <= after:
            continue
        lines.append((stamp, text))
    return PodLog(pod, previous, lines, truncated=truncated)


def _log_problem(exc: K8sError) -> str:
    if exc.status is None or exc.transient:
        return "unreachable"
    if exc.status == 404:
        return "gone"
    text = exc.message
    if "previous terminated container" in text:
        return "no_previous"
    if ("waiting to start" in text or "does not have a host assigned" in text
            or "is not available" in text or "ContainerCreating" in text):
        return "not_started"
    if "is terminated" in text:
        return "gone"
    return "refused"


def events_of(job: TrainingJob):  # type: ignore[no-untyped-def]
    """Recent cluster events about the job and its pods."""
    if not job.k8s_name:
        return ClusterEvent.objects.none()
    return ClusterEvent.objects.filter(involved_namespace=job.pool.namespace,
                                       involved_name__startswith=job.k8s_name).order_by(
        "-last_seen")[:50]


# --- maintenance windows --------------------------------------------------------------------


def open_windows(now):  # type: ignore[no-untyped-def]
    """Applied maintenance windows not yet released whose end has not come."""
    return MaintenanceWindow.objects.filter(status=MaintenanceWindow.Status.APPLIED,
                                            released_at__isnull=True, ends_at__gt=now)


def windows_to_release(now):  # type: ignore[no-untyped-def]
    """Windows that cordoned (or may have cordoned) nodes and ended or were cancelled."""

    return MaintenanceWindow.objects.filter(released_at__isnull=True,
                                            applied_at__isnull=False).filter(
        Q(status=MaintenanceWindow.Status.CANCELLED) | Q(ends_at__lte=now))


def maintenance_held_nodes(now) -> set[str]:  # type: ignore[no-untyped-def]
    """Nodes an open window frees: no new work goes there until it ends, whether or not
    the cordon has been applied or observed yet."""
    held: set[str] = set()
    for plan, nodes in open_windows(now).values_list("plan", "nodes"):
        held |= set(((plan or {}).get("applied") or {}).get("nodes") or [])
        held |= set(nodes or [])
    return held


def start_observations(job: TrainingJob):  # type: ignore[no-untyped-def]
    """What the cluster said about a job whose pods have not started
    (``jobs.podstart.Seen`` lists): its unstarted pods' reasons and its events."""
    pods = [Seen(reason, message) for reason, message in ObservedPod.objects.filter(
        namespace=job.pool.namespace, job=str(job.pk)).exclude(
        phase__in=["Running", "Succeeded", "Failed"]).values_list("reason", "message")]
    events = [Seen(reason, message, at) for reason, message, at in ClusterEvent.objects.filter(
        involved_namespace=job.pool.namespace, involved_name__startswith=job.k8s_name
    ).order_by("-last_seen").values_list("reason", "message", "last_seen")[:50]
    ] if job.k8s_name else []
    return pods, events


# --- health: jobs that do not progress as expected (jobs.health) ---------------------------


def _entered_state() -> Subquery:
    """When the job entered its current state (its latest transition to it)."""
    return Subquery(JobTransition.objects.filter(job=OuterRef("pk"), to_state=OuterRef("state"))
                    .order_by("-at", "-id").values("at")[:1])


def _health_facts(jobs: Sequence[TrainingJob], absent: set[int]) -> dict[int, JobFacts]:
    """Facts of ``jobs`` (annotated with ``entered_at``) for ``jobs.health.classify``:
    two queries whatever their number (unstarted pods, pod-start returns)."""
    pods: dict[str, list[Seen]] = defaultdict(list)
    starting = [str(j.pk) for j in jobs if j.state in (JobState.ADMITTED, JobState.PREEMPTING)]
    if starting:
        for job_id, reason, message in ObservedPod.objects.filter(job__in=starting).exclude(
                phase__in=["Running", "Succeeded", "Failed"]).values_list("job", "reason",
                                                                          "message"):
            pods[job_id].append(Seen(reason, message))
    admitted = [j.pk for j in jobs if j.state == JobState.ADMITTED]
    returns = dict(JobTransition.objects.filter(
        job_id__in=admitted, reason="NotStarted", to_state=JobState.QUEUED).values("job_id")
        .annotate(n=Count("id")).values_list("job_id", "n")) if admitted else {}
    return {j.pk: JobFacts(
        state=j.state, since=getattr(j, "entered_at", None) or j.submitted_at,
        admitted_at=j.admitted_at, preempt_deadline=j.preempt_deadline,
        in_cluster=j.in_cluster, last_error=j.last_error,
        pool_in_cluster=j.pool_id not in absent, pods=tuple(pods.get(str(j.pk), ())),
        returns=returns.get(j.pk, 0)) for j in jobs}


def _classify(facts: JobFacts, now: dt.datetime, policy: Policy) -> Verdict | None:
    return classify(facts, now=now, deadline_seconds=int(policy.pod_start_deadline_seconds or 0),
                    attempts=int(policy.pod_start_attempts or 1))


def job_health(job: TrainingJob, *, now: dt.datetime | None = None) -> Verdict | None:
    """Whether ``job`` does not progress as expected, why and what happens next (the
    banner on its page; the cluster page lists the same verdicts: :func:`stuck_jobs`)."""
    if job.state not in ACTIVE_STATES:
        return None
    now = now or timezone.now()
    row = TrainingJob.objects.filter(pk=job.pk).annotate(entered_at=_entered_state()).first()
    if row is None:
        return None
    absent = set() if job.state != JobState.QUEUED or job.pool.in_cluster else {job.pool_id}
    return _classify(_health_facts([row], absent)[row.pk], now, Policy.current())


def stuck_jobs(*, now: dt.datetime, limit: int = 25) -> list[tuple[TrainingJob, Verdict]]:
    """Every active job that does not progress as expected (``jobs.health.classify``),
    with its verdict, the longest-stuck first: a queued job whose pool is not in the
    cluster, an admitted job without its PyTorchJob, with a cluster error or whose pods
    have not started, a preempting job past its grace, a running one the cluster refused."""
    absent = {p.pk for p in pools_not_in_cluster()}
    candidates = (
        Q(state=JobState.QUEUED, pool_id__in=absent)
        | Q(state=JobState.ADMITTED, admitted_at__lte=now - min(NOT_CREATED_AFTER,
                                                                NOT_STARTED_AFTER))
        | Q(state=JobState.PREEMPTING, preempt_deadline__lt=now)
        | (Q(state__in=[JobState.ADMITTED, JobState.RUNNING, JobState.PREEMPTING])
           & ~Q(last_error="")))
    jobs: list[TrainingJob] = list(
        TrainingJob.objects.filter(candidates).select_related("tenant", "pool__tenant")
        .annotate(entered_at=_entered_state())
        .only("id", "name", "state", "held", "workers", "gpus_per_worker", "gpu_model",
              "mig_profile", "submitted_at", "admitted_at", "preempt_deadline", "in_cluster",
              "last_error", "k8s_name", "tenant__slug", "pool__kind", "pool__tenant__slug")
        .order_by("submitted_at", "id")[:limit * 4])
    if not jobs:
        return []
    facts = _health_facts(jobs, absent)
    policy = Policy.current()
    out = [(j, v) for j in jobs if (v := _classify(facts[j.pk], now, policy)) is not None]
    out.sort(key=lambda jv: (jv[1].since or now, jv[0].pk))
    return out[:limit]
