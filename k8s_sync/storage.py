"""Provisioned IOPS of a volume: VolumeAttributesClasses per IOPS tier (pure builders).

An IOPS grant ``iops:<class>`` is a pool total: the sum of the provisioned IOPS of the
pool's volumes of that StorageClass (``tenants.iops``). Each volume carries its own
provisioned IOPS the way Kubernetes 1.34 (GA) expresses it per volume: the claim names a
VolumeAttributesClass (``spec.volumeAttributesClassName``), whose ``parameters`` the
CSI external-provisioner passes to ``CreateVolume`` as mutable parameters
(kubernetes-csi/external-provisioner ``pkg/controller/controller.go``; the class's
``driverName`` must be the StorageClass's provisioner). Trainyard keeps one shared class
per (CSI driver, IOPS tier), named ``trainyard-iops-<n>-<driver>``: no tenant in the
name, so no tenant sees another's names. The claim's StorageClass stays the base class,
so the base class's storage quota binds as granted.

The IOPS parameter per CSI driver (the drivers' VolumeAttributesClass documentation):
AWS EBS ``iops`` (aws-ebs-csi-driver ``docs/modify-volume.md``), GCE PD / Hyperdisk
``provisioned-iops`` (kubernetes.io "Volume Attributes Classes"), Azure Disk
``DiskIOPSReadWrite`` (azuredisk-csi-driver), kubesim's ``local.csi.kubesim.trainyard.io``
``iops``; a VolumeAttributesClass is for CSI drivers only, whose names are DNS-1123
subdomains (pkg/apis/storage/validation ``validateCSIDriverName``);
``settings.TRAINYARD_IOPS_PARAMETERS`` adds or overrides drivers.

Trainyard before this change made a StorageClass per pool (``ty-<tenant>-<pool>-<class>-
<n>iops``) with the whole grant on every volume; those carry the pool's labels and the
next pool reconcile deletes them (:func:`iops_class_name` and
:func:`build_iops_storage_class` remain to name and build them, for the prune's tests).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from k8s_sync import naming

__all__ = ["DEFAULT_IOPS_PARAMETERS", "IOPS_ANNOTATION", "build_iops_storage_class",
           "build_iops_volume_class", "iops_class_name", "iops_of_volume_class",
           "iops_volume_class_name"]

# The VolumeAttributesClass parameter that sets provisioned IOPS, per CSI driver.
DEFAULT_IOPS_PARAMETERS = {
    "ebs.csi.aws.com": "iops",
    "pd.csi.storage.gke.io": "provisioned-iops",
    "disk.csi.azure.com": "DiskIOPSReadWrite",
    "local.csi.kubesim.trainyard.io": "iops",
}
#: the annotation on a VolumeAttributesClass of Trainyard's that says its IOPS
IOPS_ANNOTATION = "trainyard.io/provisioned-iops"
_VAC_PREFIX = "trainyard-iops-"
_VAC_NAME = re.compile(r"^trainyard-iops-([0-9]{1,9})-")
_COPIED = ("provisioner", "reclaimPolicy", "volumeBindingMode", "allowVolumeExpansion",
           "mountOptions", "allowedTopologies")


def _whole(iops: object) -> int:
    if isinstance(iops, bool) or not isinstance(iops, int) or iops <= 0:
        raise ValueError(f"IOPS must be a whole number > 0, got {iops!r}")
    return iops


def iops_volume_class_name(driver: str, iops: int) -> str:
    """``trainyard-iops-<n>-<driver>`` (a DNS-1123 label, hashed when too long)."""
    return naming.dns_label(f"{_VAC_PREFIX}{_whole(iops)}", driver.replace(".", "-")
                            .replace("/", "-").lower())


def iops_of_volume_class(name: str) -> int:
    """The IOPS of one of Trainyard's VolumeAttributesClasses by its name; 0 for any other
    class (or none)."""
    match = _VAC_NAME.match(name or "")
    return int(match.group(1)) if match else 0


def build_iops_volume_class(driver: str, iops: int,
                            parameters: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The shared VolumeAttributesClass of ``iops`` provisioned IOPS for CSI ``driver``.

    ``parameters`` maps driver -> IOPS parameter name (default:
    :data:`DEFAULT_IOPS_PARAMETERS`). Raises ``ValueError`` for a driver with no known
    IOPS parameter, or an amount that is not a whole number above 0.
    """
    key = (parameters or DEFAULT_IOPS_PARAMETERS).get(driver)
    if key is None:
        raise ValueError(f"no IOPS parameter is configured for CSI driver {driver!r}")
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttributesClass",
        "metadata": {"name": iops_volume_class_name(driver, iops),
                     "labels": naming.managed_labels(),
                     "annotations": {IOPS_ANNOTATION: str(iops)}},
        "driverName": driver,
        "parameters": {key: str(_whole(iops))},
    }


def iops_class_name(namespace: str, base_class: str, iops: int) -> str:
    """The name of an older Trainyard's per-pool IOPS StorageClass:
    ``<namespace>-<base>-<iops>iops``, shortened with a stable hash when too long."""
    name = f"{namespace}-{base_class}-{iops}iops"
    if len(name) <= 253 and naming.is_dns1123_subdomain(name):
        return name
    return naming.dns_label(namespace, base_class, f"{iops}iops")


def build_iops_storage_class(base: Mapping[str, Any], *, name: str, iops: int,
                             labels: Mapping[str, str]) -> dict[str, Any]:
    """An older Trainyard's per-pool IOPS StorageClass (a copy of ``base`` with the IOPS
    parameter set), as the pool reconcile now prunes it. Raises ``ValueError`` for a
    provisioner with no known IOPS parameter."""
    provisioner = base.get("provisioner", "")
    key = {**DEFAULT_IOPS_PARAMETERS, "pd.csi.storage.gke.io": "provisioned-iops-on-create"
           }.get(provisioner)
    if key is None:
        raise ValueError(f"no IOPS parameter is configured for provisioner {provisioner!r}")
    obj: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name, "labels": dict(sorted(labels.items()))},
    }
    obj.update({k: base[k] for k in _COPIED if k in base})
    obj["parameters"] = {**dict(base.get("parameters") or {}), key: str(iops)}
    return obj
