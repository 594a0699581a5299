"""Pure quota decisions: from granted amounts to the cluster's ResourceQuota spec.

No database, no cluster: the selector gathers the rows, this decides the numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal

from k8s_sync.specs import QuotaSpec, StorageClassQuota
from tenants.catalog import Resource, ResourceKind

__all__ = ["quota_spec_for"]


def quota_spec_for(grants: Mapping[str, Decimal], *, storage_classes: Iterable[str] = (),
                   mig_profiles: Iterable[str] = (),
                   class_remap: Mapping[str, str] | None = None) -> QuotaSpec:
    """The ResourceQuota limits for one pool's current grants.

    What is not granted is zero, never unlimited: CPU, memory, whole and shared GPUs,
    every known MIG profile and every known StorageClass (so a namespace can create PVCs
    only of the classes it was granted). ``requests.nvidia.com/gpu`` is the total over
    GPU models; the per-model split, GPU memory and IOPS are enforced by Trainyard's
    admission, not by Kubernetes. ``class_remap`` moves a storage grant from a base
    StorageClass to the pool's own IOPS class (the base class then stays at zero).
    """
    parsed = {Resource.parse(key): Decimal(amount) for key, amount in grants.items()}

    def total(kind: ResourceKind) -> Decimal:
        return sum((a for r, a in parsed.items() if r.kind == kind), Decimal(0))

    def by_qualifier(kind: ResourceKind) -> dict[str, Decimal]:
        return {r.qualifier: a for r, a in parsed.items() if r.kind == kind}

    mig = dict.fromkeys(mig_profiles, 0)
    mig.update({profile: int(amount) for profile, amount in by_qualifier(ResourceKind.MIG).items()})
    storage = dict.fromkeys(storage_classes, Decimal(0))
    for name, amount in by_qualifier(ResourceKind.STORAGE).items():
        target = (class_remap or {}).get(name, name)
        storage[target] = amount
        if target != name:
            storage[name] = Decimal(0)
    pvcs = int(total(ResourceKind.PVCS)) if any(r.kind == ResourceKind.PVCS for r in parsed) \
        else None
    return QuotaSpec(
        cpu_cores=_plain(total(ResourceKind.CPU)),
        memory_gib=_plain(total(ResourceKind.MEMORY)),
        gpus=int(total(ResourceKind.GPU)),
        shared_gpus=int(total(ResourceKind.GPU_SHARED)),
        mig=mig,
        storage_gib=_plain(sum(storage.values(), Decimal(0))),
        pvc_count=pvcs,
        storage_classes=tuple(
            StorageClassQuota(name, storage_gib=_plain(amount),
                              pvc_count=None if amount else 0)
            for name, amount in sorted(storage.items())
        ),
    )


def _plain(amount: Decimal) -> Decimal:
    """Drop trailing zeros so 16.000 renders as "16", not "16000m"."""
    return amount.normalize() if amount else Decimal(0)
