"""The admission backend: who decides when a job runs, chosen by configuration.

``TRAINYARD_ADMISSION_BACKEND`` (``portal/settings.py``) names it:

* ``trainyard`` (the default, what ``make run`` uses): Trainyard's own engine
  (``jobs.admission``), its pass and its sync (:mod:`jobs.backends.trainyard`);
* ``kueue``: Kueue admits (:mod:`jobs.backends.kueue`). Trainyard writes Kueue's queues
  from its quotas (``tenants.tasks.reconcile_kueue``), creates each job suspended with
  Kueue's queue and priority labels, and reads Kueue's decisions back into the same job
  states, transitions, positions, ETAs and reasons.

Both are a :class:`~jobs.backends.base.BaseBackend`, which owns the cycle's bookkeeping
(the cycle lock, the pass token, timing, the explain cadence) and submit. The rest of
Trainyard does not know which is on: services call :func:`get_backend` for the few verbs
that differ, and the tasks (``jobs.tasks``) are thin wrappers that hand over to it.
"""

from __future__ import annotations

from django.conf import settings

from jobs.backends.base import BaseBackend
from jobs.backends.kueue import KueueBackend
from jobs.backends.trainyard import TrainyardBackend

__all__ = ["BaseBackend", "backend_name", "get_backend"]


def backend_name() -> str:
    return str(getattr(settings, "TRAINYARD_ADMISSION_BACKEND", "trainyard") or "trainyard")


def get_backend() -> BaseBackend:
    """The backend in force (read each call: tests switch the setting)."""
    if backend_name() == "kueue":
        return KueueBackend()
    return TrainyardBackend()
