"""What the observers watch and how an object becomes a row's columns.

* The parse functions (``parse_pod``, ``parse_node``, ...) turn one object, as the API
  server returned it, into the columns of its table (:mod:`k8s_sync.models`).
* :data:`KINDS` names every observed kind (:class:`KindSpec`: its apiVersion and kind,
  its table, its parse function, which objects to keep, whether a relist prunes).

The kinds: nodes, pods, quotas, PVCs, storage classes, events, and the PyTorchJobs and
TrainJobs Trainyard manages (only those: the list and the watch carry the managed label
selector), which the admission loop reads (``jobs.tasks.observe_jobs``) instead of
listing them. Recording rows is :mod:`k8s_sync.observe_record`, the watch loop
:mod:`k8s_sync.observe`; both re-export what they use of this module.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import QuerySet
from django.utils.dateparse import parse_datetime

from k8s_sync import fastjson, kueue_observe, naming
from k8s_sync.models import (
    PYTORCHJOB,
    TRAINJOB,
    ClusterEvent,
    Observed,
    ObservedKueueWorkload,
    ObservedNode,
    ObservedPod,
    ObservedPVC,
    ObservedQuota,
    ObservedStorageClass,
    ObservedWorkload,
)
from k8s_sync.quantity import format_decimal, parse_quantity

log = logging.getLogger(__name__)

__all__ = [
    "EVENT_REASONS", "EVENT_RETENTION", "KINDS", "KindSpec", "gpu_model_of", "parse_event",
    "parse_node", "parse_pod", "parse_pvc", "parse_pytorchjob", "parse_quota",
    "parse_storage_class", "parse_trainjob", "pod_requests", "pod_run_times",
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
    resource with only a limit requests its limit (the API server's defaulting).

    Remembered per distinct set of resources (the pods of a job share theirs, and a pod's
    every watch event repeats them): the quantities are parsed once, not at each event."""
    key = [[c.get("resources") for c in spec.get("containers") or []],
           [c.get("resources") for c in spec.get("initContainers") or []], spec.get("overhead")]
    try:
        encoded = fastjson.dumps_bytes(key)
    except TypeError:  # not JSON (a caller's own objects): compute it, uncached
        return _requests(spec)
    return dict(_requests_of(encoded))


@functools.lru_cache(maxsize=4096)
def _requests_of(encoded: bytes) -> tuple[tuple[str, str], ...]:
    containers, init, overhead = fastjson.loads(encoded)
    return tuple(_requests({
        "containers": [{"resources": r} for r in containers],
        "initContainers": [{"resources": r} for r in init], "overhead": overhead}).items())


def _requests(spec: Mapping[str, Any]) -> dict[str, str]:
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
        "volume_attributes_class": spec.get("volumeAttributesClassName") or "",
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
