"""Every device priced (issue 30, item 2): the rate card lists every device the cluster
advertises or that was used, with where its price comes from; an admin overrides any
device; a month with unpriced usage closes only when finance confirms it, and its lines
say so."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from billing import selectors, services
from billing.models import DevicePrice, Invoice, MonthClose
from billing.tests.conftest import A100, A100_PRICE, at, make_job, run
from core.exceptions import ApplicationError
from core.texts import english
from k8s_sync.models import ObservedNode

OCT = dt.date(2026, 10, 1)
L4 = "NVIDIA-L4"


def _node(model: str, mib: int, *, sharing: str = "", replicas: int = 1,
          alloc: dict | None = None) -> None:
    ObservedNode.objects.create(name=f"{model}-{sharing or 'whole'}", gpu_product=model,
                                gpu_model=model, gpu_count=8, gpu_memory_mib=mib,
                                sharing_strategy=sharing, gpu_replicas=replicas,
                                allocatable=alloc or {}, observed_at=timezone.now())


@pytest.fixture
def unpriced_october(tenant_a, rate_card):
    """October: 2 h of a priced A100 and 3 h of an L4 the rate card does not price."""
    make_job(tenant_a, run(at("2026-10-05", "10:00"), at("2026-10-05", "12:00")))
    make_job(tenant_a, run(at("2026-10-06", "10:00"), at("2026-10-06", "13:00")), gpu_model=L4)
    services.ledger_ingest_gpu(now=at("2026-11-01", "00:30"))
    return OCT


def test_closing_with_unpriced_usage_needs_confirmation_and_the_line_says_so(
        unpriced_october, finance_user, tenant_a):
    with pytest.raises(ApplicationError) as refused:
        services.month_close(actor=finance_user, period=OCT)
    assert refused.value.field == "confirm_unpriced" and L4 in refused.value.message
    assert refused.value.extra["unpriced"] == [L4]
    assert refused.value.extra["devices"] == [f"{L4}|"]
    assert not MonthClose.objects.exists()
    assert not Invoice.objects.filter(status="issued").exists()
    services.month_close(actor=finance_user, period=OCT, confirm_unpriced=True)
    invoice = Invoice.objects.get(tenant=tenant_a, period=OCT)
    lines = {line.resource: line for line in invoice.lines.all()}
    assert lines[f"{L4}|"].amount == 0
    assert english(lines[f"{L4}|"].text) == f"{L4} (no price on the rate card: billed 0)"
    assert lines[f"{A100}|"].amount == Decimal("3.30")


def test_the_api_and_the_month_page_ask_for_the_confirmation(unpriced_october, finance_user,
                                                             api, login):
    month = api(finance_user).get("/api/v1/billing/months/2026-10/").json()
    assert month["unpriced"] == [{"device": f"{L4}|", "description": L4}]
    refused = api(finance_user).post("/api/v1/billing/months/2026-10/close/", {},
                                     format="json")
    assert refused.status_code == 400 and L4 in str(refused.json())
    assert not MonthClose.objects.exists()
    page = login(finance_user).get(reverse("billing:month") + "?month=2026-10")
    assert 'name="confirm_unpriced"' in page.content.decode()
    said = login(finance_user).post(reverse("billing:close"), {"month": "2026-10"}, follow=True)
    assert L4 in said.content.decode() and not MonthClose.objects.exists()
    closed = api(finance_user).post("/api/v1/billing/months/2026-10/close/",
                                    {"confirm_unpriced": True}, format="json")
    assert closed.status_code == 201


def test_an_override_prices_a_device_and_is_validated(platform_admin, tenant_a):
    with pytest.raises(ApplicationError) as bad:
        services.rate_card_create(
            actor=platform_admin, effective_from=dt.date(2026, 9, 1), gpus=[A100_PRICE],
            devices=[{"device": "A100|bogus:1/2", "price_per_hour": "1"},
                     {"device": f"{L4}|shared:1/4", "price_per_hour": "-1"}])
    assert set(bad.value.extra["errors"]) == {"devices-0-device", "devices-1-price_per_hour"}
    services.rate_card_create(
        actor=platform_admin, effective_from=dt.date(2026, 9, 1), gpus=[A100_PRICE],
        devices=[{"device": f"{L4}|", "price_per_hour": Decimal("0.8")},
                 {"device": f"{A100}|shared:1/4", "price_per_hour": Decimal("0.5")}])
    assert DevicePrice.objects.count() == 2
    make_job(tenant_a, run(at("2026-10-06", "10:00"), at("2026-10-06", "13:00")), gpu_model=L4)
    services.ledger_ingest_gpu(now=at("2026-11-01", "00:30"))
    (line,) = selectors.month_lines(OCT, [tenant_a.pk])[tenant_a.pk]
    assert (line.unit_price, line.amount) == (Decimal("0.8"), Decimal("2.40"))
    assert selectors.unpriced_devices(OCT) == []


def test_the_rate_card_page_lists_every_device_and_flags_the_unpriced_one_in_use(
        tenant_a, rate_card, login, platform_admin, frozen_clock):
    _node(A100, 81920, alloc={"nvidia.com/mig-1g.10gb": "7"})
    _node(A100, 81920, sharing="time-slicing", replicas=4)
    _node(L4, 24576)
    make_job(tenant_a, run(at("2026-11-10", "10:00"), at("2026-11-10", "12:00")), gpu_model=L4)
    services.ledger_ingest_gpu(now=at("2026-11-15"))
    rows = {row.device.key: row for row in selectors.rate_card_devices(
        selectors.current_rate_card())}
    assert {k: r.priced.source for k, r in rows.items()} == {
        f"{A100}|": "set", f"{A100}|1g.10gb": "derived", f"{A100}|shared:1/4": "derived",
        f"{L4}|": "unpriced"}
    assert rows[f"{A100}|shared:1/4"].priced.price == Decimal("0.4125")
    assert rows[f"{L4}|"].unpriced_in_use and not rows[f"{A100}|"].in_use
    body = login(platform_admin).get(reverse("billing:rates")).content.decode()
    assert f'data-unpriced-device="{L4}|"' in body
    assert f'data-device="{A100}|shared:1/4" data-source="derived"' in body


def test_the_api_takes_and_shows_device_prices_and_names_a_bad_row(api, platform_admin):
    body = {"effective_from": "2026-12-01", "gpus": [
        {k: str(v) for k, v in A100_PRICE.items()}],
        "devices": [{"device": f"{A100}|shared:1/4", "price_per_hour": "0.5"},
                    {"device": f"{A100}|shared:1/4", "price_per_hour": "0.6"}]}
    twice = api(platform_admin).post("/api/v1/billing/rate-cards/", body, format="json")
    assert twice.status_code == 400 and "devices-1-device" in twice.json()["extra"]["errors"]
    assert not DevicePrice.objects.exists()
    body["devices"].pop()
    created = api(platform_admin).post("/api/v1/billing/rate-cards/", body, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["device_prices"] == [
        {"device": f"{A100}|shared:1/4", "price_per_hour": "0.5000"}]
