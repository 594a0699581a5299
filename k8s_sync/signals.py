"""``observed_changed``: sent after the observers recorded a change (``observe.py``).

The sender is the observed model (e.g. ``ObservedPod``). Arguments: ``kind`` (an
``observe.KINDS`` name: "nodes", "pods", "quotas", "pvcs", "storageclasses", "events")
and ``keys`` (a list of "namespace/name", or "name" for cluster-scoped kinds, of rows
created, updated or deleted). Sent on commit of the transaction that recorded the
change, never for a no-op. Domain apps connect to it to react (e.g. enqueue a
reconcile); receivers must be quick and must not raise.
"""

from __future__ import annotations

from django.dispatch import Signal

__all__ = ["observed_changed"]

observed_changed = Signal()
