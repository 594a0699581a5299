"""Issue 30, item 5: an invoice finance can send. The PDF is rendered (pdftoppm) and its
text layer (pdftotext) checked for every field: issuer, bill-to, service period, issue
and due dates, payment terms, tax, lines, totals, and a footer with "Page n of m" on
every page; a Chinese invoice renders with a CJK font; a credit note has the same form;
an issued document never changes when the settings or the tenant do."""

from __future__ import annotations

import datetime as dt
import re
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import translation

from billing import document, exports, services
from billing.models import Invoice
from billing.tests.conftest import at, make_job, run

OCT = dt.date(2026, 10, 1)
pytestmark = pytest.mark.skipif(not all(map(shutil.which, ("pdftotext", "pdftoppm", "pdffonts"))),
                                reason="poppler-utils missing: scripts/ensure-test-tools.sh")


def _text(pdf: bytes) -> str:
    return subprocess.run(["pdftotext", "-layout", "-", "-"], input=pdf, check=True,
                          capture_output=True).stdout.decode()


def _fonts(pdf: bytes) -> str:
    """pdffonts' list of the PDF's fonts."""
    return subprocess.run(["pdffonts", "-"], input=pdf, capture_output=True,
                          check=True).stdout.decode()


def _rendered(pdf: bytes, tmp_path: Path) -> list[Path]:
    """The pages as 50 dpi PNGs; each must show something (not a blank page)."""
    from PIL import Image

    (tmp_path / "doc.pdf").write_bytes(pdf)
    drawn = subprocess.run(["pdftoppm", "-png", "-r", "50", str(tmp_path / "doc.pdf"),
                            str(tmp_path / "page")], check=True, capture_output=True, text=True)
    assert "font" not in drawn.stderr.lower(), drawn.stderr  # every face found
    pages = sorted(tmp_path.glob("page*.png"))
    for page in pages:
        gray = Image.open(page).convert("L")
        dark = sum(gray.histogram()[:128])
        assert dark > 300, f"{page.name} is blank"
    return pages


@pytest.fixture
def billed(settings, tenant_a, rate_card, finance_user):
    settings.TRAINYARD_INVOICE_ISSUER_NAME = "Compute Commons GmbH"
    settings.TRAINYARD_INVOICE_ISSUER_ADDRESS = "Hafenstrasse 7|20457 Hamburg|Germany"
    settings.TRAINYARD_INVOICE_ISSUER_TAX_ID = "DE123456789"
    settings.TRAINYARD_INVOICE_PAYMENT_TERMS_DAYS = 14
    settings.TRAINYARD_INVOICE_TAX_RATE = "10"
    tenant_a.contact_name, tenant_a.billing_address = "Ada Park", "12 Lab Road\nCambridge CB2"
    tenant_a.save()
    make_job(tenant_a, run(at("2026-10-05", "10:00"), at("2026-10-05", "13:00")), workers=2,
             gpus=4, name="resnet-big")
    for n in range(30):  # enough lines for a second page
        services.adjustment_add(actor=finance_user, tenant=tenant_a, period=OCT,
                                description=f"Support ticket {n + 1}", amount=Decimal("1.00"))
    services.month_close(actor=finance_user, period=OCT, now=at("2026-11-03", "09:00"))
    return Invoice.objects.get(tenant=tenant_a, period=OCT)


def test_the_pdf_has_every_field_on_rendered_pages_and_never_changes(
        billed, settings, login, alice, finance_user, tenant_a, tmp_path):
    invoice = billed
    # 24 GPU-hours x 1.65 = 39.60, 30 x 1.00: subtotal 69.60, tax 10% 6.96, total 76.56
    assert (invoice.total, invoice.tax_amount) == (Decimal("69.60"), Decimal("6.96"))
    assert (invoice.issue_date, invoice.due_date) == (dt.date(2026, 11, 3),
                                                      dt.date(2026, 11, 17))
    pdf = login(alice).get(reverse("billing:download", kwargs={
        "slug": "acme", "pk": invoice.pk, "fmt": "pdf"})).content
    assert len(_rendered(pdf, tmp_path)) == 2
    assert "STSong-Light" not in _fonts(pdf)  # English: Helvetica only
    text = _text(pdf)
    for field in ("Compute Commons GmbH", "Hafenstrasse 7", "20457 Hamburg", "Germany",
                  "Tax ID: DE123456789", "Bill to", "Acme Vision", "Cost center: CC-acme",
                  "Ada Park <lead@acme.example.org>", "12 Lab Road", "Cambridge CB2",
                  invoice.number, "2026-10-01 – 2026-10-31", "Issue date", "2026-11-03",
                  "Due date", "2026-11-17", "14 days", "Description", "Quantity", "Unit",
                  "Unit price", "Amount", "GPU-hours", "Support ticket 30"):
        assert field in text, field
    assert re.search(r"NVIDIA-A100-SXM4-80GB\s+24\s+GPU-hours\s+1\.65\s+39\.60", text)
    assert re.search(r"Subtotal\s+69\.60 USD", text)
    assert re.search(r"Tax \(10%\)\s+6\.96 USD", text)
    assert re.search(r"Total\s+76\.56 USD", text)
    pages = text.split("\f")
    for n in (1, 2):  # the footer on every page
        assert f"Page {n} of 2" in pages[n - 1]
        assert "Compute Commons GmbH | Tax ID DE123456789 | Invoice" in pages[n - 1]

    # the page shows the same document
    page = login(alice).get(reverse("billing:invoice", kwargs={
        "slug": "acme", "pk": invoice.pk})).content.decode()
    for field in ("Compute Commons GmbH", "DE123456789", "12 Lab Road", "2026-11-17",
                  "14 days", "Tax (10%)", "76.56"):
        assert field in page, field

    # one total due wherever the invoice is listed: the month (page and API), the CSV, the API
    month = login(finance_user).get(reverse("billing:month") + "?month=2026-10").content
    assert b'data-field="total_due">76.56' in month
    body = login(alice).get(reverse("billing:download", kwargs={
        "slug": "acme", "pk": invoice.pk, "fmt": "csv"})).content.decode()
    assert body.splitlines()[-3:] == [
        f"{invoice.number},invoice,issued,Acme Vision,CC-acme,2026-10,USD,,{kind},{label},,,,"
        f"{amount}" for kind, label, amount in (("subtotal", "Subtotal", "69.60"),
                                                 ("tax", "Tax (10%)", "6.96"),
                                                 ("total", "Total", "76.56"))]

    # issued: changing the settings or the tenant changes nothing of it
    settings.TRAINYARD_INVOICE_ISSUER_NAME = "Someone Else"
    settings.TRAINYARD_INVOICE_TAX_RATE = ""
    tenant_a.billing_address = "Elsewhere"
    tenant_a.save()
    invoice.refresh_from_db()
    again = _text(exports.invoice_pdf(invoice))
    assert "Compute Commons GmbH" in again and "Someone Else" not in again
    assert "12 Lab Road" in again and "Total    76.56 USD" in re.sub(r" {4,}", "    ", again)

    # a credit note in the same form, with the invoice's bill-to and tax rate
    note = services.credit_note_issue(actor=finance_user, invoice=invoice,
                                      amount=Decimal("10.00"), reason="Outage on Oct 5")
    assert note.tax_rate == Decimal("10") and note.tax_amount == Decimal("-1.00")
    note_text = _text(exports.invoice_pdf(note))
    for field in ("Credit note", note.number, f"Credits invoice    {invoice.number}",
                  "Outage on Oct 5", "12 Lab Road", "Someone Else", "Page 1 of 1"):
        assert field in re.sub(r" {4,}", "    ", note_text), field
    assert re.search(r"Total\s+-11\.00 USD", note_text)


@pytest.mark.skipif(not Path("/usr/share/poppler/cMap").is_dir(),
                    reason="poppler-data missing: scripts/ensure-test-tools.sh")
def test_a_chinese_invoice_renders_with_a_cjk_font(billed, tmp_path, settings):
    invoice = billed
    with translation.override("zh-hans"):
        pdf = exports.invoice_pdf(invoice)
    assert "STSong-Light" in _fonts(pdf)
    text = _text(pdf)
    for field in ("账单", "收票方", "开票日期", "到期日", "付款期限", "14 天", "税（10%）",
                  "第 1 页，共 2 页", "Compute Commons GmbH", "76.56"):
        assert field in text, field
    _rendered(pdf, tmp_path)


def test_a_draft_shows_the_settings_of_now_and_no_dates(tenant_a, rate_card, settings):
    settings.TRAINYARD_INVOICE_TAX_RATE = ""
    make_job(tenant_a, run(at("2026-11-02", "10:00"), at("2026-11-02", "12:00")))
    draft = services.invoice_draft_refresh(tenant=tenant_a, period=dt.date(2026, 11, 1))
    doc = document.invoice_document(draft)
    assert doc.issue_date is None and doc.due_date is None and doc.tax_amount is None
    assert doc.total == draft.total == Decimal("3.30")
    assert (doc.service_start, doc.service_end) == (dt.date(2026, 11, 1),
                                                    dt.date(2026, 11, 30))
