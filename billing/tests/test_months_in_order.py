"""Months in order (issue 30, item 6): a month is not closed while an earlier month with
charges is open (service, page, API; nothing changes), numbers are gapless per series, and
no month after the current one is offered. The clock is mid-November 2026
(billing/tests/conftest.py)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.urls import reverse

from billing import months, services
from billing.models import Adjustment, Invoice, MonthClose, StorageSnapshot
from billing.tests.conftest import at, make_job, run
from core.exceptions import Conflict

SEP, OCT, NOV = dt.date(2026, 9, 1), dt.date(2026, 10, 1), dt.date(2026, 11, 1)
AUG = dt.date(2026, 8, 1)


def test_months_with_charges_by_kind(tenant_a, rate_card, finance_user):
    make_job(tenant_a, run(at("2026-09-10", "10:00"), at("2026-09-10", "12:00")))
    services.ledger_ingest_gpu(now=at("2026-11-15"))
    Adjustment.objects.create(tenant=tenant_a, period=OCT, description="x", amount=Decimal(5))
    # a volume from July 20 to August 3: July and August hold storage, nothing else
    pool = tenant_a.pools.get(kind="prod")
    for size, when in ((10 * 1024**3, "2026-07-20"), (0, "2026-08-03")):
        StorageSnapshot.objects.create(tenant=tenant_a, pool=pool, namespace=pool.namespace,
                                       name="v", uid="u1", storage_class="fast-ssd",
                                       size_bytes=size, at=at(when))
    found = months.months_with_charges([dt.date(2026, 6, 1), dt.date(2026, 7, 1), AUG, SEP,
                                        OCT, NOV])
    assert found == {dt.date(2026, 7, 1), AUG, SEP, OCT}


def test_a_month_waits_for_an_earlier_open_month_with_charges(tenant_a, tenant_b, rate_card,
                                                             finance_user, login, api):
    make_job(tenant_a, run(at("2026-09-10", "10:00"), at("2026-09-10", "12:00")))
    make_job(tenant_b, run(at("2026-10-10", "10:00"), at("2026-10-10", "11:00")))
    services.ledger_ingest_gpu(now=at("2026-11-15"))
    assert months.first_open_month_with_charges(OCT) == SEP
    with pytest.raises(Conflict, match="Close 2026-09 first"):
        services.month_close(actor=finance_user, period=OCT)
    assert not MonthClose.objects.exists() and not Invoice.objects.filter(
        status="issued").exists()
    # the API says the same (409) and names the month to close first
    response = api(finance_user).post("/api/v1/billing/months/2026-10/close/")
    assert response.status_code == 409 and "2026-09" in str(response.json())
    assert api(finance_user).get("/api/v1/billing/months/2026-10/").json()[
        "close_first"] == "2026-09"
    # the page offers no close button, and says why
    page = login(finance_user).get(reverse("billing:month") + "?month=2026-10").content.decode()
    assert 'id="close-first"' in page and "2026-09" in page
    assert reverse("billing:close") not in page
    posted = login(finance_user).post(reverse("billing:close"), {"month": "2026-10"},
                                      follow=True).content.decode()
    assert "Close 2026-09 first" in posted and not MonthClose.objects.exists()
    # in order, both close; an empty earlier month (August) never blocked anything
    services.month_close(actor=finance_user, period=SEP)
    assert months.first_open_month_with_charges(OCT) is None
    services.month_close(actor=finance_user, period=OCT)
    # an empty month before a closed one has nothing to close, and its page says so
    with pytest.raises(Conflict, match="2026-08 has no charges"):
        services.month_close(actor=finance_user, period=AUG)
    page = login(finance_user).get(reverse("billing:month") + "?month=2026-08").content.decode()
    assert 'id="nothing-to-close"' in page and reverse("billing:close") not in page


def test_numbers_are_gapless_per_series(tenant_a, tenant_b, rate_card, finance_user):
    for tenant in (tenant_a, tenant_b):
        make_job(tenant, run(at("2026-09-10", "10:00"), at("2026-09-10", "12:00")))
        make_job(tenant, run(at("2026-10-10", "10:00"), at("2026-10-10", "12:00")))
    services.ledger_ingest_gpu(now=at("2026-11-15"))
    services.month_close(actor=finance_user, period=SEP)
    september = Invoice.objects.get(tenant=tenant_a, period=SEP)
    note = services.credit_note_issue(actor=finance_user, invoice=september,
                                      amount=Decimal("1"), reason="goodwill")
    with pytest.raises(Conflict, match="2026-10 first"):  # a refused close takes no number
        services.month_close(actor=finance_user, period=NOV, now=at("2026-12-01", "01:00"))
    services.month_close(actor=finance_user, period=OCT)
    second = services.credit_note_issue(actor=finance_user, invoice=september,
                                        amount=Decimal("1"), reason="again")
    invoices = sorted(Invoice.objects.filter(kind="invoice", status="issued")
                      .values_list("number", flat=True))
    assert invoices == [f"TY-2026-0000{n}" for n in range(1, 5)]
    assert [note.number, second.number] == ["TYC-2026-00001", "TYC-2026-00002"]


def test_no_month_after_the_current_one_is_offered(finance_user, login, api):
    client = login(finance_user)
    page = client.get(reverse("billing:month")).content.decode()
    assert "?month=2026-10" in page and "?month=2026-12" not in page
    future = client.get(reverse("billing:month") + "?month=2027-01", follow=True)
    assert future.status_code == 200
    body = future.content.decode()
    assert "2027-01 has not begun" in body and "Billing 2026-11" in body
    response = api(finance_user).get("/api/v1/billing/months/2027-01/")
    assert response.status_code == 400 and "2027-01" in str(response.json())
    assert months.is_future(dt.date(2026, 12, 1)) and not months.is_future(NOV)


def test_usage_not_yet_in_the_ledger_still_keeps_the_order(tenant_a, rate_card, finance_user):
    """The close brings the ledger up to date first: September's usage, not yet taken in,
    still makes October wait."""
    make_job(tenant_a, run(at("2026-09-30", "20:00"), at("2026-10-01", "02:00")))
    with pytest.raises(Conflict, match="Close 2026-09 first"):
        services.month_close(actor=finance_user, period=OCT)
    assert not MonthClose.objects.exists() and not Invoice.objects.filter(
        status="issued").exists()
