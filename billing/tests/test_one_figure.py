"""Issue 30, item 1: one billed quantity, one figure. Every quantity of an invoice (each
line's GPU-hours, instance-hours, CPU core-hours, memory GiB-hours, GiB-months and GiB
sent; unit prices, amounts, the total and the GPU-hours billed) is read from every output
(the invoice page, the CSV, the PDF's text layer, the API and finance's month, page and
API) and compared digit for digit: one rule (``core.numbers.billed_quantity``, money and
unit prices) writes them all."""

from __future__ import annotations

import csv
import datetime as dt
import html
import io
import re
import shutil
import subprocess
from decimal import Decimal

import pytest
from django.urls import reverse

from billing import pricing, services
from billing.models import Invoice
from billing.tests.conftest import A100_PRICE, at, make_job, run
from core import numbers
from k8s_sync.models import ObservedPVC

GIB = 1024**3
OCT = dt.date(2026, 10, 1)


def _text(cell: str) -> str:
    """A page's cell as text: tags and the currency gone, no thousands separators."""
    plain = html.unescape(re.sub(r"<[^>]+>", "", cell)).replace("\xa0", " ")
    return plain.replace("USD", "").replace(",", "").strip()


@pytest.fixture
def october_mix(tenant_a, platform_admin, finance_user):
    """October with every kind of line, at odd durations so no quantity is round."""
    services.rate_card_create(
        actor=platform_admin, effective_from=dt.date(2026, 1, 1), gpus=[A100_PRICE],
        storage=[{"storage_class": "fast-ssd", "gib_month": Decimal("0.10")}],
        egress_gib=Decimal("0.08"), cpu_core_hour=Decimal("0.013"),
        memory_gib_hour=Decimal("0.0017"))
    make_job(tenant_a, run(at("2026-10-05", "10:00:00"), at("2026-10-05", "13:07:41")),
             workers=2, gpus=4, name="resnet-big")
    make_job(tenant_a, run(at("2026-10-07", "09:00:00"), at("2026-10-07", "20:41:13")),
             mig="1g.10gb", name="small")
    pool = tenant_a.pools.get(kind="prod")
    ObservedPVC.objects.create(
        namespace=pool.namespace, name="data", uid="pvc-odd", resource_version="1",
        storage_class="fast-ssd", requested_bytes=30 * GIB + 12345,
        created_at=at("2026-10-10", "12:34:56"), observed_at=at("2026-10-10", "12:34:56"))
    services.storage_snapshots_record(now=at("2026-10-10", "12:35"))
    services.egress_record(readings={(pool.namespace, "web-0", "internet"): 0},
                           at=at("2026-10-08"))
    services.egress_record(readings={(pool.namespace, "web-0", "internet"): 2 * GIB + 987654},
                           at=at("2026-10-09"))
    services.month_close(actor=finance_user, period=OCT)
    return Invoice.objects.get(tenant=tenant_a, period=OCT)


def _page_lines(page: str) -> list[tuple[str, str, str]]:
    rows = re.findall(r'<td data-field="quantity">(.*?)</td>.*?<td data-field="unit_price">'
                      r'(.*?)</td><td data-field="amount">(.*?)</td>', page, re.S)
    return [(_text(q), _text(p), _text(a)) for q, p, a in rows]


def test_every_output_shows_each_quantity_with_the_same_digits(
        october_mix, login, api, alice, finance_user):
    invoice = october_mix
    lines = list(invoice.lines.all())
    kinds = {line.unit for line in lines}
    assert {"GPU-hours", "instance-hours", "core-hours", "GiB-hours", "GiB-months"} <= kinds
    assert any(line.kind == "egress" for line in lines)
    # the one rule, stated once: a billed quantity as stored (4 places), zeros dropped
    assert -pricing.QUANTITY_PLACES.as_tuple().exponent == numbers.BILLED_PLACES
    expected = [(numbers.billed_quantity(ln.quantity, group=False),
                 numbers.unit_price_plain(ln.unit_price), numbers.money_plain(ln.amount))
                for ln in lines]
    assert any("." in q and len(q.split(".")[1]) == 4 for q, _p, _a in expected)
    total = numbers.money_plain(invoice.total)
    gpu_hours = numbers.billed_quantity(sum(ln.quantity for ln in lines if ln.kind == "gpu"),
                                        group=False)

    # the invoice page
    page = login(alice).get(reverse("billing:invoice", kwargs={
        "slug": "acme", "pk": invoice.pk})).content.decode()
    assert _page_lines(page) == expected
    assert _text(re.search(r'data-field="total">(.*?)</th>', page).group(1)) == total
    assert _text(re.search(r'data-field="gpu_hours_billed">(.*?)</dd>', page).group(1)) \
        == gpu_hours

    # the CSV
    body = login(alice).get(reverse("billing:download", kwargs={
        "slug": "acme", "pk": invoice.pk, "fmt": "csv"})).content.decode()
    rows = list(csv.DictReader(io.StringIO(body)))
    assert [(r["quantity"], r["unit_price"], r["amount"]) for r in rows
            if r["line"]] == expected
    assert rows[-1]["line_kind"] == "total" and rows[-1]["amount"] == total

    # the API: the invoice, and the month's invoice list
    data = api(alice).get(f"/api/v1/tenants/acme/invoices/{invoice.pk}/").json()
    assert [(ln["quantity"], ln["unit_price"], ln["amount"]) for ln in data["lines"]] \
        == expected
    assert data["total"] == total == data["document"]["total_due"]
    assert data["gpu_hours_billed"] == gpu_hours

    # finance's month: page and API
    month = login(finance_user).get(reverse("billing:month") + "?month=2026-10"
                                    ).content.decode()
    row = re.search(r'<tr data-tenant="acme">(.*?)</tr>', month, re.S).group(1)
    assert _text(re.search(r'data-field="billed_hours">(.*?)</td>', row).group(1)) == gpu_hours
    assert total in _text(row)
    summary = api(finance_user).get("/api/v1/billing/months/2026-10/").json()
    acme = next(t for t in summary["tenants"] if t["tenant"] == "acme")
    assert acme["billed_gpu_hours"] == gpu_hours
    assert next(i for i in summary["invoices"] if i["id"] == invoice.pk)["lines"] == data["lines"]
    # the utilisation figures' allocated GPU-hours, another figure under another name, are
    # written with the digits the API sends too (2 decimals)
    allocated = re.search(r'data-period="month">.*?<span data-field="allocated">([^<]*)<',
                          row, re.S).group(1)
    assert allocated.replace(",", "") == acme["utilisation"]["allocated_gpu_hours"]

    # the PDF's text layer: each line's quantity, unit price and amount on one row
    if not shutil.which("pdftotext"):
        pytest.skip("pdftotext (poppler-utils) is not installed: scripts/ensure-test-tools.sh")
    pdf = login(alice).get(reverse("billing:download", kwargs={
        "slug": "acme", "pk": invoice.pk, "fmt": "pdf"})).content
    text = subprocess.run(["pdftotext", "-layout", "-", "-"], input=pdf, check=True,
                          capture_output=True).stdout.decode().replace(",", "")
    for quantity, price, amount in expected:
        pattern = rf"(?m)^.*\s{re.escape(quantity)}\s.*\s{re.escape(price)}\s+" \
                  rf"{re.escape(amount)}\s*$"
        assert re.search(pattern, text), (quantity, price, amount, text)
    assert re.search(rf"Total\s+{re.escape(total)} USD", text)
