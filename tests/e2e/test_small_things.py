"""The small things of issue 29 ("Why", item 6), in a real browser, in English and in
Simplified Chinese (the fixtures and helpers are ``test_browser``'s):

* a queued job's log pane says the job has not started yet (not "this pod no longer
  exists"), and the job page's cards use the page's width, a 300-character reason
  wrapping inside its card, at 1280 and 1920 pixels (the tenant page, the dashboard, the
  invoices and a pool's page likewise);
* a member of exactly one tenant lands on its page, the list one click away;
* a gauge at exactly its quota is full, in the in-use blue, and amber only above it, as
  its legend says; GPU memory not granted is "not limited" in the same words on the
  dashboard and the quota page; a trend with one sample spans its whole period, and a
  period without samples says so.
"""

from __future__ import annotations

import datetime as dt
import io
import re

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
    world,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180), pytest.mark.xdist_group("e2e")]

LONG_REASON = ("Held for the storage migration of the shared checkpoint volumes: "
               + "x" * 120 + " ") + "averyveryverylongwordwithoutanyspace" * 3
LONG_REASON = LONG_REASON[:300]

# How a grid's cards sit and whether anything runs out of its card: per row (cards at the
# same top), the share of the grid's width the row covers; and every element whose box
# reaches past its card's (inside a box that scrolls by design, such as the log, none).
MEASURE = """(grid) => {
  const g = grid.getBoundingClientRect();
  const cards = Array.from(grid.children).filter(
    c => c.classList.contains('card') || c.tagName === 'FIGURE');
  const rows = {};
  const out = [];
  for (const card of cards) {
    const r = card.getBoundingClientRect();
    const top = Math.round(r.top);
    (rows[top] = rows[top] || []).push([r.left, r.right]);
    for (const el of card.querySelectorAll('*')) {
      let scroller = false;
      for (let p = el.parentElement; p && p !== card; p = p.parentElement) {
        const o = getComputedStyle(p).overflowX;
        if (o === 'auto' || o === 'scroll' || o === 'hidden') { scroller = true; break; }
      }
      if (scroller) { continue; }
      const e = el.getBoundingClientRect();
      if (e.width && (e.right > r.right + 1 || e.left < r.left - 1)) {
        out.push(el.tagName + ' ' + (el.textContent || '').slice(0, 40));
      }
    }
  }
  const spans = Object.values(rows).map(
    cells => (Math.max(...cells.map(c => c[1])) - Math.min(...cells.map(c => c[0]))) / g.width);
  return {width: g.width, spans: spans, overflow: out};
}"""


def _layout(page, selector: str = "main .grid") -> dict:
    return page.locator(selector).first.evaluate(MEASURE)


def _submit(user, tenant, name, pool, tier, gpus, model):
    from jobs import services
    from tenants.access import access_for

    return services.job_submit(access=access_for(user, tenant), actor=user, pool=pool, data={
        "name": name, "image": "registry.example.org/ml/trainer:1", "tier": tier,
        "workers": 1, "gpus_per_worker": gpus, "gpu_model": model, "cpu_per_worker": 8,
        "memory_gib_per_worker": 32, "max_run_seconds": 86400,
        "annotations": {"kubesim.trainyard.io/run-seconds": "3600"}})


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_queued_jobs_page_uses_the_width_and_its_logs_say_not_started(
        lang, new_page, world, cluster, bob, platform_admin, tenant_a):  # noqa: F811
    from jobs import services
    from jobs.models import JobTransition

    h800 = world["h800"]
    _submit(bob, tenant_a, "e2e-first", "prod", "production", 8, h800)
    waiting = _submit(bob, tenant_a, "e2e-waits", "prod", "production", 8, h800)
    waiting.refresh_from_db()
    assert waiting.state == "queued", waiting.state   # production never borrows
    services.job_hold(actor=platform_admin, job=waiting, held=True, reason=LONG_REASON)
    JobTransition.objects.create(job=waiting, from_state="queued", to_state="queued",
                                 reason="Held", message=LONG_REASON, at=timezone.now())
    page = new_page(lang)
    log_in(page, "bob", f"/t/acme/jobs/{waiting.pk}/")
    status = page.locator("#logs [data-log-status]")
    expect(status).to_have_text(tr(
        lang, "The job has not started yet: logs appear when its first pod runs."))
    expect(status).not_to_contain_text("no longer exists")
    expect(page.locator(".banner").first).to_contain_text(LONG_REASON[:60])
    for width in (1280, 1920):
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(100)
        measured = _layout(page)
        # every row of cards covers the grid's width (Resources and Timeline: half each)
        assert min(measured["spans"]) > 0.97, (width, measured)
        assert measured["overflow"] == [], (width, measured["overflow"])
        resources = page.locator("[data-live=resources]").bounding_box()
        timeline = page.locator("[data-live=timeline]").bounding_box()
        assert abs(resources["width"] - timeline["width"]) < 2
        assert resources["width"] > 0.45 * measured["width"], (width, measured)
        # the banner with the long reason stays within the page's main column
        main = page.locator("main").bounding_box()
        banner = page.locator(".banner").first.bounding_box()
        assert banner["x"] + banner["width"] <= main["x"] + main["width"] + 1
    page.set_viewport_size({"width": 1280, "height": 800})
    shot(page, lang, "small-job-page-queued")

    # the sibling pages: their cards fill the rows too
    for url, selectors in (("/t/acme/", ["main .grid"]),
                           ("/t/acme/dashboard/", ["main .grid", ".gauges"]),
                           ("/t/acme/invoices/", ["main .grid"]),
                           ("/t/acme/pools/prod/", ["main .grid"])):
        page.goto(url)
        for selector in selectors:
            measured = _layout(page, selector)
            assert min(measured["spans"]) > 0.97, (url, measured)
            assert measured["overflow"] == [], (url, measured["overflow"])


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_member_of_one_tenant_lands_on_its_page(lang, new_page, world, bob):  # noqa: F811
    page = new_page(lang)
    log_in(page, "bob")
    page.wait_for_url(re.compile(r"/t/acme/$"))
    expect(page.locator("h1")).to_contain_text("Acme")
    page.locator("details.switcher summary").first.click()
    page.locator("details.switcher a", has_text=tr(lang, "My tenants")).click()
    page.wait_for_url(re.compile(r"/\?all=1$"))
    expect(page.locator("h1")).to_have_text(tr(lang, "My tenants"))
    expect(page.locator("a.tenant-card")).to_have_count(1)


def _pixels(png: bytes, rgb: tuple[int, int, int], tolerance: int = 40) -> int:
    """How many pixels of a screenshot are near ``rgb``."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1 << 24) or []
    return sum(n for n, p in colours
               if all(abs(a - b) <= tolerance for a, b in zip(p, rgb, strict=True)))


BLUE, AMBER = (37, 99, 235), (245, 158, 11)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_gauges_are_amber_only_above_the_quota_and_empty_trends_say_so(
        lang, new_page, world, cluster, bob, platform_admin, tenant_a):  # noqa: F811
    from k8s_sync.client import get_client
    from k8s_sync.observe import relist_all
    from tenants import services as tenant_services
    from tenants.models import UsageSeries

    h800 = world["h800"]
    key = f"gpu:{h800}"
    prod, dev = tenant_a.pools.get(kind="prod"), tenant_a.pools.get(kind="dev")
    tenant_services.quota_set(actor=platform_admin, pool=dev, reason="e2e",
                              amounts={key: 0, "cpu": 128, "memory": 1024})
    _submit(bob, tenant_a, "e2e-full", "prod", "production", 8, h800)
    relist_all(get_client())
    page = new_page(lang)
    log_in(page, "bob", "/t/acme/dashboard/")
    expect(page.locator("p.legend")).to_have_text(tr(
        lang, "Bar: in use. Line: quota; a bar that reaches it is full. Blue band: "
        "guaranteed part. Amber: borrowed above the quota (only above it)."))
    gauge = page.locator(f"figure.gauge[data-key='{key}']")
    expect(gauge).to_have_attribute("data-state", "full")
    expect(gauge.locator("[data-field=used]")).to_have_text("8")
    expect(gauge.locator("[data-field=quota]")).to_have_text("8")
    expect(gauge.locator(".js-plotly-plot")).to_have_count(1)
    meter = gauge.locator("meter").screenshot()
    chart = gauge.locator(".js-plotly-plot").screenshot()
    assert _pixels(meter, BLUE) > 20 and _pixels(meter, AMBER) == 0
    assert _pixels(chart, AMBER) == 0
    shot(page, lang, "small-gauge-full", top=gauge)
    # GPU memory was not granted: not limited, in the same words here and on the quota page
    words = tr(lang, "no quota set: use is shown, not limited")
    expect(page.locator("figure.gauge[data-key='gpu-memory']")).to_contain_text(words)
    # no usage sampled yet: the trends say so
    expect(page.locator("[data-trend-panel='7'] [data-no-data]")).to_have_text(
        tr(lang, "No data in this period yet."))

    page.goto("/t/acme/quota/")
    row = page.locator("tr[data-pool=prod][data-key='gpu-memory']")
    expect(row).to_contain_text(words)
    expect(row).not_to_contain_text("0 GiB")

    # above the quota: amber, on the meter and on the chart
    tenant_services.quota_set(actor=platform_admin, pool=prod, reason="e2e",
                              amounts={key: 4, "cpu": 128, "memory": 1024})
    # one hour's sample: its chart spans the whole week, not a millisecond
    hour = timezone.now().replace(minute=0, second=0, microsecond=0)
    UsageSeries.objects.create(pool=prod, resource=key, resolution="h", start=hour,
                               allocated=8, peak=8, quota=4)
    from django.core.cache import cache

    cache.clear()
    page.goto("/t/acme/dashboard/")
    expect(gauge).to_have_attribute("data-state", "over")
    expect(gauge.locator(".js-plotly-plot")).to_have_count(1)
    meter = gauge.locator("meter").screenshot()
    chart = gauge.locator(".js-plotly-plot").screenshot()
    assert _pixels(meter, AMBER) > 20 and _pixels(meter, BLUE) == 0
    assert _pixels(chart, AMBER) > 20
    trend = page.locator("[data-trend-panel='7'] .js-plotly-plot").first
    expect(trend).to_be_visible()
    # the one chart takes the row (the grid kept two thirds of it empty)
    assert min(_layout(page, "[data-trend-panel='7']")["spans"]) > 0.97
    # plotly's own axis range, as it drew it ("2026-12-07 12:00:00.123" and the like)
    span = [dt.datetime.fromisoformat(v[:19]) for v in
            trend.evaluate("el => el._fullLayout.xaxis.range")]
    assert dt.timedelta(days=6, hours=23) < span[1] - span[0] < dt.timedelta(days=7, hours=1), \
        span
    shot(page, lang, "small-gauge-over-and-trend", top=gauge)
