"""The admission engine's inputs, read from the database and the observed cluster (no
cluster call), and its decisions with the jobs whose pool the cluster does not show."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from decimal import Decimal
from typing import Any

from core.models import Policy
from core.resources import extended
from core.texts import message as stored_text
from jobs import submitcache
from jobs.admission import ACTIVE_STATES as HOLDING_STATES
from jobs.admission import JobView, NodeView, PoolQuota, decide
from jobs.admission import Policy as EnginePolicy
from jobs.admission.incremental import loop_engine
from jobs.choices import ACTIVE_STATES, JobState
from jobs.models import TrainingJob
from jobs.progress import reported_remaining
from jobs.selectors.history import recent_history
from jobs.selectors.inventory import _node_cpu_memory, physical_use_now
from jobs.selectors.use import job_resources
from jobs.selectors.windows import (
    maintenance_held_nodes,
    target_windows,
    window_scope,
    window_targets,
)
from k8s_sync.models import (
    ObservedPod,
)
from k8s_sync.placement import topology_levels as topology_levels_in_force
from k8s_sync.selectors import capacity_report
from tenants.choices import LoanStatus, QuotaMode, TenantStatus
from tenants.demand import (
    card_facts,
    pool_limits,
)
from tenants.models import Pool, QuotaLoan, Tenant
from tenants.quota import guaranteed_amount
from tenants.selectors import (
    effective_grants_by_pool,
    guaranteed_shares,
    node_dedications,
    pools_not_in_cluster,
)
from tenants.tiers import reclaim_grace_seconds, tier_rules

# --- admission inputs -------------------------------------------------------------------


def admission_inputs(now, *, rows=None, nodes=None, pods=None):  # type: ignore[no-untyped-def]
    """Everything ``jobs.admission.decide`` needs, from the database and the observed
    cluster (no cluster calls): nodes, active jobs, pool quotas, policy, history.
    ``rows``: the active jobs' rows (:func:`active_rows`) as the caller keeps them (the
    admission service's memory, ``jobs.live``), instead of reading them all; ``nodes`` and
    ``pods``: the nodes' and pods' rows as its informers keep them (``jobs.informers``),
    instead of the watcher's."""
    return _admission_inputs(now, rows=rows, nodes=nodes, pods=pods)[0]


def active_rows(ids=None) -> list[Any]:  # type: ignore[no-untyped-def]
    """The active jobs' rows as a pass reads them (the columns of :data:`VIEW_FIELDS`,
    as named tuples): all of them, or only those of ``ids`` that are active."""
    found = TrainingJob.objects.filter(state__in=ACTIVE_STATES)
    if ids is None:
        return list(found.values_list(*VIEW_FIELDS, named=True))
    ids = list(ids)
    return [row for start in range(0, len(ids), 2000)
            for row in found.filter(pk__in=ids[start:start + 2000]).values_list(
                *VIEW_FIELDS, named=True)]


def _admission_inputs(now, *, rows=None, nodes=None, pods=None):  # type: ignore[no-untyped-def]
    """:func:`admission_inputs` and the card facts they were counted with (the preview
    counts its hypothetical job with the same ones, from the same capacity report)."""
    dedicated = node_dedications()
    held = maintenance_held_nodes(now)  # cordoned for a window, even before it is observed
    # a window's nodes held for its target job: dedicated to it alone (JobView.scope)
    targeted, targets = window_targets(now), target_windows(now)
    policy = Policy.current()
    # NodeView.switch: the node's value of the policy's last topology level.
    report = capacity_report(topology_levels_in_force(policy.topology_levels), nodes=nodes,
                             pods=pods)
    report_nodes = report.nodes
    facts = card_facts(report_nodes)
    nodes = [NodeView(name=n.name, gpu_model=n.gpu_model, switch=n.switch,
                      gpus=n.whole_allocatable, gpus_used=n.whole_allocated,
                      mig={m.profile: m.allocatable for m in n.mig},
                      mig_used={m.profile: m.allocated for m in n.mig},
                      schedulable=(n.schedulable or n.name in targeted)
                      and (n.name not in held or n.name in targeted),
                      dedicated_to=(window_scope(targeted[n.name]) if n.name in targeted
                                    else dedicated.get(n.name, "")),
                      shared=n.shared_allocatable, shared_used=n.shared_allocated,
                      extended=n.extended, extended_used=n.extended_requested,
                      **_node_cpu_memory(n))
             for n in report_nodes]
    # Every active job: the columns a decision reads, as tuples (no model instances: on a
    # long queue building them was most of the pass's reading), read now or kept.
    active = active_rows() if rows is None else rows
    bound = _bound_nodes([j.id for j in active if j.state != JobState.QUEUED], pods=pods)
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
    views: dict[int, tuple[Any, tuple[str, ...], JobView, Any]] = {}
    jobs = []
    reports = _reported_remaining(active, now)
    for j in active:
        placement = _placement(j.state, j.placement, bound.get(str(j.id), []))
        said = reports.get(j.id)
        hit = previous.get(j.id)
        if hit is not None and hit[0] == j and hit[1] == placement and hit[3] == said:
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
                resources=resources(j), reported_remaining_seconds=said and said[0],
                reported_at=said and said[1])
        views[j.id] = (j, placement, view, said)
        if j.id in targets:
            view = replace(view, scope=window_scope(targets[j.id]))
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


_VIEWS: dict[str, tuple[Any, dict[int, tuple[Any, tuple[str, ...], JobView, Any]]]] = {}
"""The last pass's JobViews in this process, with the columns they were built from."""
_SHAPE = ("workers", "cpu_per_worker", "memory_gib_per_worker", "gpus_per_worker", "gpu_model",
          "mig_profile", "gpu_shared", "gpu_memory_gib_per_card",
          *(d.job_field for d in extended()))
"""What :func:`job_demand_of` reads of a TrainingJob."""
VIEW_FIELDS = tuple(dict.fromkeys((
    "id", "tenant__slug", "pool__kind", "tier", "state", "submitted_at", "admitted_at",
    "started_at", "expected_seconds", "max_run_seconds", "template", "priority", "held",
    "borrowing", "placement", "preempt_deadline", "loan_id", "loan__lender__tenant__slug",
    "loan__lender__kind", "loan__status", "kind", "k8s_name", "restart_count", *_SHAPE)))
"""The columns of an active job the admission pass reads (``JobView``)."""


def _reported_remaining(active, now):  # type: ignore[no-untyped-def]
    """The running jobs' fresh reports of their remaining time: job id -> (seconds, when
    reported) (``jobs.progress.reported_remaining``: a cache read, a query only after a
    new report)."""
    return reported_remaining({j.id: j.started_at for j in active
                               if j.state == JobState.RUNNING}, now=now)


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
    """A quota-holding job's loan for its JobView (from a row of :data:`VIEW_FIELDS`): id,
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


def _bound_nodes(job_ids: list[int], *, pods=None) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    """Job id (as labelled) -> the node of each of its observed, bound, unfinished pods
    (``pods``: the pods' rows an informer keeps, else read)."""
    out: dict[str, list[str]] = defaultdict(list)
    rows: Any
    if pods is not None:
        wanted = {str(i) for i in job_ids}
        rows = [(p.job, p.node_name) for p in pods if p.job in wanted and p.node_name
                and p.phase not in ("Succeeded", "Failed")]
    else:
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
