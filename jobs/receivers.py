"""The jobs app's answer to ``k8s_sync.signals.observed_changed``: an admission pass
soon after the watcher records a change a job waits for (the admission service is
nudged at once, ``jobs.enqueue.nudge``; a Celery cycle is enqueued, debounced).

A PyTorchJob's conditions (running, succeeded, failed) and the pods of tenant namespaces
(a preempted job's pods gone, capacity freed) are what move jobs, and the admission loop
reads them from the observed rows. Without this, a change would wait for the next beat
(5 s). The receiver runs inside the watcher's thread, right after the commit of what it
recorded, so it only enqueues, and at most once per :data:`KICK_DEBOUNCE_SECONDS`
cluster-wide (a cache key; the cache is shared by the watcher and the workers). The
cycle runs that long after the first change, so every change of the window is committed
before it reads. A cycle that finds another one running skips, and then the beat (every
5 s) is the safety net, as it is for a lost message.

Nothing is enqueued when Celery runs tasks eagerly (the tests, the benchmarks): there is
no worker then, and a whole admission cycle would run inside the observer's commit.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.dispatch import receiver

from jobs import enqueue
from k8s_sync.naming import NAMESPACE_PREFIX
from k8s_sync.signals import observed_changed

log = logging.getLogger(__name__)

KICK_KEY = "jobs:admission-kick"
KICK_DEBOUNCE_SECONDS = 1  # whole seconds: Redis cache timeouts are integers


def _concerns_jobs(kind: str, keys: list[str]) -> bool:
    """A change the admission loop acts on: a managed PyTorchJob or TrainJob, a Kueue
    Workload of a Trainyard job (the watcher records only those), or a pod in a tenant
    namespace (``ty-...``)."""
    if kind in ("pytorchjobs", "trainjobs", "kueueworkloads"):
        return bool(keys)
    if kind == "pods":
        return any(key.startswith(NAMESPACE_PREFIX) for key in keys)
    return False


@receiver(observed_changed, dispatch_uid="jobs.admission_on_observed_change")
def admission_on_observed_change(sender: Any, kind: str = "", keys: list[str] | None = None,
                                 **kwargs: Any) -> bool:
    """Enqueue one admission cycle (debounced) when jobs' PyTorchJobs or pods changed;
    returns whether it enqueued. Never raises (the observer must keep observing)."""
    if not _concerns_jobs(kind, list(keys or [])):
        return False
    enqueue.nudge()  # the admission service, when one runs, passes at once
    if getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False):
        return False
    try:
        if not cache.add(KICK_KEY, "1", timeout=KICK_DEBOUNCE_SECONDS):
            return False  # a cycle is already due within the window
        # expires, as the beat's entry: a backlog never runs stale copies
        enqueue.send(enqueue.ADMISSION_CYCLE, countdown=KICK_DEBOUNCE_SECONDS,
                     expires=KICK_DEBOUNCE_SECONDS + 8)
        return True
    except Exception:  # a broker or cache outage: the beat's next cycle covers it
        log.warning("cannot enqueue an admission cycle after observing %s", kind,
                    exc_info=True)
        return False
