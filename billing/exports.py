"""Invoice downloads: CSV, PDF (reportlab, pure Python) and a month's zip."""

from __future__ import annotations

import csv
import io
import zipfile
from collections.abc import Iterable
from decimal import Decimal
from xml.sax.saxutils import escape

from django.utils.translation import get_language
from django.utils.translation import gettext as _
from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import getSampleStyleSheet
from reportlab.lib.units import mm
from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

from billing.choices import InvoiceKind
from billing.models import Invoice, InvoiceLine
from core.numbers import api_decimal

CSV_HEADER = ["invoice", "kind", "status", "tenant", "cost_center", "period", "currency",
              "line", "line_kind", "description", "quantity", "unit", "unit_price", "amount"]


def _label(invoice: Invoice) -> str:
    return invoice.number or f"DRAFT-{invoice.tenant.slug}-{invoice.period:%Y-%m}"


def filename(invoice: Invoice, ext: str) -> str:
    return f"{_label(invoice)}.{ext}"


def _rows(invoice: Invoice, lines: Iterable[InvoiceLine]) -> list[list[str]]:
    head = [_label(invoice), invoice.kind, invoice.status, invoice.tenant_name,
            invoice.cost_center, f"{invoice.period:%Y-%m}", invoice.currency]
    rows = [[*head, str(n), line.kind, line.label, str(line.quantity), line.unit_label,
             api_decimal(line.unit_price), str(line.amount)]
            for n, line in enumerate(lines, 1)]
    rows.append([*head, "", "total", _("Total"), "", "", "", str(invoice.total)])
    return rows


def invoices_csv(invoices: Iterable[Invoice]) -> str:
    """One CSV of the invoices' lines, each followed by its total row."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_HEADER)
    for invoice in invoices:
        writer.writerows(_rows(invoice, invoice.lines.all()))
    return out.getvalue()


def _pdf_fonts(texts: Iterable[str]) -> tuple[str, str]:
    """Regular and bold font: the built-in Helvetica has no CJK glyphs (Chinese came out
    as boxes), so Chinese pages use reportlab's CID font STSong-Light (no font file)."""
    if (get_language() or "").startswith("zh") or any(
            ord(c) > 0xFF for text in texts for c in str(text)):
        # deferred: the CID font machinery loads only for a PDF with Chinese text
        from reportlab.pdfbase import pdfmetrics
        from reportlab.pdfbase.cidfonts import UnicodeCIDFont

        pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
        return "STSong-Light", "STSong-Light"
    return "Helvetica", "Helvetica-Bold"


def invoice_pdf(invoice: Invoice) -> bytes:
    """The invoice as a one-or-more page A4 PDF: header, cost center, lines, total."""
    styles = getSampleStyleSheet()
    buffer = io.BytesIO()
    title = (_("Credit note") if invoice.kind == InvoiceKind.CREDIT_NOTE else _("Invoice"))
    doc = SimpleDocTemplate(buffer, pagesize=A4, title=f"{title} {_label(invoice)}",
                            leftMargin=18 * mm, rightMargin=18 * mm, topMargin=18 * mm)
    cur = invoice.currency
    facts = [[_("Tenant"), invoice.tenant_name], [_("Cost center"), invoice.cost_center],
             [_("Month"), f"{invoice.period:%Y-%m}"], [_("Status"), invoice.get_status_display()],
             [_("Currency"), cur]]
    if invoice.issued_at:
        facts.append([_("Issued"), f"{invoice.issued_at:%Y-%m-%d %H:%M} UTC"])
    if invoice.credits is not None:
        facts.append([_("Corrects"), invoice.credits.number or ""])
    lines = list(invoice.lines.all())
    font, bold = _pdf_fonts([title, *(v for _k, v in facts), *(ln.label for ln in lines)])
    styles["Title"].fontName = bold
    story = [Paragraph(f"Trainyard · {title} {_label(invoice)}", styles["Title"])]
    facts_table = Table(facts, colWidths=[40 * mm, 120 * mm], hAlign="LEFT")
    facts_table.setStyle(TableStyle([("FONTNAME", (0, 0), (-1, -1), font)]))
    story += [facts_table, Spacer(1, 8 * mm)]
    small = styles["BodyText"]
    small.fontName = font
    rows: list[list] = [[_("Description"), _("Quantity"), _("Unit"), _("Unit price"),
                         _("Amount")]]
    for line in lines:
        rows.append([Paragraph(escape(line.label), small), api_decimal(line.quantity),
                     line.unit_label, api_decimal(line.unit_price),
                     f"{line.amount:,.2f}"])
    rows.append(["", "", "", _("Total"), f"{invoice.total:,.2f} {cur}"])
    table = Table(rows, colWidths=[75 * mm, 25 * mm, 25 * mm, 22 * mm, 27 * mm], repeatRows=1)
    table.setStyle(TableStyle([
        ("FONTNAME", (0, 0), (-1, -1), font),
        ("FONTNAME", (0, 0), (-1, 0), bold),
        ("FONTNAME", (0, -1), (-1, -1), bold),
        ("LINEBELOW", (0, 0), (-1, 0), 0.5, colors.black),
        ("LINEABOVE", (0, -1), (-1, -1), 0.5, colors.black),
        ("ALIGN", (1, 0), (-1, -1), "RIGHT"),
        ("VALIGN", (0, 0), (-1, -1), "TOP"),
    ]))
    story.append(table)
    doc.build(story)
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
    return sum((i.total for i in invoices), Decimal(0))
