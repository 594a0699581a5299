"""Converge jobs to the cluster: make each job's PyTorchJob or TrainJob match its row.

* :func:`sync_one`: one job: its PyTorchJob exists (suspended unless admitted or
  running); a cancelled job's is deleted; a job failed before its pods started is
  suspended. Returns (result, a transient API error to retry, else None): the caller
  (``jobs.backends.trainyard``, for the ``jobs.sync_job`` task) retries with backoff.
* :func:`sync_many`: a pass's admissions and preemptions (``jobs.sync_jobs``), in a
  bounded pool of threads (``TRAINYARD_SYNC_CONCURRENCY``); a job that failed
  transiently gets its own ``jobs.sync_job`` task, enqueued by name.
* What the cluster refuses for good fails the job (:func:`refused`, :func:`unbuildable`);
  a missing namespace sends an admitted job back to the queue (:func:`pool_absent`).

Plain functions: they enqueue through ``jobs.enqueue`` and write through
``jobs.transitions``, and import no task and no backend.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone

from core.db import update_rows
from core.texts import message as stored_text
from jobs import enqueue, selectors, submitcache, transitions
from jobs.choices import JobState
from jobs.models import TrainingJob
from k8s_sync import manifests, tier_runtime
from k8s_sync.client import K8sError, K8sNotFoundError, get_client, is_transient
from k8s_sync.specs import JOB_KIND_TRAINJOB, WORKLOAD_KINDS, JobSpec
from tenants.services import pool_sync_request
from tenants.tasks import backoff_seconds

log = logging.getLogger(__name__)


def sync_many(job_ids: list[int], *, ordered: bool = False) -> dict[str, int]:
    """Converge many jobs (a pass's admissions and preemptions, ``enqueue.schedule_syncs``) as
    :func:`sync_one` does each, at most ``settings.TRAINYARD_SYNC_CONCURRENCY`` at once,
    each in its own thread and database connection. A job whose call failed transiently gets
    its own ``jobs.sync_job`` with the usual backoff; one that still fails is left to the
    level-triggered paths (the next pass's sync of what it moves, the watchdog), as a lost
    task would be. Inside a transaction (the tests' eager tasks) the jobs run one by one in
    this thread, which alone sees that transaction's rows.

    ``ordered``: the caller runs its batches one after the other, in the order the jobs
    moved (the admission service's writer): each thread then reads its share's rows at
    once, and writes back what a patch changed at once, rather than a query or two per
    job (a job moved again after that read gets the next batch)."""
    ids = list(dict.fromkeys(int(i) for i in job_ids))
    workers = min(settings.TRAINYARD_SYNC_CONCURRENCY, len(ids))
    if workers <= 1 or connection.in_atomic_block:
        outcomes = [sync_one(job_id) for job_id in ids]
    else:
        # Each thread takes every workers-th job, on one database connection of its own
        # for its whole share (a connection per job cost more than the job's queries).
        shares = [ids[i::workers] for i in range(workers)]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sync-job") as pool:
            done: dict[int, tuple[str, K8sError | None]] = {}
            converged = pool.map(_sync_share, shares, [ordered] * len(shares))
            for share, results in zip(shares, converged, strict=True):
                done.update(zip(share, results, strict=True))
        outcomes = [done[job_id] for job_id in ids]
    counts: dict[str, int] = {}
    for job_id, (result, exc) in zip(ids, outcomes, strict=True):
        if exc is not None:
            result = "retrying"
            enqueue.send(enqueue.SYNC_JOB, job_id, countdown=backoff_seconds(0))
        counts[result] = counts.get(result, 0) + 1
    return counts


def _sync_share(job_ids: list[int], ordered: bool = False
                ) -> list[tuple[str, K8sError | None]]:
    try:
        # Each job read just before it is converged (not the share at once): a job the
        # loop moved meanwhile (admitted, then preempted) is never resumed from an old read,
        # unless the caller's batches are ordered. What rarely changes (the policy, who has
        # dedicated nodes) is read once a share.
        facts = submitcache.snapshot()
        if not ordered:
            return [sync_one(job_id, facts=facts) for job_id in job_ids]
        rows = {job.pk: job for job in TrainingJob.objects.select_related(
            "tenant", "pool").filter(pk__in=job_ids)}
        patched: list[tuple[int, bool, str]] = []
        results = [sync_one(job_id, facts=facts, job=rows.get(job_id), patched=patched)
                   for job_id in job_ids]
        update_rows(TrainingJob, ["cluster_suspended", "last_error"], patched)
        return results
    finally:
        connection.close()  # this thread's own connection


def sync_one(job_id: int, *, facts: submitcache.Snapshot | None = None,
             job: TrainingJob | Literal[False] | None = False,
             patched: list[tuple[int, bool, str]] | None = None
             ) -> tuple[str, K8sError | None]:
    """Converge one job's PyTorchJob or TrainJob (and checkpoint volume) with its row:
    (result, a transient error to retry, else None). Idempotent. ``facts``: the policy and
    the tenants with dedicated nodes as the caller read them (``jobs.submitcache``), else
    read here.

    A PyTorchJob created before is patched without being read first (the merge patch
    sets everything a suspend or a resume changes, whatever the object holds); one whose
    row says it is already as wanted is left alone. A TrainJob is read: its resume patch
    merges with the runtime patches it holds. ``job``: its row as the caller read it (None:
    gone); ``patched``: where the caller collects (id, suspended, "") to write back after a
    patch, instead of an UPDATE here."""
    if job is False:
        job = TrainingJob.objects.select_related("tenant", "pool").filter(pk=job_id).first()
    if job is None:
        return "gone", None
    facts = facts if facts is not None else submitcache.snapshot()
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
            spec = selectors.job_spec(job, policy=facts.policy,
                                      dedicated=job.tenant_id in facts.dedicated)
        except DatabaseError:
            raise
        except Exception as exc:  # any build failure (a ValueError of JobSpec, mostly)
            return unbuildable(job, exc), None
        if job.in_cluster and spec.kind != JOB_KIND_TRAINJOB:
            if job.cluster_suspended == spec.suspend:
                return "unchanged", None
            patch = (manifests.workload_suspend_patch(spec.kind, True) if spec.suspend
                     else manifests.workload_resume_patch(spec))
            try:
                client.patch(api_version, kind, spec.name, patch, job.pool.namespace)
            except K8sNotFoundError:
                pass  # gone from the cluster (deleted by hand): created again below
            else:
                if patched is not None:
                    patched.append((job.pk, spec.suspend, ""))
                else:
                    TrainingJob.objects.filter(pk=job.pk).update(
                        cluster_suspended=spec.suspend, last_error="")
                return ("suspended" if spec.suspend else "running"), None
        try:
            pvc = manifests.build_checkpoint_pvc(spec)
            workload = manifests.build_workload(spec)
        except DatabaseError:
            raise
        except Exception as exc:  # any build failure (a ValueError of JobSpec, mostly)
            return unbuildable(job, exc), None
        if pvc is not None:
            client.create_if_absent(pvc)
        if obj_absent_or_resumed(job, spec):
            ensure_tier_runtime(client, spec)
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
            return pool_absent(job, exc), None
        if is_transient(exc):
            return "error", exc
        if refused(exc) and not job.in_cluster:
            # The cluster will never take this job as it is (invalid, forbidden, over a
            # storage quota): fail it with the cluster's words rather than leave it queued
            # or admitted, holding quota, forever.
            transitions.job_transition(
                job_id=job.pk, from_states=[JobState.QUEUED, JobState.ADMITTED],
                to_state=JobState.FAILED, reason="Rejected", finished_at=timezone.now(),
                message=stored_text("jobs.transition.rejected", status=exc.status,
                                    reason=exc.reason, error=exc.message[:1000]))
            enqueue.kick_admission()  # its quota is free again
            return "rejected", None
        return "error", None
    return ("created" if created else ("suspended" if spec.suspend else "running")), None


def pool_absent(job: TrainingJob, exc: K8sError) -> str:
    """The job's namespace is not in the cluster (its pool is not set up yet, or was
    lost): an admitted job goes back to the queue with that reason rather than hold
    quota it cannot use, and its pool is asked to sync. Admission admits it again once
    the cluster shows the pool (``jobs.backends.trainyard``), which creates it then."""
    pool_sync_request(pool=job.pool)
    if transitions.job_transition(
            job_id=job.pk, from_states=[JobState.ADMITTED], to_state=JobState.QUEUED,
            reason="PoolAbsent", admitted_at=None, borrowing=False, placement=[], switch="",
            message=stored_text("jobs.transition.pool_absent", namespace=job.pool.namespace,
                                error=exc.message[:500]),
            wait_reason=stored_text("jobs.wait.pool_absent", namespace=job.pool.namespace)):
        # No kick: the next pass (within seconds) comes after the pool's reconcile has
        # had its chance, rather than admitting it again into the same missing namespace.
        return "requeued: no namespace"
    return "waiting: no namespace"


def unbuildable(job: TrainingJob, exc: Exception) -> str:
    """The job's spec or manifests cannot be built (submission checks the same code, so
    this is a job from before a rule or a policy changed): fail a job that is not running
    yet, with the reason on its page, and free its reservation; never an exception that
    leaves it admitted, holding quota, with no PyTorchJob."""
    error = (str(exc) or type(exc).__name__)[:1000]
    log.error("job %s cannot be built for the cluster: %s", job.pk, error, exc_info=exc)
    TrainingJob.objects.filter(pk=job.pk).update(last_error=error)
    text = stored_text("jobs.transition.unbuildable", error=error)
    if transitions.job_transition(
            job_id=job.pk, from_states=[JobState.QUEUED, JobState.ADMITTED],
            to_state=JobState.FAILED, reason="Unbuildable", finished_at=timezone.now(),
            message=text):
        enqueue.kick_admission()  # its quota is free again
        transitions.job_notify_owner(job=job, text=text, email=True)
        return "unbuildable"
    return "error"  # running or preempting: its PyTorchJob exists; the error is on its page


def refused(exc: K8sError) -> bool:
    """A refusal no retry changes: a bad request, forbidden, or an invalid object. Not
    a missing namespace (the pool is still being created) nor a conflict."""
    return not exc.transient and exc.status in (400, 403, 422)


def obj_absent_or_resumed(job: TrainingJob, spec: JobSpec) -> bool:
    """Whether this sync may create or un-suspend a TrainJob (its tier's runtime is then
    written first)."""
    return spec.kind == JOB_KIND_TRAINJOB and (not job.in_cluster or not spec.suspend)


def ensure_tier_runtime(client, spec: JobSpec) -> bool:  # type: ignore[no-untyped-def]
    """Write the tier's copy of a TrainJob's runtime (``k8s_sync.tier_runtime``) from the
    runtime as it is now, before the TrainJob that references it is created or resumed.
    A runtime the cluster lacks is left to Trainer (its TrainJob waits, with Trainer's
    event, as on a runtime of the original name). Idempotent (server-side apply)."""
    if spec.kind != JOB_KIND_TRAINJOB:
        return False
    api_version = manifests.TRAINJOB_API_VERSION
    base = client.read(api_version, manifests.TRAINING_RUNTIME_KIND, spec.runtime)
    if base is None or tier_runtime.is_tier_runtime(base):
        return False
    client.apply(tier_runtime.build_tier_runtime(base, spec.tier))
    return True
