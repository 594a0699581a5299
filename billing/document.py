"""The invoice as a document finance can send (issue 30, item 5): who issues it, who it is
billed to, the service period, issue and due dates, payment terms and tax.

One function builds it (:func:`invoice_document`) for every output: the invoice page,
the PDF, the CSV's tax rows and the API's ``document``. An issued invoice or credit note
reads what was stamped on it when it was issued (:func:`stamp`, in the same save that
issues it, so the database's immutability covers it and a later change of the settings
or of the tenant never changes it). A draft shows the settings and the tenant as they are
now, and has no issue or due date yet.

The settings (``portal/settings.py``, README): ``TRAINYARD_INVOICE_ISSUER_NAME``,
``..._ISSUER_ADDRESS`` (lines separated by ``|`` or a newline), ``..._ISSUER_TAX_ID``,
``..._PAYMENT_TERMS_DAYS`` (30) and ``..._TAX_RATE`` (percent; empty: no tax, and no tax
line). Tax is ``subtotal x rate`` rounded once to cents (``billing.pricing.tax``); the
total due is subtotal + tax (``Invoice.total_due``, with ``applied_tax_rate`` and
``tax_due``). A credit note carries the rate of the invoice it credits.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings
from django.utils import timezone

from billing import ledger, pricing, selectors
from billing.choices import InvoiceKind
from billing.models import Invoice, tax_rate_setting
from tenants.models import Tenant

_LINES = re.compile(r"\s*(?:\n|\|)\s*")


def address_lines(text: str) -> tuple[str, ...]:
    """A postal address as its lines: a newline or ``|`` separates them."""
    return tuple(part for part in _LINES.split(text or "") if part.strip())


@dataclass(frozen=True)
class Party:
    """An issuer or a bill-to: name, address lines and the rest, each possibly empty."""

    name: str
    address: tuple[str, ...] = ()
    tax_id: str = ""
    cost_center: str = ""
    contact: str = ""
    email: str = ""


@dataclass(frozen=True)
class Document:
    invoice: Invoice
    issuer: Party
    bill_to: Party
    service_start: dt.date            # the first day of the month billed
    service_end: dt.date              # its last day
    issue_date: dt.date | None        # None: a draft, not issued yet
    due_date: dt.date | None
    payment_terms_days: int
    tax_rate: Decimal | None          # percent; None: no tax (no tax line)
    subtotal: Decimal                 # the lines' sum (``Invoice.total``)
    tax_amount: Decimal | None

    @property
    def total(self) -> Decimal:
        """What is due: subtotal + tax (``Invoice.total_due``)."""
        return self.invoice.total_due

    @property
    def is_credit_note(self) -> bool:
        return self.invoice.kind == InvoiceKind.CREDIT_NOTE

    def as_api(self) -> dict:
        """The document as the API sends it (plain strings for the amounts)."""
        def party(p: Party) -> dict:
            return {"name": p.name, "address": list(p.address), "tax_id": p.tax_id,
                    "cost_center": p.cost_center, "contact": p.contact, "email": p.email}

        def text(value: Decimal | None) -> str | None:
            return None if value is None else format(value, "f")

        return {"issuer": party(self.issuer), "bill_to": party(self.bill_to),
                "service_start": self.service_start.isoformat(),
                "service_end": self.service_end.isoformat(),
                "issue_date": self.issue_date.isoformat() if self.issue_date else None,
                "due_date": self.due_date.isoformat() if self.due_date else None,
                "payment_terms_days": self.payment_terms_days,
                "tax_rate": text(self.tax_rate), "subtotal": text(self.subtotal),
                "tax_amount": text(self.tax_amount), "total_due": text(self.total),
                "credits": self.invoice.credits.number if self.invoice.credits else None}


def _issuer_now() -> Party:
    return Party(name=settings.TRAINYARD_INVOICE_ISSUER_NAME,
                 address=address_lines(settings.TRAINYARD_INVOICE_ISSUER_ADDRESS),
                 tax_id=settings.TRAINYARD_INVOICE_ISSUER_TAX_ID)


def _bill_to_now(invoice: Invoice, tenant: Tenant) -> Party:
    return Party(name=invoice.tenant_name or tenant.name, cost_center=invoice.cost_center,
                 address=address_lines(tenant.billing_address),
                 contact=tenant.contact_name, email=tenant.contact_email)


def _local_day(moment: dt.datetime | None) -> dt.date | None:
    """The installation's local day of ``moment`` (the day the month's days are counted in)."""
    return None if moment is None else timezone.localtime(moment, selectors.tz()).date()


def stamp(invoice: Invoice, tenant: Tenant, now: dt.datetime) -> list[str]:
    """Write the document's issuer, bill-to, dates, terms and tax onto ``invoice`` as it
    is issued (a credit note: the bill-to and tax rate of the invoice it credits). The
    caller saves the returned fields in the same save that issues it."""
    issue = timezone.localtime(now, selectors.tz()).date()
    terms = int(settings.TRAINYARD_INVOICE_PAYMENT_TERMS_DAYS)
    issuer = _issuer_now()
    credited = invoice.credits if invoice.credits_id else None
    if credited is not None and credited.issue_date is not None:
        contact, email, address = (credited.bill_to_contact, credited.bill_to_email,
                                   credited.bill_to_address)
        rate = credited.tax_rate
    else:
        contact, email, address = tenant.contact_name, tenant.contact_email, \
            tenant.billing_address
        rate = tax_rate_setting() if credited is None else None
    invoice.issuer_name, invoice.issuer_tax_id = issuer.name, issuer.tax_id
    invoice.issuer_address = "\n".join(issuer.address)
    invoice.bill_to_contact, invoice.bill_to_email = contact, email
    invoice.bill_to_address = address
    invoice.issue_date, invoice.payment_terms_days = issue, terms
    invoice.due_date = issue + dt.timedelta(days=terms)
    invoice.tax_rate, invoice.tax_amount = rate, pricing.tax(invoice.total, rate)
    return ["issuer_name", "issuer_address", "issuer_tax_id", "bill_to_contact",
            "bill_to_email", "bill_to_address", "issue_date", "due_date",
            "payment_terms_days", "tax_rate", "tax_amount"]


def invoice_document(invoice: Invoice) -> Document:
    """The document of ``invoice``: as stamped when issued; a draft (or an invoice issued
    before documents were stamped) with today's settings and tenant."""
    period = ledger.month_start(invoice.period)
    service_end = ledger.next_month(period) - dt.timedelta(days=1)
    if invoice.issue_date is not None:
        return Document(
            invoice=invoice,
            issuer=Party(invoice.issuer_name, address_lines(invoice.issuer_address),
                         invoice.issuer_tax_id),
            bill_to=Party(invoice.tenant_name, address_lines(invoice.bill_to_address),
                          cost_center=invoice.cost_center, contact=invoice.bill_to_contact,
                          email=invoice.bill_to_email),
            service_start=period, service_end=service_end, issue_date=invoice.issue_date,
            due_date=invoice.due_date, payment_terms_days=invoice.payment_terms_days or 0,
            tax_rate=invoice.tax_rate, subtotal=invoice.total, tax_amount=invoice.tax_amount)
    terms = int(settings.TRAINYARD_INVOICE_PAYMENT_TERMS_DAYS)
    issued = _local_day(invoice.issued_at) if invoice.is_issued else None
    return Document(
        invoice=invoice, issuer=_issuer_now(), bill_to=_bill_to_now(invoice, invoice.tenant),
        service_start=period, service_end=service_end, issue_date=issued,
        due_date=issued + dt.timedelta(days=terms) if issued else None,
        payment_terms_days=terms, tax_rate=invoice.applied_tax_rate, subtotal=invoice.total,
        tax_amount=invoice.tax_due)
