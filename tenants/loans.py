"""What a quota loan leaves its lender (issue 30): the one rule the offer, the acceptance
and both tenants' quota pages use, and its words.

A lender keeps its grant minus everything it lends (this loan included). What must fit in
what it keeps is its work **within its quota**: the admitted, running and preempting jobs
that are neither batch nor admitted borrowing idle capacity
(``tenants.usage.in_use_by_pool(within_quota=True)``). Batch jobs and borrowed work run
on idle capacity beyond the quota and are reclaimed when the quota is needed (see
docs/architecture.md, "No GPU idles behind a soft limit"), so they never block a loan;
the words say how much of it there is.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import Q, Sum

from core.numbers import api_decimal
from core.texts import StoredText, message
from tenants import texts
from tenants.choices import LoanStatus
from tenants.models import Pool, QuotaGrant, QuotaLoan
from tenants.usage import in_use_by_pool


def resource_text(key: str) -> StoredText:
    """A resource's name in a sentence ("NVIDIA-H800 GPUs", "CPU cores"), rendered in the
    reader's language; an unknown key as it is."""
    kind, _sep, qualifier = key.partition(":")
    code = texts.RESOURCES.get(kind)
    return message(code, q=qualifier) if code else key


@dataclass(frozen=True)
class LenderTerms:
    """A loan of ``amount`` of ``key`` seen from its lender ``pool``."""

    pool: str          # "vision/prod"
    key: str
    holds: Decimal     # granted minus what it lends already (other loans)
    used: Decimal      # in use within its quota (counts)
    beyond: Decimal    # in use by batch and borrowed work (does not count)
    amount: Decimal

    @property
    def keeps(self) -> Decimal:
        return self.holds - self.amount

    @property
    def ok(self) -> bool:
        return self.amount <= self.holds and self.used <= self.keeps

    @property
    def name(self) -> StoredText:
        return resource_text(self.key)

    @property
    def most(self) -> Decimal:
        """The most it can lend now."""
        return max(self.holds - self.used, Decimal(0))

    def text(self) -> StoredText:
        """"vision/prod uses 5 of its 8 NVIDIA-H800 GPUs within its quota; lending 2
        leaves 6." (or why it cannot lend that much), with the batch and borrowed work
        said apart when there is some."""
        args: dict[str, Any] = {
            "p": self.pool, "u": api_decimal(self.used), "h": api_decimal(self.holds),
            "r": resource_text(self.key), "a": api_decimal(self.amount),
            "k": api_decimal(max(self.keeps, Decimal(0))), "m": api_decimal(self.most)}
        if self.beyond:
            args["b"] = api_decimal(self.beyond)
            return message(texts.LOAN_TERMS_BEYOND if self.ok else texts.LOAN_SHORT_BEYOND,
                           **args)
        return message(texts.LOAN_TERMS if self.ok else texts.LOAN_SHORT, **args)


def _lent(pool: Pool, key: str, exclude: int | None) -> Decimal:
    loans = QuotaLoan.objects.filter(lender=pool, resource=key,
                                     status__in=[LoanStatus.ACTIVE, LoanStatus.PROPOSED])
    if exclude is not None:
        loans = loans.exclude(pk=exclude)
    return loans.aggregate(total=Sum("amount"))["total"] or Decimal(0)


def lender_terms(pool: Pool, key: str, amount: Decimal, *, loan: QuotaLoan | None = None
                 ) -> LenderTerms:
    """What lending ``amount`` of ``key`` leaves ``pool`` now (``loan``: an offer already
    made, not counted twice). Reads the grant, the other loans and the pool's use."""
    granted = QuotaGrant.objects.filter(pool=pool, resource=key,
                                        superseded_at__isnull=True).first()
    within = in_use_by_pool([pool], within_quota=True).get(pool.pk, {}).get(key, Decimal(0))
    total = in_use_by_pool([pool]).get(pool.pk, {}).get(key, Decimal(0))
    return LenderTerms(pool=str(pool), key=key,
                       holds=(granted.amount if granted else Decimal(0))
                       - _lent(pool, key, loan.pk if loan else None),
                       used=within, beyond=max(total - within, Decimal(0)), amount=amount)


def offer_term() -> dt.timedelta:
    """How long an offer waits for the borrower (``TRAINYARD_LOAN_OFFER_HOURS``)."""
    return dt.timedelta(hours=settings.TRAINYARD_LOAN_OFFER_HOURS)


def offer_expires(loan: QuotaLoan) -> dt.datetime:
    """When a proposed loan's offer lapses: its own date (offers made before it was kept:
    the term from when it was made), never after the loan's end."""
    expires = loan.offer_expires_at or loan.created_at + offer_term()
    return min(expires, loan.ends_at)


def lapsed_offers(now: dt.datetime) -> Q:
    """The proposed loans whose offer has lapsed at ``now`` (a filter)."""
    return Q(status=LoanStatus.PROPOSED) & (
        Q(offer_expires_at__lte=now) | Q(ends_at__lte=now)
        | Q(offer_expires_at__isnull=True, created_at__lte=now - offer_term()))


def loans_shown(loans: list[QuotaLoan], now: dt.datetime) -> list[QuotaLoan]:
    """``loans`` as both quota pages show them: the resource's name (``shown_resource``),
    and a proposed offer with ``shown_expires``
    (when it lapses) and ``shown_terms`` (what it leaves the lender now, checked as
    acceptance checks it) and ``shown_blocked`` (it could not be accepted now)."""
    for loan in loans:
        loan.shown_resource = resource_text(loan.resource)  # type: ignore[attr-defined]
        loan.shown_expires = None  # type: ignore[attr-defined]
        loan.shown_terms = None  # type: ignore[attr-defined]
        loan.shown_blocked = False  # type: ignore[attr-defined]
        if loan.status == LoanStatus.PROPOSED:
            terms = lender_terms(loan.lender, loan.resource, loan.amount, loan=loan)
            loan.shown_expires = offer_expires(loan)  # type: ignore[attr-defined]
            loan.shown_terms = terms.text()  # type: ignore[attr-defined]
            loan.shown_blocked = not terms.ok  # type: ignore[attr-defined]
    return loans


def lendable(pools: list[Pool]) -> list[LenderTerms]:
    """What each of ``pools`` could lend now, per resource it holds (``most``), with the
    work within its quota and the batch and borrowed work beside it: shown above the
    offer form. Two reads of use for all the pools together."""
    within = in_use_by_pool(pools, within_quota=True)
    total = in_use_by_pool(pools)
    lent: dict[tuple[int, str], Decimal] = {}
    for pool_id, key, amount in QuotaLoan.objects.filter(
            lender__in=pools, status__in=[LoanStatus.ACTIVE, LoanStatus.PROPOSED]).values_list(
            "lender_id", "resource", "amount"):
        lent[(pool_id, key)] = lent.get((pool_id, key), Decimal(0)) + amount
    out = []
    for grant in QuotaGrant.objects.filter(pool__in=pools, superseded_at__isnull=True,
                                           amount__gt=0).order_by("pool_id", "resource"):
        pool = next(p for p in pools if p.pk == grant.pool_id)
        used = within.get(pool.pk, {}).get(grant.resource, Decimal(0))
        out.append(LenderTerms(
            pool=str(pool), key=grant.resource,
            holds=grant.amount - lent.get((pool.pk, grant.resource), Decimal(0)), used=used,
            beyond=max(total.get(pool.pk, {}).get(grant.resource, Decimal(0)) - used,
                       Decimal(0)), amount=Decimal(0)))
    return out
