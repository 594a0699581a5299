"""Reads of the jobs app: tenant-scoped job lists, the inventory, admission inputs."""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from dataclasses import replace
from decimal import Decimal
from typing import Any

from django.db.models import Q, QuerySet
from django.http import Http404
from django.utils.translation import gettext as _

from core.choices import Tier
from core.models import Policy
from core.texts import render, text_code
from jobs.admission import History, JobView, NodeView, PoolQuota, decide
from jobs.admission import Policy as EnginePolicy
from jobs.choices import ACTIVE_STATES, JobState
from jobs.models import JobTransition, MaintenanceWindow, TrainingJob
from jobs.podstart import Seen
from jobs.validation import Inventory
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
from tenants.choices import QuotaMode, TenantStatus
from tenants.demand import (
    card_facts,
    dimension_only_when_granted,
    engine_amount,
    engine_demand,
    from_engine,
    job_demand,
    pool_batch_ceiling,
    pool_limits,
)
from tenants.models import NodeDedication, Pool, Tenant
from tenants.quota import guaranteed_amount, overcommit_factor
from tenants.selectors import effective_grants, guaranteed_shares, node_dedications
from tenants.tiers import tier_rules

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
    """The largest node per GPU model and MIG profile, and the largest node's CPU/memory."""
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
    classes = dict(ObservedStorageClass.objects.values_list("name", "is_default"))
    return Inventory(dict(gpus), dict(mig), max_cpu, max_mem.quantize(Decimal("0.001")),
                     classes, shared_per_node=dict(shared), shared_memory_mib=share_mib,
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
    active = list(TrainingJob.objects.filter(state__in=ACTIVE_STATES).select_related(
        "tenant", "pool"))
    bound = _bound_nodes([j.pk for j in active if j.state != JobState.QUEUED])
    jobs = [JobView(
        id=j.pk, tenant=j.tenant.slug, pool=j.pool.kind, tier=j.tier, gpu_model=j.gpu_model,
        mig_profile=j.mig_profile, replicas=j.workers, gpus_per_replica=j.gpus_per_worker,
        state=j.state, submitted_at=j.submitted_at, admitted_at=j.admitted_at,
        started_at=j.started_at,
        expected_seconds=float(j.expected_seconds) if j.expected_seconds else None,
        max_run_seconds=float(j.max_run_seconds) if j.max_run_seconds else None,
        template=j.template,
        priority=j.priority, held=j.held, borrowing=j.borrowing,
        placement=_placement(j, bound.get(str(j.pk), [])),
        preempt_deadline=j.preempt_deadline, gpu_shared=j.gpu_shared,
        resources=job_resources(j, facts)) for j in active]
    quotas = []
    for pool in Pool.objects.select_related("tenant").exclude(
            tenant__status__in=[TenantStatus.DELETING, TenantStatus.DELETED]):
        grants = effective_grants(pool)
        nominal, ceiling = pool_limits(grants, elastic_factor=pool.tenant.ceiling_factor)
        quotas.append(PoolQuota(
            tenant=pool.tenant.slug, pool=pool.kind, nominal=nominal, ceiling=ceiling,
            batch_ceiling=pool_batch_ceiling(
                grants, tenant_factor=pool.tenant.ceiling_factor,
                overcommit=lambda key: overcommit_factor(key, policy.overcommit_factors))))
    quotas = _with_guarantees(quotas)
    engine_policy = EnginePolicy(
        watermark=float(policy.eviction_watermark),
        grace_seconds={str(tier): rules.preemption_grace_seconds
                       for tier, rules in tier_rules(policy).items()})
    return {"nodes": nodes, "jobs": jobs, "quotas": quotas, "policy": engine_policy,
            "history": job_history(now), "now": now,
            "physical": {k: u.use for k, u in physical_use_now(report).items()}}, facts


def _with_guarantees(quotas: list) -> list:
    """Each overcommitted-mode tenant's pool quotas with their guaranteed part per GPU/MIG
    key (``tenants.quota.guaranteed_amount``: the number its quota pages show); other
    pools are guaranteed their whole nominal quota (the engine's default)."""
    over = set(Tenant.objects.filter(quota_mode=QuotaMode.OVERCOMMITTED)
               .values_list("slug", flat=True))
    if not over:
        return quotas
    shares = guaranteed_shares()
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


def observed_card_facts():  # type: ignore[no-untyped-def]
    """Per-card GPU memory by model, from the observed nodes (``tenants.demand``)."""
    return card_facts(capacity_report().nodes)


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


def _placement(job: TrainingJob, bound: list[str]) -> tuple[str, ...]:
    """What the engine needs per state (see jobs.admission.types.JobView): running and
    preempting jobs, the nodes their pods are on; admitted jobs, the planned nodes of the
    replicas whose pods are not bound yet (bound ones are already in the node's use)."""
    if job.state in (JobState.RUNNING, JobState.PREEMPTING):
        return tuple(sorted(bound))
    if job.state == JobState.ADMITTED:
        pending = list(job.placement or ())
        for node in bound:
            if node in pending:
                pending.remove(node)
        return tuple(pending)
    return ()


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


def job_spec(job: TrainingJob):  # type: ignore[no-untyped-def]
    """The plain spec of the job's PyTorchJob (k8s_sync builds the manifest); also of an
    unsaved job, which is how submission proves it can be built (``jobs.contract``)."""
    policy = Policy.current()
    rules = tier_rules(policy)[Tier(job.tier)]
    placement = dedicated_placement(job.tenant.slug) if NodeDedication.objects.filter(
        tenant=job.tenant).exists() else {}
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
    )


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
    decisions = decide(**{**inputs, "jobs": [*inputs["jobs"], job]})
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
    used: dict[str, int] = defaultdict(int)
    for other in inputs["jobs"]:
        if (other.tenant, other.pool) == (tenant, pool_kind):
            for key, amount in other.resources.items():
                used[key] += amount
    out = []
    for key, wanted in sorted(job.resources.items()):
        granted = quota is not None and key in quota.nominal
        if not granted and dimension_only_when_granted(key):
            continue
        nominal = quota.nominal.get(key, 0) if quota is not None else 0
        ceiling = max(nominal, quota.ceiling.get(key, nominal)) if quota is not None else 0
        resource = Resource.parse(key)
        out.append({"key": key, "label": resource.label(),
                    "unit": resource.unit_for(from_engine(key, ceiling)),
                    "wanted": from_engine(key, wanted),
                    "in_use": from_engine(key, used[key]), "quota": from_engine(key, nominal),
                    "ceiling": from_engine(key, ceiling),
                    "fits_quota": used[key] + wanted <= nominal,
                    "fits_ceiling": used[key] + wanted <= ceiling})
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


def pods_of(job: TrainingJob):  # type: ignore[no-untyped-def]
    """The job's pods as last observed (name, phase, node, reason)."""
    return ObservedPod.objects.filter(namespace=job.pool.namespace,
                                      job=str(job.pk)).order_by("name")


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
