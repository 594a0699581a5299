"""A pool's storage beyond GiB: provisioned IOPS as a pool total, and which StorageClasses
a tenant is shown.

IOPS: a grant ``iops:<class>`` is the sum of the provisioned IOPS of the pool's volumes
of that StorageClass. A volume carries its own provisioned IOPS by naming one of the
shared VolumeAttributesClasses of :func:`iops_tiers` (``k8s_sync.storage``); the pool
reconcile makes sure the classes of every tier up to the grant exist for the class's
CSI driver (:func:`iops_volume_classes`). The grant binds at submission
(``jobs.services``: a new volume whose IOPS would take the pool's sum over the grant is
refused) and in the volumes themselves (the driver provisions what the class says).
Kubernetes' ResourceQuota has no IOPS key, so the API server's admission does not bind
them. The tenant's Role is read-only (``k8s_sync.manifests.build_role``), so only
Trainyard creates a pool's claims; a claim someone with more rights writes by hand naming
one of the classes counts in the sum (``tenants.usage``), so its use shows.

Names: a tenant sees the cluster's shared StorageClasses and its own, never a class
another tenant's pools own (``trainyard.io/tenant`` label, as older Trainyard's per-pool
IOPS classes ``ty-<tenant>-...-<n>iops`` carry until the reconcile prunes them).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from django.conf import settings

from k8s_sync import naming
from k8s_sync.models import ObservedStorageClass
from k8s_sync.storage import DEFAULT_IOPS_PARAMETERS, build_iops_volume_class

__all__ = ["iops_driver", "iops_parameters", "iops_tiers", "iops_volume_classes",
           "storage_class_owners"]


def iops_tiers() -> list[int]:
    """The provisioned-IOPS amounts a new volume may ask for, smallest first."""
    return list(settings.TRAINYARD_IOPS_TIERS)


def iops_parameters() -> dict[str, str]:
    """CSI driver -> its VolumeAttributesClass IOPS parameter (defaults and settings)."""
    return {**DEFAULT_IOPS_PARAMETERS, **settings.TRAINYARD_IOPS_PARAMETERS}


def iops_volume_classes(grants: Mapping[str, Decimal],
                        cluster_storage_classes: Mapping[str, Mapping[str, Any]]
                        ) -> list[dict[str, Any]]:
    """The shared VolumeAttributesClasses a pool's IOPS grants need: each tier up to the
    grant, for the granted StorageClass's provisioner. Raises ``ValueError`` when a
    granted class does not exist or its driver has no known IOPS parameter."""
    out: dict[str, dict[str, Any]] = {}
    for key, amount in sorted(grants.items()):
        if not key.startswith("iops:") or amount <= 0:
            continue
        name = key.partition(":")[2]
        base = cluster_storage_classes.get(name)
        if base is None:
            raise ValueError(f"StorageClass {name!r} does not exist in the cluster")
        driver = str(base.get("provisioner") or "")
        if driver not in iops_parameters():
            raise ValueError(f"no IOPS parameter is configured for provisioner {driver!r} "
                             f"(StorageClass {name!r})")
        for tier in iops_tiers():
            if tier <= amount:
                vac = build_iops_volume_class(driver, tier, iops_parameters())
                out[vac["metadata"]["name"]] = vac
    return list(out.values())


def iops_driver(storage_class: str) -> str | None:
    """The observed provisioner of ``storage_class`` when it can set IOPS, else None."""
    driver = ObservedStorageClass.objects.filter(name=storage_class).values_list(
        "provisioner", flat=True).first()
    return driver if driver in iops_parameters() else None


def storage_class_owners() -> dict[str, str]:
    """Observed StorageClass -> the tenant its ``trainyard.io/tenant`` label names, for
    the classes a tenant's pools own (the shared ones are left out). A tenant is shown
    the shared classes and its own, never another's
    (``jobs.validation.Inventory.for_tenant``)."""
    return {name: str((labels or {})[naming.LABEL_TENANT])
            for name, labels in ObservedStorageClass.objects.values_list("name", "labels")
            if naming.LABEL_TENANT in (labels or {})}
