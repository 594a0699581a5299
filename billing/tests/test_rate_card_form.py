"""The rate card as one form per GPU model: choices, one validation (the service's) shown
at the field on the page and named the same way by the API, nothing written on an error;
MIG slices priced from the card memory the cluster reports when the card leaves it blank."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from billing import services
from billing.models import RateCard
from billing.tests.conftest import A100, A100_PRICE, at, make_job, run
from billing.tests.test_invoice_arithmetic import NOV, amounts, lines_of
from core.exceptions import ApplicationError
from core.tests.html import form_values
from k8s_sync.models import ObservedNode

URL = reverse("billing:rates")


def _node(model: str, mib: int | None, name: str = "") -> None:
    ObservedNode.objects.create(name=name or f"{model}-0", gpu_product=model, gpu_model=model,
                                gpu_count=8, gpu_memory_mib=mib, observed_at=timezone.now())


def _row(**overrides: str) -> dict[str, str]:
    values = {"memory_gib": "80", "purchase_price": "26280", "depreciation_months": "36",
              "power_watts": "500", "pue": "1.5", "electricity_kwh": "0.2",
              "operations_month": "0"}
    values.update(overrides)
    return {f"gpus-0-{k}": v for k, v in values.items()}


@pytest.fixture
def page_values(login, platform_admin):
    _node(A100, 81920)
    client = login(platform_admin)
    return client, form_values(client.get(URL).content.decode(), None)


def test_a_price_out_of_range_is_shown_at_its_field_and_nothing_is_saved(page_values):
    client, values = page_values
    assert values["gpus-0-gpu_model"] == A100  # the model the cluster reports, preselected
    response = client.post(URL, {**values, "effective_from": "2030-01-01", **_row(pue="0.5")})
    page = response.content.decode()
    assert response.status_code == 400
    assert 'data-field="gpus-0-pue"' in page and "PUE is between 1 and 3." in page
    assert 'value="0.5"' in page  # the typed value is kept
    assert not RateCard.objects.exists()


def test_a_gpu_model_that_is_not_offered_is_a_field_error(page_values):
    client, values = page_values
    response = client.post(URL, {**values, "effective_from": "2030-01-01",
                                 **_row(gpu_model="H999")})
    assert response.status_code == 400
    assert 'data-field="gpus-0-gpu_model"' in response.content.decode()
    assert not RateCard.objects.exists()


def test_a_row_without_numbers_is_left_off_and_a_half_row_asks_for_the_rest(page_values):
    client, values = page_values
    half = client.post(URL, {**values, "effective_from": "2030-01-01",
                             "gpus-0-purchase_price": "1000"})
    assert half.status_code == 400 and 'data-field="gpus-0-pue"' in half.content.decode()
    empty = client.post(URL, {**values, "effective_from": "2030-01-01"})
    assert empty.status_code == 400 and "Price at least one GPU model." in \
        empty.content.decode()
    assert not RateCard.objects.exists()


def test_the_api_gets_the_same_validation(api, platform_admin):
    payload = {"effective_from": "2030-01-01", "gpus": [
        {**{k: str(v) for k, v in A100_PRICE.items()}, "depreciation_months": 0}]}
    response = api(platform_admin).post("/api/v1/billing/rate-cards/", payload, format="json")
    body = response.json()
    assert response.status_code == 400, body
    assert body["field"] == "gpus-0-depreciation_months"
    assert "gpus-0-depreciation_months" in body["extra"]["errors"]
    assert not RateCard.objects.exists()


def test_service_errors_name_every_field(platform_admin):
    with pytest.raises(ApplicationError) as caught:
        services.rate_card_create(actor=platform_admin, effective_from=dt.date(2030, 1, 1),
                                  gpus=[{**A100_PRICE, "pue": Decimal("9")},
                                        {**A100_PRICE, "power_watts": Decimal("-1")}])
    assert set(caught.value.extra["errors"]) == {"gpus-0-pue", "gpus-1-gpu_model",
                                                 "gpus-1-power_watts"}


def test_mig_priced_from_the_memory_the_cluster_reports(tenant_a, platform_admin):
    # the card leaves the memory blank; the cluster reports 80 GiB per A100 card
    services.rate_card_create(actor=platform_admin, effective_from=dt.date(2026, 1, 1),
                              gpus=[{**A100_PRICE, "memory_gib": None}])
    _node(A100, 81920)
    make_job(tenant_a, run(at("2026-11-04", "08:00"), at("2026-11-04", "12:00")), gpus=1,
             gpu_model="", mig="3g.40gb")
    services.ledger_ingest_gpu(now=at("2026-12-01"))
    lines = lines_of(tenant_a, NOV)
    # 4 instance-hours x 1.65 / 2 = 0.825 an hour
    assert amounts(lines) == [(Decimal("4"), Decimal("0.825"), Decimal("3.30"))]
    assert "1/2" in lines[0].description


def test_mig_with_no_memory_known_says_why_and_the_page_warns(tenant_a, platform_admin,
                                                              login):
    services.rate_card_create(actor=platform_admin, effective_from=dt.date(2026, 1, 1),
                              gpus=[{**A100_PRICE, "memory_gib": None}])
    _node(A100, None)
    make_job(tenant_a, run(at("2026-11-04", "08:00"), at("2026-11-04", "12:00")), gpus=1,
             gpu_model="", mig="1g.10gb")
    services.ledger_ingest_gpu(now=at("2026-12-01"))
    (line,) = lines_of(tenant_a, NOV)
    assert line.amount == 0 and "card memory" in line.description
    page = login(platform_admin).get(URL).content.decode()
    assert f'data-mig-warning="{A100}"' in page


def test_egress_prices_per_destination_checked_by_the_service(page_values, api,
                                                              platform_admin):
    """The internet, other regions and other zones each have a price per GiB; the
    service's check is shown at the field on the page and named alike by the API."""
    errors = services.rate_card_errors(gpus=[A100_PRICE], egress={
        "egress_gib": Decimal("0.08"), "egress_region_gib": Decimal("-0.01"),
        "egress_zone_gib": Decimal("1234567.5"), "egress_moon_gib": Decimal(1)})
    assert set(errors) == {"egress_region_gib", "egress_zone_gib", "egress_moon_gib"}
    assert errors["egress_region_gib"] == "Enter zero or more."
    client, values = page_values
    response = client.post(URL, {**values, "effective_from": "2030-01-01", **_row(),
                                 "egress_zone_gib": "-1"})
    page = response.content.decode()
    assert response.status_code == 400
    assert 'data-field="egress_zone_gib"' in page and "Enter zero or more." in page
    assert not RateCard.objects.exists()
    payload = {"effective_from": "2030-01-01", "egress_region_gib": "-0.5",
               "gpus": [{k: str(v) for k, v in A100_PRICE.items()}]}
    refused = api(platform_admin).post("/api/v1/billing/rate-cards/", payload, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "egress_region_gib"
    assert not RateCard.objects.exists()
    response = client.post(URL, {**values, "effective_from": "2030-01-01", **_row(),
                                 "egress_gib": "0.09", "egress_region_gib": "0.02",
                                 "egress_zone_gib": "0.01"})
    assert response.status_code == 302
    card = RateCard.objects.get()
    assert (card.egress_gib, card.egress_region_gib, card.egress_zone_gib) == (
        Decimal("0.09"), Decimal("0.02"), Decimal("0.01"))
    assert [card.egress_price(c) for c in ("internet", "cross_region", "cross_zone",
                                           "in_cluster", "unclassified")] == [
        Decimal("0.09"), Decimal("0.02"), Decimal("0.01"), None, Decimal("0.09")]
    shown = client.get(URL).content.decode()
    assert "data-egress-prices" in shown and "0.01" in shown
    listed = api(platform_admin).get("/api/v1/billing/rate-cards/").json()
    first = (listed["results"] if isinstance(listed, dict) else listed)[0]
    assert first["egress_zone_gib"] == "0.010000"
