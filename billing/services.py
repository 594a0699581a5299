"""Writes of the billing app: ``<entity>_<verb>``, keyword-only.

Ledger ingestion is idempotent (rows are keyed and recomputed, never added to), so the
periodic tasks and a month close may run it any number of times. Rows of a closed
month are never rewritten. Invoices are written as drafts, refreshed during the month,
and issued (numbered, immutable) only by :func:`month_close`; corrections of an issued
invoice are credit notes (:func:`credit_note_issue`).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterable, Mapping
from decimal import Decimal

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from billing import document, ledger, months, selectors, texts
from billing.choices import (
    InvoiceKind,
    InvoiceStatus,
    LineKind,
)

# the ledger's and the rate card's writes live in their own modules; their names stay
# reachable here, where the tasks, pages and API have always called them
from billing.ingest import egress_record as egress_record
from billing.ingest import ledger_ingest_gpu as ledger_ingest_gpu
from billing.ingest import storage_snapshots_record as storage_snapshots_record
from billing.models import (
    Adjustment,
    Invoice,
    InvoiceLine,
    MonthClose,
    NumberSequence,
)
from billing.rate_cards import rate_card_create as rate_card_create
from billing.rate_cards import rate_card_errors as rate_card_errors
from billing.recommend import IdleRule, recommend_gpu_quota
from core.exceptions import ApplicationError, Conflict, NotAllowed
from core.texts import english, message, render
from tenants.access import AnyUser, is_finance
from tenants.audit import record_audit
from tenants.choices import TenantStatus
from tenants.models import Pool, Tenant
from tenants.selectors import current_grants
from tenants.services import quota_request_propose
from tenants.utilisation import Utilisation, idle_against_quota, is_gpu_kind


def require_finance(actor: AnyUser) -> None:
    if not is_finance(actor):
        raise NotAllowed(_("Only finance can do this."))




# --- invoices -----------------------------------------------------------------------------


def _next_numbers(prefix: str, year: int, count: int) -> list[str]:
    """``count`` consecutive numbers ``<prefix>-<year>-00001``..., under a row lock.

    Two gapless series per year of the month billed: invoices ``TY-2026-00001`` (prefix
    ``TRAINYARD_INVOICE_PREFIX``) and credit notes ``TYC-2026-00001`` (the prefix and
    ``C``). A number is taken in the transaction that issues the document, so a close or
    credit note that fails gives its numbers back; numbers already issued never change."""
    if count == 0:
        return []
    NumberSequence.objects.get_or_create(prefix=prefix, year=year)
    seq = NumberSequence.objects.select_for_update().get(prefix=prefix, year=year)
    first = seq.last + 1
    seq.last += count
    seq.save(update_fields=["last"])
    return [f"{prefix}-{year}-{n:05d}" for n in range(first, first + count)]


def _write_invoices(*, period: dt.date, lines: Mapping[int, list[selectors.LineSpec]],
                    tenant_ids: Iterable[int], now: dt.datetime) -> list[Invoice]:
    """Replace the drafts of ``tenant_ids`` for ``period`` by ``lines`` (inside a
    transaction). A tenant without lines has no draft."""
    tenant_ids = list(tenant_ids)
    # the tenant rows are locked (in id order) so a page refresh, the ledger ingest and a
    # month close never write the same draft at once
    tenants = {t.pk: t for t in Tenant.objects.select_for_update().filter(
        pk__in=tenant_ids).order_by("pk")}
    drafts = {i.tenant_id: i for i in Invoice.objects.filter(
        period=period, kind=InvoiceKind.INVOICE, tenant_id__in=tenant_ids)}
    if any(i.is_issued for i in drafts.values()):
        raise Conflict(_("This month's invoices are already issued."))
    InvoiceLine.objects.filter(invoice__in=list(drafts.values())).delete()
    Invoice.objects.filter(pk__in=[i.pk for t, i in drafts.items() if not lines.get(t)]).delete()
    new: list[Invoice] = []
    keep: list[Invoice] = []
    for tenant_id in tenant_ids:
        if not lines.get(tenant_id):
            continue
        tenant = tenants[tenant_id]
        invoice = drafts.get(tenant_id) or Invoice(tenant=tenant, period=period,
                                                    kind=InvoiceKind.INVOICE)
        invoice.tenant_name, invoice.cost_center = tenant.name, tenant.cost_center
        invoice.currency = settings.TRAINYARD_CURRENCY
        invoice.total = sum((spec.amount for spec in lines[tenant_id]), Decimal(0))
        invoice.computed_at = now
        (keep if invoice.pk else new).append(invoice)
    Invoice.objects.bulk_create(new, batch_size=500)
    if keep:
        Invoice.objects.bulk_update(keep, ["tenant_name", "cost_center", "currency", "total",
                                           "computed_at"], batch_size=500)
    invoices = new + keep
    InvoiceLine.objects.bulk_create((
        InvoiceLine(invoice=invoice, position=n, kind=spec.kind, text=spec.text,
                    description=spec.description[:300],
                    resource=spec.resource, starts=spec.starts, ends=spec.ends,
                    quantity=spec.quantity, unit=spec.unit, unit_price=spec.unit_price,
                    amount=spec.amount, rate_card_id=spec.rate_card_id)
        for invoice in invoices for n, spec in enumerate(lines[invoice.tenant_id])),
        batch_size=2000)
    return invoices


def invoice_draft_refresh(*, tenant: Tenant, period: dt.date | None = None,
                          now: dt.datetime | None = None, ingest: bool = True
                          ) -> Invoice | None:
    """Recompute the tenant's running draft for ``period`` (this month by default) from
    the ledger (brought up to date first). None when nothing is billable yet."""
    now = now or timezone.now()
    period = ledger.month_start(period or selectors.current_period(now))
    if selectors.month_is_closed(period):
        raise Conflict(_("%(month)s is closed.") % {"month": f"{period:%Y-%m}"})
    if ingest:
        ledger_ingest_gpu(now=now, tenant=tenant)
    lines = selectors.month_lines(period, [tenant.pk])
    with transaction.atomic():
        invoices = _write_invoices(period=period, lines=lines, tenant_ids=[tenant.pk], now=now)
    return invoices[0] if invoices else None


def drafts_refresh(*, now: dt.datetime | None = None, tenant_ids: Iterable[int] | None = None,
                   ingest: bool = True) -> int:
    """Recompute this month's draft of every tenant (or of ``tenant_ids``) from the ledger,
    first brought up to date unless the caller just did (``ingest=False``)."""
    now = now or timezone.now()
    period = selectors.current_period(now)
    if selectors.month_is_closed(period):
        return 0
    if ingest:
        ledger_ingest_gpu(now=now)
        storage_snapshots_record(now=now)
    if tenant_ids is not None:
        ids = set(tenant_ids)
        lines = selectors.month_lines(period, ids)
    else:
        lines = selectors.month_lines(period)
        ids = set(lines) | set(Invoice.objects.filter(
            period=period, kind=InvoiceKind.INVOICE).values_list("tenant_id", flat=True))
    with transaction.atomic():
        return len(_write_invoices(period=period, lines=lines, tenant_ids=ids, now=now))


def month_close_unpriced(*, period: dt.date, confirm_unpriced: bool) -> list[str]:
    """The devices the month bills usage of that the rate card does not price (their
    lines bill 0), in the reader's language. Unless ``confirm_unpriced``, any such device
    is an ApplicationError on ``confirm_unpriced`` naming them (``extra``: ``unpriced``,
    their descriptions, and ``devices``, their keys), before anything of the close is
    written (the ledger is brought up to date first, idempotently)."""
    rows = selectors.unpriced_devices(period)
    unpriced = [render(row.priced.text) for row in rows]
    if unpriced and not confirm_unpriced:
        raise ApplicationError(
            _("The rate card has no price for %(devices)s, used in %(month)s: their usage "
              "would be billed 0. Price them on the rate card, or confirm that the month "
              "closes with them unpriced.") % {"devices": "; ".join(unpriced),
                                               "month": f"{period:%Y-%m}"},
            field="confirm_unpriced",
            extra={"unpriced": unpriced, "devices": [row.device.key for row in rows]})
    return unpriced


def month_close(*, actor: AnyUser, period: dt.date, now: dt.datetime | None = None,
                confirm_unpriced: bool = False) -> MonthClose:
    """Finance closes a month that has ended: the ledger is brought up to date, every
    tenant with charges gets its invoice issued (numbered, immutable), the month's
    ledger is frozen. Closing a closed month is a Conflict. Usage of a device the rate
    card does not price needs ``confirm_unpriced`` (:func:`month_close_unpriced`); its
    lines then say "no price on the rate card: billed 0"."""
    require_finance(actor)
    started = time.perf_counter()
    now = now or timezone.now()
    period = ledger.month_start(period)
    _start, end = ledger.month_bounds(period, selectors.tz())
    if now < end:
        raise ApplicationError(_("%(month)s has not ended yet.") % {"month": f"{period:%Y-%m}"})
    if selectors.month_is_closed(period):
        raise Conflict(_("%(month)s is already closed.") % {"month": f"{period:%Y-%m}"})
    _require_in_order(period)  # refused at once from what the ledger knows
    ledger_ingest_gpu(now=now)
    month_close_unpriced(period=period, confirm_unpriced=confirm_unpriced)
    storage_snapshots_record(now=now)
    _require_in_order(period)  # and from what it knows now (an earlier month's usage)
    lines = selectors.month_lines(period)
    with transaction.atomic():
        try:
            with transaction.atomic():
                closing = MonthClose.objects.create(period=period, closed_at=now,
                                                    closed_by=actor)
        except IntegrityError:
            raise Conflict(_("%(month)s is already closed.")
                           % {"month": f"{period:%Y-%m}"}) from None
        ids = set(lines) | set(Invoice.objects.filter(period=period, kind=InvoiceKind.INVOICE)
                               .values_list("tenant_id", flat=True))
        invoices = sorted(_write_invoices(period=period, lines=lines, tenant_ids=ids, now=now),
                          key=lambda i: (i.tenant_name, i.tenant_id))
        numbers = _next_numbers(settings.TRAINYARD_INVOICE_PREFIX, period.year, len(invoices))
        tenants = Tenant.objects.in_bulk([i.tenant_id for i in invoices])
        stamped: list[str] = []
        for invoice, number in zip(invoices, numbers, strict=True):
            invoice.number, invoice.status = number, InvoiceStatus.ISSUED
            invoice.issued_at, invoice.issued_by = now, actor
            stamped = document.stamp(invoice, tenants[invoice.tenant_id], now)
        Invoice.objects.bulk_update(invoices, ["number", "status", "issued_at", "issued_by",
                                               *stamped], batch_size=500)
        closing.invoices = len(invoices)
        closing.total = sum((i.total for i in invoices), Decimal(0))
        closing.seconds = time.perf_counter() - started
        closing.save()
        record_audit(actor=actor, action="billing.month.close",
                     text=message(texts.AUDIT_MONTH_CLOSE, month=f"{period:%Y-%m}",
                                  n=len(invoices)),
                     period=period.isoformat(), total=str(closing.total))
    return closing


def _require_in_order(period: dt.date) -> None:
    """Months are closed in order (issue 30): not while an earlier month with charges is
    open, and not a month without charges once a later month is closed (it would issue
    nothing; what is found for it now is billed late by the first open month)."""
    earlier = months.first_open_month_with_charges(period)
    if earlier is not None:
        raise Conflict(_("Close %(earlier)s first: it has charges and is still open, and "
                         "months are closed in order. Nothing was changed.")
                       % {"earlier": f"{earlier:%Y-%m}"})
    later = months.closed_after(period)
    if later is not None and not months.months_with_charges([period]):
        raise Conflict(_("%(month)s has no charges to close, and %(later)s, a later month, is "
                         "closed already: usage found for %(month)s now is billed by the "
                         "first open month.") % {"month": f"{period:%Y-%m}",
                                                 "later": f"{later:%Y-%m}"})


def credit_note_issue(*, actor: AnyUser, invoice: Invoice, amount: Decimal, reason: str
                      ) -> Invoice:
    """Correct an issued invoice: a numbered credit note of ``-amount``. The credits of an
    invoice never exceed its total."""
    require_finance(actor)
    if not reason.strip():
        raise ApplicationError(_("Say why the invoice is credited."), field="reason")
    if amount <= 0:
        raise ApplicationError(_("The credit must be a positive amount."), field="amount")
    with transaction.atomic():
        locked = Invoice.objects.select_for_update().get(pk=invoice.pk)
        if locked.kind != InvoiceKind.INVOICE or not locked.is_issued:
            raise Conflict(_("Only an issued invoice can be credited."))
        remaining = locked.total + selectors.credited_total(locked)
        if amount > remaining:
            raise ApplicationError(_("At most %(left)s %(cur)s is left to credit.")
                                   % {"left": remaining, "cur": locked.currency},
                                   field="amount")
        note = Invoice.objects.create(
            tenant_id=locked.tenant_id, period=locked.period, kind=InvoiceKind.CREDIT_NOTE,
            tenant_name=locked.tenant_name, cost_center=locked.cost_center,
            currency=locked.currency, total=-amount, credits=locked, reason=reason,
            computed_at=timezone.now())
        text = message(texts.LINE_CREDIT, number=locked.number, reason=reason)
        InvoiceLine.objects.create(
            invoice=note, kind=LineKind.CREDIT, quantity=Decimal(1), unit_price=-amount,
            amount=-amount, text=text, description=english(text)[:300])
        note.number = _next_numbers(f"{settings.TRAINYARD_INVOICE_PREFIX}C",
                                    locked.period.year, 1)[0]
        note.status, note.issued_at, note.issued_by = InvoiceStatus.ISSUED, timezone.now(), actor
        document.stamp(note, locked.tenant, note.issued_at)
        note.save()
        record_audit(actor=actor, action="billing.credit_note", tenant=locked.tenant,
                     text=message(texts.AUDIT_CREDIT_NOTE, number=note.number, amount=str(amount),
                                  invoice=locked.number))
    return note


def adjustment_add(*, actor: AnyUser, tenant: Tenant, period: dt.date, description: str,
                   amount: Decimal) -> Adjustment:
    """A manual charge or discount on an open month's invoice (finance)."""
    require_finance(actor)
    period = ledger.month_start(period)
    months.require_open(period)
    if not description.strip() or not amount:
        raise ApplicationError(_("An adjustment needs a description and a non-zero amount."))
    with transaction.atomic():
        adj = Adjustment.objects.create(tenant=tenant, period=period, description=description,
                                        amount=amount, created_by=actor)
        record_audit(actor=actor, action="billing.adjustment", tenant=tenant,
                     text=message(texts.AUDIT_ADJUSTMENT, amount=str(amount),
                                  month=f"{period:%Y-%m}", description=description))
    return adj


# --- quota recommendation -----------------------------------------------------------------


def quota_recommend_quarterly(*, today: dt.date | None = None,
                              rule: IdleRule | None = None) -> int:
    """For every tenant, whatever its quota mode (static, overcommitted, dynamic), lower
    the GPU grants that sat idle last quarter against the quota held, of every GPU kind
    (whole cards ``gpu:<model>``, MIG profiles ``mig:<profile>``, shared GPUs
    ``gpu-shared``): one proposal per pool (a QuotaRequest through
    ``tenants.services.quota_request_propose``), applied only when a platform admin
    approves it. The measure is ``tenants.utilisation.idle_against_quota``, from the
    utilisation figures (``billing.selectors.utilisation_figures`` per pool and kind):
    1 - quota use x (1 - idle rate). Returns the number of proposals filed."""
    today = today or timezone.localdate()
    rule = rule or IdleRule.from_settings()
    end = selectors.quarter_start(today)
    start = selectors.quarter_start(end - dt.timedelta(days=1))
    pools = list(Pool.objects.select_related("tenant").filter(
        tenant__status=TenantStatus.ACTIVE))
    figures = selectors.utilisation_figures(start, end, {p.tenant_id for p in pools},
                                            by_pool=True,
                                            now=ledger.local_midnight(end, selectors.tz()))
    filed = 0
    for pool in pools:
        amounts, formulas = {}, []
        for key, current in sorted(current_grants(pool).items()):
            figure = figures.get(pool.pk, {}).get(key)
            if not is_gpu_kind(key) or figure is None:
                continue
            result = recommend_gpu_quota(current=Decimal(current),
                                         idle_rate=idle_against_quota(figure), rule=rule)
            if result is not None:
                amounts[key], formula = result
                formulas.append(f"{key}: {utilisation_formula(figure)}; {formula}")
        if amounts:
            quota_request_propose(pool=pool, amounts=amounts, formula="\n".join(
                [f"quarterly recommendation for {start:%Y-%m}..{end:%Y-%m} "
                 f"({pool.tenant.get_quota_mode_display()} quota mode)", *formulas]))
            filed += 1
    return filed


def utilisation_formula(figure: Utilisation) -> str:
    """The figures behind a proposal, spelled out (English, like the rule's formula)."""
    return (f"quota held {_n(figure.quota_held_hours)} GPU-h, allocated "
            f"{_n(figure.allocated_hours)} (within quota {_n(figure.within_quota_hours)}, "
            f"borrowed {_n(figure.borrowed_hours)}), busy {_n(figure.busy_hours)} of "
            f"{_n(figure.measured_hours)} measured; quota use {_pct(figure.quota_use)}, "
            f"idle rate {_pct(figure.idle_rate)}, so idle against quota "
            f"1 - quota use x (1 - idle rate) = {_pct(idle_against_quota(figure))}")


def _n(value: Decimal) -> str:
    return f"{value.normalize():f}"


def _pct(value: Decimal | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"
