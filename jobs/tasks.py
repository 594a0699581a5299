"""The jobs app's Celery tasks: thin wrappers, by stable names, over the job-lifecycle core.

* ``jobs.admission_cycle``: one admission pass of the backend in force
  (``jobs.backends``: :meth:`~jobs.backends.base.BaseBackend.cycle`). Runs on every submit,
  cancel and finish, when the watcher records a change of a PyTorchJob or of a pod in a
  tenant namespace (``jobs/receivers.py``), and every few seconds from beat.
* ``jobs.sync_job(job_id)``: make the cluster match one job (the backend's
  ``sync_job``: ``jobs.converge.sync_one`` for the trainyard engine), retried with backoff
  after a transient API error.
* ``jobs.sync_jobs(job_ids)``: the same for a pass's admissions and preemptions, in a
  bounded pool of threads (``TRAINYARD_SYNC_CONCURRENCY``; ``jobs.converge.sync_many``).
* ``jobs.apply_maintenance_windows``: open due maintenance windows, cordon and release
  their nodes (``jobs.windows``).
* ``jobs.read_progress``: the running jobs' own progress reports (``jobs.progress``), from
  beat every minute.

Nothing outside calls these functions to enqueue them: ``jobs.enqueue`` does, by name.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.utils import timezone

from jobs import progress, window_kueue, windows
from jobs.backends import get_backend
from jobs.backends.base import MAX_RETRIES
from k8s_sync.client import K8sError, get_client, is_transient
from tenants.tasks import backoff_seconds

log = logging.getLogger(__name__)


@shared_task(name="jobs.sync_job", queue="k8s", bind=True, max_retries=MAX_RETRIES)
def sync_job(self, job_id: int) -> str:  # type: ignore[no-untyped-def]
    """Converge one job's PyTorchJob or TrainJob (and checkpoint volume) with its row.
    Idempotent. A transient API error retries with backoff, :data:`MAX_RETRIES` times."""
    return get_backend().sync_job(self, job_id)


@shared_task(name="jobs.sync_jobs", queue="k8s")
def sync_jobs(job_ids: list[int]) -> dict[str, int]:
    """Converge many jobs (a pass's admissions and preemptions, ``enqueue.schedule_syncs``)
    as :func:`sync_job` does each (``jobs.converge.sync_many`` for the trainyard engine; one
    ``jobs.sync_job`` task each otherwise)."""
    return get_backend().sync_many(list(dict.fromkeys(int(i) for i in job_ids)))


@shared_task(name="jobs.admission_cycle", queue="default")
def admission_cycle() -> dict[str, Any]:
    """One admission pass (see the module docstring). Returns counts of what it did."""
    return get_backend().cycle()


@shared_task(name="jobs.apply_maintenance_windows", queue="default", bind=True,
             max_retries=MAX_RETRIES)
def apply_maintenance_windows(self) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Open every maintenance window whose start has come (preempt the jobs its plan
    moves), keep the nodes of open windows cordoned, and uncordon the nodes of windows
    that ended or were cancelled. Level-triggered and idempotent: a second run writes
    nothing; a transient API error retries the whole pass."""
    now = timezone.now()
    moved = windows.open_due(now)
    try:
        cordoned = windows.hold_window_nodes(now)
        released = windows.release_windows(now)
        window_kueue.hold_in_kueue(get_client(), now)  # Kueue mode: the targets' holds
    except K8sError as exc:
        log.warning("maintenance windows: %s", exc)
        if is_transient(exc) and self.request.retries < MAX_RETRIES:
            raise self.retry(exc=exc, countdown=backoff_seconds(self.request.retries)) from exc
        raise
    return {"moved": moved, "cordoned": cordoned, "released": released}


@shared_task(name="jobs.read_progress", queue="k8s")
def read_progress() -> dict[str, int]:
    """Read and store the running jobs' progress reports (``jobs.progress.read_progress``:
    TrainJobs' recorded ``trainerStatus``, else the rank-0 pod's last progress line)."""
    return progress.read_progress(timezone.now())
