"""Cluster sync of tenant pools: one task reconciles one pool; a periodic pass repairs drift.

* ``tenants.reconcile_pool(pool_id)``: make the pool's namespace and its objects match
  the database, deleting the objects Trainyard labelled as the pool's that it no longer
  declares (``k8s_sync.reconcile.converge``), or remove the namespace of a deleted
  tenant. Idempotent; retried with
  exponential backoff and jitter on transient API errors; a permanent error is recorded
  on the pool and shown in its page and in the API.
* ``tenants.resync_pools()``: list what Trainyard manages in the cluster (one list call
  per kind of ``manifests.POOL_KINDS``, no per-object reads), compare with the database
  (``reconcile.plan``: an object missing or differing, or one the pool owns and no
  longer declares), and enqueue a reconcile only for pools that drifted, are pending, or
  failed. Writes nothing when nothing changed.
* ``tenants.reconcile_cluster()``: the cluster-wide PriorityClasses of the tiers.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from datetime import timedelta
from decimal import Decimal
from typing import Any

from celery import shared_task
from django.utils import timezone

from core.choices import PoolKind
from core.models import Policy
from k8s_sync import kueue, kueue_hold, manifests, naming
from k8s_sync.client import K8sError, get_client, is_transient
from k8s_sync.models import ObservedPod, ObservedPVC
from k8s_sync.placement import node_dedication_patch
from k8s_sync.reconcile import Owner, converge, plan, pool_owner
from tenants import selectors, services
from tenants.choices import QuotaMode, RequestSource, RequestStatus, SyncState, TenantStatus
from tenants.kueue import kueue_on, kueue_spec
from tenants.models import Pool, QuotaRequest, VolumeUse
from tenants.quota import propose_amount, volumes_to_reclaim
from tenants.series import usage_rollup, usage_sample
from tenants.signals import volumes_held
from tenants.usage import allocation_by_namespace

log = logging.getLogger(__name__)

MAX_RETRIES = 8
STORAGE_CLASS = ("storage.k8s.io/v1", "StorageClass")


def backoff_seconds(retries: int) -> float:
    """Exponential backoff with full jitter: about 2, 4, 8 ... seconds, capped at 5 minutes."""
    return random.uniform(0.5, 1.0) * min(300.0, 2.0 ** (retries + 1))


@shared_task(name="tenants.reconcile_pool", queue="k8s", bind=True, max_retries=MAX_RETRIES,
             acks_late=True)
def reconcile_pool(self, pool_id: int) -> str:  # type: ignore[no-untyped-def]
    """Converge one pool; returns "gone", "applied N" (", pruned M" when it deleted objects
    no longer declared), "unchanged", "deleting", "deleted" or "error"."""
    pool = Pool.objects.select_related("tenant").filter(pk=pool_id).first()
    if pool is None or pool.tenant.status == TenantStatus.DELETED:
        return "gone"
    version = pool.desired_version
    services.pool_sync_started(pool_id=pool_id)
    client = get_client()
    try:
        if pool.tenant.status == TenantStatus.DELETING:
            return _remove_namespace(pool, version)
        desired = selectors.pool_objects(pool, cluster_storage_classes=_storage_classes(client))
        result = converge(client, desired, owner=pool_owner(pool.tenant.slug, pool.kind),
                          assume_missing=pool.synced_version == 0)
    except ValueError as exc:  # the grants cannot be expressed in this cluster
        services.pool_sync_failed(pool_id=pool_id, error=str(exc), transient=False)
        return "error"
    except K8sError as exc:
        services.pool_sync_failed(pool_id=pool_id, error=str(exc), transient=is_transient(exc))
        log.warning("reconcile of pool %s failed: %s", pool, exc)
        if is_transient(exc) and self.request.retries < MAX_RETRIES:
            raise self.retry(exc=exc, countdown=backoff_seconds(self.request.retries)) from exc
        return "error"
    services.pool_sync_succeeded(pool_id=pool_id, version=version)
    if kueue_on():
        _kueue_sync()  # the pool's grants are its ClusterQueue's quota
    if not result.changed:
        return "unchanged"
    if result.deletes:
        return f"applied {result.writes}, pruned {result.deletes}"
    return f"applied {result.writes}"


def _storage_classes(client) -> dict[str, dict]:  # type: ignore[no-untyped-def]
    return {sc["metadata"]["name"]: sc
            for sc in client.list_objects("storage.k8s.io/v1", "StorageClass")}


def _remove_namespace(pool: Pool, version: int) -> str:
    """Delete the pool's namespace; once both of the tenant's namespaces are gone, the
    tenant is marked deleted. Namespace deletion is asynchronous, so this re-checks."""
    client = get_client()
    client.ensure_absent("v1", "Namespace", pool.namespace)
    services.pool_sync_succeeded(pool_id=pool.pk, version=version)
    remaining = [p for p in pool.tenant.pools.all()
                 if client.read("v1", "Namespace", p.namespace) is not None]
    if not remaining:
        services.tenant_mark_deleted(tenant_id=pool.tenant_id)
        return "deleted"
    return "deleting"


@shared_task(name="tenants.resync_pools", queue="k8s")
def resync_pools() -> dict[str, int]:
    """Find pools that differ from the cluster and enqueue their reconcile
    (:func:`pool_drift`)."""
    drifted, in_sync = pool_drift(get_client())
    services.pools_verified_in_sync(pool_ids=in_sync)
    for pool_id in drifted:
        reconcile_pool.delay(pool_id)
    if kueue_on():
        _kueue_sync()
    return {"drifted": len(drifted), "in_sync": len(in_sync)}


def pool_drift(client: Any) -> tuple[list[int], list[int]]:
    """(drifted, in sync) pool ids, as the cluster holds them now (read live).

    Costs one list call per kind of ``manifests.POOL_KINDS`` (paged; the StorageClasses
    are listed whole, since a pool's IOPS grants name the cluster's classes) and one of
    Trainyard's VolumeAttributesClasses (the IOPS tiers every pool shares), whatever the
    number of tenants. A pool drifted when one of its objects is missing or
    differs, or when an object labelled as the pool's is no longer declared, or when its
    last write did not succeed. The one rule of "converged": the resync and the chaos
    run's invariant check (``scripts/chaos.py``) both use it.
    """
    selector = naming.label_selector(naming.managed_labels())
    classes = _storage_classes(client)
    by_pool: dict[tuple, list[dict]] = {}
    for api_version, kind in manifests.POOL_KINDS:
        listed = (list(classes.values()) if (api_version, kind) == STORAGE_CLASS
                  else client.list_objects(api_version, kind, label_selector=selector))
        for obj in listed:
            labels = obj["metadata"].get("labels") or {}
            if labels.get(naming.LABEL_MANAGED_BY) == naming.MANAGED_BY:
                by_pool.setdefault(_pool_key(labels), []).append(obj)
    # the IOPS tiers' shared classes (tenants.storage): declared by pools, owned by none
    shared = client.list_objects("storage.k8s.io/v1", "VolumeAttributesClass",
                                 label_selector=selector)
    drifted, in_sync = [], []
    for pool in selectors.pools_to_sync():
        if pool.tenant.status == TenantStatus.DELETING:
            drifted.append(pool.pk)
            continue
        try:
            desired = selectors.pool_objects(pool, cluster_storage_classes=classes)
        except ValueError:  # reconcile_pool records the error on the pool
            drifted.append(pool.pk)
            continue
        owner = pool_owner(pool.tenant.slug, pool.kind)
        if (pool.write_state != SyncState.IN_SYNC
                or not plan(desired, [*by_pool.get(_pool_key(owner.labels), ()), *shared],
                            owner).empty):
            drifted.append(pool.pk)
        else:
            in_sync.append(pool.pk)
    return drifted, in_sync


def _pool_key(labels: Mapping[str, str]) -> tuple[str | None, str | None]:
    """Which pool's objects these labels mark (the index of the resync's relist)."""
    return (labels.get(naming.LABEL_TENANT), labels.get(naming.LABEL_POOL))


@shared_task(name="tenants.reconcile_cluster", queue="k8s", bind=True, max_retries=MAX_RETRIES)
def reconcile_cluster(self) -> str:  # type: ignore[no-untyped-def]
    """Converge the cluster-wide objects (the tiers' PriorityClasses)."""
    try:
        result = converge(get_client(), manifests.desired_cluster_objects())
    except K8sError as exc:
        if is_transient(exc) and self.request.retries < MAX_RETRIES:
            raise self.retry(exc=exc, countdown=backoff_seconds(self.request.retries)) from exc
        raise
    return f"applied {result.writes}" if result.changed else "unchanged"


@shared_task(name="tenants.reconcile_kueue", queue="k8s", bind=True, max_retries=MAX_RETRIES)
def reconcile_kueue(self) -> str:  # type: ignore[no-untyped-def]
    """Kueue mode: converge Kueue's objects (flavors, cohort, ClusterQueues, LocalQueues,
    WorkloadPriorityClasses, Topology) with the quotas (``tenants.kueue.kueue_spec``),
    pruning the ones Trainyard wrote and no longer declares. One list call per kind and
    no write when nothing changed. Does nothing in the trainyard mode."""
    if not kueue_on():
        return "off"
    try:
        result = converge(get_client(), kueue_hold.desired_objects(kueue_spec()),
                          owner=kueue_owner())
    except K8sError as exc:
        if is_transient(exc) and self.request.retries < MAX_RETRIES:
            raise self.retry(exc=exc, countdown=backoff_seconds(self.request.retries)) from exc
        raise
    if not result.changed:
        return "unchanged"
    return f"applied {result.writes}, pruned {result.deletes}"


def _kueue_sync() -> None:
    """Enqueue a converge of Kueue's objects; its failure (it retries by itself) is not
    the caller's."""
    try:
        reconcile_kueue.delay()
    except Exception:  # eager (tests, benchmarks): the converge ran here and failed
        log.exception("reconcile of Kueue's objects failed")


def kueue_owner() -> Owner:
    """The owner of the Kueue objects Trainyard writes (its labels, in every namespace)."""
    return Owner(labels=kueue.owner_labels(), kinds=kueue.KINDS, any_namespace=True)


@shared_task(name="tenants.reconcile_nodes", queue="k8s", bind=True, max_retries=MAX_RETRIES)
def reconcile_nodes(self) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Label and taint dedicated nodes, and clear nodes no longer dedicated.

    One list call; one patch per node that differs (none when nothing changed).
    Returns counts of patched nodes and of dedications naming nodes that do not exist.
    """
    wanted = selectors.node_dedications()
    try:
        client = get_client()
        nodes = client.list_objects("v1", "Node")
        patched = 0
        for node in nodes:
            patch = node_dedication_patch(node, wanted.get(node["metadata"]["name"]))
            if patch is not None:
                client.patch("v1", "Node", node["metadata"]["name"], patch)
                patched += 1
    except K8sError as exc:
        if is_transient(exc) and self.request.retries < MAX_RETRIES:
            raise self.retry(exc=exc, countdown=backoff_seconds(self.request.retries)) from exc
        raise
    present = {n["metadata"]["name"] for n in nodes}
    return {"patched": patched, "missing": len(set(wanted) - present)}


@shared_task(name="tenants.sample_usage", queue="default")
def sample_usage() -> int:
    """Fold the pools' current allocation into today's UsageDaily rows (peak, mean).

    Reads only the observed tables. Idempotent per sample in the sense that matters: a
    repeated sample raises neither the peak nor the mean beyond what was observed.
    """
    pools = list(selectors.pools_to_sync())
    usage = allocation_by_namespace([p.namespace for p in pools])
    return services.usage_record(samples={p.pk: usage.get(p.namespace, {}) for p in pools},
                                 keys={p.pk: set(selectors.current_grants(p)) for p in pools})


@shared_task(name="tenants.expire_temporary_quota", queue="default")
def expire_temporary_quota() -> int:
    """End temporary grants whose date has passed (their amount returns)."""
    return services.quota_expire_temporary()


@shared_task(name="tenants.propose_dynamic_quotas", queue="default")
def propose_dynamic_quotas() -> int:
    """For dynamic-mode tenants, propose quota from 30 days of usage; an admin decides."""
    policy = Policy.current()
    proposed = 0
    # A pending proposal stays a week for admins to decide (the quarterly recommendation
    # from billing included) before a newer daily one may replace it.
    recent = set(QuotaRequest.objects.filter(
        source=RequestSource.DYNAMIC, status=RequestStatus.PENDING,
        created_at__gte=timezone.now() - timedelta(days=7)).values_list("pool_id", flat=True))
    for pool in selectors.pools_to_sync().filter(tenant__quota_mode=QuotaMode.DYNAMIC,
                                                 tenant__status=TenantStatus.ACTIVE):
        if pool.pk in recent:
            continue
        amounts, formulas = {}, []
        # the idle rate of each GPU kind over the last 30 days (tenants.utilisation)
        figures = selectors.pool_utilisation(pool)
        for key, current in selectors.current_grants(pool).items():
            idle = figures[key].idle_rate if key in figures else None
            result = propose_amount(
                daily_peaks=selectors.daily_peaks(pool, key), current=Decimal(current),
                idle_rate=None if idle is None else float(idle),
                headroom=policy.dynamic_headroom, idle_threshold=policy.dynamic_idle_threshold)
            if result is not None:
                amounts[key], formula = result
                formulas.append(f"{key}: {formula}")
        if amounts:
            services.quota_request_propose(pool=pool, amounts=amounts,
                                           formula="\n".join(formulas))
            proposed += 1
    return proposed


@shared_task(name="tenants.expire_loans", queue="default")
def expire_loans() -> int:
    """End quota loans whose date has passed (both pools are re-synced), and expire offers
    not accepted within their term (both tenants' admins are told)."""
    return services.loans_expire()


def _volumes_held(pool) -> set[str]:  # type: ignore[no-untyped-def]
    """PVC names the receivers of ``signals.volumes_held`` keep for ``pool``."""
    held: set[str] = set()
    for _receiver, names in volumes_held.send(sender=pool.__class__, pool=pool):
        held.update(names or ())
    return held


@shared_task(name="tenants.reclaim_dev_volumes", queue="k8s")
def reclaim_dev_volumes() -> int:
    """Delete dev-pool PVCs no pod has mounted for the policy's N days (off when unset).

    Never the checkpoint volume of a job that is queued, admitted, running or preempting
    (``signals.volumes_held``): a preempted job has no pods, but resumes from it.

    Tracks when each volume was last mounted (from observed pods); tenant admins are
    told what was removed. Returns how many volumes were deleted.
    """
    days = Policy.current().dev_pvc_reclaim_days
    if not days:
        return 0
    now = timezone.now()
    deleted = 0
    client = get_client()
    for pool in selectors.pools_to_sync().filter(kind=PoolKind.DEV,
                                                 tenant__status=TenantStatus.ACTIVE):
        pvcs = {p.name: p.created_at or now for p in ObservedPVC.objects.filter(
            namespace=pool.namespace)}
        in_use = {vol["persistentVolumeClaim"]["claimName"]
                  for raw in ObservedPod.objects.filter(namespace=pool.namespace).exclude(
                      phase__in=["Succeeded", "Failed"]).values_list("raw", flat=True)
                  for vol in ((raw or {}).get("spec") or {}).get("volumes") or []
                  if "persistentVolumeClaim" in vol}
        # Volumes an app holds without a pod: a queued or preempted job's checkpoints.
        # They count as in use, so their N days start when the job no longer needs them.
        in_use |= _volumes_held(pool)
        services.volumes_seen_in_use(namespace=pool.namespace, names=in_use & set(pvcs),
                                     now=now)
        last = dict(VolumeUse.objects.filter(namespace=pool.namespace).values_list(
            "name", "last_used_at"))
        doomed = volumes_to_reclaim(volumes=pvcs, in_use=in_use, last_used=last, now=now,
                                    days=days)
        for name in doomed:
            client.ensure_absent("v1", "PersistentVolumeClaim", name, pool.namespace)
        if doomed:
            services.volumes_reclaimed(pool=pool, names=doomed, days=days)
            deleted += len(doomed)
    return deleted


@shared_task(name="tenants.sample_usage_series", queue="default")
def sample_usage_series() -> int:
    """One minute of the usage time series (allocated, DCGM-utilised, quota) per pool.

    Reads the observed tables and the metrics source (a failed scrape records allocation
    without utilisation); idempotent per minute. See ``tenants.series``.
    """
    return usage_sample()


@shared_task(name="tenants.rollup_usage_series", queue="default")
def rollup_usage_series() -> dict[str, int]:
    """Recompute recent hourly and daily rows and drop expired ones (retention)."""
    return usage_rollup()
