"""What each pool has allocated right now, per catalog resource, from observed pods.

Allocation is what running (and bound, not finished) pods requested: CPU cores, memory
GiB, whole cards per GPU model (the model of the node the pod is on), MIG instances,
shared GPUs, GPU memory, plus PVC storage per class. Reads only k8s_sync's observed
tables; never calls the cluster.
"""

from __future__ import annotations

from collections import defaultdict
from contextlib import suppress
from decimal import Decimal

from k8s_sync.models import ObservedNode, ObservedPod, ObservedPVC
from k8s_sync.quantity import parse_quantity
from k8s_sync.selectors import HAMI_MEMORY, mig_profile_memory_mib, share_memory_mib

GIB = Decimal(1024**3)
MIG_PREFIX = "nvidia.com/mig-"


def allocation_by_namespace(namespaces: list[str] | None = None
                            ) -> dict[str, dict[str, Decimal]]:
    """namespace -> resource key -> allocated amount (three queries)."""
    nodes = {n.name: n for n in ObservedNode.objects.only(
        "name", "gpu_model", "gpu_memory_mib", "gpu_replicas", "labels")}
    pods = ObservedPod.objects.exclude(node_name="").exclude(phase__in=["Succeeded", "Failed"])
    pvcs = ObservedPVC.objects.all()
    if namespaces is not None:
        pods = pods.filter(namespace__in=namespaces)
        pvcs = pvcs.filter(namespace__in=namespaces)
    out: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for namespace, node_name, requests in pods.values_list("namespace", "node_name", "requests"):
        node = nodes.get(node_name)
        usage = out[namespace]
        requests = requests or {}
        for resource, raw in requests.items():
            try:
                amount = parse_quantity(raw)
            except ValueError:
                continue
            _add(usage, resource, amount, node, requests)
    for namespace, storage_class, size in pvcs.values_list("namespace", "storage_class",
                                                           "requested_bytes"):
        if storage_class and size:
            out[namespace][f"storage:{storage_class}"] += Decimal(size) / GIB
            out[namespace]["pvcs"] += 1
    return {ns: {k: v.quantize(Decimal("0.001")) for k, v in usage.items()}
            for ns, usage in out.items()}


def _add(usage: dict[str, Decimal], resource: str, amount: Decimal,
         node: ObservedNode | None, requests: dict) -> None:
    """Add one pod request; GPU memory is derived as ``tenants.demand`` derives a job's:
    a card's memory, HAMi's per-card limit (``nvidia.com/gpumem``, MiB) where the pod
    sets one, a share's slice, a MIG profile's memory."""
    card_gib = Decimal(node.gpu_memory_mib or 0) / 1024 if node else Decimal(0)
    if HAMI_MEMORY in requests:
        with suppress(ValueError):
            card_gib = parse_quantity(requests[HAMI_MEMORY]) / 1024
    if resource == "cpu":
        usage["cpu"] += amount
    elif resource == "memory":
        usage["memory"] += amount / GIB
    elif resource == "nvidia.com/gpu":
        usage[f"gpu:{node.gpu_model if node and node.gpu_model else 'unknown'}"] += amount
        usage["gpu-memory"] += amount * card_gib
    elif resource == "nvidia.com/gpu.shared":
        usage["gpu-shared"] += amount
        share = share_memory_mib(node) if node else None
        if share:
            usage["gpu-memory"] += amount * Decimal(share) / 1024
    elif resource.startswith(MIG_PREFIX):
        profile = resource.removeprefix(MIG_PREFIX)
        usage[f"mig:{profile}"] += amount
        usage["gpu-memory"] += amount * Decimal(mig_profile_memory_mib(profile) or 0) / 1024
