"""Tenant StorageClasses that carry an IOPS quota (pure builders).

An IOPS grant on a StorageClass becomes a StorageClass of the pool's own, a copy of the
base class with the provisioner's IOPS parameter set to the granted amount. StorageClass
parameters are immutable, so the amount is part of the name: a new amount is a new
class. The class carries the pool's labels (``naming.pool_labels``), so the next pool
reconcile (``reconcile.converge``) deletes the class of an amount no longer granted.
Volumes already provisioned keep their PersistentVolumes (deleting a StorageClass does
not touch them), but a claim of the old class can no longer be provisioned or expanded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from k8s_sync import naming

__all__ = ["DEFAULT_IOPS_PARAMETERS", "build_iops_storage_class", "iops_class_name"]

# The StorageClass parameter that sets provisioned IOPS, per CSI provisioner.
DEFAULT_IOPS_PARAMETERS = {
    "ebs.csi.aws.com": "iops",
    "pd.csi.storage.gke.io": "provisioned-iops-on-create",
    "disk.csi.azure.com": "DiskIOPSReadWrite",
    "kubesim.trainyard.io/local": "iops",
}
_COPIED = ("provisioner", "reclaimPolicy", "volumeBindingMode", "allowVolumeExpansion",
           "mountOptions", "allowedTopologies")


def iops_class_name(namespace: str, base_class: str, iops: int) -> str:
    """``<namespace>-<base>-<iops>iops``, a valid DNS-1123 subdomain, shortened with a
    stable hash when too long."""
    name = f"{namespace}-{base_class}-{iops}iops"
    if len(name) <= 253 and naming.is_dns1123_subdomain(name):
        return name
    return naming.dns_label(namespace, base_class, f"{iops}iops")


def build_iops_storage_class(base: Mapping[str, Any], *, name: str, iops: int,
                             labels: Mapping[str, str],
                             parameters: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A copy of StorageClass ``base`` named ``name`` with provisioned IOPS set.

    ``parameters`` maps provisioner -> IOPS parameter name (default:
    :data:`DEFAULT_IOPS_PARAMETERS`). Raises ``ValueError`` for a provisioner with no
    known IOPS parameter, or a negative amount.
    """
    if isinstance(iops, bool) or not isinstance(iops, int) or iops < 0:
        raise ValueError(f"IOPS must be a whole number >= 0, got {iops!r}")
    provisioner = base.get("provisioner", "")
    key = (parameters or DEFAULT_IOPS_PARAMETERS).get(provisioner)
    if key is None:
        raise ValueError(f"no IOPS parameter is configured for provisioner {provisioner!r} "
                         f"(StorageClass {base.get('metadata', {}).get('name')!r})")
    obj: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name, "labels": dict(sorted(labels.items()))},
    }
    obj.update({k: base[k] for k in _COPIED if k in base})
    obj["parameters"] = {**dict(base.get("parameters") or {}), key: str(iops)}
    return obj
