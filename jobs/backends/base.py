"""What every admission backend shares: the cycle's bookkeeping, and submit.

:class:`BaseBackend` owns what a pass does the same way whichever backend decides:

* the cycle lock (:data:`CYCLE_LOCK` in the cache): one pass at a time per cache, a
  pass that finds one running skips;
* the pass token: ``AdmissionState.last_cycle_at``, read before deciding
  (:meth:`BaseBackend.pass_state`) and moved by a conditional update when applying
  (:meth:`BaseBackend.take_pass`), so passes apply one at a time cluster-wide and a
  decision is never applied twice;
* timing and what the pass did (``last_cycle_ms``, ``last_decisions``, ``explained_at``,
  ``explain_ms``: :meth:`BaseBackend.record_pass`), and when a pass explains the queue
  (:meth:`BaseBackend.explain_due`, ``jobs.admission.cadence``);
* submit: the job's workload, suspended, then a pass (both enqueued after the commit).

A subclass implements what differs: :meth:`~BaseBackend.run_pass` (observe, decide and
apply, or read the admitter's decisions), :meth:`~BaseBackend.sync_job` (converge one
job), :meth:`~BaseBackend.preempt`, and optionally :meth:`~BaseBackend.sync_many` and
:meth:`~BaseBackend.sync_queues`.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from jobs import enqueue
from jobs.admission.cadence import explain_due
from jobs.models import AdmissionState

CYCLE_LOCK = "jobs:admission-cycle"
CYCLE_LOCK_SECONDS = 120  # a pass that died holding the lock frees it after this
MAX_RETRIES = 8  # of a job's sync after a transient API error, with backoff


class BaseBackend:
    """An admission backend (``jobs.backends.get_backend``); see the module docstring."""

    name = ""

    # -- what differs ----------------------------------------------------------------------

    def run_pass(self, now: dt.datetime, started: float) -> dict[str, Any]:
        """One pass's work, under the cycle lock (``started``: ``time.monotonic()`` when
        the pass began). Returns counts of what it did."""
        raise NotImplementedError

    def sync_job(self, task: Any, job_id: int) -> str:
        """Make the cluster match one job (``task``: the bound Celery task, for retries)."""
        raise NotImplementedError

    def preempt(self, *, job_id: int, reason: Any, actor: Any = None) -> bool:
        """Preempt a running or admitted job on an admin's request: it stops after its
        tier's grace (its checkpoint) and goes back to the queue. True when it moved."""
        raise NotImplementedError

    def sync_many(self, job_ids: list[int]) -> dict[str, int]:
        """Converge many jobs (``jobs.sync_jobs``): by default each in its own
        ``jobs.sync_job`` task, through :meth:`sync_job`."""
        for job_id in job_ids:
            enqueue.send(enqueue.SYNC_JOB, job_id)
        return {"queued": len(job_ids)}

    def sync_queues(self) -> None:
        """Write the admitter's own objects from the quotas (Kueue's queues); nothing
        for an admitter that reads the quotas directly."""
        return None

    # -- what is shared --------------------------------------------------------------------

    def submit(self, job_id: int) -> None:
        """A job row was created (in the caller's transaction): its workload, suspended,
        and an admission pass, once the transaction commits."""
        enqueue.schedule_sync(job_id)
        enqueue.kick_admission()

    def cycle(self) -> dict[str, Any]:
        """One admission pass under the cycle lock: what the cluster reports moves jobs;
        admissions and preemptions are made or read; every waiting job's position,
        estimated start and reason are recorded. Returns counts."""
        if self.service_decides(timezone.now()):
            return {"skipped": "the admission service decides"}
        if not cache.add(CYCLE_LOCK, "1", timeout=CYCLE_LOCK_SECONDS):
            return {"skipped": "another cycle is running"}
        started = time.monotonic()
        try:
            return self.run_pass(timezone.now(), started)
        finally:
            cache.delete(CYCLE_LOCK)

    def service_decides(self, now: dt.datetime) -> bool:
        """Whether a long-running process decides for this backend now (then the Celery
        pass does nothing); none by default."""
        return False

    @staticmethod
    def pass_state() -> AdmissionState:
        """The pass token's row as this pass reads it, before it decides."""
        return AdmissionState.objects.get_or_create(pk=1)[0]

    @staticmethod
    def explain_due(now: dt.datetime, state: AdmissionState) -> bool:
        """Whether this pass explains the queue (positions, ETAs, reasons): only every
        ``TRAINYARD_EXPLAIN_SECONDS`` or so; the decisions are the same either way."""
        return explain_due(now, state.explained_at, state.explain_ms,
                           settings.TRAINYARD_EXPLAIN_SECONDS)

    @staticmethod
    def take_pass(seen: dt.datetime | None, now: dt.datetime) -> bool:
        """Take the pass token (inside the pass's transaction): True when no other pass
        applied since this one read ``seen``; then this pass applies, else nothing."""
        return bool(AdmissionState.objects.filter(pk=1, last_cycle_at=seen).update(
            last_cycle_at=now))

    @staticmethod
    def record_pass(started: float, decisions: dict[str, Any], *,
                    explained_at: dt.datetime | None = None,
                    at: dt.datetime | None = None) -> None:
        """Record the pass's time and what it did (inside its transaction);
        ``explained_at``: it explained the queue then; ``at``: a pass that takes no
        token (it applies nothing of its own) stamps its time, under the row's lock."""
        if at is not None:
            AdmissionState.objects.select_for_update().get_or_create(pk=1)
        elapsed_ms = (time.monotonic() - started) * 1000
        fields: dict[str, Any] = {"last_cycle_ms": elapsed_ms, "last_decisions": decisions}
        if at is not None:
            fields["last_cycle_at"] = at
        if explained_at is not None:
            fields.update(explained_at=explained_at, explain_ms=elapsed_ms)
        AdmissionState.objects.filter(pk=1).update(**fields)
