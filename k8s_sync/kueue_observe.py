"""Kueue's Workloads as the watcher records them, and as Kueue mode reads them back.

The watcher (``manage.py k8s_watch``, ``observe.KINDS`` "kueueworkloads") lists and
watches ``kueue.x-k8s.io/v1beta2`` Workloads into
:class:`~k8s_sync.models.ObservedKueueWorkload`, like the PyTorchJobs it records, so
Kueue mode's pass (``jobs.backends.kueue``) reads one query of the Workloads of its
active jobs instead of listing every Workload from the API server each pass.

* :func:`keeps_workload`: only the Workloads of Trainyard's jobs: in a tenant namespace
  (``naming.NAMESPACE_PREFIX``), owned by a PyTorchJob or TrainJob. Kueue copies none of
  the job's labels to its Workload (only ``labelKeysToCopy`` of its configuration), so
  no label selector can narrow the watch on the server: the watch carries every
  Workload and this filter keeps Trainyard's.
* :func:`parse_workload`: the columns of a :class:`~k8s_sync.kueue.WorkloadView`, as
  :func:`k8s_sync.kueue.workload_view` reads the object.
* :func:`workload_views`: (namespace, job name) -> its Workload's view, for the jobs
  asked for only, in one query per 2,000 names, never touching ``raw``.
* :func:`workloads_observed`: whether the watcher has listed Workloads at all (a
  cluster without Kueue's CRDs never has: the kind's reflector records the 404 and
  retries with its backoff, as the TrainJob kind does without Kubeflow Trainer).

Nothing here calls the API server or decides anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from k8s_sync import kueue, kueue_status, naming
from k8s_sync.models import ObservedKind, ObservedKueueWorkload

__all__ = ["KIND_NAME", "WORKLOAD", "keeps_workload", "parse_workload", "view_of_row",
           "workload_views", "workloads_observed"]

#: The observed kind's name (``observe.KINDS``, ``ObservedKind.kind``).
KIND_NAME = "kueueworkloads"
WORKLOAD: tuple[str, str] = kueue.WORKLOAD
CONDITION_FIELDS = ("type", "status", "reason", "message", "lastTransitionTime")
_COLUMNS = ("namespace", "name", "created_at", "owner_kind", "owner_name", "active",
            "queue_name", "cluster_queue", "conditions", "flavors", "requeue_at",
            "requeue_count", "evictions")


def keeps_workload(obj: Mapping[str, Any]) -> bool:
    """A Workload of a Trainyard job: in a tenant namespace, owned by a training job."""
    namespace = str((obj.get("metadata") or {}).get("namespace") or "")
    if not namespace.startswith(naming.NAMESPACE_PREFIX):
        return False
    kind, name = kueue.owner_of(obj.get("metadata") or {})
    return kind in kueue.JOB_KINDS and bool(name)


def parse_workload(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A Workload into :class:`~k8s_sync.models.ObservedKueueWorkload`'s columns: its
    owner, ``spec.active``, queue, admission (ClusterQueue, flavors), requeue time and
    conditions (the fields a :class:`~k8s_sync.kueue.WorkloadView` reads, as the API
    said them)."""
    view = kueue.workload_view(obj)
    status = obj.get("status") or {}
    return {
        "owner_kind": view.owner_kind, "owner_name": view.owner_name,
        "active": view.active, "queue_name": view.queue_name,
        "cluster_queue": view.cluster_queue, "flavors": list(view.flavors),
        "requeue_at": view.requeue_at, "requeue_count": view.requeue_count,
        "evictions": [{"reason": r, "underlyingCause": c, "count": n}
                      for r, c, n in view.evictions],
        "conditions": [{k: c[k] for k in CONDITION_FIELDS if k in c}
                       for c in status.get("conditions") or [] if isinstance(c, Mapping)],
    }


def view_of_row(row: Mapping[str, Any]) -> kueue.WorkloadView:
    """The :class:`~k8s_sync.kueue.WorkloadView` of a recorded row (its columns as
    ``values()`` returns them): the same as :func:`k8s_sync.kueue.workload_view` of the
    object the row was recorded from."""
    return kueue.WorkloadView(
        namespace=row["namespace"], name=row["name"], owner_kind=row["owner_kind"],
        owner_name=row["owner_name"], active=row["active"], queue_name=row["queue_name"],
        cluster_queue=row["cluster_queue"],
        conditions=kueue.conditions_by_type(row["conditions"] or []),
        flavors=tuple(row["flavors"] or ()), requeue_at=row["requeue_at"],
        requeue_count=int(row.get("requeue_count") or 0),
        evictions=kueue_status.evictions_of(row.get("evictions") or []))


def workload_views(keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], kueue.WorkloadView]:
    """(namespace, job name) -> the recorded Workload of that job (the newest when it has
    several, as :func:`k8s_sync.kueue.workloads_by_job` picks), for these jobs only; a
    job whose Workload is not recorded (yet) is absent. A query per 2,000 names, by the
    table's (namespace, owner) index; ``raw`` is never read."""
    wanted = set(keys)
    names = sorted({name for _ns, name in wanted})
    namespaces = sorted({ns for ns, _name in wanted})
    found: dict[tuple[str, str], kueue.WorkloadView] = {}
    for start in range(0, len(names), 2000):
        rows = ObservedKueueWorkload.objects.filter(
            namespace__in=namespaces, owner_name__in=names[start:start + 2000],
            owner_kind__in=kueue.JOB_KINDS).order_by("created_at", "namespace", "name")
        for row in rows.values(*_COLUMNS):
            key = (row["namespace"], row["owner_name"])
            if key in wanted:
                found[key] = view_of_row(row)  # ordered by creation: the newest wins
    return found


def workloads_observed() -> bool:
    """The watcher has listed Workloads at least once (a cluster without Kueue never)."""
    return ObservedKind.objects.filter(kind=KIND_NAME, last_list_at__isnull=False).exists()
