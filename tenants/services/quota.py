"""Quota: grants (static mode) and, built on them, requests, approvals and loans.

Approvals are serialised by a row lock on the Policy row, so two approvals racing
cannot together exceed the overcommit limit (each sees the other's grants).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone
from django.utils.translation import gettext as _

from core.exceptions import ApplicationError, Conflict, NotAllowed
from core.models import Policy
from core.numbers import api_decimal
from core.texts import StoredText, english, message
from tenants import texts
from tenants.access import AnyUser, TenantAccess, require_platform_admin
from tenants.audit import record_audit
from tenants.capacity import capacity_by_resource, cluster_observed, offered_resources
from tenants.catalog import Resource
from tenants.choices import RequestSource, RequestStatus, TenantStatus
from tenants.models import Pool, QuotaGrant, QuotaRequest, QuotaRequestItem, UsageDaily
from tenants.quota import overcommit_factor, overcommit_limited, overcommit_violation
from tenants.services._common import _schedule_pools
from tenants.services.notify import notify, notify_platform_admins
from tenants.services.preferences import preference_default_language


def parse_amounts(amounts: dict[str, Any]) -> dict[str, Decimal]:
    """Validate resource keys and amounts; the first problem is an ApplicationError."""
    if not amounts:
        raise ApplicationError(_("Name at least one resource."), field="amounts")
    parsed: dict[str, Decimal] = {}
    for key, raw in amounts.items():
        try:
            resource = Resource.parse(key)
            parsed[resource.key] = resource.check_amount(Decimal(str(raw).strip()))
        except ValueError as exc:
            raise ApplicationError(str(exc), field="amounts", extra={"resource": key}) from None
        except InvalidOperation:
            raise ApplicationError(_("“%(v)s” is not a number.") % {"v": raw}, field="amounts",
                                   extra={"resource": key}) from None
    return parsed


def check_offered(pool: Pool, amounts: dict[str, Decimal]) -> frozenset[str]:
    """Refuse an amount of a resource that exists on no node (not in
    ``tenants.capacity.offered_resources``: e.g. a GPU model no observed node carries),
    with a field error naming it. Lowering or removing (0) a pool's existing grant of such
    a resource stays allowed, so a quota key whose nodes are gone can be taken away.
    Before any node has been observed nothing is refused (there is nothing to compare).
    Returns the keys of ``amounts`` that exist on no node (set to 0, they are removed)."""
    if not cluster_observed():
        return frozenset()
    offered = {r.key for r in offered_resources()}
    current = _current_amounts(pool)
    for key, amount in amounts.items():
        if key in offered or amount <= current.get(key, Decimal(0)):
            continue
        raise ApplicationError(
            _("%(r)s exists on no node of the cluster: it cannot be granted or asked for "
              "(an existing grant of it can only be lowered or removed).") % {"r": key},
            field="amounts", extra={"resource": key})
    return frozenset(set(amounts) - offered)


def _grant(*, actor: AnyUser | None, pool: Pool, amounts: dict[str, Decimal],
           reason: StoredText,
           valid_until: dt.datetime | None = None, request: QuotaRequest | None = None,
           remove: frozenset[str] = frozenset()) -> list[QuotaGrant]:
    """Supersede the current grants of ``amounts``' resources and add the new ones.

    Call inside a transaction. A temporary grant (``valid_until``) remembers the amount
    to return to. Unchanged amounts are skipped (idempotent). ``reason``: what a person
    typed (a string), or the system's stored text (kept as ``reason_text``). A key of
    ``remove`` set to 0 (permanently) is taken away: its grant is superseded and no new
    row is added, so the key leaves the pool's quota (a resource that exists on no node).
    """
    now = timezone.now()
    reason_text = None if isinstance(reason, str) else reason
    reason = english(reason)[:2000]
    current = {g.resource: g for g in QuotaGrant.objects.select_for_update().filter(
        pool=pool, superseded_at__isnull=True, resource__in=list(amounts))}
    created: list[QuotaGrant] = []
    removed: list[str] = []
    for key, amount in amounts.items():
        old = current.get(key)
        if old is not None and old.amount == amount and old.valid_until == valid_until:
            continue
        if old is not None:
            old.superseded_at = now
            old.save(update_fields=["superseded_at"])
        if key in remove and not amount and valid_until is None:
            removed.append(key)
            continue
        restore = None
        if valid_until is not None:
            restore = old.restore_amount if old is not None and old.valid_until else \
                (old.amount if old is not None else Decimal(0))
        created.append(QuotaGrant.objects.create(
            pool=pool, resource=key, amount=amount, granted_by=actor, reason=reason,
            reason_text=reason_text,
            valid_until=valid_until, restore_amount=restore, request=request))
    if created or removed:
        changed = {**{g.resource: g.amount for g in created}, **dict.fromkeys(removed,
                                                                             Decimal(0))}
        record_audit(actor=actor, action="quota.set", tenant=pool.tenant,
                     text=message(texts.AUDIT_QUOTA_SET, pool=str(pool), amounts=", ".join(
                         f"{k}={api_decimal(v)}" for k, v in changed.items())),
                     pool=pool.kind, amounts={k: str(v) for k, v in changed.items()},
                     reason=reason, request=request.pk if request else None)
        _schedule_pools([pool.pk])
    return created


def quota_set(*, actor: AnyUser, pool: Pool, amounts: dict[str, Any], reason: str,
              valid_until: dt.datetime | None = None) -> list[QuotaGrant]:
    """Set the pool's quota directly (platform admins; static mode), within the overcommit
    limit. Every key and amount is validated before anything is written. Returns the new
    grant rows (none when nothing changed)."""
    require_platform_admin(actor)
    parsed = parse_amounts(amounts)
    gone = check_offered(pool, parsed)
    with transaction.atomic():
        Policy.objects.select_for_update().get(pk=Policy.current().pk)
        _check_overcommit(pool, parsed)
        return _grant(actor=actor, pool=pool, amounts=parsed, reason=reason,
                      valid_until=valid_until, remove=gone)


def _check_overcommit(pool: Pool, amounts: dict[str, Decimal]) -> None:
    """Raise when the new amounts would take total grants past factor x capacity (a
    grant lowered is never refused: a resource whose nodes are gone must be removable).

    Call with the Policy row locked, so concurrent approvals see each other's grants.
    """
    capacity = capacity_by_resource()
    if not capacity:
        return  # nothing observed yet (no cluster): nothing to compare with
    factors = Policy.current().overcommit_factors
    current = _current_amounts(pool)
    for key, amount in amounts.items():
        if not overcommit_limited(key, capacity):
            continue
        if key in current and amount <= current[key]:
            continue  # lowering a grant never takes the total further past the limit
        elsewhere = (QuotaGrant.objects.filter(resource=key, superseded_at__isnull=True)
                     .exclude(pool=pool).exclude(pool__tenant__status=TenantStatus.DELETED)
                     .aggregate(total=Sum("amount"))["total"]) or Decimal(0)
        message = overcommit_violation(resource_key=key, capacity=capacity.get(key, Decimal(0)),
                                       granted_elsewhere=elsewhere, new_amount=amount,
                                       factor=overcommit_factor(key, factors))
        if message:
            raise Conflict(message, field="amounts", extra={"resource": key})


# --- requests -------------------------------------------------------------------------------


def quota_request_submit(*, access: TenantAccess, actor: AnyUser, pool: Pool,
                         amounts: dict[str, Any], justification: str,
                         valid_until: dt.datetime | None = None,
                         language: str = "en") -> QuotaRequest:
    """Ask for new amounts of several resources of one pool at once.

    Tenant admins may always ask; members when the tenant allows it. ``valid_until``
    makes the change temporary. Platform admins are notified. ``language`` (the one the
    requester works in) becomes their e-mail language unless they chose one.
    """
    tenant = access.tenant
    access.require_request_quota()
    if tenant.status != TenantStatus.ACTIVE:
        raise ApplicationError(_("This tenant is suspended and cannot request quota."))
    if pool.tenant_id != tenant.pk:
        raise ApplicationError(_("That pool belongs to another tenant."))
    parsed = parse_amounts(amounts)
    check_offered(pool, parsed)
    if not (justification or "").strip():
        raise ApplicationError(_("Say why the team needs this; admins decide on it."),
                               field="justification")
    if valid_until is not None and valid_until <= timezone.now():
        raise ApplicationError(_("The end date must be in the future."), field="valid_until")
    current = _current_amounts(pool)
    if all(current.get(k, Decimal(0)) == v for k, v in parsed.items()):
        raise ApplicationError(_("These amounts are the current quota already."),
                               field="amounts")
    with transaction.atomic():
        request = QuotaRequest.objects.create(
            tenant=tenant, pool=pool, requested_by=actor, justification=justification.strip(),
            valid_until=valid_until, language=language[:16])
        QuotaRequestItem.objects.bulk_create(
            QuotaRequestItem(request=request, resource=k, requested_amount=v,
                             current_amount=current.get(k, Decimal(0)))
            for k, v in parsed.items())
        preference_default_language(user=actor, language=language)
        record_audit(actor=actor, action="quota_request.submit", tenant=tenant,
                     text=message(texts.AUDIT_REQUEST_SUBMIT, pool=str(pool), amounts=", ".join(
                         f"{k}={api_decimal(v)}" for k, v in parsed.items())), request=request.pk)
        notify_platform_admins(
            tenant=tenant, link=f"/platform/quota-requests/{request.pk}/",
            text=message(texts.QUOTA_REQUEST_SUBMITTED, t=tenant.slug, p=pool.kind))
    return request


def _current_amounts(pool: Pool) -> dict[str, Decimal]:
    return dict(QuotaGrant.objects.filter(pool=pool, superseded_at__isnull=True)
                .values_list("resource", "amount"))


def quota_request_propose(*, pool: Pool, amounts: dict[str, Decimal], formula: str
                          ) -> QuotaRequest | None:
    """A dynamic-mode proposal from usage history, for an admin to approve; never applied
    silently. At most one pending proposal per pool: a newer one replaces it."""
    why = message(texts.QUOTA_PROPOSED_FROM_USAGE)
    replaced = message(texts.QUOTA_REPLACED_BY_NEWER)
    with transaction.atomic():
        QuotaRequest.objects.filter(pool=pool, source=RequestSource.DYNAMIC,
                                    status=RequestStatus.PENDING).update(
            status=RequestStatus.CANCELLED, decision_text=replaced,
            decision_note=english(replaced), decided_at=timezone.now())
        current = _current_amounts(pool)
        request = QuotaRequest.objects.create(
            tenant=pool.tenant, pool=pool, source=RequestSource.DYNAMIC, formula=formula,
            justification=english(why), justification_text=why)
        QuotaRequestItem.objects.bulk_create(
            QuotaRequestItem(request=request, resource=k, requested_amount=v,
                             current_amount=current.get(k, Decimal(0)))
            for k, v in amounts.items())
        record_audit(actor=None, action="quota_request.propose", tenant=pool.tenant,
                     text=message(texts.AUDIT_REQUEST_PROPOSE, pool=str(pool)), request=request.pk)
    return request


def quota_request_approve(*, actor: AnyUser, request: QuotaRequest,
                          amended: dict[str, Any] | None = None, note: str = "") -> QuotaRequest:
    """Approve (optionally with amended amounts) and apply through the sync.

    Platform admins only; never one's own request; only once. The overcommit limit is
    checked under a lock, so concurrent approvals cannot together exceed it.
    """
    require_platform_admin(actor)
    if request.requested_by_id is not None and request.requested_by_id == actor.pk:
        raise NotAllowed(_("You cannot approve your own request; another platform admin "
                           "must decide it."))
    amended_parsed = parse_amounts(amended) if amended else {}
    with transaction.atomic():
        Policy.objects.select_for_update().get(pk=Policy.current().pk)
        locked = QuotaRequest.objects.select_for_update().select_related("pool__tenant").get(
            pk=request.pk)
        _require_pending(locked)
        items = {i.resource: i for i in locked.items.all()}
        unknown = set(amended_parsed) - set(items)
        if unknown:
            raise ApplicationError(_("Only requested resources can be amended: %(r)s")
                                   % {"r": ", ".join(sorted(unknown))}, field="amended")
        final = {k: amended_parsed.get(k, i.requested_amount) for k, i in items.items()}
        gone = check_offered(locked.pool, final)
        _check_overcommit(locked.pool, final)
        for key, item in items.items():
            item.approved_amount = final[key]
            item.save(update_fields=["approved_amount"])
        _grant(actor=actor, pool=locked.pool, amounts=final, request=locked,
               reason=message(texts.GRANT_FROM_REQUEST, n=locked.pk, why=locked.why),
               valid_until=locked.valid_until, remove=gone)
        _decide(locked, actor, RequestStatus.APPROVED, note)
        changed = any(final[k] != i.requested_amount for k, i in items.items())
        summary = ", ".join(f"{k}={api_decimal(v)}" for k, v in final.items())
        record_audit(actor=actor, action="quota_request.approve", tenant=locked.tenant,
                     text=message(texts.AUDIT_REQUEST_APPROVE_AMENDED if changed
                                  else texts.AUDIT_REQUEST_APPROVE, n=locked.pk, amounts=summary),
                     request=locked.pk, note=note)
        _notify_requester(locked, approved=True, summary=summary)
    return locked


def quota_request_reject(*, actor: AnyUser, request: QuotaRequest, reason: str) -> QuotaRequest:
    """Reject with a reason the requester will read (platform admins; only once)."""
    require_platform_admin(actor)
    if not (reason or "").strip():
        raise ApplicationError(_("Give the requester a reason."), field="reason")
    if request.requested_by_id is not None and request.requested_by_id == actor.pk:
        raise NotAllowed(_("You cannot decide your own request."))
    with transaction.atomic():
        locked = QuotaRequest.objects.select_for_update().get(pk=request.pk)
        _require_pending(locked)
        _decide(locked, actor, RequestStatus.REJECTED, reason.strip())
        record_audit(actor=actor, action="quota_request.reject", tenant=locked.tenant,
                     text=message(texts.AUDIT_REQUEST_REJECT, n=locked.pk, reason=reason.strip()),
                     request=locked.pk)
        _notify_requester(locked, approved=False, summary=reason.strip())
    return locked


def quota_request_cancel(*, access: TenantAccess, actor: AnyUser,
                         request: QuotaRequest) -> QuotaRequest:
    """Withdraw a pending request (its requester or a tenant admin)."""
    if not (access.can_admin or request.requested_by_id == actor.pk):
        raise NotAllowed(_("Only the requester or a tenant admin can withdraw this request."))
    with transaction.atomic():
        locked = QuotaRequest.objects.select_for_update().get(pk=request.pk,
                                                              tenant=access.tenant)
        _require_pending(locked)
        _decide(locked, actor, RequestStatus.CANCELLED, "")
        record_audit(actor=actor, action="quota_request.cancel", tenant=locked.tenant,
                     text=message(texts.AUDIT_REQUEST_CANCEL, n=locked.pk), request=locked.pk)
    return locked


def _require_pending(request: QuotaRequest) -> None:
    if request.status != RequestStatus.PENDING:
        raise Conflict(_("Request #%(n)s was %(s)s already.")
                       % {"n": request.pk, "s": request.get_status_display().lower()})


def _decide(request: QuotaRequest, actor: AnyUser, status: str, note: str) -> None:
    request.status = status
    request.decided_by = actor
    request.decided_at = timezone.now()
    request.decision_note = note
    request.save(update_fields=["status", "decided_by", "decided_at", "decision_note"])


def _notify_requester(request: QuotaRequest, *, approved: bool, summary: str) -> None:
    """Tell the requester, in their language (a rejection reason stays as typed)."""
    if request.requested_by is None:
        return
    code = texts.QUOTA_REQUEST_APPROVED if approved else texts.QUOTA_REQUEST_REJECTED
    notify(users=[request.requested_by], tenant=request.tenant,
           text=message(code, n=request.pk, p=request.pool.namespace, s=summary),
           link=f"/t/{request.tenant.slug}/quota/", email=True)


# --- temporary quota ------------------------------------------------------------------------


def quota_expire_temporary(*, now: dt.datetime | None = None) -> int:
    """End every temporary grant whose date has passed: the amount returns to what it
    was before. Idempotent; returns how many grants ended."""
    now = now or timezone.now()
    ended = 0
    expired = (QuotaGrant.objects.filter(superseded_at__isnull=True, valid_until__lte=now)
               .select_related("pool__tenant"))
    for grant in expired:
        with transaction.atomic():
            locked = QuotaGrant.objects.select_for_update().filter(
                pk=grant.pk, superseded_at__isnull=True).first()
            if locked is None:
                continue
            _grant(actor=None, pool=grant.pool, reason=message(texts.GRANT_TEMPORARY_ENDED),
                   amounts={grant.resource: grant.restore_amount or Decimal(0)})
            ended += 1
    return ended


# --- usage history --------------------------------------------------------------------------


def usage_record(*, samples: dict[int, dict[str, Decimal]], keys: dict[int, set[str]],
                 day: dt.date | None = None) -> int:
    """Fold one allocation sample per pool into the day's UsageDaily rows.

    ``samples``: pool id -> resource -> allocated now; ``keys``: resources to record as
    zero when not allocated (the pool's granted ones), so idle days count. Returns the
    number of rows written.
    """
    day = day or timezone.now().date()
    written = 0
    with transaction.atomic():
        for pool_id, usage in samples.items():
            for key in set(usage) | keys.get(pool_id, set()):
                amount = usage.get(key, Decimal(0))
                row, _created = UsageDaily.objects.select_for_update().get_or_create(
                    pool_id=pool_id, resource=key, day=day)
                row.peak = max(row.peak, amount)
                row.total += amount
                row.samples += 1
                row.save(update_fields=["peak", "total", "samples"])
                written += 1
    return written
