"""The admission loop and the cluster side of jobs.

* ``jobs.admission_cycle``: move jobs by what the cluster says of their PyTorchJobs, as
  the ``k8s_watch`` reflector recorded them (running, succeeded, failed, preempted and
  gone), then ask the pure engine (``jobs.admission.decide``) what to admit and preempt,
  apply its decisions and record every waiting job's position, ETA and reason. It
  decides without a transaction, then applies everything in one transaction in a fixed
  number of statements, only if no other pass applied since it read (the pass token in
  ``AdmissionState``): passes apply one at a time cluster-wide, and every decision is a
  conditional state change, so it is never applied twice. Runs on every submit, cancel
  and finish, when the watcher records a change of a PyTorchJob or of a pod in a tenant
  namespace (``jobs/receivers.py``), and every few seconds from beat.
* ``jobs.sync_job(job_id)``: make the cluster match one job: the PyTorchJob exists
  (suspended unless admitted or running); a cancelled job's PyTorchJob is deleted.
* ``jobs.sync_jobs(job_ids)``: the same for a pass's admissions and preemptions, in a
  bounded pool of threads (``TRAINYARD_SYNC_CONCURRENCY``).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from celery import shared_task
from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, connection, transaction
from django.db.models import Max
from django.utils import timezone

from core.models import Policy
from core.texts import message as stored_text
from jobs import health, idle_waiting, podstart, selectors, services
from jobs.admission.cadence import explain_due
from jobs.backends import get_backend
from jobs.choices import JobState
from jobs.models import AdmissionState, JobTransition, MaintenanceWindow, TrainingJob
from k8s_sync import manifests
from k8s_sync.client import K8sError, get_client, is_transient
from k8s_sync.maintenance import cordon_patch, is_cordoned, maintenance_taint
from k8s_sync.models import ObservedNode, ObservedPod
from k8s_sync.placement import switch_of
from k8s_sync.selectors import WorkloadStatus, pod_run_times, workload_statuses
from k8s_sync.specs import WORKLOAD_KINDS
from tenants.models import Pool
from tenants.selectors import topology_levels
from tenants.services import pool_sync_request
from tenants.tasks import backoff_seconds

log = logging.getLogger(__name__)
CYCLE_LOCK = "jobs:admission-cycle"
MAX_RETRIES = 8


def _backoff(retries: int) -> float:
    return backoff_seconds(retries)


@shared_task(name="jobs.sync_job", queue="k8s", bind=True, max_retries=MAX_RETRIES)
def sync_job(self, job_id: int) -> str:  # type: ignore[no-untyped-def]
    """Converge one job's PyTorchJob or TrainJob (and checkpoint volume) with its row.
    Idempotent. A transient API error retries with backoff, :data:`MAX_RETRIES` times."""
    if (backend := get_backend()).name != "trainyard":
        return backend.sync_job(self, job_id)  # jobs.backends: Kueue admits
    result, exc = _sync_one(job_id)
    if exc is not None:
        if self.request.retries < MAX_RETRIES:
            raise self.retry(exc=exc, countdown=_backoff(self.request.retries)) from exc
        return "error"
    return result


@shared_task(name="jobs.sync_jobs", queue="k8s")
def sync_jobs(job_ids: list[int]) -> dict[str, int]:
    """Converge many jobs (a pass's admissions and preemptions, ``services.schedule_syncs``) as
    :func:`sync_job` does each, at most ``settings.TRAINYARD_SYNC_CONCURRENCY`` at once,
    each in its own thread and database connection. A job whose call failed transiently gets
    its own ``jobs.sync_job`` with the usual backoff; one that still fails is left to the
    level-triggered paths (the next pass's sync of what it moves, the watchdog), as a lost
    task would be. Inside a transaction (the tests' eager tasks) the jobs run one by one in
    this thread, which alone sees that transaction's rows."""
    ids = list(dict.fromkeys(int(i) for i in job_ids))
    if get_backend().name != "trainyard":  # jobs.backends: each through its backend
        for job_id in ids:
            sync_job.delay(job_id)
        return {"queued": len(ids)}
    workers = min(settings.TRAINYARD_SYNC_CONCURRENCY, len(ids))
    if workers <= 1 or connection.in_atomic_block:
        outcomes = [_sync_one(job_id) for job_id in ids]
    else:
        # Each thread takes every workers-th job, on one database connection of its own
        # for its whole share (a connection per job cost more than the job's queries).
        shares = [ids[i::workers] for i in range(workers)]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sync-job") as pool:
            done: dict[int, tuple[str, K8sError | None]] = {}
            for share, results in zip(shares, pool.map(_sync_share, shares), strict=True):
                done.update(zip(share, results, strict=True))
        outcomes = [done[job_id] for job_id in ids]
    counts: dict[str, int] = {}
    for job_id, (result, exc) in zip(ids, outcomes, strict=True):
        if exc is not None:
            result = "retrying"
            sync_job.apply_async(args=[job_id], countdown=_backoff(0))
        counts[result] = counts.get(result, 0) + 1
    return counts


def _sync_share(job_ids: list[int]) -> list[tuple[str, K8sError | None]]:
    try:
        # Each job read just before it is converged (not the share at once): a job the
        # loop moved meanwhile (admitted, then preempted) is never resumed from an old read.
        return [_sync_one(job_id) for job_id in job_ids]
    finally:
        connection.close()  # this thread's own connection


def _sync_one(job_id: int) -> tuple[str, K8sError | None]:
    """The work of :func:`sync_job`: (result, a transient error to retry, else None)."""
    job = TrainingJob.objects.select_related("tenant", "pool").filter(pk=job_id).first()
    if job is None:
        return "gone", None
    client = get_client()
    api_version, kind = WORKLOAD_KINDS[job.kind]  # a PyTorchJob or a TrainJob
    try:
        if job.state == JobState.CANCELLED:
            client.ensure_absent(api_version, kind, job.k8s_name,
                                 job.pool.namespace, propagation_policy="Foreground")
            return "absent", None
        if job.state in (JobState.SUCCEEDED, JobState.FAILED):
            if (job.state == JobState.FAILED and job.in_cluster and not job.cluster_suspended
                    and job.started_at is None):
                # Failed before its pods ever started (the pod-start deadline): suspend it,
                # so its pending pods go and their nodes' GPUs are free again.
                client.patch(api_version, kind, job.k8s_name,
                             manifests.workload_suspend_patch(job.kind, True),
                             job.pool.namespace)
                TrainingJob.objects.filter(pk=job.pk).update(cluster_suspended=True)
                return "suspended", None
            return "finished", None
        try:
            spec = selectors.job_spec(job)
            pvc = manifests.build_checkpoint_pvc(spec)
            workload = manifests.build_workload(spec)
        except DatabaseError:
            raise
        except Exception as exc:  # any build failure (a ValueError of JobSpec, mostly)
            return _unbuildable(job, exc), None
        if pvc is not None:
            client.create_if_absent(pvc)
        # A job created before (admitted or preempted now) is read, not created again: a
        # create of an existing object is refused (409) and then read anyway.
        obj = (client.read(api_version, kind, job.k8s_name, job.pool.namespace)
               if job.in_cluster else None)
        created = False
        if obj is None:
            obj, created = client.create_if_absent(workload)
        if manifests.workload_suspended(spec.kind, obj) != spec.suspend:
            # Un-suspending also refreshes the pod templates (TRAINYARD_RESUME, the restart
            # count), so a preempted job resumes from its checkpoint.
            patch = (manifests.workload_suspend_patch(spec.kind, True) if spec.suspend
                     else manifests.workload_resume_patch(spec, obj))
            client.patch(api_version, kind, spec.name, patch, job.pool.namespace)
        TrainingJob.objects.filter(pk=job.pk).update(in_cluster=True,
                                                     cluster_suspended=spec.suspend,
                                                     last_error="")
    except K8sError as exc:
        TrainingJob.objects.filter(pk=job.pk).update(last_error=str(exc)[:2000])
        if exc.namespace_missing and not job.in_cluster:
            return _pool_absent(job, exc), None
        if is_transient(exc):
            return "error", exc
        if _refused(exc) and not job.in_cluster:
            # The cluster will never take this job as it is (invalid, forbidden, over a
            # storage quota): fail it with the cluster's words rather than leave it queued
            # or admitted, holding quota, forever.
            services.job_transition(
                job_id=job.pk, from_states=[JobState.QUEUED, JobState.ADMITTED],
                to_state=JobState.FAILED, reason="Rejected", finished_at=timezone.now(),
                message=stored_text("jobs.transition.rejected", status=exc.status,
                                    reason=exc.reason, error=exc.message[:1000]))
            services.kick_admission()  # its quota is free again
            return "rejected", None
        return "error", None
    return ("created" if created else ("suspended" if spec.suspend else "running")), None


def _pool_absent(job: TrainingJob, exc: K8sError) -> str:
    """The job's namespace is not in the cluster (its pool is not set up yet, or was
    lost): an admitted job goes back to the queue with that reason rather than hold
    quota it cannot use, and its pool is asked to sync. Admission admits it again once
    the cluster shows the pool (``_decide_and_apply``), which creates it then."""
    pool_sync_request(pool=job.pool)
    if services.job_transition(
            job_id=job.pk, from_states=[JobState.ADMITTED], to_state=JobState.QUEUED,
            reason="PoolAbsent", admitted_at=None, borrowing=False, placement=[], switch="",
            message=stored_text("jobs.transition.pool_absent", namespace=job.pool.namespace,
                                error=exc.message[:500]),
            wait_reason=stored_text("jobs.wait.pool_absent", namespace=job.pool.namespace)):
        # No kick: the next pass (within seconds) comes after the pool's reconcile has
        # had its chance, rather than admitting it again into the same missing namespace.
        return "requeued: no namespace"
    return "waiting: no namespace"


def _unbuildable(job: TrainingJob, exc: Exception) -> str:
    """The job's spec or manifests cannot be built (submission checks the same code, so
    this is a job from before a rule or a policy changed): fail a job that is not running
    yet, with the reason on its page, and free its reservation; never an exception that
    leaves it admitted, holding quota, with no PyTorchJob."""
    error = (str(exc) or type(exc).__name__)[:1000]
    log.error("job %s cannot be built for the cluster: %s", job.pk, error, exc_info=exc)
    TrainingJob.objects.filter(pk=job.pk).update(last_error=error)
    text = stored_text("jobs.transition.unbuildable", error=error)
    if services.job_transition(job_id=job.pk, from_states=[JobState.QUEUED, JobState.ADMITTED],
                               to_state=JobState.FAILED, reason="Unbuildable",
                               finished_at=timezone.now(), message=text):
        services.kick_admission()  # its quota is free again
        services.job_notify_owner(job=job, text=text, email=True)
        return "unbuildable"
    return "error"  # running or preempting: its PyTorchJob exists; the error is on its page


def _refused(exc: K8sError) -> bool:
    """A refusal no retry changes: a bad request, forbidden, or an invalid object. Not
    a missing namespace (the pool is still being created) nor a conflict."""
    return not exc.transient and exc.status in (400, 403, 422)


def observe_jobs(now: dt.datetime) -> dict[str, int]:
    """Record what happened to jobs, from their PyTorchJobs as the ``k8s_watch`` reflector
    last recorded them (``k8s_sync.selectors.workload_statuses``: one query, no API call).

    Each change is dated by the cluster's clock, not by this pass (:func:`_cluster_times`),
    so a slow or stopped loop bills the same: a job seen running is running from its
    ``Running`` condition's time; one seen finished ends at its ``Succeeded``/``Failed``
    condition's time, and one that ran and finished between two passes gets both
    transitions. A PyTorchJob not recorded (yet) moves nothing, as one missing from a
    list did."""
    counts = {"running": 0, "succeeded": 0, "failed": 0, "requeued": 0}
    active = list(TrainingJob.objects.filter(state__in=[
        JobState.ADMITTED, JobState.RUNNING, JobState.PREEMPTING]).select_related(
        "pool__tenant").only("id", "state", "kind", "k8s_name", "preempt_deadline",
                             "restart_count",
                             "in_cluster", "admitted_at", "pool__kind", "pool__tenant__slug"))
    # the recorded workloads of these jobs only, not of every job that ever ran
    objs = {kind: workload_statuses(*types, keys=[(j.pool.namespace, j.k8s_name)
                                                  for j in active if j.kind == kind])
            for kind, types in WORKLOAD_KINDS.items()}
    # What each job's recorded workload says, then every move of the pass in one
    # transaction, by kind of move (services.job_transitions: conditional, one
    # JobTransition each); a job that ran and finished between two passes is moved
    # twice, running first.
    running: list[services.Move] = []
    finished: dict[str, list[tuple[TrainingJob, dt.datetime | None, dt.datetime, str]]] = {
        "Succeeded": [], "Failed": []}
    requeued: list[services.Move] = []
    for job in active:
        obj = objs[job.kind].get((job.pool.namespace, job.k8s_name))
        if obj is None:
            continue
        conditions = obj.true_conditions()
        active_pods = obj.active
        finish = ("Succeeded" if "Succeeded" in conditions
                  else "Failed" if "Failed" in conditions else "")
        if finish and job.state != JobState.PREEMPTING:
            started, ended = _cluster_times(job, obj, finish, now)
            if job.state == JobState.ADMITTED and started is not None:
                # it ran and finished between two passes: its run is billed all the same
                running.append(services.Move(job.pk, fields={"placement": []}, at=started))
            finished[finish].append((job, started, ended,
                                     conditions[finish].get("message", "")))
        elif job.state == JobState.ADMITTED and "Running" in conditions:
            started, _ended = _cluster_times(job, obj, "", now)
            running.append(services.Move(job.pk, fields={"placement": []},
                                         at=started or now))
        elif job.state == JobState.PREEMPTING and (
                (active_pods == 0 and not _pods_remain(job))
                or (job.preempt_deadline
                    and now >= job.preempt_deadline + health.PREEMPT_RELEASE_AFTER)):
            requeued.append(services.Move(job.pk, fields={
                "restart_count": job.restart_count + 1},
                message=stored_text("jobs.transition.requeued")))
    with transaction.atomic():
        counts["running"] = len(services.job_transitions(
            moves=running, from_states=[JobState.ADMITTED], to_state=JobState.RUNNING,
            reason="Running", stamp=["started_at"]))
        ran = [job.pk for done in finished.values() for job, started, _, _ in done
               if started is not None]
        recorded = dict(JobTransition.objects.filter(
            job_id__in=ran, to_state=JobState.RUNNING).values("job_id").annotate(
            last=Max("at")).values_list("job_id", "last")) if ran else {}
        for finish, done in finished.items():
            moves = []
            for job, started, ended, message in done:
                if started is not None and ended >= started and job.pk in recorded:
                    # the run lasts as long as the cluster says, from its recorded start
                    # (the same time unless the cluster's clock is off Trainyard's)
                    ended = recorded[job.pk] + (ended - started)
                moves.append(services.Move(job.pk, message=message, at=ended))
            counts[finish.lower()] = len(services.job_transitions(
                moves=moves, from_states=[JobState.ADMITTED, JobState.RUNNING],
                to_state=JobState(finish.lower()), reason=finish, stamp=["finished_at"]))
        counts["requeued"] = len(services.job_transitions(
            moves=requeued, from_states=[JobState.PREEMPTING], to_state=JobState.QUEUED,
            reason="Requeued", preempt_deadline=None,
            started_at=None, admitted_at=None, borrowing=False, placement=[]))
    return counts


def _cluster_times(job: TrainingJob, obj: WorkloadStatus, finished: str, now: dt.datetime
                   ) -> tuple[dt.datetime | None, dt.datetime]:
    """(when the job's last run started, when it finished) by the cluster's clock.

    The start is the ``Running`` condition's ``lastTransitionTime``
    (:meth:`~k8s_sync.selectors.WorkloadStatus.running_since`), else the earliest
    container start of its observed pods; None when neither shows it ran. The end (for
    ``finished``, "Succeeded" or "Failed") is that condition's time, else the latest
    container end, else ``now``. ``services.job_transition`` keeps both between the
    job's previous transition and now."""
    started = obj.running_since()
    pod_start: dt.datetime | None = None
    pod_end: dt.datetime | None = None
    if started is None or (finished and obj.condition_time(finished) is None):
        pod_start, pod_end = pod_run_times(job.pool.namespace, str(job.pk))
    started = started or pod_start
    ended = (obj.condition_time(finished) or pod_end or now) if finished else now
    return started, ended


def enforce_pod_start(now: dt.datetime) -> dict[str, int]:
    """No job holds quota without pods: an admitted job whose pods have not all started
    within ``Policy.pod_start_deadline_seconds`` of its admission goes back to the queue
    (its PyTorchJob suspended, its GPUs free for this pass) with the cluster's reason on
    its page and in a notification, or fails after ``Policy.pod_start_attempts`` such
    admissions (see :mod:`jobs.podstart`)."""
    policy = Policy.current()
    deadline = int(policy.pod_start_deadline_seconds or 0)
    attempts = max(1, int(policy.pod_start_attempts or 1))
    counts = {"start_requeued": 0, "start_failed": 0}
    if deadline <= 0:
        return counts
    stuck = TrainingJob.objects.filter(
        state=JobState.ADMITTED, admitted_at__lte=now - dt.timedelta(seconds=deadline)
    ).select_related("tenant", "pool", "submitted_by")
    for job in stuck:
        returns = job.transitions.filter(reason="NotStarted", to_state=JobState.QUEUED).count()
        decision = podstart.verdict(admitted_at=job.admitted_at, now=now,
                                    deadline_seconds=deadline, returns=returns,
                                    attempts=attempts)
        if decision == "wait":
            continue
        pods, events = selectors.start_observations(job)
        why = podstart.cause(pods=pods, events=events, image=job.image,
                             in_cluster=job.in_cluster, last_error=job.last_error)
        minutes = max(1, round(deadline / 60))
        if decision == "requeue":
            text = stored_text("jobs.transition.start_requeued", minutes=minutes, cause=why,
                               n=returns + 1, max=attempts)
            moved = services.job_transition(
                job_id=job.pk, from_states=[JobState.ADMITTED], to_state=JobState.QUEUED,
                reason="NotStarted", message=text, at=now, admitted_at=None, borrowing=False,
                placement=[], switch="")
        else:
            text = stored_text("jobs.transition.start_failed", minutes=minutes, cause=why,
                               max=attempts)
            moved = services.job_transition(
                job_id=job.pk, from_states=[JobState.ADMITTED], to_state=JobState.FAILED,
                reason="NotStarted", message=text, at=now, finished_at=now, placement=[])
        if not moved:
            continue
        log.warning("job %s: pods not started within %ss (%s): %s", job.pk, deadline,
                    decision, why)
        counts["start_requeued" if decision == "requeue" else "start_failed"] += 1
        services.schedule_sync(job.pk)  # suspend its PyTorchJob: the pending pods go
        services.job_notify_owner(job=job, text=text, email=decision == "fail")
    return counts


def _pods_remain(job: TrainingJob) -> bool:
    """Whether any pod of the job is still observed, terminating ones included: until
    they are gone their GPUs are held, so the job is not back in the queue yet."""
    return ObservedPod.objects.filter(job=str(job.pk)).exclude(
        phase__in=["Succeeded", "Failed"]).filter(namespace=job.pool.namespace).exists()


@shared_task(name="jobs.admission_cycle", queue="default")
def admission_cycle() -> dict[str, Any]:
    """One admission pass (see the module docstring). Returns counts of what it did."""
    if (backend := get_backend()).name != "trainyard":
        return backend.cycle()  # jobs.backends: Kueue admits
    if not cache.add(CYCLE_LOCK, "1", timeout=120):
        return {"skipped": "another cycle is running"}
    started = time.monotonic()
    try:
        now = timezone.now()
        observed = observe_jobs(now)  # the recorded PyTorchJobs: no API call to fail
        observed.update(enforce_pod_start(now))
        # Decide on what the database holds, outside any transaction (on SQLite a write
        # transaction would stop submissions and the watcher for the whole pass); then
        # apply in one short transaction, only if no other pass applied meanwhile (the
        # pass token: the last pass's time). Only passes admit, so the quota a pass saw
        # free is still free unless another pass used it; then this one applies nothing.
        state = AdmissionState.objects.get_or_create(pk=1)[0]
        seen = state.last_cycle_at
        # Explain the queue (positions, ETAs, reasons) only every few seconds: the
        # decisions are the same either way (jobs.admission.cadence).
        explain = explain_due(now, state.explained_at, state.explain_ms,
                              settings.TRAINYARD_EXPLAIN_SECONDS)
        inputs = selectors.admission_inputs(now)
        decisions, waiting_for_pool = _decide(now, explain=explain, inputs=inputs)
        with transaction.atomic():
            if not AdmissionState.objects.filter(pk=1, last_cycle_at=seen).update(
                    last_cycle_at=now):
                return {"skipped": "another cycle applied first", **observed}
            result = _apply(decisions, waiting_for_pool, now, explained=explain)
            if explain:   # GPU-seconds idle while work that fits waits (jobs.idle_waiting)
                idle_waiting.record_pass(
                    nodes=inputs["nodes"], jobs=inputs["jobs"], decisions=decisions,
                    skip=waiting_for_pool, now=now, previous=state.explained_at,
                    default_seconds=settings.TRAINYARD_EXPLAIN_SECONDS)
            elapsed_ms = (time.monotonic() - started) * 1000
            AdmissionState.objects.filter(pk=1).update(
                last_cycle_ms=elapsed_ms, last_decisions={**result, **observed},
                **({"explained_at": now, "explain_ms": elapsed_ms} if explain else {}))
        return {**result, **observed}
    finally:
        cache.delete(CYCLE_LOCK)


def _decide_and_apply(now: dt.datetime) -> dict[str, Any]:
    """Decide and apply at once (the caller holds the pass: see :func:`admission_cycle`)."""
    return _apply(*_decide(now), now)


def _decide(now: dt.datetime, *, explain: bool = True, inputs: dict | None = None,
            ) -> tuple[Any, dict[int, Pool]]:
    """The engine's decisions on the jobs as stored now (reads only); with ``explain``,
    every waiting job's position, ETA and reason too. ``inputs``: the engine's inputs
    already read (``selectors.admission_inputs(now)``)."""
    # A job whose pool the cluster does not show waits, held out of this pass, with that
    # reason; its pool is asked to sync again.
    return selectors.decide_with_pools_absent(
        inputs if inputs is not None else selectors.admission_inputs(now),
        incremental=settings.TRAINYARD_INCREMENTAL_ADMISSION, explain=explain)


def _apply(decisions: Any, waiting_for_pool: dict[int, Pool], now: dt.datetime, *,
           explained: bool = True) -> dict[str, Any]:
    """Carry out a pass's decisions (inside the pass's transaction); ``explained``: the
    decisions carry the waiting jobs' positions, ETAs and reasons, which are stored."""
    for pool in {p.pk: p for p in waiting_for_pool.values()}.values():
        _request_pool_sync(pool)
    levels = topology_levels() if decisions.admit else ()
    switches = _switches_of([a.placement for a in decisions.admit], levels)
    borrowing = stored_text("jobs.transition.borrowing")
    # Every decision of the pass in one transaction (the caller's), by a fixed number of
    # statements; each is still conditional (services.job_transitions), so a job another
    # pass moved first is left alone, and a decision is never applied twice.
    admitted = services.job_transitions(
        moves=[services.Move(a.job_id, fields={
            "borrowing": a.borrowing, "loan_id": a.loan, "placement": list(a.placement),
            "switch": switches[i]}, message=borrowing if a.borrowing else "")
            for i, a in enumerate(decisions.admit)],
        from_states=[JobState.QUEUED], to_state=JobState.ADMITTED, reason="Admitted",
        admitted_at=now, wait_reason="", position_in_pool=None, position_in_model=None,
        eta_p50=None, eta_p90=None)
    deadlines = {p.job_id: now + dt.timedelta(seconds=p.grace_seconds)
                 for p in decisions.preempt}
    preempted = services.job_transitions(
        moves=[services.Move(p.job_id, fields={
            "preempt_reason": p.reason, "preempt_deadline": deadlines[p.job_id]},
            message=p.reason) for p in decisions.preempt],
        from_states=[JobState.RUNNING, JobState.ADMITTED], to_state=JobState.PREEMPTING,
        reason="Preempted")
    services.schedule_syncs([*admitted, *preempted])
    if explained:
        services.record_waiting(decisions.waiting)
    return {"admitted": len(admitted), "preempted": len(preempted),
            "waiting": len(decisions.waiting) if explained else None}


POOL_SYNC_EVERY = 30  # seconds between two reconciles a waiting job asks of one pool


def _request_pool_sync(pool: Pool) -> None:
    """Ask for a reconcile of a pool jobs wait for, at most every ``POOL_SYNC_EVERY``
    seconds (its reconcile retries transient errors with backoff by itself)."""
    if cache.add(f"jobs:pool-sync:{pool.pk}", "1", timeout=POOL_SYNC_EVERY):
        pool_sync_request(pool=pool)


def _switches_of(placements: list[tuple[str, ...]], levels: tuple[str, ...]) -> list[str]:
    """The one switch (value of the last topology level) of each multi-node placement
    ("" for one node or several switches); the nodes' labels in one query."""
    wanted = {n for placement in placements if len(set(placement)) > 1 for n in placement}
    labels = dict(ObservedNode.objects.filter(name__in=wanted).values_list(
        "name", "labels")) if wanted else {}
    found = []
    for placement in placements:
        switches = ({switch_of(labels[n], levels) for n in set(placement) if n in labels}
                    if len(set(placement)) > 1 else set())
        found.append(switches.pop() if len(switches) == 1 else "")
    return found


@shared_task(name="jobs.apply_maintenance_windows", queue="default", bind=True,
             max_retries=MAX_RETRIES)
def apply_maintenance_windows(self) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Open every maintenance window whose start has come (preempt the jobs its plan
    moves), keep the nodes of open windows cordoned, and uncordon the nodes of windows
    that ended or were cancelled. Level-triggered and idempotent: a second run writes
    nothing; a transient API error retries the whole pass."""
    now = timezone.now()
    due = MaintenanceWindow.objects.filter(status=MaintenanceWindow.Status.SCHEDULED,
                                           starts_at__lte=now)
    moved = sum(services.window_apply(window_id=w.pk, now=now) for w in due)
    try:
        cordoned = _hold_window_nodes(now)
        released = _release_windows(now)
    except K8sError as exc:
        log.warning("maintenance windows: %s", exc)
        if is_transient(exc) and self.request.retries < MAX_RETRIES:
            raise self.retry(exc=exc, countdown=_backoff(self.request.retries)) from exc
        raise
    return {"moved": moved, "cordoned": cordoned, "released": released}


def _hold_window_nodes(now: dt.datetime) -> int:
    """Cordon what open windows free. A node already cordoned by someone else is
    remembered as such and left alone (at the end it stays cordoned); a node the window
    cordoned and someone uncordoned is cordoned again. Returns nodes patched."""
    windows = list(selectors.open_windows(now))
    if not windows:
        return 0
    client = get_client()
    nodes = {n["metadata"]["name"]: n for n in client.list_objects("v1", "Node")}
    patched = 0
    for window in windows:
        applied = (window.plan or {}).get("applied") or {}
        ours, before = set(window.nodes or []), set(applied.get("already_cordoned") or [])
        fresh: list[str] = []
        found: list[str] = []
        for name in applied.get("nodes") or []:
            node = nodes.get(name)
            if node is None or name in before:
                continue
            if name not in ours:
                (found if is_cordoned(node) else fresh).append(name)
        if (fresh or found) and not services.window_nodes_hold(
                window_id=window.pk, cordoned=fresh, already=found):
            continue  # cancelled or released meanwhile
        taint = maintenance_taint(window.pk)
        for name in sorted(ours | set(fresh)):
            if name in nodes and cordon_patch(nodes[name], unschedulable=True,
                                              taint=taint) is not None:
                client.set_node_unschedulable(name, True, taint=taint)
                patched += 1
        if fresh:  # cancelled and released while we cordoned: give them back now
            window.refresh_from_db()
            if window.released_at is not None or window.status != window.Status.APPLIED:
                for name in fresh:
                    client.set_node_unschedulable(name, False, taint=taint)
                services.window_released(window_id=window.pk)
    return patched


def _release_windows(now: dt.datetime) -> int:
    windows = list(selectors.windows_to_release(now))
    if not windows:
        return 0
    client = get_client()
    return sum(_release(client, window.pk) for window in windows)


def _release(client: Any, window_id: int) -> int:
    """Uncordon exactly the nodes the window cordoned (a node another open window also
    holds only loses this window's taint), then stamp the window released."""
    window = MaintenanceWindow.objects.get(pk=window_id)
    others = set()
    for nodes in selectors.open_windows(timezone.now()).exclude(pk=window_id).values_list(
            "nodes", flat=True):
        others |= set(nodes or [])
    for name in window.nodes or []:
        client.set_node_unschedulable(name, False, taint=maintenance_taint(window_id),
                                      keep_unschedulable=name in others)
    return int(services.window_released(window_id=window_id))
