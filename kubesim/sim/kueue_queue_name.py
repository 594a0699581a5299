"""Kueue's job reconciler moving a Workload when its job's queue changes.

kubernetes-sigs/kueue ``pkg/controller/jobframework/reconciler.go``: while a job is
suspended and its Workload holds no quota, ``handleQueueNameChange`` ->
``QueueNameChange`` sets the Workload's ``spec.queueName`` to the job's
``kueue.x-k8s.io/queue-name`` label when they differ (an update of the Workload; the
queue manager then moves it to the new LocalQueue's ClusterQueue). The Workload CRD
refuses the change while quota is reserved (``queueName is immutable while workload
quota reserved``), so an admitted job keeps its queue until it is evicted.
"""

from __future__ import annotations

import contextlib
from typing import Any

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def queue_name_change(store: Any, resource: str, job: dict, wl: dict, reserved: bool,
                      suspended: bool) -> bool:
    """Update the Workload ``wl`` (of ``resource``, the Workloads' resource) to its job's
    queue; True when it wrote."""
    wanted = (job["metadata"].get("labels") or {}).get(QUEUE_LABEL) or ""
    if not suspended or reserved or not wanted:
        return False
    if ((wl.get("spec") or {}).get("queueName") or "") == wanted:
        return False
    md = wl["metadata"]
    with contextlib.suppress(Exception):  # a conflict: the next reconcile tries again
        store.patch(resource, md["name"], {"spec": {"queueName": wanted}},
                    patch_type="merge", namespace=md.get("namespace"))
        return True
    return False
