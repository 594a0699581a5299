"""Kueue's objects from Trainyard's quotas, and Kueue's decisions read back: pure.

With ``TRAINYARD_ADMISSION_BACKEND=kueue`` Kueue admits jobs and Trainyard writes the
objects Kueue admits by (``kueue.x-k8s.io/v1beta2``) from its own state, level-triggered
and idempotent like a pool's objects (``tenants.tasks.reconcile_kueue`` ->
``reconcile.converge``). This module turns a plain :class:`KueueSpec` (built by
``tenants.kueue.kueue_spec`` from grants, loans and the policy) into those manifests, and
a Workload as the API returns it into a :class:`WorkloadView`. It imports nothing of the
domain apps nor the ``kubernetes`` package.

The mapping (docs/architecture.md, "Kueue mode"):

* **ResourceFlavor** per GPU model (``nodeLabels: nvidia.com/gpu.product=<model>``), per
  MIG profile (its own resource ``nvidia.com/mig-<profile>``), one for shared GPUs
  (``nvidia.com/gpu.shared``, any model: the grant ``gpu-shared`` is not per model) and
  one for CPU and memory. GPU flavors carry ``topologyName`` when the policy names
  topology levels.
* **One cohort for the cluster** (``trainyard``): a pool borrows any other pool's idle
  quota of the same resource, and flavors already keep GPU models apart (quota is per
  flavor and resource), so cohorts per model would add nothing but one ClusterQueue per
  pool and model. The cohort has **its own nominal quota**: the physical capacity no
  queue was granted (``KueueSpec.capacity`` per catalog key minus the sum of every
  queue's nominal quota, never below 0; :func:`cohort_quota`). Kueue lends only what the
  nominal quotas in a cohort add up to (``resource_node.go``: a cohort's
  ``SubtreeQuota`` is its own quota plus its children's), while Trainyard's engine lends
  any idle card, granted or not (grants often add up to less than the cluster): the
  cohort's own quota is that ungranted capacity, which only borrowers use and which no
  queue ever reclaims (nobody is within a nominal quota on it).
* **ClusterQueue** per pool (named as its namespace): ``nominalQuota`` is the pool's
  effective grant (grants with active loans: a loan moves nominal quota from the
  lender's queue to the borrower's, and no queue has a ``lendingLimit``: a loan is a
  guaranteed transfer, which Kueue expresses with nominal quota only; README, "Loans in
  Kueue mode"). Every queue covers every flavor the cluster has (nominal 0 where not
  granted), so a pool without a borrowing cap may borrow a GPU model it was not granted,
  as the engine allows. Production (the ``prod`` pool) never borrows
  (``borrowingLimit: 0``) and never preempts within its queue, so no reclaim can ever
  reach it (Kueue reclaims only from queues above their nominal quota); development
  (``dev``) borrows up to the pool's borrowing limit (``tenants.demand.pool_ceiling``
  under a cap an admin set: ``borrowingLimit`` = ceiling - grant; no cap,
  ``QueueSpec.borrowing`` None: no ``borrowingLimit``, any idle capacity) and, borrowing,
  may preempt batch (``borrowWithinCohort``). Both reclaim their nominal quota from
  borrowers (``reclaimWithinCohort: Any``): Kueue takes candidates lowest priority first
  (batch, then development), most recently admitted first, each evicted with its tier's
  grace (the pods' termination grace), as the engine does.
* **Batch**: a second ClusterQueue per pool, ``<namespace>-batch``, with no nominal
  quota: it only borrows (no ``borrowingLimit`` without a cap; under one, up to the
  pool's ceiling), so batch runs on idle capacity only, never preempts and is reclaimed
  first.
* **LocalQueue** ``trainyard`` (and ``trainyard-batch``) in each pool namespace.
* **WorkloadPriorityClass** per tier, the tiers' PriorityClass values and names.
* **Topology** ``trainyard`` from the policy's levels (widest first) and the hostname.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import ROUND_FLOOR, Decimal
from typing import Any, Literal

from core.resources import REGISTRY, Dimension, by_kind
from k8s_sync import naming
from k8s_sync.kueue_workloads import (  # noqa: F401 (re-exported: the Workloads read back)
    JOB_KINDS,
    Condition,
    WorkloadView,
    conditions_by_type,
    owner_of,
    workload_view,
    workloads_by_job,
)
from k8s_sync.specs import (
    TierSpec,
    cpu_quantity,
    default_tiers,
    gib_quantity,
)

__all__ = [
    "BATCH_LOCAL_QUEUE", "COHORT", "KINDS", "KUEUE_API", "LABEL_PRIORITY_CLASS",
    "LABEL_QUEUE_NAME", "LOCAL_QUEUE", "QUEUE_ROLES", "KueueSpec", "QueueSpec",
    "WorkloadView", "cluster_queue_name", "cohort_quota", "counted", "desired_kueue_objects",
    "kueue_job",
    "owner_labels", "workload_view",
]

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_API = f"{KUEUE_GROUP}/v1beta2"
VISIBILITY_API = "visibility.kueue.x-k8s.io/v1beta2"
#: The labels a job is queued and prioritised by (Kueue's ``constants``).
LABEL_QUEUE_NAME = "kueue.x-k8s.io/queue-name"
LABEL_PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"
ANNOTATION_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
HOSTNAME_LABEL = "kubernetes.io/hostname"
LABEL_COMPONENT = "trainyard.io/component"
COMPONENT = "kueue"

COHORT = "trainyard"
TOPOLOGY = "trainyard"
LOCAL_QUEUE = "trainyard"
BATCH_LOCAL_QUEUE = "trainyard-batch"
DEFAULT_FLAVOR = by_kind("cpu").kueue_flavor
SHARED_FLAVOR = by_kind("gpu-shared").kueue_flavor

#: What Trainyard writes of Kueue, in apply order (a flavor before the queue naming it).
KINDS: tuple[tuple[str, str], ...] = (
    (KUEUE_API, "Topology"), (KUEUE_API, "ResourceFlavor"),
    (KUEUE_API, "WorkloadPriorityClass"), (KUEUE_API, "Cohort"),
    (KUEUE_API, "ClusterQueue"), (KUEUE_API, "LocalQueue"),
)
WORKLOAD = (KUEUE_API, "Workload")

QueueRole = Literal["prod", "dev", "batch"]
QUEUE_ROLES: tuple[QueueRole, ...] = ("prod", "dev", "batch")

Amounts = Mapping[str, Decimal]


def owner_labels() -> dict[str, str]:
    """The labels of every Kueue object Trainyard writes (what a converge prunes by)."""
    return {**naming.managed_labels(), LABEL_COMPONENT: COMPONENT}


def cluster_queue_name(namespace: str, role: QueueRole) -> str:
    """The ClusterQueue of a pool namespace: its name, or ``<name>-batch``."""
    return f"{namespace}-batch" if role == "batch" else namespace


def local_queue_for(tier: str) -> str:
    """The LocalQueue a job of ``tier`` is submitted to in its pool's namespace."""
    return BATCH_LOCAL_QUEUE if str(tier) == "batch" else LOCAL_QUEUE


def gpu_flavor_name(model: str) -> str:
    return naming.dns_label("gpu", model.lower())


def mig_flavor_name(profile: str) -> str:
    return naming.dns_label("mig", profile.replace(".", "-"))


@dataclass(frozen=True)
class QueueSpec:
    """One pool's ClusterQueue: ``nominal`` and ``borrowing`` limits by catalog key
    (``cpu``, ``memory``, ``gpu:<model>``, ``mig:<profile>``, ``gpu-shared``; other keys
    are not counted by Kueue and ignored). A key missing from ``nominal`` is 0; missing
    from ``borrowing`` is no borrowing; ``borrowing=None``: Kueue's default (no limit)."""

    tenant_slug: str
    pool: Literal["prod", "dev"]
    role: QueueRole
    nominal: Amounts = field(default_factory=dict)
    borrowing: Amounts | None = field(default_factory=dict)

    def __post_init__(self) -> None:
        naming.validate_pool(self.pool)
        if self.role not in QUEUE_ROLES:
            raise ValueError(f"unknown queue role {self.role!r}")
        object.__setattr__(self, "nominal", dict(sorted(self.nominal.items())))
        if self.borrowing is not None:
            object.__setattr__(self, "borrowing", dict(sorted(self.borrowing.items())))

    @property
    def namespace(self) -> str:
        return naming.namespace_name(self.tenant_slug, self.pool)

    @property
    def name(self) -> str:
        return cluster_queue_name(self.namespace, self.role)


@dataclass(frozen=True)
class KueueSpec:
    """Everything Kueue needs of Trainyard: the queues (two per pool: the pool's queue
    and its batch queue), the tiers, the topology levels and the cluster's physical
    ``capacity`` per catalog key (``k8s_sync.selectors.resource_capacity``: what the
    observed nodes advertise; keys Kueue does not count are ignored). Capacity no queue
    was granted becomes the cohort's own nominal quota (:func:`cohort_quota`)."""

    queues: tuple[QueueSpec, ...] = ()
    tiers: tuple[TierSpec, ...] = field(default_factory=default_tiers)
    topology_levels: tuple[str, ...] = ()
    batch_threshold: int | None = None
    capacity: Amounts = field(default_factory=dict)
    holds: tuple[Any, ...] = ()  # maintenance windows' holds (k8s_sync.kueue_hold.HoldSpec)

    def __post_init__(self) -> None:
        object.__setattr__(self, "capacity", {k: Decimal(v) for k, v in sorted(
            self.capacity.items()) if counted(k)})

    def resource_keys(self) -> list[str]:
        """Every counted catalog key the cluster has capacity of or any queue names, plus
        cpu and memory (every pod requests them, and Kueue refuses a workload asking for
        a resource its queue does not cover)."""
        found = {"cpu", "memory"} | set(self.capacity)
        for queue in self.queues:
            found |= {k for k in queue.nominal if counted(k)}
            found |= {k for k in (queue.borrowing or {}) if counted(k)}
        return sorted(found)


def _dimension(key: str) -> tuple[Dimension | None, str]:
    kind, _sep, qualifier = key.partition(":")
    try:
        return by_kind(kind), qualifier
    except KeyError:
        return None, qualifier


def counted(key: str) -> bool:
    """Whether Kueue counts catalog ``key``: its dimension has a Kueue resource
    (``core.resources``), and the key a qualifier exactly when the dimension takes one."""
    dim, qualifier = _dimension(key)
    return dim is not None and bool(dim.kueue_resource) and (
        bool(qualifier) == (dim.qualifier is not None))


#: The flavor of one qualifier of a qualified dimension (a GPU model's, a MIG profile's):
#: their names are kept as they were before the registry (clusters hold them).
_QUALIFIED_FLAVOR: dict[str, Callable[[str], str]] = {
    "gpu": gpu_flavor_name, "mig": mig_flavor_name}


def _resource_of(key: str) -> tuple[str, str]:
    """(flavor, Kubernetes resource) counting catalog ``key`` (``core.resources``)."""
    dim, qualifier = _dimension(key)
    if dim is None or not counted(key):
        raise ValueError(f"{key!r} is not a resource Kueue counts")
    resource = dim.kueue_resource.format(q=qualifier)
    if qualifier:
        return _QUALIFIED_FLAVOR[dim.kind](qualifier), resource
    return dim.kueue_flavor, resource


def _quantity(key: str, amount: Decimal) -> str:
    kind = key.partition(":")[0]
    if amount < 0:
        raise ValueError(f"{key}: a negative amount {amount}")
    if kind == "cpu":
        return cpu_quantity(amount)
    if kind == "memory":
        return gib_quantity(amount)
    return str(int(amount))  # whole cards, instances, shares, NICs


def _registry_order(key: str) -> tuple[int, str]:
    kind = key.partition(":")[0]
    return next((i for i, d in enumerate(REGISTRY) if d.kind == kind), len(REGISTRY)), key


def _groups(keys: list[str]) -> list[tuple[tuple[str, ...], list[tuple[str, list[str]]]]]:
    """The resource groups every ClusterQueue has: [(covered resources, [(flavor,
    [catalog keys in resource order])])], from the registry: the keys of one flavor
    (cpu and memory) cover their resources together; the flavors of one resource (a
    flavor per GPU model) form one group; each MIG profile, shared GPUs and RDMA NICs
    have their own. Groups in the registry's order."""
    by_flavor: dict[str, list[str]] = {}
    for key in sorted(keys, key=_registry_order):
        by_flavor.setdefault(_resource_of(key)[0], []).append(key)
    groups: dict[tuple[str, ...], list[tuple[str, list[str]]]] = {}
    for flavor, members in by_flavor.items():
        covered = tuple(dict.fromkeys(_resource_of(k)[1] for k in members))
        groups.setdefault(covered, []).append((flavor, members))
    return list(groups.items())


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": owner_labels()}
    if namespace:
        meta["namespace"] = namespace
    return meta


def _flavor(name: str, node_labels: Mapping[str, str], topology: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if node_labels:
        spec["nodeLabels"] = dict(node_labels)
    if topology:
        spec["topologyName"] = TOPOLOGY
    return {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": _meta(name),
            "spec": spec}


def build_flavors(spec: KueueSpec) -> list[dict[str, Any]]:
    """One ResourceFlavor per flavor the groups name (:func:`_groups`); a GPU model's
    selects its nodes by their product label, and carries the topology."""
    topology = bool(spec.topology_levels)
    flavors = [_flavor(DEFAULT_FLAVOR, {}, False)]
    seen = {DEFAULT_FLAVOR}
    for key in sorted(spec.resource_keys(), key=_registry_order):
        flavor = _resource_of(key)[0]
        if flavor in seen:
            continue
        seen.add(flavor)
        dim, qualifier = _dimension(key)
        if dim is not None and dim.node_label and qualifier:
            flavors.append(_flavor(flavor, {dim.node_label: qualifier}, topology))
        else:
            flavors.append(_flavor(flavor, {}, False))
    return flavors


def build_topology(spec: KueueSpec) -> dict[str, Any] | None:
    """The Topology of the policy's levels (widest first), hostname last; None without
    levels."""
    if not spec.topology_levels:
        return None
    levels = [level for level in spec.topology_levels if level != HOSTNAME_LABEL]
    return {"apiVersion": KUEUE_API, "kind": "Topology", "metadata": _meta(TOPOLOGY),
            "spec": {"levels": [{"nodeLabel": level} for level in [*levels, HOSTNAME_LABEL]]}}


def build_priority_class(tier: TierSpec) -> dict[str, Any]:
    return {"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass",
            "metadata": _meta(tier.priority_class_name), "value": tier.value,
            "description": tier.description}


def _floored(key: str, amount: Decimal) -> Decimal:
    """``amount`` rounded down to what a quantity of ``key`` can say: whole cards,
    instances and shares, a millicore, a MiB (capacity is observed, not granted: memory
    allocatable is rarely a whole MiB in GiB)."""
    kind = key.partition(":")[0]
    step = {"cpu": Decimal("0.001"), "memory": Decimal(1) / 1024}.get(kind, Decimal(1))
    return (amount / step).to_integral_value(rounding=ROUND_FLOOR) * step


def cohort_quota(spec: KueueSpec) -> dict[str, Decimal]:
    """The cohort's own nominal quota per catalog key: the physical capacity no queue was
    granted, ``capacity - sum of every queue's nominal quota``, never below 0 (grants
    may add up to more than the cluster: overcommitted tenants), rounded down to what a
    quantity can say. Empty without capacity (the nodes not observed yet)."""
    if not spec.capacity:
        return {}
    granted: dict[str, Decimal] = {}
    for queue in spec.queues:
        for key, amount in queue.nominal.items():
            if counted(key):
                granted[key] = granted.get(key, Decimal(0)) + Decimal(amount)
    return {key: _floored(key, max(Decimal(0), spec.capacity.get(key, Decimal(0))
                                   - granted.get(key, Decimal(0))))
            for key in spec.resource_keys()}


def _resource_groups(spec: KueueSpec, quota: Callable[[str], dict[str, Any]]
                     ) -> list[dict[str, Any]]:
    """``resourceGroups`` covering every counted resource of the cluster, each flavor
    listing its group's resources in order; ``quota(key)``: the item's limits."""
    groups = []
    for covered, flavors in _groups(spec.resource_keys()):
        rendered = [{"name": flavor, "resources": [
            {"name": _resource_of(key)[1], **quota(key)} for key in keys]}
            for flavor, keys in flavors]
        groups.append({"coveredResources": list(covered), "flavors": rendered})
    return groups


def build_cohort(spec: KueueSpec) -> dict[str, Any]:
    """The cohort ``trainyard``, with the ungranted capacity as its own nominal quota
    (:func:`cohort_quota`; none before the nodes were observed)."""
    own = cohort_quota(spec)
    body: dict[str, Any] = {}
    if own:
        body["resourceGroups"] = _resource_groups(spec, lambda key: {
            "nominalQuota": _quantity(key, own[key])})
    return {"apiVersion": KUEUE_API, "kind": "Cohort", "metadata": _meta(COHORT),
            "spec": body}


def _preemption(queue: QueueSpec, spec: KueueSpec) -> dict[str, Any]:
    """Batch preempts nothing. Production and development reclaim their nominal quota
    from borrowers of any queue (``Any``: Kueue takes only workloads of queues above
    their nominal quota, lowest priority and most recent first; production, which never
    borrows, is never one) and never preempt within their own queue (the engine never
    preempts a pool's work for its own work of the same tier)."""
    if queue.role == "batch":
        return {"reclaimWithinCohort": "Never", "withinClusterQueue": "Never"}
    preemption: dict[str, Any] = {"reclaimWithinCohort": "Any", "withinClusterQueue": "Never"}
    if queue.role == "dev":
        # Borrowing, development may take idle capacity back from batch (lower priority
        # than the threshold), never from another development or production job.
        threshold = spec.batch_threshold
        if threshold is None:
            batch = [t.value for t in spec.tiers if str(t.name) == "batch"]
            threshold = batch[0] if batch else None
        if threshold is not None:
            preemption["borrowWithinCohort"] = {"policy": "LowerPriority",
                                                "maxPriorityThreshold": int(threshold)}
    return preemption


def build_cluster_queue(queue: QueueSpec, spec: KueueSpec) -> dict[str, Any]:
    """A pool's queue: every flavor of the cluster, ``nominalQuota`` its grant (0 where
    not granted; for an overcommitted-mode tenant its guaranteed part,
    ``tenants.kueue.queue_limits``); production ``borrowingLimit: 0`` (the overcommitted
    part of its grant, ``QueueSpec.borrowing``, for an overcommitted-mode tenant);
    development and batch the pool's borrowing limit (0 for a key missing from it), or
    none at all without a cap. Never a ``lendingLimit`` (docs/architecture.md)."""
    def quota(key: str) -> dict[str, Any]:
        item = {"nominalQuota": _quantity(key, Decimal(queue.nominal.get(key, 0)))}
        if queue.role == "prod":   # the overcommitted part of its grant, else 0
            item["borrowingLimit"] = _quantity(key, Decimal((queue.borrowing or {}).get(key, 0)))
        elif queue.borrowing is not None:
            item["borrowingLimit"] = _quantity(key, Decimal(queue.borrowing.get(key, 0)))
        return item

    groups = _resource_groups(spec, quota)
    return {
        "apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": _meta(queue.name),
        "spec": {
            "cohortName": COHORT,
            "namespaceSelector": {"matchLabels": {
                "kubernetes.io/metadata.name": queue.namespace}},
            "resourceGroups": groups,
            "preemption": _preemption(queue, spec),
        },
    }


def build_local_queues(queue: QueueSpec) -> list[dict[str, Any]]:
    name = BATCH_LOCAL_QUEUE if queue.role == "batch" else LOCAL_QUEUE
    return [{"apiVersion": KUEUE_API, "kind": "LocalQueue",
             "metadata": _meta(name, queue.namespace),
             "spec": {"clusterQueue": queue.name}}]


def desired_kueue_objects(spec: KueueSpec) -> list[dict[str, Any]]:
    """Every Kueue object Trainyard wants, in apply order. Pure and deterministic: the
    same spec gives the same list, so a converge with nothing changed writes nothing."""
    topology = build_topology(spec)
    objects: list[dict[str, Any]] = [topology] if topology else []
    objects += build_flavors(spec)
    objects += [build_priority_class(tier) for tier in spec.tiers]
    objects.append(build_cohort(spec))
    queues = sorted(spec.queues, key=lambda q: q.name)
    objects += [build_cluster_queue(queue, spec) for queue in queues]
    for queue in queues:
        objects += build_local_queues(queue)
    return objects  # and the holds': k8s_sync.kueue_hold.desired_objects


# --- jobs ----------------------------------------------------------------------------------


def kueue_job(manifest: Mapping[str, Any], *, tier: str,
              required_topology: str = "") -> dict[str, Any]:
    """A built PyTorchJob (``manifests.build_pytorchjob``) or TrainJob as Kueue takes it:
    the queue and priority-class labels, created suspended (``runPolicy.suspend``, a
    TrainJob's ``spec.suspend``; Kueue un-suspends it when it admits the workload) and,
    for a multi-node PyTorchJob, its pods required under one
    ``required_topology`` domain (Kueue's topology-aware scheduling). Returns a new
    dict."""
    job = copy.deepcopy(dict(manifest))
    labels = job.setdefault("metadata", {}).setdefault("labels", {})
    labels[LABEL_QUEUE_NAME] = local_queue_for(tier)
    labels[LABEL_PRIORITY_CLASS] = naming.priority_class_name(tier)
    spec = job.setdefault("spec", {})
    if job.get("kind") == "TrainJob":  # Kubeflow Trainer v2: spec.suspend
        spec["suspend"] = True
        return job
    spec.setdefault("runPolicy", {})["suspend"] = True
    replicas = spec.get("pytorchReplicaSpecs") or {}
    several = sum(int(r.get("replicas") or 0) for r in replicas.values()) > 1
    for replica in replicas.values():
        template = replica.setdefault("template", {})
        if required_topology and several:
            template.setdefault("metadata", {}).setdefault("annotations", {})[
                ANNOTATION_REQUIRED_TOPOLOGY] = required_topology
    return job


def workload_active_patch(active: bool) -> dict[str, Any]:
    """Merge patch that deactivates (``False``: Kueue evicts it, the job is suspended and
    its pods get their grace period; it is not requeued) or reactivates a Workload."""
    return {"spec": {"active": bool(active)}}
