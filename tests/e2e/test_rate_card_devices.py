"""Every device priced (issue 30, item 2), in a real browser, in English and in Simplified
Chinese (the fixtures and helpers are ``test_browser``'s): an L4 used this month that the
rate card does not price is flagged on the rate card page, its row says UNPRICED; the
platform admin sets a price for the device on a new card, and the flag is gone."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.e2e.test_browser import (  # noqa: F401 - fixtures
    LANGUAGES,
    browser,
    log_in,
    new_page,
    shot,
    tr,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180), pytest.mark.xdist_group("e2e")]

L4 = "NVIDIA-L4"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_an_unpriced_device_in_use_is_flagged_until_it_is_priced(
        lang, new_page, settings, tenant_a, platform_admin):  # noqa: F811
    from billing import services
    from billing.models import DevicePrice
    from billing.tests.conftest import A100_PRICE, make_job, run
    from k8s_sync.models import ObservedNode

    settings.TRAINYARD_CURRENCY = "USD"
    services.rate_card_create(actor=platform_admin, effective_from=dt.date(2026, 1, 1),
                              gpus=[A100_PRICE])
    ObservedNode.objects.create(name="l4-0", gpu_product=L4, gpu_model=L4, gpu_count=8,
                                gpu_memory_mib=24576, observed_at=timezone.now())
    # an L4 job ran earlier this month (half the time since the month began, at most 1 h)
    now = timezone.now().replace(microsecond=0)
    month_began = timezone.localtime(now).replace(day=1, hour=0, minute=0, second=0)
    ran = dt.timedelta(seconds=max(1, min(3600, int((now - month_began).total_seconds()) // 2)))
    make_job(tenant_a, run(now - ran, now), gpu_model=L4)
    services.ledger_ingest_gpu(now=now)

    page = new_page(lang)
    log_in(page, "pat", "/billing/rates/", switch_to=lang)
    warning = page.locator(f'[data-unpriced-device="{L4}|"]')
    expect(warning).to_be_visible()
    expect(warning).to_contain_text(tr(
        lang, "%(device)s was used this month and has no price on the rate card: its usage "
              "is billed 0. Price its GPU model, or set a price for the device below.",
        device=L4))
    row = page.locator(f'#device-prices tr[data-device="{L4}|"]')
    expect(row).to_contain_text(tr(lang, "UNPRICED"))
    expect(page.locator(f'#device-prices tr[data-device="{A100_PRICE["gpu_model"]}|"]')
           ).to_contain_text(tr(lang, "set on the rate card"))
    shot(page, lang, "rate-card-unpriced-device", top=page.locator("#device-prices"))

    # a new card from today sets the L4's price per device-hour: the flag is gone
    form = page.locator("#rate-card-form")
    form.locator("input[name=effective_from]").fill(timezone.localdate().isoformat())
    form.locator("input[name='devices-0-device']").fill(f"{L4}|")
    form.locator("input[name='devices-0-price_per_hour']").fill("0.8")
    with page.expect_navigation():
        form.locator("button[type=submit]").click()
    expect(page.locator(f'#device-prices tr[data-device="{L4}|"]')).to_contain_text(
        tr(lang, "overridden on the rate card"))
    expect(page.locator("[data-unpriced-device]")).to_have_count(0)
    assert DevicePrice.objects.get().price_per_hour == Decimal("0.8")
