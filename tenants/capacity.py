"""Capacity per catalog resource, and which resources exist, from what the cluster
observers recorded (never the cluster itself).

*Capacity* has one definition, ``k8s_sync.selectors.resource_capacity`` (allocatable on
every observed node, cordoned ones included); this module names it for the tenants app
and derives from it which resources a quota may name (:func:`offered_resources`).
"""

from __future__ import annotations

from decimal import Decimal

from core.resources import kinds
from k8s_sync.models import ObservedNode, ObservedStorageClass
from k8s_sync.naming import LABEL_TENANT
from k8s_sync.selectors import CapacityReport, capacity_report
from tenants.catalog import Resource, ResourceKind

#: Kinds whose capacity nodes advertise (``Dimension.node_resource``): offered when some has.
_FROM_NODES = kinds(lambda d: bool(d.node_resource))
#: Kinds offered whatever the nodes say (a pool may always be granted CPU, memory, ...).
PLAIN_KINDS = tuple(ResourceKind(k) for k in sorted(kinds(lambda d: d.always_offered)))


def capacity_by_resource(report: CapacityReport | None = None) -> dict[str, Decimal]:
    """Resource key -> capacity (``k8s_sync.selectors.resource_capacity``): cpu cores,
    memory GiB, whole cards per GPU model, MIG instances per profile, shared GPUs, GPU
    memory GiB. Storage and IOPS have no capacity here (they are not limited by
    overcommit)."""
    return (report or capacity_report()).resources


def offered_resources(capacity: dict[str, Decimal] | None = None) -> list[Resource]:
    """The resources a quota may name: the plain kinds, every GPU model and MIG profile
    with capacity (a node without a GPU model label offers no ``gpu:`` key), and the
    observed StorageClasses (storage and IOPS), the shared ones only: never a class a
    tenant's pools own (its ``trainyard.io/tenant`` label, as an older Trainyard's per-pool
    ``ty-`` IOPS classes carry), whose name the catalog would show every tenant.
    ``capacity``: :func:`capacity_by_resource`, when the caller has it already."""
    capacity = capacity if capacity is not None else capacity_by_resource()
    found = {Resource(kind) for kind in PLAIN_KINDS}
    for key in capacity:  # what nodes advertise (gpu:<model>, mig:<profile>, rdma ...)
        if key.partition(":")[0] in _FROM_NODES:
            found.add(Resource.parse(key))
    for name, labels in ObservedStorageClass.objects.values_list("name", "labels"):
        if not name.startswith("ty-") and LABEL_TENANT not in (labels or {}):
            found |= {Resource(ResourceKind.STORAGE, name), Resource(ResourceKind.IOPS, name)}
    return sorted(found)


def cluster_observed() -> bool:
    """Whether any node has been observed (before that, nothing can be said to exist)."""
    return ObservedNode.objects.exists()
