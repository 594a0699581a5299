"""The admission backend: who decides when a job runs, chosen by configuration.

``TRAINYARD_ADMISSION_BACKEND`` (``portal/settings.py``) names it:

* ``trainyard`` (the default, what ``make run`` uses): Trainyard's own engine
  (``jobs.admission``), its loop and ``sync_job`` in ``jobs.tasks``
  (:mod:`jobs.backends.trainyard` delegates to them unchanged);
* ``kueue``: Kueue admits (:mod:`jobs.backends.kueue`). Trainyard writes Kueue's queues
  from its quotas (``tenants.tasks.reconcile_kueue``), creates each job suspended with
  Kueue's queue and priority labels, and reads Kueue's decisions back into the same job
  states, transitions, positions, ETAs and reasons.

The rest of Trainyard does not know which is on: services call :func:`get_backend` for
the few verbs that differ (:class:`AdmissionBackend`), and ``jobs.tasks.admission_cycle``
and ``jobs.tasks.sync_job`` hand over to it at their top.
"""

from __future__ import annotations

from typing import Any, Protocol

from django.conf import settings

__all__ = ["AdmissionBackend", "backend_name", "get_backend"]


class AdmissionBackend(Protocol):
    """The verbs an admission backend answers."""

    name: str

    def submit(self, job_id: int) -> None:
        """A job row was created (in the caller's transaction): put it before the
        admitter once the transaction commits."""

    def cycle(self) -> dict[str, Any]:
        """One admission pass: what the cluster reports moves jobs; admissions and
        preemptions are made (trainyard) or read (kueue); every waiting job's position,
        estimated start and reason are recorded. Returns counts."""

    def sync_job(self, task: Any, job_id: int) -> str:
        """Make the cluster match one job (``task``: the bound Celery task, for retries)."""

    def preempt(self, *, job_id: int, reason: Any, actor: Any = None) -> bool:
        """Preempt a running or admitted job on an admin's request: it stops after its
        tier's grace (its checkpoint) and goes back to the queue. True when it moved."""

    def sync_queues(self) -> None:
        """Write the admitter's own objects from the quotas (Kueue's queues); nothing
        for the trainyard engine, which reads the quotas directly."""


def backend_name() -> str:
    return str(getattr(settings, "TRAINYARD_ADMISSION_BACKEND", "trainyard") or "trainyard")


def get_backend() -> AdmissionBackend:
    """The backend in force (read each call: tests switch the setting)."""
    if backend_name() == "kueue":
        from jobs.backends.kueue import KueueBackend
        return KueueBackend()
    from jobs.backends.trainyard import TrainyardBackend
    return TrainyardBackend()
