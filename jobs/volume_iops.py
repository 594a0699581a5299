"""Provisioned IOPS of the checkpoint volumes Trainyard creates: the pool total a grant
``iops:<class>`` bounds (``tenants.storage``).

* the submission check (:func:`check_checkpoint_iops`): a new volume's IOPS must fit in
  what the pool's grant leaves, counting the pool's observed volumes and the new volumes
  of its jobs not observed yet (:func:`unobserved_iops`); refused naming ``checkpoint_iops``;
* the VolumeAttributesClass the volume names (:func:`checkpoint_volume_attributes_class`),
  one shared class per CSI driver and tier (``k8s_sync.storage``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from django.utils.translation import gettext as _

from core.exceptions import ApplicationError
from jobs.choices import ACTIVE_STATES
from k8s_sync.models import ObservedPVC
from k8s_sync.naming import job_name
from k8s_sync.storage import iops_volume_class_name
from tenants.selectors import effective_grants
from tenants.storage import iops_driver
from tenants.usage import in_use_by_pool

__all__ = ["check_checkpoint_iops", "checkpoint_volume_attributes_class", "unobserved_iops"]


def checkpoint_volume_attributes_class(job: Any) -> str:
    """The VolumeAttributesClass of the job's new checkpoint volume ("" for none: an
    existing claim, or the class's default IOPS). Raises ``ValueError`` when the class's
    driver cannot set IOPS (or the class is gone)."""
    if not job.checkpoint_iops or job.checkpoint_claim or not job.checkpoint_storage_class:
        return ""
    driver = iops_driver(job.checkpoint_storage_class)
    if driver is None:
        raise ValueError(f"checkpoint_iops: StorageClass {job.checkpoint_storage_class!r} "
                         "cannot set provisioned IOPS")
    return iops_volume_class_name(driver, int(job.checkpoint_iops))


def unobserved_iops(pools: list[Any], jobs: Iterable[Any]) -> dict[int, dict[str, Decimal]]:
    """Pool pk -> ``iops:<class>`` -> the provisioned IOPS of the new checkpoint volumes of
    ``jobs`` (the pools' queued, admitted, running and preempting jobs with
    ``checkpoint_iops``) that the cluster does not show yet: once observed,
    ``tenants.usage.volumes_by_namespace`` counts them. One query, none without jobs."""
    by_pk = {p.pk: p for p in pools}
    wanted = [job for job in jobs if job.checkpoint_iops and not job.checkpoint_claim
              and job.checkpoint_storage_class and job.state in ACTIVE_STATES
              and job.pool_id in by_pk]
    if not wanted:
        return {}
    observed = set(ObservedPVC.objects.filter(
        namespace__in=[p.namespace for p in pools]).values_list("namespace", "name"))
    out: dict[int, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for job in wanted:
        claim = f"{job.k8s_name or job_name(job.pk, job.name)}-ckpt"
        if (by_pk[job.pool_id].namespace, claim) not in observed:
            out[job.pool_id][f"iops:{job.checkpoint_storage_class}"] += Decimal(
                job.checkpoint_iops)
    return {pk: dict(v) for pk, v in out.items()}


def check_checkpoint_iops(pool: Any, clean: dict[str, Any]) -> None:
    """Refuse a new checkpoint volume whose provisioned IOPS the pool's grant of its class
    cannot hold (the grant is the sum over the pool's volumes; what is in use is what the
    quota page shows, ``tenants.usage.in_use_by_pool``)."""
    iops, storage_class = clean.get("checkpoint_iops"), clean.get("checkpoint_storage_class")
    if not iops or not storage_class:
        return
    pool_label = pool.get_kind_display()
    key = f"iops:{storage_class}"
    granted = effective_grants(pool).get(key, Decimal(0))
    if granted <= 0:
        raise ApplicationError(_(
            "Your %(pool)s pool has no IOPS quota for %(sc)s: leave the IOPS at the class's "
            "default, or ask for IOPS quota.") % {"pool": pool_label, "sc": storage_class},
            field="checkpoint_iops")
    if iops_driver(storage_class) is None:
        raise ApplicationError(_(
            "StorageClass %(sc)s cannot set provisioned IOPS per volume: leave the IOPS at "
            "the class's default.") % {"sc": storage_class}, field="checkpoint_iops")
    used = in_use_by_pool([pool]).get(pool.pk, {}).get(key, Decimal(0))
    if used + iops > granted:
        left = max(Decimal(0), granted - used)
        raise ApplicationError(_(
            "Your %(pool)s pool's volumes of %(sc)s use %(used)s of its %(granted)s IOPS; "
            "%(left)s are left, so a volume of %(iops)s IOPS does not fit: choose a lower "
            "tier, the class's default, or ask for more IOPS quota.") % {
            "pool": pool_label, "sc": storage_class, "used": _n(used),
            "granted": _n(granted), "left": _n(left), "iops": iops},
            field="checkpoint_iops")


def _n(amount: Decimal) -> str:
    return format(Decimal(amount).normalize(), "f")
