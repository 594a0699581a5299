"""What each namespace's bound pods hold of the GPU devices, counted as the capacity report
counts them (``k8s_sync.selectors.node_capacity``), so per-namespace figures add up to the
report's per-model ones: whole cards (``gpu:<model>``), MIG instances (``mig:<profile>``)
and shares of time-sliced or MPS cards (``shared:<model>``). Pure over the report's nodes
and the pods' rows it was built from (``CapacityReport.allocated_by_namespace``).

A HAMi vGPU holds the card memory of its ``nvidia.com/gpumem`` limit (its whole card
without one), counted here as that fraction of a card; the report counts a HAMi node's
cards by the memory held rounded up to whole cards, so there the namespaces' figures may
add up to a little less.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from k8s_sync.quantity import parse_quantity

if TYPE_CHECKING:
    from k8s_sync.selectors import CapacityReport, NodeCapacity

GPU, GPU_SHARED, MIG_PREFIX = "nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-"
HAMI_MEMORY = "nvidia.com/gpumem"
#: The device kinds, their key prefixes in the order pages show them.
KINDS = ("gpu", "mig", "shared")


def device_key(node: NodeCapacity, resource: str) -> str | None:
    """The device key a request of ``resource`` on ``node`` holds, or None (no GPU)."""
    if not node.gpu_model:
        return None
    if resource == GPU_SHARED:
        return f"shared:{node.gpu_model}"
    if resource.startswith(MIG_PREFIX):
        return f"mig:{resource.removeprefix(MIG_PREFIX)}"
    if resource != GPU:
        return None
    if node.sharing_strategy and not node.whole_allocatable:  # shares not renamed
        return f"shared:{node.gpu_model}"
    if not node.whole_allocatable and len(node.mig) == 1 and not node.hami:  # MIG single
        return f"mig:{node.mig[0].profile}"
    return f"gpu:{node.gpu_model}"


def devices_by_namespace(nodes: Iterable[NodeCapacity],
                         bound: Iterable[tuple[str, str, Mapping[str, Any]]]
                         ) -> dict[str, dict[str, Decimal]]:
    """namespace -> device key -> amount held by its bound, unfinished pods (``bound``:
    (node name, namespace, requests) of each; a pod on a node not listed holds nothing
    the report counts)."""
    by_name = {n.name: n for n in nodes}
    out: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for node_name, namespace, requests in bound:
        node = by_name.get(node_name)
        if node is None:
            continue
        for resource, raw in (requests or {}).items():
            key = device_key(node, resource)
            if key is None:
                continue
            try:
                amount = parse_quantity(raw)
            except ValueError:
                continue
            if node.hami and key.startswith("gpu:") and node.card_memory_mib:
                try:
                    per_card = parse_quantity(requests.get(HAMI_MEMORY) or
                                              node.card_memory_mib)
                except ValueError:
                    per_card = Decimal(node.card_memory_mib)
                amount = amount * min(Decimal(1), per_card / node.card_memory_mib)
            out[namespace][key] += amount
    return {ns: {k: v for k, v in keys.items() if v} for ns, keys in out.items()
            if any(keys.values())}


def allocated_devices(report: CapacityReport) -> dict[str, Decimal]:
    """Device key -> what the report counts allocated: whole cards and shares per GPU
    model, MIG instances per profile (the per-model table's figures)."""
    out: dict[str, Decimal] = defaultdict(Decimal)
    for model in report.models:
        out[f"gpu:{model.gpu_model}"] += model.whole_allocated
        out[f"shared:{model.gpu_model}"] += model.shared_allocated
        for mig in model.mig:
            out[f"mig:{mig.profile}"] += mig.allocated
    return {k: v for k, v in out.items() if v}


def by_kind(devices: Mapping[str, Decimal]) -> dict[str, Decimal]:
    """Device amounts summed per kind (``gpu`` cards, ``mig`` instances, ``shared``
    shares): never added across kinds, which count different things."""
    out = dict.fromkeys(KINDS, Decimal(0))
    for key, amount in devices.items():
        kind = key.partition(":")[0]
        if kind in out:
            out[kind] += amount
    return out
