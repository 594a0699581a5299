"""Physical capacity per catalog resource, from what the cluster observers recorded."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

from k8s_sync.models import ObservedNode
from k8s_sync.quantity import parse_quantity
from k8s_sync.selectors import capacity_report

GIB = Decimal(1024**3)


def capacity_by_resource() -> dict[str, Decimal]:
    """Resource key -> physical amount: cpu cores, memory GiB, whole cards per GPU model,
    MIG instances per profile, shared GPUs, GPU memory GiB. Storage and IOPS have no
    capacity here (they are not limited by overcommit)."""
    totals: dict[str, Decimal] = defaultdict(Decimal)
    for allocatable in ObservedNode.objects.values_list("allocatable", flat=True):
        for key, resource, scale in (("cpu", "cpu", Decimal(1)), ("memory", "memory", GIB)):
            try:
                totals[key] += parse_quantity((allocatable or {}).get(resource) or 0) / scale
            except ValueError:
                continue
    report = capacity_report()
    for model in report.models:
        if model.whole_allocatable:
            totals[f"gpu:{model.gpu_model}"] += model.whole_allocatable
        for mig in model.mig:
            totals[f"mig:{mig.profile}"] += mig.allocatable
        if model.shared_allocatable:
            totals["gpu-shared"] += model.shared_allocatable
        totals["gpu-memory"] += Decimal(model.memory_mib) / 1024
    return {key: value.quantize(Decimal("0.001")) for key, value in totals.items()}
