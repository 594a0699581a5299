"""Reads of the observed tables: the GPU capacity inventory, the training workloads the
admission loop follows (``workload_statuses``) and the observers' bookkeeping.

Only observed rows are read (never the API server): a page view costs a few queries,
whatever the cluster does. Per node, the inventory splits the GPU resources the device
plugin advertises into whole cards (``nvidia.com/gpu``), MIG instances by profile
(``nvidia.com/mig-<profile>``, or ``nvidia.com/gpu`` on a MIG-single node) and shared GPU
replicas (time-slicing/MPS: ``nvidia.com/gpu.shared``, or ``nvidia.com/gpu`` when not
renamed). *Allocated* is what non-terminal pods bound to the node request.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from functools import cached_property
from typing import Any

from django.db.models import Max, Min, QuerySet
from django.utils.dateparse import parse_datetime

from core.resources import extended, node_extended
from k8s_sync import naming, placement
from k8s_sync.allocation import devices_by_namespace
from k8s_sync.models import (
    PYTORCHJOB,
    TRAINJOB,
    ClusterEvent,
    ObservedKind,
    ObservedKueueWorkload,
    ObservedNode,
    ObservedPod,
    ObservedPVC,
    ObservedQuota,
    ObservedStorageClass,
    ObservedWorkload,
)
from k8s_sync.placement import node_topology, switch_of
from k8s_sync.quantity import parse_quantity

__all__ = [
    "CapacityReport", "KindStatus", "MigCapacity", "ModelCapacity", "NodeCapacity",
    "WorkloadStatus", "capacity_report", "mig_profile_memory_mib", "observed_counts",
    "observer_status", "pod_run_times", "pool_namespaces_observed", "resource_capacity",
    "workload_statuses",
]

GPU, GPU_SHARED, MIG_PREFIX = "nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-"
HAMI_LABEL = ("gpu", "on")  # the node label HAMi's device plugin DaemonSet selects
HAMI_MEMORY = "nvidia.com/gpumem"  # MiB per card, a pod limit HAMi's scheduler checks
# pseudo-resource of _allocated_by_node: vGPUs whose pods set nvidia.com/gpumem
HAMI_CARDS_LIMITED = "trainyard.io/hami-vgpus-with-gpumem"
# pod requests counted per node besides nvidia.com/: cpu, memory and the extended
# resources of the registry's dimensions (core.resources: rdma/hca_shared_devices_a ...)
_PER_NODE = frozenset({"cpu", "memory", *(d.node_resource for d in extended())})
_MIG_NAME = re.compile(r"^(\d+)g\.(\d+)gb$")
TERMINAL_PHASES = ("Succeeded", "Failed")
LIVE_PHASES = ("", "Pending", "Running", "Unknown")
"""Every other phase a pod can have (the API's enum, and "" before its first status):
filtering on these uses the index on ``ObservedPod.phase``, where excluding the terminal
ones reads every pod of every finished job the cluster keeps."""


def mig_profile_memory_mib(profile: str) -> int | None:
    """GPU memory of one MIG instance from its profile name: ``1g.10gb`` -> 10240 MiB."""
    match = _MIG_NAME.match(profile)
    return int(match.group(2)) * 1024 if match else None


def share_memory_mib(node: ObservedNode) -> int | None:
    """GPU memory of one share of a time-sliced/MPS card: kubesim's (and an operator's)
    ``trainyard.io/gpu.shared-memory`` label, else the card's memory over its replicas;
    None when the card's memory is not known."""
    if not node.gpu_memory_mib:
        return None
    label = (node.labels or {}).get("trainyard.io/gpu.shared-memory")
    try:
        return int(label) if label else node.gpu_memory_mib // max(1, node.gpu_replicas)
    except ValueError:
        return node.gpu_memory_mib // max(1, node.gpu_replicas)


@dataclass(frozen=True)
class MigCapacity:
    """MIG instances of one profile: allocatable, allocated, memory per instance."""

    profile: str
    allocatable: int
    allocated: int
    memory_mib: int | None

    @property
    def free(self) -> int:
        return max(0, self.allocatable - self.allocated)


@dataclass(frozen=True)
class NodeCapacity:
    """The GPU inventory of one observed node."""

    name: str
    gpu_model: str
    rack: str
    switch: str
    zone: str
    schedulable: bool
    ready: bool
    unschedulable: bool
    cards: int  # physical GPUs (nvidia.com/gpu.count)
    card_memory_mib: int | None  # per physical GPU
    whole_allocatable: int
    whole_allocated: int
    mig: tuple[MigCapacity, ...]
    shared_allocatable: int  # replicas of shared GPUs
    shared_allocated: int
    sharing_strategy: str
    share_memory_mib: int | None  # GPU memory per replica
    #: The node's value of each topology level in force (widest first); ``switch`` is
    #: the last one (``k8s_sync.placement.switch_of``).
    topology: tuple[str, ...] = ()
    # HAMi (label gpu=on): nvidia.com/gpu counts vGPUs, vgpus_per_card of them per card;
    # whole_allocatable is then the cards, and hami_memory_allocated_mib what pods hold by
    # their nvidia.com/gpumem limits (a vGPU without one holds its whole card).
    vgpus_per_card: int = 0
    hami_vgpus_allocated: int = 0
    hami_memory_allocated_mib: int = 0
    #: The node's allocatable CPU (cores) and memory (bytes), and what its bound,
    #: unfinished pods request (0: not reported).
    cpu_allocatable: Decimal = Decimal(0)
    cpu_requested: Decimal = Decimal(0)
    memory_allocatable: Decimal = Decimal(0)
    memory_requested: Decimal = Decimal(0)
    #: Per extended-resource dimension (``core.resources``, by kind: ``rdma``), what the
    #: node advertises as allocatable and what its bound pods request.
    extended: Mapping[str, int] = field(default_factory=dict)
    extended_requested: Mapping[str, int] = field(default_factory=dict)

    @property
    def hami(self) -> bool:
        return self.vgpus_per_card > 0

    @property
    def shared_memory_mib(self) -> int:
        """GPU memory per share (time-slicing/MPS replica); 0 on a node without shares."""
        return self.share_memory_mib or 0

    @property
    def whole_free(self) -> int:
        return max(0, self.whole_allocatable - self.whole_allocated)

    @property
    def memory_mib(self) -> int:
        """Physical GPU memory of the node."""
        return self.cards * (self.card_memory_mib or 0)

    @property
    def whole_memory_allocatable_mib(self) -> int:
        return self.whole_allocatable * (self.card_memory_mib or 0)

    @property
    def memory_allocated_mib(self) -> int:
        """GPU memory held by pods: whole cards, MIG slices (by profile) and shares."""
        if self.hami:
            return self.hami_memory_allocated_mib
        return (self.whole_allocated * (self.card_memory_mib or 0)
                + sum(m.allocated * (m.memory_mib or 0) for m in self.mig)
                + self.shared_allocated * (self.share_memory_mib or 0))


@dataclass(frozen=True)
class ModelCapacity:
    """Totals for one GPU model over every node carrying it."""

    gpu_model: str
    nodes: int
    schedulable_nodes: int
    cards: int
    memory_mib: int
    memory_allocated_mib: int
    whole_allocatable: int
    whole_allocated: int
    whole_free_schedulable: int  # free whole cards on schedulable nodes
    mig: tuple[MigCapacity, ...]
    shared_allocatable: int
    shared_allocated: int


@dataclass(frozen=True)
class CapacityReport:
    """Per GPU model, then per node (GPU nodes first, by model and name)."""

    models: tuple[ModelCapacity, ...]
    nodes: tuple[NodeCapacity, ...]
    observed_at: datetime | None  # the last node list
    totals: Mapping[str, int] = field(default_factory=dict)
    #: The node-label keys of the topology levels in force, widest first.
    topology_levels: tuple[str, ...] = ()

    #: (node name, namespace, requests) of the bound, unfinished pods it was built from
    bound: tuple[tuple[str, str, Any], ...] = field(default=(), repr=False, compare=False)

    @property
    def resources(self) -> dict[str, Decimal]:
        """:func:`resource_capacity` of this report: capacity per quota resource key."""
        return resource_capacity(self)

    @cached_property
    def allocated_by_namespace(self) -> dict[str, dict[str, Decimal]]:
        """namespace -> GPU device key -> held, counted as this report counts
        (``k8s_sync.allocation``): the per-namespace split of the per-model figures."""
        return devices_by_namespace(self.nodes, self.bound)


_GIB = Decimal(1024**3)
_MILLI_STEP = Decimal("0.001")


def resource_capacity(report: CapacityReport) -> dict[str, Decimal]:
    """**Capacity**, the one definition: per quota resource key, what the observed nodes
    advertise as allocatable, every observed node counted (cordoned, not ready or held
    for maintenance included: capacity is the cluster's size, which grants and the
    overcommit limit are measured against; what can take work *now* is shown apart as
    "free on schedulable nodes").

    * ``gpu:<model>``: whole cards (``whole_allocatable``; a MIG-partitioned card is
      counted as its instances, a HAMi card once, time-sliced/MPS cards as shares);
    * ``mig:<profile>``: MIG instances; ``gpu-shared``: shares of time-sliced/MPS cards;
    * ``gpu-memory``: GiB of every physical card; ``cpu`` cores, ``memory`` GiB.

    Keys with nothing allocatable are left out (a model whose cards are all
    MIG-partitioned has no ``gpu:<model>`` capacity). Pure over the report.
    """
    totals: dict[str, Decimal] = defaultdict(Decimal)
    for node in report.nodes:
        totals["cpu"] += node.cpu_allocatable
        totals["memory"] += node.memory_allocatable / _GIB
        for kind, count in node.extended.items():  # rdma NICs ... (core.resources)
            totals[kind] += count
        if not node.gpu_model:
            continue
        if node.whole_allocatable:
            totals[f"gpu:{node.gpu_model}"] += node.whole_allocatable
        for mig in node.mig:
            if mig.allocatable:
                totals[f"mig:{mig.profile}"] += mig.allocatable
        if node.shared_allocatable:
            totals["gpu-shared"] += node.shared_allocatable
        totals["gpu-memory"] += Decimal(node.memory_mib) / 1024
    return {key: value.quantize(_MILLI_STEP) for key, value in sorted(totals.items())
            if value > 0}


def _count(values: Mapping[str, Any], resource: str) -> int:
    try:
        return int(parse_quantity(values.get(resource) or 0))
    except ValueError:
        return 0


def _bound_pods(pods: Iterable[Any] | None = None) -> tuple[tuple[str, str, Any], ...]:
    """(node name, namespace, requests) of the non-terminal pods bound to a node (``pods``:
    the pods' rows as an informer keeps them, ``k8s_sync.informer``; else read)."""
    if pods is None:
        return tuple(ObservedPod.objects.filter(phase__in=LIVE_PHASES).exclude(node_name="")
                     .values_list("node_name", "namespace", "requests"))
    return tuple((p.node_name, p.namespace, p.requests) for p in pods
                 if p.node_name and p.phase in LIVE_PHASES)


def _allocated_by_node(bound: Iterable[tuple[str, str, Any]]) -> dict[str, dict[str, Decimal]]:
    """GPU-ish, CPU and memory requests of the bound pods (:func:`_bound_pods`) per node."""
    out: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for node_name, _namespace, requests in bound:
        requests = requests or {}
        for resource, qty in requests.items():
            if resource.startswith("nvidia.com/") or resource in _PER_NODE:
                try:
                    out[node_name][resource] += parse_quantity(qty)
                except ValueError:
                    continue
        if HAMI_MEMORY in requests:  # the gpumem limit is per card: one per vGPU
            try:
                vgpus = parse_quantity(requests.get(GPU) or 0)
                out[node_name][HAMI_MEMORY] += parse_quantity(requests[HAMI_MEMORY]) * (
                    vgpus - 1)
                out[node_name][HAMI_CARDS_LIMITED] += vgpus
            except ValueError:
                continue
    return out


def node_capacity(node: ObservedNode, allocated: Mapping[str, Decimal],
                  topology_levels: Iterable[str] | None = None) -> NodeCapacity:
    """Split one node's allocatable GPU resources into whole cards, MIG and shared.
    ``switch`` and ``topology`` follow ``topology_levels`` (None: the default levels)."""
    alloc = node.allocatable or {}
    used = {k: int(v) for k, v in allocated.items() if k.startswith("nvidia.com/")}
    shared = node.sharing_strategy not in ("", "none")
    mig: dict[str, tuple[int, int]] = {}
    for resource in alloc:
        if resource.startswith(MIG_PREFIX):
            profile = resource.removeprefix(MIG_PREFIX)
            mig[profile] = (_count(alloc, resource), used.get(resource, 0))
    whole, whole_used = _count(alloc, GPU), used.get(GPU, 0)
    shared_alloc, shared_used = _count(alloc, GPU_SHARED), used.get(GPU_SHARED, 0)
    if node.mig_strategy == "single" and "-MIG-" in node.gpu_product:
        profile = node.gpu_product.split("-MIG-", 1)[1].removesuffix("-SHARED")
        mig[profile] = (whole, whole_used)
        whole = whole_used = 0
    elif shared and not shared_alloc:  # replicas advertised as nvidia.com/gpu (no rename)
        shared_alloc, shared_used, whole, whole_used = whole, whole_used, 0, 0
    vgpus_per_card = hami_vgpus = hami_mem = 0
    if node.labels.get(HAMI_LABEL[0]) == HAMI_LABEL[1] and node.gpu_count and not shared:
        # HAMi registers cards x deviceSplitCount vGPUs as nvidia.com/gpu (Project-HAMi/HAMi)
        vgpus_per_card = max(1, whole // node.gpu_count)
        hami_vgpus = whole_used
        card = node.gpu_memory_mib or 0
        hami_mem = min(node.gpu_count * card, int(allocated.get(HAMI_MEMORY, 0))
                       + max(0, whole_used - int(allocated.get(HAMI_CARDS_LIMITED, 0))) * card)
        whole = node.gpu_count
        whole_used = min(whole, -(-hami_mem // card) if card else whole_used)
    share_mem = share_memory_mib(node) if shared else None
    return NodeCapacity(
        name=node.name, gpu_model=node.gpu_model, rack=node.rack,
        switch=switch_of(node.labels, topology_levels),
        topology=node_topology(node.labels, topology_levels),
        zone=node.zone, schedulable=node.schedulable, ready=node.ready,
        unschedulable=node.unschedulable, cards=node.gpu_count,
        card_memory_mib=node.gpu_memory_mib, whole_allocatable=whole, whole_allocated=whole_used,
        mig=tuple(MigCapacity(p, a, u, mig_profile_memory_mib(p))
                  for p, (a, u) in sorted(mig.items(), key=_mig_order)),
        shared_allocatable=shared_alloc, shared_allocated=shared_used,
        sharing_strategy=node.sharing_strategy if shared else "", share_memory_mib=share_mem,
        vgpus_per_card=vgpus_per_card, hami_vgpus_allocated=hami_vgpus,
        hami_memory_allocated_mib=hami_mem,
        cpu_allocatable=_quantity(alloc, "cpu"), cpu_requested=allocated.get("cpu", Decimal(0)),
        memory_allocatable=_quantity(alloc, "memory"),
        memory_requested=allocated.get("memory", Decimal(0)),
        extended=node_extended(alloc, parse_quantity),
        extended_requested=node_extended(dict(allocated), lambda v: v),
    )


_KEPT: dict[tuple[Any, ...], NodeCapacity] = {}
""":func:`node_capacity` of informers' node rows, by the node's version and its use: most
nodes are as they were at the last pass of a process that passes often."""


def _kept_capacity(node: Any, allocated: Mapping[str, Decimal],
                   levels: Iterable[str] | None) -> NodeCapacity:
    key = (node.name, node.uid, node.resource_version, tuple(sorted(allocated.items())),
           tuple(levels or ()))
    found = _KEPT.get(key)
    if found is None:
        if len(_KEPT) > 20_000:
            _KEPT.clear()
        found = _KEPT[key] = node_capacity(node, allocated, levels)
    return found


def _quantity(values: Mapping[str, Any], resource: str) -> Decimal:
    try:
        return parse_quantity(values.get(resource) or 0)
    except ValueError:
        return Decimal(0)


def _mig_order(item: tuple[str, Any]) -> tuple[int, int, str]:
    match = _MIG_NAME.match(item[0])
    return (int(match.group(1)), int(match.group(2)), item[0]) if match else (99, 0, item[0])


def _model_totals(model: str, nodes: Iterable[NodeCapacity]) -> ModelCapacity:
    nodes = list(nodes)
    mig: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for node in nodes:
        for m in node.mig:
            mig[m.profile][0] += m.allocatable
            mig[m.profile][1] += m.allocated
    return ModelCapacity(
        gpu_model=model, nodes=len(nodes), schedulable_nodes=sum(n.schedulable for n in nodes),
        cards=sum(n.cards for n in nodes), memory_mib=sum(n.memory_mib for n in nodes),
        memory_allocated_mib=sum(n.memory_allocated_mib for n in nodes),
        whole_allocatable=sum(n.whole_allocatable for n in nodes),
        whole_allocated=sum(n.whole_allocated for n in nodes),
        whole_free_schedulable=sum(n.whole_free for n in nodes if n.schedulable),
        mig=tuple(MigCapacity(p, a, u, mig_profile_memory_mib(p))
                  for p, (a, u) in sorted(mig.items(), key=_mig_order)),
        shared_allocatable=sum(n.shared_allocatable for n in nodes),
        shared_allocated=sum(n.shared_allocated for n in nodes),
    )


def capacity_report(topology_levels: Iterable[str] | None = None, *,
                    nodes: Iterable[Any] | None = None,
                    pods: Iterable[Any] | None = None) -> CapacityReport:
    """The GPU inventory from the observed nodes and pods (three queries). Nodes'
    ``switch``/``topology`` follow ``topology_levels``, by default the configured ones
    (``placement.configured_topology_levels``). ``nodes`` and ``pods``: their rows as an
    informer keeps them (``k8s_sync.informer``), instead of the recorded ones."""
    levels = (placement.topology_levels(topology_levels) if topology_levels is not None
              else placement.configured_topology_levels())
    bound = _bound_pods(pods)
    allocated = _allocated_by_node(bound)
    rows = (sorted(nodes, key=lambda n: n.name) if nodes is not None
            else ObservedNode.objects.defer("raw", "capacity", "taints").order_by("name"))
    if nodes is None:
        report_nodes = [node_capacity(n, allocated.get(n.name, {}), levels) for n in rows]
    else:
        report_nodes = [_kept_capacity(n, allocated.get(n.name, {}), levels) for n in rows]
    report_nodes.sort(key=lambda n: (not n.gpu_model, n.gpu_model, n.name))
    by_model: dict[str, list[NodeCapacity]] = defaultdict(list)
    for node in report_nodes:
        if node.gpu_model:
            by_model[node.gpu_model].append(node)
    models = tuple(_model_totals(m, ns) for m, ns in sorted(by_model.items()))
    bookkeeping = (ObservedKind.objects.filter(kind="nodes").first() if nodes is None
                   else None)
    totals = {
        "nodes": len(report_nodes), "gpu_nodes": sum(m.nodes for m in models),
        "cards": sum(m.cards for m in models),
        "whole_allocatable": sum(m.whole_allocatable for m in models),
        "whole_allocated": sum(m.whole_allocated for m in models),
        "mig_allocatable": sum(x.allocatable for m in models for x in m.mig),
        "mig_allocated": sum(x.allocated for m in models for x in m.mig),
        "shared_allocatable": sum(m.shared_allocatable for m in models),
        "shared_allocated": sum(m.shared_allocated for m in models),
        "memory_mib": sum(m.memory_mib for m in models),
        "memory_allocated_mib": sum(m.memory_allocated_mib for m in models),
    }
    return CapacityReport(models=models, nodes=tuple(report_nodes),
                          observed_at=bookkeeping.last_list_at if bookkeeping else None,
                          totals=totals, topology_levels=levels, bound=bound)


_COUNTED: dict[str, Callable[[], QuerySet[Any]]] = {
    "nodes": ObservedNode.objects.all, "pods": ObservedPod.objects.all,
    "quotas": ObservedQuota.objects.all, "pvcs": ObservedPVC.objects.all,
    "storageclasses": ObservedStorageClass.objects.all, "events": ClusterEvent.objects.all,
    "pytorchjobs": lambda: _workloads(*PYTORCHJOB),
    "trainjobs": lambda: _workloads(*TRAINJOB),
    "kueueworkloads": ObservedKueueWorkload.objects.all,
}


def observed_counts() -> dict[str, int]:
    """Rows per observed kind."""
    return {kind: rows().count() for kind, rows in _COUNTED.items()}


@dataclass(frozen=True)
class KindStatus:
    """One observed kind: rows recorded now, and the watcher's bookkeeping."""

    kind: str
    objects: int
    resource_version: str
    last_list_at: datetime | None
    last_event_at: datetime | None
    last_error: str
    last_error_at: datetime | None
    failing: bool  # the last error is newer than the last successful list


def observer_status(counts: Mapping[str, int] | None = None) -> list[KindStatus]:
    """Per observed kind: row count and last list, last event, last error."""
    counts = counts if counts is not None else observed_counts()
    known = {k.kind: k for k in ObservedKind.objects.all()}
    out = []
    for kind in _COUNTED:
        row = known.get(kind) or ObservedKind(kind=kind)
        out.append(KindStatus(kind, counts.get(kind, 0), row.resource_version,
                              row.last_list_at, row.last_event_at, row.last_error,
                              row.last_error_at, row.failing))
    return out


# --- pools in the cluster ------------------------------------------------------------------


def pool_namespaces_observed(namespaces: Iterable[str] | None = None) -> set[str]:
    """The namespaces (of ``namespaces``, or all) where the watcher has recorded Trainyard's
    ResourceQuota (``naming.RESOURCE_QUOTA_NAME``), the last object of a pool's reconcile
    after its namespace and LimitRange: the pools that are set up in the cluster, as the
    cluster says, not as Trainyard wrote. One query. A namespace that is deleted takes
    its quota with it, and the watcher records that too."""
    rows = ObservedQuota.objects.filter(name=naming.RESOURCE_QUOTA_NAME)
    if namespaces is not None:
        rows = rows.filter(namespace__in=list(namespaces))
    return set(rows.values_list("namespace", flat=True))


# --- training workloads (observe.KINDS "pytorchjobs") -------------------------------------


@dataclass(frozen=True)
class WorkloadStatus:
    """What the watcher last recorded of one training workload (a PyTorchJob)."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    suspended: bool
    conditions: tuple[Mapping[str, Any], ...]  # as the API said (type, status, reason, ...)
    replica_statuses: Mapping[str, Any]
    active: int  # replicas the operator reports active, over every replica type

    def true_conditions(self) -> dict[Any, Mapping[str, Any]]:
        """The conditions whose status is ``"True"``, by type (the last one of a type)."""
        return {c.get("type"): c for c in self.conditions if c.get("status") == "True"}

    def condition_time(self, ctype: str) -> datetime | None:
        """The ``lastTransitionTime`` of the condition ``ctype`` (the operator's clock),
        whatever its status; None when absent or unreadable."""
        for cond in reversed(self.conditions):
            if cond.get("type") == ctype:
                value = cond.get("lastTransitionTime")
                return parse_datetime(value) if isinstance(value, str) and value else None
        return None

    def running_since(self) -> datetime | None:
        """When the workload's current (or, once finished, its last) run started, by the
        cluster's clock: the ``Running`` condition's ``lastTransitionTime`` while it is
        True, or after the job finished (the operator turns ``Running`` False when it sets
        ``Succeeded``/``Failed`` and keeps its time). None when it never ran since it was
        last suspended (``Running`` False for a suspension, or absent)."""
        running = next((c for c in reversed(self.conditions) if c.get("type") == "Running"),
                       None)
        if running is None:
            return None
        finished = {"Succeeded", "Failed"} & set(self.true_conditions())
        if running.get("status") == "True" or (
                finished and "suspend" not in str(running.get("reason", "")).lower()):
            return self.condition_time("Running")
        return None


def _workloads(api_version: str, kind: str) -> QuerySet[ObservedWorkload]:
    return ObservedWorkload.objects.filter(api_version=api_version, kind=kind)


def workload_statuses(api_version: str = PYTORCHJOB[0],
                      kind: str = PYTORCHJOB[1], *,
                      keys: Iterable[tuple[str, str]] | None = None,
                      ) -> dict[tuple[str, str], WorkloadStatus]:
    """Every recorded workload of one kind (by default the PyTorchJobs Trainyard manages),
    by (namespace, name); one query, never the API server. An object the watcher has not
    recorded yet is simply absent. ``keys``: only these (namespace, name) (a query per
    2,000 names, by the table's unique index), not every one ever recorded."""
    fields = _STATUS_FIELDS
    rows: Iterable[dict[str, Any]]
    if keys is None:
        rows = _workloads(api_version, kind).values(*fields)
    else:
        wanted = set(keys)
        names = sorted({name for _ns, name in wanted})
        namespaces = sorted({ns for ns, _name in wanted})
        rows = [row for start in range(0, len(names), 2000)
                for row in _workloads(api_version, kind).filter(
                    namespace__in=namespaces, name__in=names[start:start + 2000]).values(*fields)
                if (row["namespace"], row["name"]) in wanted]
    return {(row["namespace"], row["name"]): _status(row) for row in rows}


_STATUS_FIELDS = ("namespace", "name", "uid", "resource_version", "suspended", "conditions",
                  "replica_statuses", "active")
"""A workload's columns a :class:`WorkloadStatus` is built from."""


def _status(row: Mapping[str, Any]) -> WorkloadStatus:
    return WorkloadStatus(
        namespace=row["namespace"], name=row["name"], uid=row["uid"],
        resource_version=row["resource_version"], suspended=row["suspended"],
        conditions=tuple(c for c in row["conditions"] or [] if isinstance(c, Mapping)),
        replica_statuses=dict(row["replica_statuses"] or {}), active=row["active"])


def status_of(row: Any) -> WorkloadStatus:
    """The :class:`WorkloadStatus` of a workload's row as an informer keeps it
    (``k8s_sync.informer``): what :func:`workload_statuses` gives of a recorded one."""
    return _status({name: getattr(row, name) for name in _STATUS_FIELDS})


def pod_run_times(namespace: str, job: str) -> tuple[datetime | None, datetime | None]:
    """When the observed pods of one Trainyard job (label ``trainyard.io/job``) ran, by
    the kubelet's clock: the earliest container start and the latest end (None while a
    pod has not ended). One query."""
    rows = ObservedPod.objects.filter(namespace=namespace, job=job)
    agg = rows.aggregate(start=Min("started_at"), end=Max("finished_at"))
    if rows.filter(finished_at__isnull=True).exists():
        agg["end"] = None
    return agg["start"], agg["end"]
