"""Writes of the jobs app: submit, cancel, hold, preempt, re-prioritise, maintenance windows.

Every state change goes through :func:`job_transition` (``jobs.transitions``, re-exported
here with :func:`job_transitions`, :class:`Move`, :func:`record_waiting` and
:func:`job_notify_owner`), a conditional update (it happens only from the expected states,
so two workers racing cannot both apply it) that writes a JobTransition row in the same
transaction. What a verb asks of the cluster is enqueued after its commit
(``jobs.enqueue``); what differs by admission backend is asked of it (``jobs.backends``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from core.choices import Tier
from core.exceptions import ApplicationError, Conflict, NotAllowed
from core.models import Policy
from core.resources import by_kind, extended
from core.texts import StoredText
from core.texts import message as stored_text
from core.validation import typed_text
from jobs import enqueue, selectors, submitcache
from jobs.backends import get_backend
from jobs.choices import ACTIVE_STATES, JobState
from jobs.contract import NON_FIELD, check_buildable
from jobs.defrag import plan_defrag
from jobs.kueue_submit import check_gpu_memory
from jobs.models import MaintenanceWindow, TrainingJob
from jobs.transitions import Move as Move
from jobs.transitions import job_notify_owner as job_notify_owner
from jobs.transitions import job_transition, record
from jobs.transitions import job_transitions as job_transitions
from jobs.transitions import record_waiting as record_waiting
from jobs.validation import Inventory, SubmissionError, check_gang, validate_submission
from jobs.volume_iops import check_checkpoint_iops
from k8s_sync.naming import job_name
from tenants.access import AnyUser, TenantAccess, require_platform_admin
from tenants.audit import record_audit
from tenants.catalog import Resource, ResourceKind, fmt_amount
from tenants.demand import (
    CardFacts,
    dimension_only_when_granted,
    pool_ceiling,
)
from tenants.models import Pool
from tenants.tiers import tier_rules


def job_submit(*, access: TenantAccess, actor: AnyUser, pool: str, data: dict[str, Any],
               template: str = "", inventory: Inventory | None = None) -> TrainingJob:
    """Queue a training job. Everything is checked first (:func:`job_submit_check`); a bad
    field is an ApplicationError naming it, and nothing is created. The PyTorchJob is
    created in the cluster (suspended) once the row commits; admission then decides when
    it runs."""
    pool_row, clean, annotations = job_submit_check(access=access, pool=pool, data=data,
                                                    inventory=inventory)
    try:
        with transaction.atomic():
            job = TrainingJob.objects.create(
                tenant=access.tenant, pool=pool_row, submitted_by=actor, template=template,
                annotations=annotations, expected_seconds=data.get("expected_seconds"),
                **clean)
            job.k8s_name = job_name(job.pk, job.name)
            job.save(update_fields=["k8s_name"])
            record(job, "", JobState.QUEUED, "Submitted", actor=actor)
            get_backend().submit(job.pk)  # its PyTorchJob, suspended; then an admission pass
    except IntegrityError:
        raise Conflict(_("A job named “%(n)s” exists already in this tenant; choose another "
                         "name.") % {"n": clean["name"]}, field="name") from None
    return job


def job_submit_check(*, access: TenantAccess, pool: str, data: dict[str, Any],
                     inventory: Inventory | None = None
                     ) -> tuple[Pool, dict[str, Any], dict[str, str]]:
    """Every check :func:`job_submit` makes, writing nothing: the pool row, the cleaned
    submission and the simulator annotations it keeps, or an ApplicationError naming the
    field (``extra["errors"]``: every field's). The form's live preview asks this too, so
    it refuses exactly what a submit would."""
    access.require_member()
    if not access.tenant.is_active:
        raise ApplicationError(_("This tenant is suspended and cannot submit work: %(r)s")
                               % {"r": access.tenant.suspended_reason})
    # The pool, whether the name is taken (the name as validate_submission cleans it;
    # the conflict is still reported after every other check, and the unique constraint
    # still decides a race), the inventory, policy, dedications and grants
    # (jobs.submitcache): one query when none of the latter changed since the last one.
    name = str(data.get("name") or "").strip()
    snap, pool_row, name_taken = submitcache.for_submission(access.tenant, str(pool), name)
    if pool_row is None:
        raise ApplicationError(_("Unknown pool “%(p)s”.") % {"p": pool}, field="pool")
    annotations = {k: str(v) for k, v in (data.get("annotations") or {}).items()
                   if str(k).startswith("kubesim.trainyard.io/")}
    try:
        # only the shared StorageClasses and the tenant's own (never another tenant's)
        clean = validate_submission(data, pool=pool, inventory=(
            inventory or snap.inventory).for_tenant(access.tenant.slug))
        # the pool's IOPS total, in words, before the spec's own check of the class
        check_checkpoint_iops(pool_row, clean)
        # One contract: build the spec and manifests now, with the code sync_job uses.
        check_buildable(tenant=access.tenant, pool=pool_row, clean=clean,
                        annotations=annotations, policy=snap.policy,
                        dedicated=access.tenant.pk in snap.dedicated)
    except SubmissionError as exc:
        field, message = next(iter(exc.errors.items()))
        raise ApplicationError(message, field=None if field == NON_FIELD else field,
                               extra={"errors": exc.errors}) from None
    _check_ceiling(pool_row, clean, snap)
    check_gpu_memory(pool_row, clean, snap)  # Kueue mode: what Kueue cannot count
    try:
        check_gang(clean, inventory or snap.inventory)
    except SubmissionError as exc:
        raise ApplicationError(exc.errors["workers"], field="workers",
                               extra={"errors": exc.errors}) from None
    _check_checkpoint_storage(pool_row, clean)
    if name_taken and name == clean["name"]:
        raise Conflict(_("A job named “%(n)s” exists already in this tenant; choose another "
                         "name.") % {"n": clean["name"]}, field="name")
    return pool_row, clean, annotations


def _check_checkpoint_storage(pool: Pool, clean: dict[str, Any]) -> None:
    """Refuse a new checkpoint volume the pool's storage quota cannot hold: Kubernetes
    would refuse the claim, and the job would be admitted but never start."""
    storage_class = clean["checkpoint_storage_class"]
    if not storage_class:
        return
    left = selectors.storage_left(pool, storage_class)
    if left is not None and clean["checkpoint_size_gib"] > left:
        pool_label = pool.get_kind_display()
        if left <= 0:
            message = _("Your %(pool)s pool has no storage quota left for %(sc)s: ask for "
                        "storage quota, use another class or an existing volume.")
        else:
            message = _("Your %(pool)s pool has %(left)s GiB of %(sc)s left: choose a smaller "
                        "volume, another class, or ask for more storage quota.")
        raise ApplicationError(message % {"pool": pool_label, "sc": storage_class,
                                          "left": format(left.normalize(), "f")},
                               field="checkpoint_size_gib")


def _check_ceiling(pool: Pool, clean: dict[str, Any],
                   snap: submitcache.Snapshot | None = None) -> None:
    """Refuse a job that could never start: more of any dimension (GPUs, MIG instances,
    shared GPUs, CPU, memory, GPU memory) than the pool may ever hold, counted as
    admission counts it (``tenants.demand``: the whole job, the pods' requests), naming
    the form field that makes it too large. A production job may hold its pool's grant
    (production never borrows); development and batch work its ceiling
    (``tenants.demand.pool_ceiling``: without a borrowing cap, any idle capacity, which
    the engine's node checks bound)."""
    snap = snap or submitcache.snapshot()
    grants = snap.effective_grants(pool)
    production = clean.get("tier") == Tier.PRODUCTION
    factor = None if production else pool.tenant.borrowing_factor(snap.policy)
    facts = snap.card_facts() if "gpu-memory" in grants else CardFacts()
    demand = selectors.job_demand_of(clean, facts)
    gpu_fields = {ResourceKind.GPU, ResourceKind.MIG, ResourceKind.GPU_SHARED}
    for key, wanted in sorted(demand.items(), key=lambda kv: _DIM_ORDER.get(
            kv[0].partition(":")[0], 9)):
        if key not in grants and dimension_only_when_granted(key):
            continue
        resource = Resource.parse(key)
        granted = grants.get(key, Decimal(0))
        ceiling = granted if production else pool_ceiling(key, granted, factor)
        if ceiling is None or wanted <= ceiling:
            continue
        why = (_("production jobs never borrow: ask for more quota first")
               if production else _("that is the borrowing cap a platform admin set: ask "
                                    "for more quota first"))
        if resource.kind in gpu_fields and resource.kind != ResourceKind.GPU_SHARED:
            raise ApplicationError(
                _("This job asks for %(w)s %(r)s but the %(p)s pool may hold at most %(c)s, "
                  "so it could never start (%(why)s), or use fewer workers or GPUs.")
                % {"w": int(wanted), "r": resource.qualifier, "p": pool.kind,
                   "c": int(ceiling), "why": why}, field="gpus_per_worker")
        field = {ResourceKind.CPU: "cpu_per_worker", ResourceKind.MEMORY: "memory_gib_per_worker"
                 }.get(resource.kind, by_kind(resource.kind).job_field or "gpus_per_worker")
        if resource.kind == ResourceKind.GPU_MEMORY and clean.get("gpu_memory_gib_per_card"):
            field = "gpu_memory_gib_per_card"
        raise ApplicationError(
            _("This job needs %(w)s %(u)s of %(r)s (all its workers together, as the pool's "
              "quota counts it) but the %(p)s pool may hold at most %(c)s, so it could never "
              "start (%(why)s), or make the job smaller.")
            % {"w": fmt_amount(wanted), "u": resource.unit_for(wanted), "r": resource.label(),
               "p": pool.kind, "c": fmt_amount(ceiling), "why": why}, field=field)


_DIM_ORDER = {"gpu": 0, "mig": 0, "gpu-shared": 0, "cpu": 1, "memory": 2, "gpu-memory": 3}
"""The order in which :func:`_check_ceiling` names a job's dimensions."""




def job_cancel(*, access: TenantAccess, actor: AnyUser, job: TrainingJob) -> TrainingJob:
    """Cancel in any state; a finished job is left as it is (idempotent)."""
    if not (access.is_member or access.platform_admin):
        raise NotAllowed(_("Only members of this tenant can cancel its jobs."))
    if job.state not in ACTIVE_STATES:
        return job
    moved = job_transition(job_id=job.pk, from_states=ACTIVE_STATES, to_state=JobState.CANCELLED,
                           reason="Cancelled", actor=actor, finished_at=timezone.now(),
                           message=stored_text("jobs.transition.cancelled_by",
                                           u=actor.get_username()))
    if moved:
        enqueue.schedule_sync(job.pk)
        enqueue.kick_admission()
    job.refresh_from_db()
    return job


def job_hold(*, actor: AnyUser, job: TrainingJob, held: bool,
             reason: StoredText) -> TrainingJob:
    """Hold a queued job (never admitted while held) or release it (platform admins).

    ``reason`` is what a person typed (kept as it is) or a stored text the system wrote
    (``core.texts.message(...)``, shown in each reader's language)."""
    require_platform_admin(actor)
    if isinstance(reason, str):
        reason = typed_text(reason, field="reason")
    if not reason:
        raise ApplicationError(_("Give a reason; it is shown to the job's owners."),
                               field="reason")
    with transaction.atomic():
        TrainingJob.objects.filter(pk=job.pk).update(held=held,
                                                     hold_reason=reason if held else "")
        record_audit(actor=actor, tenant=job.tenant, action="job.hold" if held else "job.release",
                     text=stored_text("jobs.audit.hold" if held else "jobs.audit.release",
                                      job=job.name, reason=reason), job=job.pk)
        enqueue.kick_admission()
    job.refresh_from_db()
    return job


def job_preempt(*, actor: AnyUser, job: TrainingJob, reason: str) -> TrainingJob:
    """Preempt a running or admitted job (platform admins), with a reason: it stops after
    its tier's grace, so it checkpoints, and goes back to the queue, by the admission
    backend in force (``jobs.backends``). A job in any other state is left as it is."""
    require_platform_admin(actor)
    reason = typed_text(reason, field="reason")
    if not reason:
        raise ApplicationError(_("Give a reason; it is shown to the job's owners."),
                               field="reason")
    text = stored_text("jobs.preempt.admin", u=actor.get_username(), reason=reason)
    with transaction.atomic():
        if get_backend().preempt(job_id=job.pk, reason=text, actor=actor):
            record_audit(actor=actor, tenant=job.tenant, action="job.preempt",
                         text=stored_text("jobs.audit.preempt", job=job.name, reason=reason),
                         job=job.pk)
    job.refresh_from_db()
    return job


def job_set_priority(*, actor: AnyUser, job: TrainingJob, priority: int,
                     reason: str) -> TrainingJob:
    """Re-prioritise a job within its tier (platform admins), with a reason."""
    require_platform_admin(actor)
    reason = typed_text(reason, field="reason")
    if not reason:
        raise ApplicationError(_("Give a reason for the audit log."), field="reason")
    if not -1000 <= int(priority) <= 1000:
        raise ApplicationError(_("Priority is between -1000 and 1000."), field="priority")
    with transaction.atomic():
        TrainingJob.objects.filter(pk=job.pk).update(priority=int(priority))
        record_audit(actor=actor, tenant=job.tenant, action="job.priority",
                     text=stored_text("jobs.audit.priority", job=job.name, priority=int(priority),
                                      reason=reason), job=job.pk)
        enqueue.kick_admission()
    job.refresh_from_db()
    return job


def clone_initial(job: TrainingJob) -> dict[str, Any]:
    """A submission form's initial values copied from ``job`` (a new name)."""
    return {
        "name": f"{job.name}-2"[:60], "pool": job.pool.kind, "kind": job.kind,
        "runtime": job.runtime, "image": job.image,
        "command": job.command, "args": job.args, "env": job.env, "workers": job.workers,
        "gpus_per_worker": job.gpus_per_worker, "gpu_model": job.gpu_model,
        "mig_profile": job.mig_profile, "cpu_per_worker": job.cpu_per_worker,
        "memory_gib_per_worker": job.memory_gib_per_worker, "tier": job.tier,
        "max_run_seconds": job.max_run_seconds, "checkpoint_path": job.checkpoint_path,
        # A clone resumes from the same checkpoints: the volume Trainyard created for the
        # original job (it outlives the job) becomes the clone's existing volume.
        "checkpoint_claim": job.checkpoint_claim or (
            f"{job.k8s_name}-ckpt" if job.checkpoint_storage_class and job.k8s_name else ""),
        **{d.job_field: getattr(job, d.job_field) for d in extended()},
    }






# --- maintenance windows (defragmentation) ------------------------------------------------


def defrag_plan_preview(*, gpu_model: str, wanted: int,
                        min_gpus: int = 0):  # type: ignore[no-untyped-def]
    """The plan for freeing ``wanted`` whole nodes of ``gpu_model`` now (nothing written);
    ``min_gpus``: a target job's cards per worker (smaller nodes are not emptied)."""
    inputs = selectors.admission_inputs(timezone.now())
    return plan_defrag(nodes=inputs["nodes"], jobs=inputs["jobs"], gpu_model=gpu_model,
                       wanted=wanted, min_gpus=min_gpus)


def window_schedule(*, actor: AnyUser, gpu_model: str, nodes_wanted: int,
                    starts_at: dt.datetime, ends_at: dt.datetime, reason: str = "",
                    target_job_id: int | None = None):  # type: ignore[no-untyped-def]
    """Schedule a defragmentation window (platform admins); the plan is re-computed when
    the window opens, since the cluster will have changed by then. ``target_job_id``: a
    queued job of ``gpu_model`` the freed nodes are held for (it alone runs there during
    the window: ``selectors.window_targets``)."""
    require_platform_admin(actor)
    target = None
    if target_job_id is not None:
        target = TrainingJob.objects.filter(pk=target_job_id).first()
        if target is None or target.state != JobState.QUEUED or target.mig_profile or (
                target.gpu_model != gpu_model):
            raise ApplicationError(_("The nodes can be held only for a queued job of "
                                     "%(m)s whole cards.") % {"m": gpu_model},
                                   field="target_job")
    reason = typed_text(reason, field="reason")
    if nodes_wanted < 1:
        raise ApplicationError(_("Free at least one node."), field="nodes_wanted")
    if ends_at <= starts_at or starts_at < timezone.now() - dt.timedelta(minutes=5):
        raise ApplicationError(_("The window must start now or later and end after it "
                                 "starts."), field="starts_at")
    if gpu_model not in selectors.inventory().gpus_per_node:
        raise ApplicationError(_("The cluster has no GPU model “%(m)s”.") % {"m": gpu_model},
                               field="gpu_model")
    plan = defrag_plan_preview(gpu_model=gpu_model, wanted=nodes_wanted,
                               min_gpus=target.gpus_per_worker if target else 0)
    with transaction.atomic():
        window = MaintenanceWindow.objects.create(
            gpu_model=gpu_model, nodes_wanted=nodes_wanted, starts_at=starts_at,
            ends_at=ends_at, reason=reason, created_by=actor, target_job=target,
            plan={"nodes": plan.nodes, "moves": plan.moves, "blocked": plan.blocked})
        starts = {"code": "jobs.clock.date",
                  "args": {"at": window.starts_at.astimezone(dt.UTC).isoformat()}}
        record_audit(actor=actor, action="defrag.schedule",
                     text=stored_text("jobs.audit.defrag_schedule", model=window.gpu_model,
                                      n=window.nodes_wanted, at=starts),
                     window=window.pk)
    return window


def window_apply(*, window_id: int, now: dt.datetime | None = None) -> int:
    """Open a due window: preempt the jobs its fresh plan moves (they resume elsewhere
    from their checkpoints). Idempotent: a window applies once. Returns jobs moved."""
    now = now or timezone.now()
    with transaction.atomic():
        window = MaintenanceWindow.objects.select_for_update().filter(
            pk=window_id, status=MaintenanceWindow.Status.SCHEDULED,
            starts_at__lte=now).first()
        if window is None:
            return 0
        target = window.target_job
        plan = defrag_plan_preview(gpu_model=window.gpu_model, wanted=window.nodes_wanted,
                                   min_gpus=target.gpus_per_worker if target else 0)
        moved = 0
        grace = {str(tier): rules.termination_grace_seconds
                 for tier, rules in tier_rules(Policy.current()).items()}
        tiers = dict(TrainingJob.objects.filter(pk__in=plan.moves).values_list("pk", "tier"))
        for job_id in plan.moves:
            if job_transition(job_id=job_id, from_states=[JobState.RUNNING, JobState.ADMITTED],
                              to_state=JobState.PREEMPTING, reason="Preempted",
                              message=stored_text("jobs.transition.maintenance",
                                              window=window.pk, model=window.gpu_model),
                              preempt_reason=stored_text("jobs.preempt.maintenance"),
                              preempt_deadline=now + dt.timedelta(
                                  seconds=grace.get(str(tiers.get(job_id)), 300))):
                enqueue.schedule_sync(job_id)
                moved += 1
        window.status = MaintenanceWindow.Status.APPLIED
        window.applied_at = now
        window.plan = {**window.plan, "applied": {"nodes": plan.nodes, "moves": plan.moves}}
        window.save(update_fields=["status", "applied_at", "plan"])
        record_audit(actor=None, action="defrag.apply",
                     text=stored_text("jobs.audit.defrag_apply", model=window.gpu_model, n=moved,
                                      nodes=", ".join(plan.nodes) or "—"), window=window.pk)
    return moved


def window_nodes_hold(*, window_id: int, cordoned: Iterable[str],
                      already: Iterable[str] = ()) -> bool:
    """Record the nodes an open window is about to cordon (``cordoned``: released at its
    end) and those it found cordoned by someone else (``already``: left as they are).
    Recorded before the cordon, so a release never misses a node. False (nothing
    written) when the window is no longer open. Idempotent."""
    with transaction.atomic():
        window = MaintenanceWindow.objects.select_for_update().filter(
            pk=window_id, status=MaintenanceWindow.Status.APPLIED,
            released_at__isnull=True).first()
        if window is None:
            return False
        nodes = sorted(set(window.nodes or []) | set(cordoned))
        applied = dict((window.plan or {}).get("applied") or {})
        before = sorted(set(applied.get("already_cordoned") or []) | set(already))
        if nodes != window.nodes or before != applied.get("already_cordoned", []):
            window.nodes = nodes
            window.plan = {**window.plan, "applied": {**applied, "already_cordoned": before}}
            window.save(update_fields=["nodes", "plan"])
    return True


def window_released(*, window_id: int, now: dt.datetime | None = None) -> bool:
    """The window's cordoned nodes are uncordoned: stamp ``released_at`` (once)."""
    now = now or timezone.now()
    with transaction.atomic():
        window = MaintenanceWindow.objects.select_for_update().filter(
            pk=window_id, released_at__isnull=True, applied_at__isnull=False).first()
        if window is None:
            return False
        window.released_at = now
        window.save(update_fields=["released_at"])
        record_audit(actor=None, action="defrag.release",
                     text=stored_text("jobs.audit.defrag_release", model=window.gpu_model,
                                      nodes=", ".join(window.nodes or []) or "—"),
                     window=window.pk)
    enqueue.kick_admission()  # the released nodes take work again
    return True


def window_cancel(*, actor: AnyUser, window_id: int):  # type: ignore[no-untyped-def]
    """Cancel a window (platform admins): a scheduled one never opens; an open one gives
    its cordoned nodes back now (the release runs once this commits). Idempotent."""
    require_platform_admin(actor)
    with transaction.atomic():
        window = MaintenanceWindow.objects.select_for_update().filter(pk=window_id).first()
        if window is None:
            raise ApplicationError(_("There is no such maintenance window."), field="window")
        if window.status == MaintenanceWindow.Status.CANCELLED or window.released_at:
            return window
        was_open = window.status == MaintenanceWindow.Status.APPLIED
        window.status = MaintenanceWindow.Status.CANCELLED
        window.save(update_fields=["status"])
        record_audit(actor=actor, action="defrag.cancel",
                     text=stored_text("jobs.audit.defrag_cancel", model=window.gpu_model,
                                      window=window.pk), window=window.pk)
        if was_open:
            enqueue.schedule_windows()
    return window
