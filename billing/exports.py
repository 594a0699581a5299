"""Invoice downloads: CSV, PDF (reportlab, pure Python) and a month's zip; the document's
fields from ``billing.document``, every number by ``core.numbers``."""

from __future__ import annotations

import csv
import io
import zipfile
from collections.abc import Iterable
from decimal import Decimal
from typing import Any
from xml.sax.saxutils import escape

from django.utils.translation import get_language, ngettext
from django.utils.translation import gettext as _
from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
from reportlab.lib.units import mm
from reportlab.pdfgen import canvas
from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

from billing.document import Document, Party, invoice_document
from billing.models import Invoice, InvoiceLine
from core.numbers import (
    api_decimal,
    billed_quantity,
    grouped,
    money_amount,
    money_plain,
    unit_price_plain,
)

CSV_HEADER = ["invoice", "kind", "status", "tenant", "cost_center", "period", "currency",
              "line", "line_kind", "description", "quantity", "unit", "unit_price", "amount"]


def _label(invoice: Invoice) -> str:
    return invoice.number or f"DRAFT-{invoice.tenant.slug}-{invoice.period:%Y-%m}"


def filename(invoice: Invoice, ext: str) -> str:
    return f"{_label(invoice)}.{ext}"


def _rows(invoice: Invoice, lines: Iterable[InvoiceLine]) -> list[list[str]]:
    """The invoice's lines, then its total row (with tax: subtotal, tax and total rows).
    Quantities, unit prices and amounts as every output writes them (``core.numbers``)."""
    head = [_label(invoice), invoice.kind, invoice.status, invoice.tenant_name,
            invoice.cost_center, f"{invoice.period:%Y-%m}", invoice.currency]
    rows = [[*head, str(n), line.kind, line.label, billed_quantity(line.quantity, group=False),
             line.unit_label, unit_price_plain(line.unit_price), money_plain(line.amount)]
            for n, line in enumerate(lines, 1)]
    doc = invoice_document(invoice)
    if doc.tax_amount is not None:
        rows.append([*head, "", "subtotal", _("Subtotal"), "", "", "",
                     money_plain(doc.subtotal)])
        rows.append([*head, "", "tax", _tax_label(doc), "", "", "",
                     money_plain(doc.tax_amount)])
    rows.append([*head, "", "total", _("Total"), "", "", "", money_plain(doc.total)])
    return rows


def invoices_csv(invoices: Iterable[Invoice]) -> str:
    """One CSV of the invoices' lines, each followed by its total row."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_HEADER)
    for invoice in invoices:
        writer.writerows(_rows(invoice, invoice.lines.all()))
    return out.getvalue()


def _tax_label(doc: Document) -> str:
    return _("Tax (%(rate)s%%)") % {"rate": api_decimal(doc.tax_rate)}


def _winansi(text: str) -> bool:
    """Whether Helvetica (WinAnsi, Windows-1252) has every character of ``text``."""
    try:
        text.encode("cp1252")
    except UnicodeEncodeError:
        return False
    return True


def _pdf_fonts(texts: Iterable[str]) -> tuple[str, str]:
    """Regular and bold font: the built-in Helvetica has no CJK glyphs (Chinese came out
    as boxes), so Chinese pages use reportlab's CID font STSong-Light (no font file: the
    reader's CJK fonts render it, pdftoppm's through poppler-data)."""
    if (get_language() or "").startswith("zh") or not all(
            _winansi(str(text)) for text in texts):
        # deferred: the CID font machinery loads only for a PDF with Chinese text
        from reportlab.pdfbase import pdfmetrics
        from reportlab.pdfbase.cidfonts import UnicodeCIDFont

        pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
        return "STSong-Light", "STSong-Light"
    return "Helvetica", "Helvetica-Bold"


def _footer_canvas(font: str, footer: str, page_text: str) -> type[canvas.Canvas]:
    """A canvas that writes ``footer`` and "Page n of m" at the foot of every page: the
    pages are kept until the document is complete, so the count is known."""

    class FooterCanvas(canvas.Canvas):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._pages: list[dict] = []

        def showPage(self) -> None:  # reportlab's name
            self._pages.append(dict(self.__dict__))
            self._startPage()

        def save(self) -> None:
            for number, state in enumerate(self._pages, 1):
                self.__dict__.update(state)
                self.setFont(font, 8)
                self.setFillColor(colors.grey)
                self.drawString(18 * mm, 10 * mm, footer)
                self.drawRightString(A4[0] - 18 * mm, 10 * mm, page_text % {
                    "page": number, "pages": len(self._pages)})
                super().showPage()
            super().save()

    return FooterCanvas


def _party(title: str, party: Party, style: ParagraphStyle, extra: list[str]) -> Paragraph:
    parts = [f"<b>{escape(title)}</b>", escape(party.name), *map(escape, party.address),
             *map(escape, extra)]
    return Paragraph("<br/>".join(p for p in parts if p), style)


def invoice_pdf(invoice: Invoice) -> bytes:
    """The invoice (or credit note) as an A4 PDF finance can send: issuer and bill-to,
    number, service period, issue and due dates, payment terms, the lines (unit,
    quantity, unit price, amount), subtotal, tax and total, and on every page a footer
    with the issuer, the number and "Page n of m" (``billing.document``)."""
    doc = invoice_document(invoice)
    styles = getSampleStyleSheet()
    buffer = io.BytesIO()
    title = _("Credit note") if doc.is_credit_note else _("Invoice")
    cur = invoice.currency
    lines = list(invoice.lines.all())
    terms = ngettext("%(days)s day", "%(days)s days", doc.payment_terms_days) % {
        "days": doc.payment_terms_days}
    facts = [[_("Number"), invoice.number or _("Draft: not issued yet")],
             [_("Service period"), f"{doc.service_start:%Y-%m-%d} – {doc.service_end:%Y-%m-%d}"],
             [_("Issue date"), f"{doc.issue_date:%Y-%m-%d}" if doc.issue_date else "—"],
             [_("Due date"), f"{doc.due_date:%Y-%m-%d}" if doc.due_date else "—"],
             [_("Payment terms"), terms], [_("Currency"), cur]]
    if invoice.credits is not None:
        facts.append([_("Credits invoice"), invoice.credits.number or ""])
        facts.append([_("Reason"), invoice.reason])
    bill_extra = [f"{_('Cost center')}: {doc.bill_to.cost_center}"]
    if doc.bill_to.contact or doc.bill_to.email:
        who = f"{doc.bill_to.contact} <{doc.bill_to.email}>" if doc.bill_to.contact \
            else doc.bill_to.email
        bill_extra.append(f"{_('Contact')}: {who}")
    issuer_extra = [f"{_('Tax ID')}: {doc.issuer.tax_id}"] if doc.issuer.tax_id else []
    font, bold = _pdf_fonts([title, doc.issuer.name, *doc.issuer.address, doc.bill_to.name,
                             *doc.bill_to.address, doc.bill_to.contact, invoice.reason,
                             *(v for _k, v in facts), *(ln.label for ln in lines)])
    for name in ("Title", "BodyText"):
        styles[name].fontName = bold if name == "Title" else font
    body = styles["BodyText"]
    footer = " | ".join(p for p in (doc.issuer.name, doc.issuer.tax_id and
                                     f"{_('Tax ID')} {doc.issuer.tax_id}",
                                     f"{title} {_label(invoice)}") if p)
    pdf = SimpleDocTemplate(buffer, pagesize=A4, title=f"{title} {_label(invoice)}",
                            leftMargin=18 * mm, rightMargin=18 * mm, topMargin=18 * mm,
                            bottomMargin=20 * mm)
    story: list[Any] = [Paragraph(escape(f"{title} {_label(invoice)}"), styles["Title"])]
    parties = Table([[_party(_("Issued by"), doc.issuer, body, issuer_extra),
                      _party(_("Bill to"), doc.bill_to, body, bill_extra)]],
                    colWidths=[87 * mm, 87 * mm], hAlign="LEFT")
    parties.setStyle(TableStyle([("VALIGN", (0, 0), (-1, -1), "TOP")]))
    facts_table = Table(facts, colWidths=[40 * mm, 134 * mm], hAlign="LEFT")
    facts_table.setStyle(TableStyle([("FONTNAME", (0, 0), (-1, -1), font),
                                     ("FONTNAME", (0, 0), (0, -1), bold)]))
    story += [parties, Spacer(1, 5 * mm), facts_table, Spacer(1, 6 * mm)]
    rows: list[list] = [[_("Description"), _("Quantity"), _("Unit"), _("Unit price"),
                         _("Amount")]]
    for line in lines:
        rows.append([Paragraph(escape(line.label), body), billed_quantity(line.quantity),
                     Paragraph(escape(line.unit_label), body),
                     grouped(unit_price_plain(line.unit_price)), money_amount(line.amount)])
    totals = [["", "", "", _("Subtotal"), f"{money_amount(doc.subtotal)} {cur}"]] \
        if doc.tax_amount is not None else []
    if doc.tax_amount is not None:
        totals.append(["", "", "", _tax_label(doc), f"{money_amount(doc.tax_amount)} {cur}"])
    totals.append(["", "", "", _("Total"), f"{money_amount(doc.total)} {cur}"])
    rows += totals
    table = Table(rows, colWidths=[70 * mm, 25 * mm, 25 * mm, 27 * mm, 27 * mm], repeatRows=1)
    table.setStyle(TableStyle([
        ("FONTNAME", (0, 0), (-1, -1), font),
        ("FONTNAME", (0, 0), (-1, 0), bold),
        ("FONTNAME", (0, -1), (-1, -1), bold),
        ("LINEBELOW", (0, 0), (-1, 0), 0.5, colors.black),
        ("LINEABOVE", (0, -len(totals)), (-1, -len(totals)), 0.5, colors.black),
        ("ALIGN", (1, 0), (-1, -1), "RIGHT"),
        ("VALIGN", (0, 0), (-1, -1), "TOP"),
    ]))
    story.append(table)
    pdf.build(story, canvasmaker=_footer_canvas(font, footer, _("Page %(page)s of %(pages)s")))
    return buffer.getvalue()


def month_zip(invoices: list[Invoice], period_label: str) -> bytes:
    """The whole month in one file: a CSV of every invoice, and each as PDF and CSV."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"invoices-{period_label}.csv", invoices_csv(invoices))
        for invoice in invoices:
            archive.writestr(f"pdf/{filename(invoice, 'pdf')}", invoice_pdf(invoice))
            archive.writestr(f"csv/{filename(invoice, 'csv')}", invoices_csv([invoice]))
    return buffer.getvalue()


def month_total(invoices: Iterable[Invoice]) -> Decimal:
    """What the invoices ask to be paid together (tax included)."""
    return sum((i.total_due for i in invoices), Decimal(0))
