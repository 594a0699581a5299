"""Quota: grants (static mode) and, built on them, requests, approvals and loans."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from portal.exceptions import ApplicationError
from tenants.access import AnyUser, require_platform_admin
from tenants.models import (
    Pool,
    QuotaGrant,
)
from tenants.services._common import _audit, _schedule_pools

# --- quota ------------------------------------------------------------------------------


def quota_set(*, actor: AnyUser, pool: Pool, amounts: dict[str, Any], reason: str,
              valid_until: Any = None) -> list[QuotaGrant]:
    """Set the pool's quota for the given resources (platform admins; static mode).

    ``amounts`` maps resource keys (see ``tenants.catalog``) to amounts in catalog units.
    Every key and amount is validated before anything is written. A resource whose amount
    is unchanged keeps its current grant (idempotent). Returns the new grant rows.
    """
    from decimal import Decimal, InvalidOperation

    from tenants.catalog import Resource

    require_platform_admin(actor)
    if not amounts:
        raise ApplicationError(_("Name at least one resource."), field="amounts")
    parsed: dict[str, Decimal] = {}
    for key, raw in amounts.items():
        try:
            resource = Resource.parse(key)
            parsed[resource.key] = resource.check_amount(Decimal(str(raw)))
        except (ValueError, InvalidOperation) as exc:
            raise ApplicationError(str(exc) if isinstance(exc, ValueError) else
                                   _("“%(v)s” is not a number.") % {"v": raw},
                                   field="amounts", extra={"resource": key}) from None
    created: list[QuotaGrant] = []
    with transaction.atomic():
        now = timezone.now()
        current = {g.resource: g for g in QuotaGrant.objects.select_for_update().filter(
            pool=pool, superseded_at__isnull=True, resource__in=list(parsed))}
        for key, amount in parsed.items():
            old = current.get(key)
            if old is not None and old.amount == amount and old.valid_until == valid_until:
                continue
            if old is not None:
                old.superseded_at = now
                old.save(update_fields=["superseded_at"])
            created.append(QuotaGrant.objects.create(
                pool=pool, resource=key, amount=amount, granted_by=actor, reason=reason,
                valid_until=valid_until))
        if created:
            _audit(actor=actor, action="quota.set", tenant=pool.tenant,
                   summary=f"set quota of {pool}: " + ", ".join(
                       f"{g.resource}={g.amount.normalize()}" for g in created),
                   pool=pool.kind, amounts={g.resource: str(g.amount) for g in created},
                   reason=reason)
            _schedule_pools([pool.pk])
    return created
