"""Observe the cluster into k8s_sync's tables: record functions and the reflector loop.

* :func:`record_relist` and :func:`record_event` apply a list result or one watch event
  to the tables of a kind (:data:`KINDS`). Idempotent: an object whose ``uid`` and
  ``resourceVersion`` match its row is not written again, so recording the same list or
  event twice writes nothing the second time. A relist deletes the rows of objects that
  vanished (Events excepted: they are kept, see :class:`~k8s_sync.models.ClusterEvent`).
  After a change, :data:`~k8s_sync.signals.observed_changed` is sent on commit.
* :class:`Reflector` is the watch loop for one kind (the client-go reflector design):
  list, then watch from the list's ``resourceVersion``; a watch that ends normally is
  reopened from the last version seen; on 410 Gone relist at once; on any other error
  back off exponentially (capped) and relist; relist every ``relist_interval`` anyway.
* :func:`relist_all` relists every kind once (``k8s_watch --once`` and the periodic
  ``k8s_sync.relist`` task, the level-triggered safety net).

The kinds: nodes, pods, quotas, PVCs, storage classes, events, and the PyTorchJobs
Trainyard manages (only those: the list and the watch carry the managed label selector),
which the admission loop reads (``jobs.tasks.observe_jobs``) instead of listing them.

Nothing here decides anything: rows are what the API server said.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import DatabaseError, close_old_connections, connection, transaction
from django.db.models import Field, QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from k8s_sync import kueue_observe, naming
from k8s_sync.client import K8sError, KubeClient, WatchStream
from k8s_sync.models import (
    PYTORCHJOB,
    TRAINJOB,
    ClusterEvent,
    Observed,
    ObservedKind,
    ObservedKueueWorkload,
    ObservedNode,
    ObservedPod,
    ObservedPVC,
    ObservedQuota,
    ObservedStorageClass,
    ObservedWorkload,
)
from k8s_sync.quantity import format_decimal, parse_quantity
from k8s_sync.signals import observed_changed

log = logging.getLogger(__name__)

__all__ = [
    "EVENT_REASONS", "EVENT_RETENTION", "KINDS", "Backoff", "KindSpec", "Reflector",
    "TooManyFailures", "parse_pytorchjob", "parse_trainjob", "record_error", "record_event",
    "record_events", "record_relist", "relist_all",
]

# Events users need to see: a refused pod (quota), preemption, and why a pod waits
# (the kubelet's "Failed"/"BackOff": an image it cannot pull, a container it cannot start).
EVENT_REASONS = frozenset({
    "FailedCreatePod", "FailedCreate", "Preempted", "Preempting", "FailedScheduling",
    "Unschedulable", "Evicted", "Failed", "BackOff", "InspectFailed", "ErrImageNeverPull",
})
# In a tenant pool's namespace every event about these kinds is kept (the job pages).
POOL_EVENT_KINDS = frozenset({"Pod", "PyTorchJob", "TrainJob", "PersistentVolumeClaim"})
EVENT_RETENTION = timedelta(days=7)
TENANT_LABEL, POOL_LABEL, JOB_LABEL = "trainyard.io/tenant", "trainyard.io/pool", "trainyard.io/job"
RACK_LABEL, SWITCH_LABEL = "trainyard.io/rack", "trainyard.io/switch"
ZONE_LABEL, NODE_POOL_LABEL = "topology.kubernetes.io/zone", "trainyard.io/node-pool"
TERMINAL_PHASES = ("Succeeded", "Failed")


# --- parsing: object -> columns ---------------------------------------------------------


def _time(value: Any) -> datetime | None:
    return parse_datetime(value) if isinstance(value, str) and value else None


def _int(value: Any, default: int | None = None) -> int | None:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return default


def gpu_model_of(product: str) -> str:
    """The card model of a ``nvidia.com/gpu.product`` label, without the ``-MIG-<profile>``
    (MIG single strategy) and ``-SHARED`` (shared GPUs) suffixes GFD appends."""
    model = product.removesuffix("-SHARED")
    return model.split("-MIG-", 1)[0]


def parse_node(obj: Mapping[str, Any]) -> dict[str, Any]:
    labels = obj["metadata"].get("labels") or {}
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or [])
    product = labels.get("nvidia.com/gpu.product", "")
    return {
        "gpu_product": product, "gpu_model": gpu_model_of(product),
        "gpu_count": _int(labels.get("nvidia.com/gpu.count"), 0),
        "gpu_memory_mib": _int(labels.get("nvidia.com/gpu.memory")),
        "mig_strategy": labels.get("nvidia.com/mig.strategy", ""),
        "sharing_strategy": labels.get("nvidia.com/gpu.sharing-strategy", ""),
        "gpu_replicas": _int(labels.get("nvidia.com/gpu.replicas"), 1) or 1,
        "capacity": dict(status.get("capacity") or {}),
        "allocatable": dict(status.get("allocatable") or {}),
        "unschedulable": bool(spec.get("unschedulable")), "ready": ready,
        "taints": list(spec.get("taints") or []),
        "zone": labels.get(ZONE_LABEL, ""), "rack": labels.get(RACK_LABEL, ""),
        "switch": labels.get(SWITCH_LABEL, ""), "node_pool": labels.get(NODE_POOL_LABEL, ""),
    }


def pod_requests(spec: Mapping[str, Any]) -> dict[str, str]:
    """Effective requests of a pod, as the scheduler counts them: per resource, the larger
    of the containers' sum and the largest init container, plus the pod overhead. A
    resource with only a limit requests its limit (the API server's defaulting)."""
    def of(container: Mapping[str, Any]) -> dict[str, Any]:
        res = container.get("resources") or {}
        return {**(res.get("limits") or {}), **(res.get("requests") or {})}

    def amounts(resources: Mapping[str, Any]) -> Iterable[tuple[str, Decimal]]:
        for name, qty in resources.items():
            try:
                yield name, parse_quantity(qty)
            except ValueError:  # the API server validates quantities; never count junk
                log.warning("ignoring unparseable quantity %s=%r", name, qty)

    total: dict[str, Decimal] = {}
    for container in spec.get("containers") or []:
        for name, value in amounts(of(container)):
            total[name] = total.get(name, Decimal(0)) + value
    for container in spec.get("initContainers") or []:
        for name, value in amounts(of(container)):
            total[name] = max(total.get(name, Decimal(0)), value)
    for name, value in amounts(spec.get("overhead") or {}):
        total[name] = total.get(name, Decimal(0)) + value
    return {name: format_decimal(value) for name, value in sorted(total.items())}


def pod_run_times(status: Mapping[str, Any]) -> tuple[datetime | None, datetime | None]:
    """When a pod's containers ran, by the kubelet's clock: the earliest container start
    (running or terminated ``startedAt``; ``status.startTime`` when no container has
    started yet but the pod is Running) and, once every container has terminated, the
    latest ``finishedAt`` (None while one still runs)."""
    starts: list[datetime] = []
    ends: list[datetime] = []
    statuses = list(status.get("containerStatuses") or [])
    for cs in statuses:
        state = cs.get("state") or {}
        running, terminated = state.get("running") or {}, state.get("terminated") or {}
        start = _time(running.get("startedAt")) or _time(terminated.get("startedAt"))
        if start is not None:
            starts.append(start)
        if terminated:
            end = _time(terminated.get("finishedAt"))
            if end is not None:
                ends.append(end)
    if not starts and status.get("phase") == "Running":
        pod_start = _time(status.get("startTime"))
        if pod_start is not None:
            starts.append(pod_start)
    done = bool(statuses) and len(ends) == len(statuses)
    return (min(starts) if starts else None), (max(ends) if done else None)


def parse_pod(obj: Mapping[str, Any]) -> dict[str, Any]:
    labels = obj["metadata"].get("labels") or {}
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    reason, message = status.get("reason", ""), status.get("message", "")
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            reason, message = cond.get("reason", reason), cond.get("message", message)
    if not reason and status.get("phase") == "Pending":
        # Bound but not started: why its container waits (ErrImagePull, ImagePullBackOff,
        # CreateContainerConfigError, ...); ContainerCreating is only the normal start.
        for cs in status.get("containerStatuses") or []:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") and waiting["reason"] != "ContainerCreating":
                reason, message = waiting["reason"], waiting.get("message", "")
                break
    started_at, finished_at = pod_run_times(status)
    return {
        "started_at": started_at, "finished_at": finished_at,
        "phase": status.get("phase", ""), "node_name": spec.get("nodeName", ""),
        "requests": pod_requests(spec), "priority": _int(spec.get("priority")),
        "priority_class": spec.get("priorityClassName", ""),
        "tenant": labels.get(TENANT_LABEL, ""), "pool": labels.get(POOL_LABEL, ""),
        "job": labels.get(JOB_LABEL, ""), "reason": reason or "", "message": message or "",
    }


def parse_quota(obj: Mapping[str, Any]) -> dict[str, Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    scopes = list(spec.get("scopes") or [])
    for expr in (spec.get("scopeSelector") or {}).get("matchExpressions") or []:
        scopes.append(f"{expr.get('scopeName')} {expr.get('operator')} "
                      f"{','.join(expr.get('values') or [])}".strip())
    return {"hard": dict(status.get("hard") or spec.get("hard") or {}),
            "used": dict(status.get("used") or {}), "scopes": scopes}


def parse_pvc(obj: Mapping[str, Any]) -> dict[str, Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    requested = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "")
    try:
        size: int | None = int(parse_quantity(requested)) if requested else None
    except ValueError:
        size = None
    return {
        "storage_class": spec.get("storageClassName") or "", "requested": requested,
        "requested_bytes": size, "capacity": (status.get("capacity") or {}).get("storage", ""),
        "phase": status.get("phase", ""), "volume_name": spec.get("volumeName") or "",
    }


def parse_storage_class(obj: Mapping[str, Any]) -> dict[str, Any]:
    annotations = obj["metadata"].get("annotations") or {}
    return {
        "provisioner": obj.get("provisioner", ""), "parameters": dict(obj.get("parameters") or {}),
        "is_default": annotations.get("storageclass.kubernetes.io/is-default-class") == "true",
        "reclaim_policy": obj.get("reclaimPolicy") or "",
        "volume_binding_mode": obj.get("volumeBindingMode") or "",
        "allow_volume_expansion": bool(obj.get("allowVolumeExpansion")),
    }


def parse_event(obj: Mapping[str, Any]) -> dict[str, Any]:
    involved = obj.get("involvedObject") or obj.get("regarding") or {}
    source = obj.get("source") or {}
    last = (obj.get("lastTimestamp") or obj.get("eventTime")
            or (obj.get("series") or {}).get("lastObservedTime"))
    return {
        "type": obj.get("type", ""), "reason": obj.get("reason", ""),
        "message": obj.get("message") or obj.get("note") or "",
        "involved_kind": involved.get("kind", ""),
        "involved_namespace": involved.get("namespace", ""),
        "involved_name": involved.get("name", ""), "involved_uid": involved.get("uid", ""),
        "source": source.get("component") or obj.get("reportingController") or "",
        "count": _int(obj.get("count"), 1) or 1,
        "first_seen": _time(obj.get("firstTimestamp") or obj.get("eventTime")),
        "last_seen": _time(last) or _time(obj["metadata"].get("creationTimestamp")),
    }


CONDITION_FIELDS = ("type", "status", "reason", "message", "lastTransitionTime")


def parse_pytorchjob(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A Kubeflow PyTorchJob into :class:`~k8s_sync.models.ObservedWorkload`'s common
    columns: ``spec.runPolicy.suspend``, the conditions (the fields admission reads, as
    the API said them) and ``status.replicaStatuses`` with its ``active`` counts summed."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    replicas = dict(status.get("replicaStatuses") or {})
    return {
        "suspended": bool((spec.get("runPolicy") or {}).get("suspend")),
        "conditions": [{k: c[k] for k in CONDITION_FIELDS if k in c}
                       for c in status.get("conditions") or [] if isinstance(c, Mapping)],
        "replica_statuses": replicas,
        "active": sum(_int((rs or {}).get("active"), 0) or 0 for rs in replicas.values()),
    }


def parse_trainjob(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A Kubeflow Trainer v2 TrainJob into the same common columns as a PyTorchJob.

    Trainer v2.3.0 sets three condition types (``pkg/apis/trainer/v1alpha1/
    trainjob_types.go``): ``Suspended`` (reason ``Suspended``, or ``Resumed`` when False),
    ``Complete`` and ``Failed`` (from its JobSet's, or ``DeadlineExceeded``), and reports
    each replicated job's child Jobs in ``status.jobsStatus`` (``active``, ``ready``,
    ``succeeded``, ``failed``, ``suspended``). The conditions are kept as the API said them,
    followed by the two the admission loop reads of every kind: ``Succeeded`` (a True
    ``Complete``'s reason and message) and ``Running`` (True while not suspended, not
    finished, with every replicated job's pods ready). Neither carries a time: a TrainJob
    reports none for its start, so the loop dates the run by its pods at both ends (their
    containers' ``startedAt`` and ``finishedAt``, the kubelet's clock) rather than bill
    the controller's delay in noticing the end. ``active`` sums the active child Jobs;
    ``replica_statuses`` is ``jobsStatus`` by name."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    conditions = [{k: c[k] for k in CONDITION_FIELDS if k in c}
                  for c in status.get("conditions") or [] if isinstance(c, Mapping)]
    true = {c.get("type"): c for c in conditions if c.get("status") == "True"}
    jobs = {str(j.get("name")): {k: _int(j.get(k), 0) or 0 for k in
                                 ("active", "ready", "succeeded", "failed", "suspended")}
            for j in status.get("jobsStatus") or [] if isinstance(j, Mapping)}
    suspended = bool(spec.get("suspend"))
    if "Complete" in true:
        conditions.append({"type": "Succeeded", "status": "True",
                           "reason": true["Complete"].get("reason", ""),
                           "message": true["Complete"].get("message", "")})
    elif (not suspended and "Failed" not in true and jobs
            and all(j["ready"] + j["succeeded"] > 0 for j in jobs.values())
            and any(j["ready"] for j in jobs.values())):
        conditions.append({"type": "Running", "status": "True", "reason": "JobsReady",
                           "message": "every replicated job's pods are ready"})
    return {
        "suspended": suspended,
        "conditions": conditions,
        "replica_statuses": jobs,
        "active": sum(j["active"] for j in jobs.values()),
    }


def _keeps_event(obj: Mapping[str, Any]) -> bool:
    """Every event about the objects of a tenant pool (its job pages show them: scheduled,
    pulling, started, killing, preempted, the PyTorchJob's own), and elsewhere only the
    reasons of :data:`EVENT_REASONS` (the cluster's other namespaces are not Trainyard's)."""
    if obj.get("reason") in EVENT_REASONS:
        return True
    involved = obj.get("involvedObject") or obj.get("regarding") or {}
    namespace = involved.get("namespace") or (obj.get("metadata") or {}).get("namespace") or ""
    return (namespace.startswith(naming.NAMESPACE_PREFIX)
            and involved.get("kind") in POOL_EVENT_KINDS)


def _always(obj: Mapping[str, Any]) -> bool:
    return True


@dataclass(frozen=True)
class KindSpec:
    """How one kind is observed: where it lives, which table, how an object is parsed.

    ``label_selector`` narrows the list and the watch on the server (e.g. only objects
    Trainyard manages). ``shared``: the table holds several kinds (``ObservedWorkload``),
    told apart by its ``api_version`` and ``kind`` columns; this kind reads, prunes and
    counts only its own rows.
    """

    name: str
    api_version: str
    kind: str
    model: type[Observed]
    parse: Callable[[Mapping[str, Any]], dict[str, Any]]
    keep: Callable[[Mapping[str, Any]], bool] = _always
    prune: bool = True  # a relist deletes rows of vanished objects
    label_selector: str = ""
    shared: bool = False

    def rows(self) -> QuerySet[Any]:
        """This kind's rows of its table."""
        return self.model.objects.filter(**self.scope())

    def scope(self) -> dict[str, str]:
        """The columns that tell this kind's rows apart in a shared table."""
        return {"api_version": self.api_version, "kind": self.kind} if self.shared else {}



KINDS: dict[str, KindSpec] = {spec.name: spec for spec in (
    KindSpec("nodes", "v1", "Node", ObservedNode, parse_node),
    KindSpec("pods", "v1", "Pod", ObservedPod, parse_pod),
    KindSpec("quotas", "v1", "ResourceQuota", ObservedQuota, parse_quota),
    KindSpec("pvcs", "v1", "PersistentVolumeClaim", ObservedPVC, parse_pvc),
    KindSpec("storageclasses", "storage.k8s.io/v1", "StorageClass", ObservedStorageClass,
             parse_storage_class),
    KindSpec("events", "v1", "Event", ClusterEvent, parse_event, keep=_keeps_event, prune=False),
    # Only the PyTorchJobs and TrainJobs Trainyard created: one table, a parse function
    # per kind.
    KindSpec("pytorchjobs", *PYTORCHJOB, ObservedWorkload, parse_pytorchjob,
             label_selector=naming.label_selector(naming.managed_labels()), shared=True),
    KindSpec("trainjobs", *TRAINJOB, ObservedWorkload, parse_trainjob,
             label_selector=naming.label_selector(naming.managed_labels()), shared=True),
    # Kueue's Workloads of Trainyard's jobs (Kueue mode reads them: jobs.backends.kueue);
    # without Kueue's CRDs the kind fails and retries like trainjobs without Trainer's
    KindSpec(kueue_observe.KIND_NAME, *kueue_observe.WORKLOAD, ObservedKueueWorkload,
             kueue_observe.parse_workload, keep=kueue_observe.keeps_workload),
)}
_COMMON = ["uid", "resource_version", "labels", "raw", "created_at", "observed_at"]


# --- recording --------------------------------------------------------------------------


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace") or "", meta["name"]


def _label(key: tuple[str, str]) -> str:
    return f"{key[0]}/{key[1]}" if key[0] else key[1]


def _columns(spec: KindSpec, obj: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "uid": meta.get("uid", ""), "resource_version": str(meta.get("resourceVersion", "")),
        "labels": dict(meta.get("labels") or {}), "raw": dict(obj),
        "created_at": _time(meta.get("creationTimestamp")), "observed_at": now,
        **spec.scope(), **spec.parse(obj),
    }


def _announce(kind: str, keys: list[str]) -> None:
    if keys:
        transaction.on_commit(
            lambda: observed_changed.send(sender=KINDS[kind].model, kind=kind, keys=keys))


def record_relist(spec: KindSpec, items: Iterable[Mapping[str, Any]], resource_version: str,
                  *, now: datetime | None = None) -> list[str]:
    """Make the kind's table equal to a full list; returns the keys that changed.

    Creates rows for new objects, updates rows whose uid or resourceVersion moved,
    deletes rows of objects no longer listed (Events: only rows older than
    ``EVENT_RETENTION``) and stores the bookkeeping. Idempotent; one transaction.
    """
    now = now or timezone.now()
    model = spec.model
    with transaction.atomic():
        existing = _existing(spec.rows())
        listed = {_key(obj): obj for obj in items if spec.keep(obj)}
        changed = _upsert(spec, existing, listed, now)
        gone = [existing[k][0] for k in existing.keys() - listed.keys()]
        if gone:
            doomed = model.objects.filter(pk__in=gone)
            if not spec.prune:
                # kept kinds (Events) carry last_seen; only old ones go
                doomed = doomed.filter(**{"last_seen__lt": now - EVENT_RETENTION})
            doomed_keys = [_label(k) for k in doomed.values_list("namespace", "name")]
            doomed.delete()
            changed += doomed_keys
        ObservedKind.objects.update_or_create(kind=spec.name, defaults={
            "resource_version": resource_version, "last_list_at": now,
            "object_count": spec.rows().count()})
        _announce(spec.name, changed)
    return changed


def _existing(rows: Any) -> dict[tuple[str, str], tuple[int, str, str]]:
    """(namespace, name) -> (pk, uid, resourceVersion) of the recorded rows."""
    return {(ns, name): (pk, uid, rv) for pk, ns, name, uid, rv in
            rows.values_list("pk", "namespace", "name", "uid", "resource_version")}


def _upsert(spec: KindSpec, existing: dict[tuple[str, str], tuple[int, str, str]],
            objects: Mapping[tuple[str, str], Mapping[str, Any]], now: datetime) -> list[str]:
    """Insert or update the rows of ``objects`` whose uid or resourceVersion moved (rows
    that already hold both are left alone); returns their keys."""
    model = spec.model
    fresh, updates, changed = [], [], []
    for key, obj in objects.items():
        meta = obj["metadata"]
        row = existing.get(key)
        if row and row[1:] == (meta.get("uid", ""), str(meta.get("resourceVersion", ""))):
            continue
        columns = _columns(spec, obj, now)
        if row:
            updates.append((row[0], columns))
        else:
            fresh.append(model(namespace=key[0], name=key[1], **columns))
        changed.append(_label(key))
    model.objects.bulk_create(fresh, batch_size=500)
    _update_rows(model, updates)
    return changed


def _update_rows(model: type[Observed], updates: list[tuple[int, dict[str, Any]]]) -> None:
    """``UPDATE ... WHERE id = %s`` for many rows in one ``executemany``.

    Django's ``bulk_update`` builds a CASE expression per field and row in Python, which
    made a relist with 500 changed pods slower than inserting 5000 (bench/observe_scale.py).
    Values go through each field's ``get_db_prep_save``, as in a normal save.
    """
    if not updates:
        return
    meta = model._meta
    fields: list[Field[Any, Any]] = [meta.get_field(n) for n in updates[0][1]]  # type: ignore[misc]
    quote = connection.ops.quote_name
    # Identifiers from the model's own metadata, quoted; every value is a parameter.
    assignments = ", ".join(f"{quote(str(f.column))} = %s" for f in fields)
    table, pk_column = quote(meta.db_table), quote(str(meta.pk.column))  # type: ignore[union-attr]
    sql = f"UPDATE {table} SET {assignments} WHERE {pk_column} = %s"  # noqa: S608
    params = [[f.get_db_prep_save(columns[f.name], connection) for f in fields] + [row_pk]
              for row_pk, columns in updates]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


def record_event(spec: KindSpec, event_type: str, obj: Mapping[str, Any], *,
                 now: datetime | None = None) -> list[str]:
    """Apply one watch event to the kind's table; returns the keys that changed.

    ADDED/MODIFIED upsert the row unless it already holds this uid and resourceVersion;
    DELETED removes it (Events are kept); BOOKMARK and objects ``spec.keep`` rejects
    change nothing. Idempotent. See :func:`record_events` for a batch.
    """
    return record_events(spec, [(event_type, obj)], now=now)


def record_events(spec: KindSpec, events: Iterable[tuple[str, Mapping[str, Any]]], *,
                  now: datetime | None = None) -> list[str]:
    """Apply watch events, in order, in one transaction; returns the keys that changed.

    The end state equals applying :func:`record_event` to each in turn: only the last
    event per object matters, except that a DELETED removes the row only if it holds
    one of the uids this batch saw for that name (a late DELETED of an old object never
    removes the row of a newer one that a relist already recorded).
    """
    last: dict[tuple[str, str], tuple[str, Mapping[str, Any]]] = {}
    uids: dict[tuple[str, str], set[str]] = defaultdict(set)
    for event_type, obj in events:
        if event_type in ("ADDED", "MODIFIED", "DELETED") and spec.keep(obj):
            key = _key(obj)
            last[key] = (event_type, obj)
            uids[key].add(obj["metadata"].get("uid", ""))
    if not last:
        return []
    now = now or timezone.now()
    model = spec.model
    with transaction.atomic():
        existing = _existing(spec.rows().filter(namespace__in={k[0] for k in last},
                                                name__in={k[1] for k in last}))
        doomed, changed = [], []
        for key, (event_type, _obj) in last.items():
            row = existing.get(key)
            if event_type == "DELETED" and spec.prune and row and row[1] in uids[key]:
                doomed.append(row[0])
                changed.append(_label(key))
        if doomed:
            model.objects.filter(pk__in=doomed).delete()
        changed += _upsert(spec, existing, {key: obj for key, (event_type, obj) in last.items()
                                            if event_type != "DELETED"}, now)
        _announce(spec.name, changed)
    return changed


def record_error(kind: str, error: BaseException, *, now: datetime | None = None) -> None:
    """Remember the last failure of a kind's observer (shown on the health page)."""
    ObservedKind.objects.update_or_create(kind=kind, defaults={
        "last_error": str(error)[:2000], "last_error_at": now or timezone.now()})


def record_activity(kind: str, resource_version: str, *, now: datetime | None = None) -> None:
    """Remember that a kind's watch delivered events up to ``resource_version``."""
    ObservedKind.objects.update_or_create(kind=kind, defaults={
        "resource_version": resource_version, "last_event_at": now or timezone.now()})


# --- the loop ---------------------------------------------------------------------------


class TooManyFailures(Exception):
    """The reflector failed ``max_failures`` times in a row (a supervisor restarts us)."""


@dataclass
class Backoff:
    """Exponential backoff with jitter: ``base``, 2x ``base`` ... capped at ``cap`` seconds."""

    base: float = 1.0
    cap: float = 60.0
    jitter: bool = True
    failures: int = 0

    def next(self) -> float:
        delay = min(self.cap, self.base * 2 ** self.failures)
        self.failures += 1
        return delay * random.uniform(0.5, 1.0) if self.jitter else delay

    def reset(self) -> None:
        self.failures = 0


@dataclass
class Reflector:
    """List-then-watch loop for one kind; :meth:`run` until :meth:`stop` (any thread).

    ``sleep(seconds)`` waits between retries (default: an interruptible wait on the stop
    event; tests inject a fast one). ``manage_connections`` makes each cycle drop stale
    database connections (long-running threads; not inside a test transaction).
    """

    client: KubeClient
    spec: KindSpec
    backoff: Backoff = field(default_factory=Backoff)
    watch_timeout: int = 300
    relist_interval: float = 600.0
    max_failures: int | None = None
    sleep: Callable[[float], Any] | None = None
    manage_connections: bool = False
    activity_interval: float = 5.0
    clock: Callable[[], float] = time.monotonic
    stopped: threading.Event = field(default_factory=threading.Event)
    batch_size: int = 500  # events recorded in one transaction, at most
    page_size: int = 500  # objects per page of a relist (every page from one snapshot)
    lists: int = 0
    events: int = 0
    batches: int = 0
    failures: int = 0  # in a row
    _stream: WatchStream | None = field(default=None, repr=False)

    def stop(self) -> None:
        self.stopped.set()
        stream = self._stream
        if stream is not None:
            stream.close()

    def relist(self) -> str:
        items, version = self.client.list_with_resource_version(
            self.spec.api_version, self.spec.kind,
            label_selector=self.spec.label_selector or None, page_size=self.page_size)
        record_relist(self.spec, items, version)
        self.lists += 1
        return version

    def run(self, until: Callable[[], bool] | None = None) -> None:
        """Observe until stopped (or ``until()`` is true, checked after each event)."""
        version, listed_at = "", None
        while not self.stopped.is_set() and not (until and until()):
            if self.manage_connections:
                close_old_connections()
            try:
                if not version or listed_at is None or (
                        self.clock() - listed_at >= self.relist_interval):
                    version, listed_at = self.relist(), self.clock()
                version = self._watch(version, until)
                self.failures = 0  # a watch that ran to its end: healthy again
                self.backoff.reset()
            except (K8sError, DatabaseError) as exc:
                # DatabaseError: a locked SQLite file or a restarting Postgres; like an
                # API error, wait and relist rather than kill the watcher.
                self._failed(exc)
                version = ""  # relist next
                self.failures += 1
                if self.max_failures and self.failures >= self.max_failures:
                    raise TooManyFailures(f"{self.spec.name}: {exc}") from exc
                if getattr(exc, "status", None) == 410 and self.failures == 1:
                    continue  # the version expired: relist at once, the server is fine
                (self.sleep or self.stopped.wait)(self.backoff.next())

    def _failed(self, exc: Exception) -> None:
        log.warning("observing %s failed (%s); relisting", self.spec.name, exc)
        try:
            record_error(self.spec.name, exc)
        except DatabaseError:
            log.exception("cannot record the failure of %s", self.spec.name)

    def _watch(self, version: str, until: Callable[[], bool] | None) -> str:
        """Follow one watch stream. A reader thread queues events as they arrive, so
        whatever arrived while a batch was being written is recorded together."""
        stream = self._stream = self.client.watch(self.spec.api_version, self.spec.kind,
                                                  resource_version=version,
                                                  label_selector=self.spec.label_selector
                                                  or None,
                                                  timeout_seconds=self.watch_timeout)
        pump = _Pump(stream, maxsize=self.batch_size * 4)
        touched = float("-inf")  # the first batch is always noted, later ones throttled
        try:
            if self.stopped.is_set():
                return version
            pump.start()
            while True:
                batch, end = pump.take(self.batch_size)
                if batch:
                    version = self._record(batch, version)
                    if self.clock() - touched >= self.activity_interval:
                        record_activity(self.spec.name, version)
                        touched = self.clock()
                if isinstance(end, BaseException):
                    raise end
                if end is _END or self.stopped.is_set() or (until and until()):
                    break
        finally:
            pump.done.set()
            stream.close()
            self._stream = None
        return version

    def _record(self, batch: list[tuple[str, dict[str, Any]]], version: str) -> str:
        record_events(self.spec, batch)
        self.events += len(batch)
        self.batches += 1
        for _, obj in reversed(batch):
            found = (obj.get("metadata") or {}).get("resourceVersion")
            if found:
                return str(found)
        return version


_END = object()


class _Pump(threading.Thread):
    """Reads a watch stream into a bounded queue (never touches the database)."""

    def __init__(self, stream: Iterable[tuple[str, dict[str, Any]]], maxsize: int):
        super().__init__(name="k8s-watch-reader", daemon=True)
        self.stream = stream
        self.queue: queue.Queue[Any] = queue.Queue(maxsize)
        self.done = threading.Event()

    def run(self) -> None:
        try:
            for event in self.stream:
                if not self._put(event):
                    return
            self._put(_END)
        except Exception as exc:  # handed to the consumer, which raises it
            self._put(exc)

    def _put(self, item: Any) -> bool:
        while not self.done.is_set():
            try:
                self.queue.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def take(self, limit: int) -> tuple[list[tuple[str, dict[str, Any]]], Any]:
        """Block for one item, then take what is queued; returns (events, end marker or
        exception or None)."""
        batch: list[tuple[str, dict[str, Any]]] = []
        item = self.queue.get()
        while True:
            if item is _END or isinstance(item, BaseException):
                return batch, item
            batch.append(item)
            if len(batch) >= limit:
                return batch, None
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                return batch, None


def relist_all(client: KubeClient, kinds: Iterable[str] | None = None) -> dict[str, Any]:
    """Relist every kind once; returns ``{kind: row count or "error: ..."}``.

    One kind failing does not stop the others; its error is recorded.
    """
    result: dict[str, Any] = {}
    for name in kinds or KINDS:
        spec = KINDS[name]
        try:
            items, version = client.list_with_resource_version(
                spec.api_version, spec.kind, label_selector=spec.label_selector or None)
            record_relist(spec, items, version)
            result[name] = spec.rows().count()
        except (K8sError, DatabaseError) as exc:
            # DatabaseError: e.g. the watcher inserted the same new row first; the next
            # run (or the watcher) converges.
            record_error(name, exc)
            result[name] = f"error: {exc}"
    return result
