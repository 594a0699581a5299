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
from core.texts import StoredText, message, render
from core.when import when_text
from k8s_sync.placement import validate_topology_levels
from tenants import texts
from tenants.access import AnyUser, TenantAccess, require_platform_admin
from tenants.audit import record_audit
from tenants.catalog import Resource, ResourceKind
from tenants.choices import LoanStatus, MembershipRole, TenantStatus
from tenants.loans import (
    LenderTerms,
    lapsed_offers,
    lender_terms,
    offer_expires,
    offer_term,
    resource_text,
)
from tenants.models import Pool, QuotaGrant, QuotaLoan, Tenant
from tenants.services._common import _egress_cidrs, _schedule_pools
from tenants.services.notify import notify
from tenants.services.quota import parse_amounts


def lent_out(pool: Pool, resource: str, *, statuses: tuple[str, ...] = (LoanStatus.ACTIVE,
                                                                        LoanStatus.PROPOSED)
             ) -> Decimal:
    return (QuotaLoan.objects.filter(lender=pool, resource=resource, status__in=statuses)
            .aggregate(total=Sum("amount"))["total"]) or Decimal(0)


def loan_propose(*, access: TenantAccess, actor: AnyUser, lender_pool: Pool, borrower: str,
                 borrower_pool: str, resource: str, amount: Any, ends_at: dt.datetime,
                 note: str = "") -> QuotaLoan:
    """Offer part of a pool's quota to another tenant until ``ends_at`` (tenant admins).

    Checked as acceptance will check it (``tenants.loans.lender_terms``): the lender
    cannot lend more than it was granted minus what it lends already, nor leave itself
    less than its work within its quota uses. The offer waits
    ``TRAINYARD_LOAN_OFFER_HOURS`` for the borrower's admins, who are notified; the
    loan's ``terms`` say what it leaves the lender.
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
        QuotaGrant.objects.select_for_update().filter(
            pool=lender_pool, resource=key, superseded_at__isnull=True).first()
        terms = _check_lender(lender_pool, key, value)
        now = timezone.now()
        loan = QuotaLoan.objects.create(lender=lender_pool, borrower=pool, resource=key,
                                        amount=value, ends_at=ends_at, note=note.strip(),
                                        proposed_by=actor,
                                        offer_expires_at=min(now + offer_term(), ends_at))
        loan.terms = terms.text()  # type: ignore[attr-defined]
        record_audit(actor=actor, action="loan.propose", tenant=access.tenant,
                     text=message(texts.AUDIT_LOAN_PROPOSE, amount=api_decimal(value),
                                  resource=resource_text(key),
                                  borrower=f"{target.slug}/{pool.kind}",
                                  day=f"{ends_at:%Y-%m-%d}"), loan=loan.pk)
        admins = [m.user for m in target.memberships.filter(role=MembershipRole.ADMIN)
                  .select_related("user")]
        notify(users=admins, tenant=target, link=f"/t/{target.slug}/quota/", email=True,
               text=message(texts.LOAN_OFFERED, t=access.tenant.slug,
                            a=api_decimal(value), r=resource_text(key),
                            d=f"{ends_at:%Y-%m-%d}"))
    return loan


def loan_decide(*, access: TenantAccess, actor: AnyUser, loan: QuotaLoan, accept: bool
                ) -> QuotaLoan:
    """The borrower's admin accepts (the loan starts now) or declines a proposed loan."""
    access.require_admin()
    try:
        return _decide(access=access, actor=actor, loan=loan, accept=accept)
    except _Refused as refused:
        # said on both sides: kept on the offer (both quota pages show it), the lender's
        # admins told once per reason; then the borrower gets the same words
        _record_refusal(refused.loan, refused.why)
        raise Conflict(render(refused.why), field="amount") from None


class _Refused(Exception):
    def __init__(self, loan: QuotaLoan, why: StoredText) -> None:
        super().__init__(str(why))
        self.loan, self.why = loan, why


def _record_refusal(loan: QuotaLoan, why: StoredText) -> None:
    with transaction.atomic():
        locked = QuotaLoan.objects.select_for_update().select_related(
            "lender__tenant", "borrower__tenant").get(pk=loan.pk)
        if locked.status != LoanStatus.PROPOSED or locked.problem == why:
            return
        locked.problem = why
        locked.save(update_fields=["problem"])
        notify(users=_admins(locked.lender.tenant), tenant=locked.lender.tenant,
               link=f"/t/{locked.lender.tenant.slug}/quota/#loans", email=True,
               text=message(texts.LOAN_NOT_ACCEPTED, t=locked.borrower.tenant.slug,
                            a=api_decimal(locked.amount), r=resource_text(locked.resource),
                            why=why))


def _admins(tenant: Tenant) -> list[AnyUser]:
    return [m.user for m in tenant.memberships.filter(role=MembershipRole.ADMIN)
            .select_related("user")]


def _decide(*, access: TenantAccess, actor: AnyUser, loan: QuotaLoan, accept: bool
            ) -> QuotaLoan:
    with transaction.atomic():
        locked = QuotaLoan.objects.select_for_update().select_related(
            "lender__tenant", "borrower__tenant").get(pk=loan.pk)
        if locked.borrower.tenant_id != access.tenant.pk:
            raise NotAllowed(_("Only the borrowing tenant can accept or decline."))
        if locked.status == LoanStatus.PROPOSED and offer_expires(locked) <= timezone.now():
            raise Conflict(_("This offer expired on %(d)s: it was not accepted in time.")
                           % {"d": when_text(offer_expires(locked))})
        if locked.status != LoanStatus.PROPOSED:
            raise Conflict(_("This loan was %(s)s already.")
                           % {"s": locked.get_status_display().lower()})
        if accept:   # the lender's running work may have grown since the offer
            QuotaGrant.objects.select_for_update().filter(
                pool=locked.lender, resource=locked.resource, superseded_at__isnull=True).first()
            terms = lender_terms(locked.lender, locked.resource, locked.amount, loan=locked)
            if not terms.ok:
                raise _Refused(locked, terms.text())
            locked.problem = ""
        locked.status = LoanStatus.ACTIVE if accept else LoanStatus.DECLINED
        locked.decided_by = actor
        locked.started_at = timezone.now() if accept else None
        locked.save(update_fields=["status", "decided_by", "started_at", "problem"])
        verb = "accepted" if accept else "declined"
        record_audit(actor=actor, action=f"loan.{verb}", tenant=locked.borrower.tenant,
                     text=_loan_text(
                         texts.AUDIT_LOAN_ACCEPT if accept else texts.AUDIT_LOAN_DECLINE, locked),
                     loan=locked.pk)
        if accept:
            _schedule_pools([locked.lender_id, locked.borrower_id])
    return locked


def _check_lender(lender_pool: Pool, key: str, value: Decimal) -> LenderTerms:
    """Refuse an offer its lender cannot make now, as acceptance would refuse it
    (``tenants.loans.lender_terms``: the work within its quota must fit in what it
    keeps; batch and borrowed work does not count), in words that name the resource."""
    terms = lender_terms(lender_pool, key, value)
    if not terms.ok:
        raise Conflict(render(terms.text()), field="amount")
    return terms


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
    return message(code, amount=api_decimal(loan.amount), resource=resource_text(loan.resource),
                   lender=str(loan.lender), borrower=str(loan.borrower))


def loans_expire(*, now: dt.datetime | None = None) -> int:
    """End every active loan whose date has passed, and expire every offer not accepted
    within its term (``TRAINYARD_LOAN_OFFER_HOURS``) or by the loan's end: both tenants'
    admins are told. Idempotent."""
    now = now or timezone.now()
    count = 0
    for loan in QuotaLoan.objects.filter(status=LoanStatus.ACTIVE, ends_at__lte=now):
        loan_end(loan=loan)
        count += 1
    for pk in QuotaLoan.objects.filter(lapsed_offers(now)).values_list("pk", flat=True):
        count += _offer_expire(pk, now)
    return count


def _offer_expire(pk: int, now: dt.datetime) -> int:
    with transaction.atomic():
        locked = QuotaLoan.objects.select_for_update().select_related(
            "lender__tenant", "borrower__tenant").get(pk=pk)
        if not QuotaLoan.objects.filter(lapsed_offers(now), pk=pk).exists():
            return 0  # accepted, declined or withdrawn meanwhile
        locked.status, locked.ended_at = LoanStatus.EXPIRED, now
        locked.save(update_fields=["status", "ended_at"])
        record_audit(actor=None, action="loan.expire", tenant=locked.lender.tenant,
                     text=_loan_text(texts.AUDIT_LOAN_EXPIRE, locked), loan=locked.pk)
        text = message(texts.LOAN_OFFER_EXPIRED, a=api_decimal(locked.amount),
                       r=resource_text(locked.resource), lender=str(locked.lender),
                       borrower=str(locked.borrower),
                       h=round((offer_expires(locked) - locked.created_at).total_seconds()
                               / 3600))
        for tenant in (locked.lender.tenant, locked.borrower.tenant):
            notify(users=_admins(tenant), tenant=tenant, email=True,
                   link=f"/t/{tenant.slug}/quota/#loans", text=text)
    return 1


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
