"""Enqueue the jobs app's tasks by their stable names, once the current transaction commits.

The one door to the jobs app's Celery tasks for everything that is not a task itself
(services, the backends, converging and observing, the watchdog): each helper names the
task (``"jobs.sync_job"``, ``"jobs.sync_jobs"``, ``"jobs.admission_cycle"``,
``"jobs.apply_maintenance_windows"``) and imports no task module, so nothing the tasks
call imports them back. The task itself is looked up in the Celery app by name; its
module is imported at start-up (``jobs.apps``), so its queue and ``CELERY_TASK_ALWAYS_EAGER``
(the tests run it at once) hold as if it were called directly. The enqueues after a
commit are ``robust``: a broker outage loses the message, and the level-triggered paths
(the beat's passes, the watchdog) converge what it would have.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from celery import current_app
from django.core.cache import cache
from django.db import transaction

log = logging.getLogger(__name__)

SYNC_JOB = "jobs.sync_job"
SYNC_JOBS = "jobs.sync_jobs"
ADMISSION_CYCLE = "jobs.admission_cycle"
APPLY_MAINTENANCE_WINDOWS = "jobs.apply_maintenance_windows"

SYNC_BATCH = 200
"""Jobs per ``jobs.sync_jobs`` task."""


def send(name: str, *args: Any, **options: Any) -> None:
    """Enqueue the task ``name`` now with ``args`` (``options``: Celery's ``countdown``,
    ``expires``...), through the registered task's ``delay`` or ``apply_async`` as a
    direct call would."""
    task = current_app.tasks[name]
    if not options:
        task.delay(*args)
    elif args:
        task.apply_async(args=list(args), **options)
    else:
        task.apply_async(**options)


def on_commit(name: str, *args: Any) -> None:
    """Enqueue the task ``name`` with ``args`` once the current transaction commits
    (none for a rollback; at once outside a transaction)."""
    def enqueue() -> None:
        send(name, *args)
    transaction.on_commit(enqueue, robust=True)


NUDGE_KEY = "jobs:admission-nudge"
"""A cache key whose value changes whenever something a pass should see happened: the
admission service (``jobs.service``) looks at it every ``poll_seconds``."""


def nudge() -> None:
    """Tell the admission service to pass now (a new value under :data:`NUDGE_KEY`; the
    cache is shared by the processes: Redis, or the file cache of ``make run``). Never
    raises: without it the service passes on its journals and its idle period."""
    try:
        cache.set(NUDGE_KEY, time.time_ns(), timeout=3600)
    except Exception:  # a cache outage: the service still reads its journals
        log.warning("cannot nudge the admission service", exc_info=True)


def kick_admission() -> None:
    """An admission pass once the current transaction commits (none for a rollback): the
    admission service is nudged, and a Celery pass enqueued (which leaves the deciding to
    the service while one holds the lease: ``jobs.backends.base``)."""
    def kick() -> None:
        nudge()
        send(ADMISSION_CYCLE)
    transaction.on_commit(kick, robust=True)


def schedule_sync(job_id: int) -> None:
    """Converge the job's PyTorchJob once the current transaction commits."""
    on_commit(SYNC_JOB, job_id)


def schedule_syncs(job_ids: Iterable[int]) -> None:
    """Converge many jobs' PyTorchJobs once the current transaction commits: one
    ``jobs.sync_jobs`` task per :data:`SYNC_BATCH` jobs (their API calls run
    concurrently, ``jobs.converge.sync_many``) rather than a task per job."""
    ids = list(dict.fromkeys(job_ids))
    for start in range(0, len(ids), SYNC_BATCH):
        on_commit(SYNC_JOBS, ids[start:start + SYNC_BATCH])


def schedule_windows() -> None:
    """A maintenance-window pass (cordon, release) once the current transaction commits."""
    on_commit(APPLY_MAINTENANCE_WINDOWS)
