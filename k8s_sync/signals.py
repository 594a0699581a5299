"""``observed_changed``: sent after the observers recorded a change (``observe.py``).

The sender is the observed model (e.g. ``ObservedPod``). Arguments: ``kind`` (an
``observe.KINDS`` name: "nodes", "pods", "quotas", "pvcs", "storageclasses", "events",
"pytorchjobs") and ``keys`` (a list of "namespace/name", or "name" for cluster-scoped
kinds, of rows created, updated or deleted). Sent on commit of the transaction that
recorded the change, never for a no-op, from whatever thread recorded it (the watcher's,
a relist task's). Domain apps connect to it to react; receivers must be quick (enqueue,
never work inline) and must not raise. ``jobs/receivers.py`` enqueues an admission
cycle on a change of PyTorchJobs or of pods in tenant namespaces.
"""

from __future__ import annotations

from django.dispatch import Signal

__all__ = ["observed_changed"]

observed_changed = Signal()
