"""Sync bookkeeping of pools (called by tenants.tasks) and dedicated nodes."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext as _

from core.exceptions import ApplicationError, Conflict
from core.texts import message
from core.validation import typed_text
from tenants import texts
from tenants.access import AnyUser, TenantAccess
from tenants.audit import record_audit
from tenants.choices import MembershipRole
from tenants.models import (
    NodeDedication,
    Pool,
    VolumeUse,
)
from tenants.services._common import _schedule_nodes_sync, _schedule_pools
from tenants.services.notify import notify

# --- sync bookkeeping (called by tenants.tasks) -------------------------------------------


def pool_sync_request(*, pool: Pool) -> None:
    """Ask for a reconcile of ``pool`` now (idempotent: one more pass is harmless)."""
    with transaction.atomic():
        _schedule_pools([pool.pk])


def pool_sync_started(*, pool_id: int) -> None:
    Pool.objects.filter(pk=pool_id).update(last_attempt_at=timezone.now())


def pool_sync_succeeded(*, pool_id: int, version: int) -> None:
    """Record that ``version`` of the pool's desired state is in the cluster.

    Never moves ``synced_version`` backwards (an older task finishing late).
    """
    now = timezone.now()
    Pool.objects.filter(pk=pool_id, synced_version__lt=version).update(synced_version=version)
    Pool.objects.filter(pk=pool_id).update(sync_error="", sync_error_transient=False,
                                           last_synced_at=now)


def pool_sync_failed(*, pool_id: int, error: str, transient: bool) -> None:
    Pool.objects.filter(pk=pool_id).update(sync_error=error[:2000],
                                           sync_error_transient=transient)


def pools_verified_in_sync(*, pool_ids: list[int]) -> None:
    """The resync found these pools exactly as desired: stamp them, clear stale errors."""
    Pool.objects.filter(pk__in=pool_ids, synced_version=F("desired_version")).update(
        last_synced_at=timezone.now(), sync_error="", sync_error_transient=False)


# --- dedicated nodes ------------------------------------------------------------------------

_NODE_NAME = __import__("re").compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def node_dedicate(*, access: TenantAccess, actor: AnyUser, node_name: str,
                  reason: str = "") -> NodeDedication:
    """Reserve a node for the tenant (platform admins). Idempotent for the same tenant; a
    node dedicated to another tenant is a Conflict (release it first)."""
    access.require_platform_admin()
    reason = typed_text(reason, field="reason")
    node_name = (node_name or "").strip()
    if not _NODE_NAME.match(node_name):
        raise ApplicationError(_("“%(n)s” is not a valid node name.") % {"n": node_name},
                               field="node_name")
    existing = NodeDedication.objects.filter(node_name=node_name).select_related("tenant").first()
    if existing is not None:
        if existing.tenant_id == access.tenant.pk:
            return existing
        raise Conflict(_("Node %(n)s is dedicated to %(t)s already.")
                       % {"n": node_name, "t": existing.tenant.slug}, field="node_name")
    with transaction.atomic():
        dedication = NodeDedication.objects.create(node_name=node_name, tenant=access.tenant,
                                                   reason=reason, created_by=actor)
        record_audit(actor=actor, action="node.dedicate", tenant=access.tenant,
                     text=message(texts.AUDIT_NODE_DEDICATE, node=node_name,
                                  tenant=access.tenant.slug), node=node_name)
        _schedule_nodes_sync()
    return dedication


def node_release(*, access: TenantAccess, actor: AnyUser, node_name: str) -> None:
    """Return a dedicated node to the shared pool (platform admins). Idempotent."""
    access.require_platform_admin()
    with transaction.atomic():
        deleted, _rows = NodeDedication.objects.filter(node_name=node_name,
                                                       tenant=access.tenant).delete()
        if deleted:
            record_audit(actor=actor, action="node.release", tenant=access.tenant,
                         text=message(texts.AUDIT_NODE_RELEASE, node=node_name), node=node_name)
            _schedule_nodes_sync()


# --- dev volume reclaim -------------------------------------------------------------------


def volumes_seen_in_use(*, namespace: str, names: set[str], now: Any) -> None:
    """Record that these volumes are mounted now."""
    for name in names:
        VolumeUse.objects.update_or_create(namespace=namespace, name=name,
                                           defaults={"last_used_at": now})


def volumes_reclaimed(*, pool: Pool, names: list[str], days: int) -> None:
    """Audit and tell the tenant's admins which unused dev volumes were deleted."""
    with transaction.atomic():
        VolumeUse.objects.filter(namespace=pool.namespace, name__in=names).delete()
        record_audit(actor=None, action="volume.reclaim", tenant=pool.tenant,
                     text=message(texts.AUDIT_VOLUME_RECLAIM, n=len(names), days=days,
                                  volumes=", ".join(names)), volumes=names)
        admins = [m.user for m in pool.tenant.memberships.filter(role=MembershipRole.ADMIN)
                  .select_related("user")]
        notify(users=admins, tenant=pool.tenant, link=f"/t/{pool.tenant.slug}/",
               text=message(texts.VOLUMES_RECLAIMED, n=len(names), d=days,
                            v=", ".join(names)))
