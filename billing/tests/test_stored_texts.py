"""An issued invoice never changes, yet its lines read in the reader's language: the
descriptions are stored as codes and arguments, rendered on the page, in the CSV, the PDF
and the API. Lines written before (plain strings) are shown as they were."""

from __future__ import annotations

import csv
import datetime as dt
import io
from decimal import Decimal

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import translation
from pypdf import PdfReader

from billing import services
from billing.models import Invoice, InvoiceLine
from billing.tests.conftest import A100_PRICE, at, make_job, run
from core.texts import render

OCT = dt.date(2026, 10, 1)


@pytest.fixture(autouse=True)
def _english_afterwards():
    """A request in Chinese leaves Chinese active in this thread (LocaleMiddleware);
    the next test must not inherit it."""
    yield
    translation.deactivate()


@pytest.fixture
def issued(tenant_a, platform_admin, finance_user):
    """October, drafted and closed by someone working in Chinese: a MIG line and CPU
    core-hours, then a credit note."""
    services.rate_card_create(actor=platform_admin, effective_from=dt.date(2026, 1, 1),
                              gpus=[A100_PRICE], cpu_core_hour=Decimal("0.01"))
    make_job(tenant_a, run(at("2026-10-05", "10:00"), at("2026-10-05", "20:00")),
             mig="1g.10gb", name="small")
    with translation.override("zh-hans"):
        services.ledger_ingest_gpu(now=at("2026-11-01", "00:30"))
        services.month_close(actor=finance_user, period=OCT, now=at("2026-11-01", "00:30"))
        invoice = Invoice.objects.get(tenant=tenant_a, period=OCT, kind="invoice")
        services.credit_note_issue(actor=finance_user, invoice=invoice, amount=Decimal("0.10"),
                                   reason="测试 / test")
    return invoice


MIG_EN = "MIG 1g.10gb on NVIDIA-A100-SXM4-80GB (1/8 card)"
MIG_ZH = "NVIDIA-A100-SXM4-80GB 上的 MIG 1g.10gb（1/8 张卡）"


def test_lines_are_stored_as_codes_with_their_english_beside(issued):
    mig, cpu = issued.lines.all()
    assert mig.text == {"code": "billing.line.mig", "args": {
        "profile": "1g.10gb", "model": "NVIDIA-A100-SXM4-80GB", "share": "1/8"}}
    assert mig.description == MIG_EN and mig.unit == "instance-hours"
    assert cpu.text == {"code": "billing.line.cpu", "args": {}} and cpu.unit == "core-hours"


def _get(client, user, url, language):
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = language
    client.force_login(user)
    return client.get(url)


def test_the_invoice_page_reads_in_each_readers_language(client, issued, bob):
    url = reverse("billing:invoice", kwargs={"slug": "acme", "pk": issued.pk})
    english = _get(client, bob, url, "en").content.decode()
    assert MIG_EN in english and "CPU core-hours" in english and "instance-hours" in english
    assert "张卡" not in english
    chinese = _get(client, bob, url, "zh-hans").content.decode()
    assert MIG_ZH in chinese and "CPU 核时" in chinese and "实例小时" in chinese
    note = Invoice.objects.get(kind="credit_note")
    url = reverse("billing:invoice", kwargs={"slug": "acme", "pk": note.pk})
    english = _get(client, bob, url, "en").content.decode()
    assert f"Credit for {issued.number}: 测试 / test" in english
    chinese = _get(client, bob, url, "zh-hans").content.decode()
    assert f"贷记 {issued.number}：测试 / test" in chinese


def _csv_rows(client, user, invoice, language):
    url = reverse("billing:download", kwargs={"slug": "acme", "pk": invoice.pk, "fmt": "csv"})
    response = _get(client, user, url, language)
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_the_csv_reads_in_each_readers_language(client, issued, bob):
    english = _csv_rows(client, bob, issued, "en")
    assert [(r["description"], r["unit"]) for r in english[:2]] == [
        (MIG_EN, "instance-hours"), ("CPU core-hours", "core-hours")]
    chinese = _csv_rows(client, bob, issued, "zh-hans")
    assert [(r["description"], r["unit"]) for r in chinese[:2]] == [
        (MIG_ZH, "实例小时"), ("CPU 核时", "核时")]
    # the numbers are the same invoice
    assert [r["amount"] for r in english] == [r["amount"] for r in chinese]


def _pdf_text(client, user, invoice, language):
    url = reverse("billing:download", kwargs={"slug": "acme", "pk": invoice.pk, "fmt": "pdf"})
    response = _get(client, user, url, language)
    assert response.status_code == 200
    return "".join(PdfReader(io.BytesIO(response.content)).pages[0].extract_text().split())


def test_the_pdf_reads_in_each_readers_language(client, issued, bob):
    english = _pdf_text(client, bob, issued, "en")
    assert "CPUcore-hours" in english and "MIG1g.10gbonNVIDIA-A100-SXM4-80GB" in english
    assert "■" not in english
    chinese = _pdf_text(client, bob, issued, "zh-hans")
    assert "CPU核时" in chinese and "上的MIG1g.10gb" in chinese and "实例小时" in chinese
    assert "■" not in chinese


def test_the_api_renders_lines_in_the_requests_language(api, issued, bob):
    url = f"/api/v1/tenants/acme/invoices/{issued.pk}/"
    for language, description, unit in [("en", MIG_EN, "instance-hours"),
                                         ("zh-hans", MIG_ZH, "实例小时")]:
        line = api(bob).get(url, HTTP_ACCEPT_LANGUAGE=language).json()["lines"][0]
        assert (line["description"], line["unit_label"]) == (description, unit)
        assert line["text"]["code"] == "billing.line.mig" and line["unit"] == "instance-hours"


def test_a_line_written_before_stored_texts_is_shown_as_it_was(client, tenant_a, bob):
    """A draft from before: its Chinese description and unit stay as they were."""
    invoice = Invoice.objects.create(tenant=tenant_a, period=OCT, tenant_name=tenant_a.name,
                                     cost_center="CC-acme", currency="USD",
                                     total=Decimal("1.00"))
    InvoiceLine.objects.create(invoice=invoice, kind="gpu", description="旧的 GPU 行",
                               text="旧的 GPU 行", unit="GPU 小时", quantity=Decimal(1),
                               unit_price=Decimal(1), amount=Decimal("1.00"))
    InvoiceLine.objects.create(invoice=invoice, kind="adjustment", description="late fee",
                               quantity=Decimal(1), amount=Decimal(0))  # text empty
    url = reverse("billing:invoice", kwargs={"slug": "acme", "pk": invoice.pk})
    for language in ("en", "zh-hans"):
        body = _get(client, bob, url, language).content.decode()
        assert "旧的 GPU 行" in body and "GPU 小时" in body and "late fee" in body
        rows = _csv_rows(client, bob, invoice, language)
        assert [r["description"] for r in rows[:2]] == ["旧的 GPU 行", "late fee"]
    assert "旧的GPU行" in _pdf_text(client, bob, invoice, "en")


def test_a_split_month_and_a_missing_price_nest_in_the_readers_language(tenant_a,
                                                                        platform_admin):
    """Two rate cards in a month: the line names the day its prices start; a GPU model
    without a price says so, in either language."""
    from billing import selectors

    services.rate_card_create(actor=platform_admin, effective_from=dt.date(2026, 1, 1),
                              gpus=[A100_PRICE])
    services.rate_card_create(actor=platform_admin, effective_from=dt.date(2026, 10, 16),
                              gpus=[A100_PRICE])
    make_job(tenant_a, run(at("2026-10-20", "10:00"), at("2026-10-20", "12:00")),
             gpu_model="NVIDIA-H800")
    services.ledger_ingest_gpu(now=at("2026-11-01", "00:30"))
    (line,) = selectors.month_lines(OCT, [tenant_a.pk])[tenant_a.pk]
    assert render(line.text, language="en") == (
        "NVIDIA-H800 (prices from 2026-10-16) (no price on the rate card: billed 0)")
    assert render(line.text, language="zh-hans") == (
        "NVIDIA-H800（价格自 2026-10-16 起）（费率表中无此价格：按 0 计费）")
