"""Quota loans between tenants, and the platform policy."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone
from django.utils.translation import gettext as _

from core.choices import PoolKind
from core.exceptions import ApplicationError, Conflict, NotAllowed
from core.models import POLICY_BOUNDS, Policy
from core.numbers import api_decimal
from core.texts import StoredText, message
from k8s_sync.placement import validate_topology_levels
from tenants import texts
from tenants.access import AnyUser, TenantAccess, require_platform_admin
from tenants.audit import record_audit
from tenants.catalog import Resource, ResourceKind
from tenants.choices import LoanStatus, MembershipRole, TenantStatus
from tenants.models import Pool, QuotaGrant, QuotaLoan, Tenant
from tenants.services._common import _egress_cidrs, _schedule_pools
from tenants.services.notify import notify
from tenants.services.quota import parse_amounts
from tenants.usage import in_use_by_pool


def lent_out(pool: Pool, resource: str, *, statuses: tuple[str, ...] = (LoanStatus.ACTIVE,
                                                                        LoanStatus.PROPOSED)
             ) -> Decimal:
    return (QuotaLoan.objects.filter(lender=pool, resource=resource, status__in=statuses)
            .aggregate(total=Sum("amount"))["total"]) or Decimal(0)


def loan_propose(*, access: TenantAccess, actor: AnyUser, lender_pool: Pool, borrower: str,
                 borrower_pool: str, resource: str, amount: Any, ends_at: dt.datetime,
                 note: str = "") -> QuotaLoan:
    """Offer part of a pool's quota to another tenant until ``ends_at`` (tenant admins).

    The lender cannot lend more than it was granted minus what it lends already. The
    borrower's admins are notified and must accept.
    """
    access.require_admin()
    if lender_pool.tenant_id != access.tenant.pk:
        raise ApplicationError(_("That pool belongs to another tenant."))
    try:
        Resource.parse(resource)
    except ValueError as exc:
        raise ApplicationError(str(exc), field="resource") from None
    try:
        parsed = parse_amounts({resource: amount})
    except ApplicationError as exc:  # the loan's field is "amount", not a map's "amounts"
        raise ApplicationError(exc.message, field="amount", extra=exc.extra) from None
    key, value = next(iter(parsed.items()))
    if value <= 0:
        raise ApplicationError(_("Lend more than nothing."), field="amount")
    target = Tenant.objects.filter(slug=borrower).exclude(
        status__in=[TenantStatus.DELETING, TenantStatus.DELETED]).first()
    if target is None or target.pk == access.tenant.pk:
        raise ApplicationError(_("There is no other tenant “%(t)s”.") % {"t": borrower},
                               field="borrower")
    pool = Pool.objects.filter(tenant=target, kind=borrower_pool).first()
    if pool is None:
        raise ApplicationError(_("Unknown pool “%(p)s”.") % {"p": borrower_pool},
                               field="borrower_pool")
    if ends_at <= timezone.now():
        raise ApplicationError(_("The end date must be in the future."), field="ends_at")
    with transaction.atomic():
        granted = QuotaGrant.objects.select_for_update().filter(
            pool=lender_pool, resource=key, superseded_at__isnull=True).first()
        available = (granted.amount if granted else Decimal(0)) - lent_out(lender_pool, key)
        if value > available:
            raise Conflict(_("Only %(a)s of %(r)s can be lent (granted minus already lent).")
                           % {"a": api_decimal(available), "r": key}, field="amount")
        _check_lender_use(lender_pool, key, available - value)
        loan = QuotaLoan.objects.create(lender=lender_pool, borrower=pool, resource=key,
                                        amount=value, ends_at=ends_at, note=note.strip(),
                                        proposed_by=actor)
        record_audit(actor=actor, action="loan.propose", tenant=access.tenant,
                     text=message(texts.AUDIT_LOAN_PROPOSE, amount=api_decimal(value),
                                  resource=key, borrower=f"{target.slug}/{pool.kind}",
                                  day=f"{ends_at:%Y-%m-%d}"), loan=loan.pk)
        admins = [m.user for m in target.memberships.filter(role=MembershipRole.ADMIN)
                  .select_related("user")]
        notify(users=admins, tenant=target, link=f"/t/{target.slug}/quota/", email=True,
               text=message(texts.LOAN_OFFERED, t=access.tenant.slug,
                            a=api_decimal(value), r=key, d=f"{ends_at:%Y-%m-%d}"))
    return loan


def loan_decide(*, access: TenantAccess, actor: AnyUser, loan: QuotaLoan, accept: bool
                ) -> QuotaLoan:
    """The borrower's admin accepts (the loan starts now) or declines a proposed loan."""
    access.require_admin()
    with transaction.atomic():
        locked = QuotaLoan.objects.select_for_update().select_related(
            "lender__tenant", "borrower__tenant").get(pk=loan.pk)
        if locked.borrower.tenant_id != access.tenant.pk:
            raise NotAllowed(_("Only the borrowing tenant can accept or decline."))
        if locked.status != LoanStatus.PROPOSED:
            raise Conflict(_("This loan was %(s)s already.")
                           % {"s": locked.get_status_display().lower()})
        if accept:   # the lender's running work may have grown since the offer
            granted = QuotaGrant.objects.select_for_update().filter(
                pool=locked.lender, resource=locked.resource, superseded_at__isnull=True).first()
            _check_lender_use(locked.lender, locked.resource,
                              (granted.amount if granted else Decimal(0))
                              - lent_out(locked.lender, locked.resource))
        locked.status = LoanStatus.ACTIVE if accept else LoanStatus.DECLINED
        locked.decided_by = actor
        locked.started_at = timezone.now() if accept else None
        locked.save(update_fields=["status", "decided_by", "started_at"])
        verb = "accepted" if accept else "declined"
        record_audit(actor=actor, action=f"loan.{verb}", tenant=locked.borrower.tenant,
                     text=_loan_text(
                         texts.AUDIT_LOAN_ACCEPT if accept else texts.AUDIT_LOAN_DECLINE, locked),
                     loan=locked.pk)
        if accept:
            _schedule_pools([locked.lender_id, locked.borrower_id])
    return locked


def _check_lender_use(lender_pool: Pool, key: str, left: Decimal) -> None:
    """Refuse a loan that would leave the lender less quota than its jobs use now: the
    lender's **in use** (``tenants.usage.in_use_by_pool``, what admission counts) must fit
    in what it keeps (``left``: its grant minus everything it lends, this loan included)."""
    used = in_use_by_pool([lender_pool]).get(lender_pool.pk, {}).get(key, Decimal(0))
    if used > left:
        raise Conflict(_("%(p)s uses %(u)s of %(r)s now and would keep only %(k)s: lend "
                         "at most what its running jobs do not use.")
                       % {"p": str(lender_pool), "u": api_decimal(used), "r": key,
                          "k": api_decimal(max(left, Decimal(0)))}, field="amount")


def loan_end(*, loan: QuotaLoan, actor: AnyUser | None = None,
             access: TenantAccess | None = None) -> QuotaLoan:
    """End an active loan now, or withdraw a proposed one (the lender's admins); the
    periodic job ends loans on their date. Idempotent."""
    if access is not None:
        access.require_admin()
    with transaction.atomic():
        locked = QuotaLoan.objects.select_for_update().select_related(
            "lender__tenant", "borrower__tenant").get(pk=loan.pk)
        if access is not None and locked.lender.tenant_id != access.tenant.pk:
            raise NotAllowed(_("Only the lending tenant can end a loan early."))
        if locked.status not in (LoanStatus.ACTIVE, LoanStatus.PROPOSED):
            return locked
        was_active = locked.status == LoanStatus.ACTIVE
        locked.status = LoanStatus.ENDED if was_active else LoanStatus.CANCELLED
        locked.ended_at = timezone.now()
        locked.save(update_fields=["status", "ended_at"])
        record_audit(actor=actor, action="loan.end", tenant=locked.lender.tenant,
                     text=_loan_text(texts.AUDIT_LOAN_END, locked), loan=locked.pk)
        if was_active:
            _schedule_pools([locked.lender_id, locked.borrower_id])
    return locked


def _loan_text(code: str, loan: QuotaLoan) -> StoredText:
    return message(code, amount=api_decimal(loan.amount), resource=loan.resource,
                   lender=str(loan.lender), borrower=str(loan.borrower))


def loans_expire(*, now: dt.datetime | None = None) -> int:
    """End every loan whose date has passed (proposed ones lapse). Idempotent."""
    now = now or timezone.now()
    due = QuotaLoan.objects.filter(status__in=[LoanStatus.ACTIVE, LoanStatus.PROPOSED],
                                   ends_at__lte=now)
    count = 0
    for loan in due:
        loan_end(loan=loan)
        count += 1
    return count


# --- policy ---------------------------------------------------------------------------------

_POLICY_FIELDS = {"overcommit_factors", "eviction_watermark", "development_grace_seconds",
                  "batch_grace_seconds", "default_quota", "dev_pvc_reclaim_days",
                  "dynamic_headroom", "dynamic_idle_threshold", "egress_cidrs"}
_POLICY_FIELDS |= {"topology_levels", "borrowing_cap"}


def _within(value: Any, key: str) -> bool:
    """Whether ``value`` is a finite number in the range ``POLICY_BOUNDS[key]``."""
    if isinstance(value, bool):
        return False
    try:
        number = Decimal(str(value))
    except ArithmeticError:
        return False
    low, high = POLICY_BOUNDS[key]
    return number.is_finite() and low <= number <= high


def overcommit_factors_check(factors: Any) -> None:
    """Raise, naming the factor's field, unless ``factors`` maps resource kinds or keys
    to numbers within ``POLICY_BOUNDS["overcommit_factor"]`` (saving and the policy
    page's preview check the same)."""
    if not isinstance(factors, dict):
        raise ApplicationError(_("Overcommit factors map resources to numbers."),
                               field="overcommit_factors")
    for key, value in factors.items():
        if key not in ResourceKind.values:
            try:
                Resource.parse(key)
            except ValueError as exc:
                raise ApplicationError(str(exc),
                                       field=f"overcommit_factors.{key}") from None
        if not _within(value, "overcommit_factor"):
            raise ApplicationError(_("An overcommit factor is between 1 and 10, not "
                                     "%(v)s (%(k)s).") % {"v": value, "k": key},
                                   field=f"overcommit_factors.{key}")


def policy_update(*, actor: AnyUser, **fields: Any) -> Policy:
    """Change platform policy (platform admins); every value is checked first."""
    require_platform_admin(actor)
    unknown = set(fields) - _POLICY_FIELDS
    if unknown:
        raise ApplicationError(_("Unknown policy settings: %(f)s") % {"f": ", ".join(unknown)})
    factors = fields.get("overcommit_factors")
    if factors is not None:
        overcommit_factors_check(factors)
    watermark = fields.get("eviction_watermark")
    if watermark is not None and not _within(watermark, "eviction_watermark"):
        raise ApplicationError(_("The eviction watermark is between 50% and 100%."),
                               field="eviction_watermark")
    for key in ("development_grace_seconds", "batch_grace_seconds", "dev_pvc_reclaim_days",
                "dynamic_headroom", "dynamic_idle_threshold", "borrowing_cap"):
        if fields.get(key) is not None and not _within(fields[key], key):
            low, high = POLICY_BOUNDS[key]
            raise ApplicationError(_("Use a value from %(low)s to %(high)s.") % {
                "low": api_decimal(low), "high": api_decimal(high)}, field=key)
    default_quota = fields.get("default_quota")
    if default_quota is not None:
        if not isinstance(default_quota, dict) or set(default_quota) - set(PoolKind.values):
            raise ApplicationError(_("Default quota maps the pools prod and dev to amounts."),
                                   field="default_quota")
        for amounts in default_quota.values():
            parse_amounts(amounts or {"cpu": 0})
    if "egress_cidrs" in fields:
        fields["egress_cidrs"] = _egress_cidrs(fields["egress_cidrs"])
    if "topology_levels" in fields:
        fields["topology_levels"] = _topology_levels(fields["topology_levels"])
    with transaction.atomic():
        policy = Policy.objects.select_for_update().get(pk=Policy.current().pk)
        changes = {k: v for k, v in fields.items() if getattr(policy, k) != v}
        for key, value in changes.items():
            setattr(policy, key, value)
        policy.updated_by = actor
        policy.save()
        if changes:
            record_audit(actor=actor, action="policy.update",
                         text=message(texts.AUDIT_POLICY_UPDATE, fields=", ".join(sorted(changes))),
                         changes={k: str(v) for k, v in changes.items()})
        # every pool's NetworkPolicy allows the policy's list; the borrowing cap moves every
        # uncapped tenant's ResourceQuota backstop and Kueue queues
        if "egress_cidrs" in changes or "borrowing_cap" in changes:
            _schedule_pools(list(Pool.objects.exclude(
                tenant__status__in=[TenantStatus.DELETING, TenantStatus.DELETED])
                .values_list("pk", flat=True)))
    return policy


def _topology_levels(value: Any) -> list[str]:
    """The topology levels as stored: node-label keys, widest first; [] is the default."""
    if value in (None, "", [], ()):
        return []
    try:
        return list(validate_topology_levels(value))
    except ValueError as exc:
        raise ApplicationError(_("Topology levels are node-label keys, widest first: "
                                 "%(error)s") % {
            "error": str(exc).removeprefix("topology_levels: ")},
            field="topology_levels") from None
