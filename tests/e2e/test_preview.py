"""The job form's one verdict before Submit, in a real browser, in English and Chinese
(issue 29, item 1): for each case the preview says fits, waits or refused, and pressing
Submit then does exactly that:

* fits: the job is created and admitted, on the nodes and switch the preview named;
* waits (4 cards with 8 of the pool's 8 in use): the job is created and queued, and its
  page gives the reason the preview gave;
* refused (no node has 16 cards; 16 cards could never fit the prod pool's quota of 8):
  Submit shows the preview's message at the same field, and nothing is created.

The preview's dates are the server's (``core.when``: "today 21:05 UTC"), never the
browser's ``toLocaleString()``. CPU and memory show request and limit per worker (item
2), the same on the form and the job page.
"""

from __future__ import annotations

import re

import pytest
from django.utils import translation
from playwright.sync_api import expect

from tests.e2e.test_browser import (  # noqa: F401  (fixtures)
    LANGUAGES,
    _cycle,
    browser,
    log_in,
    new_page,
    shot,
    state_label,
    tr,
    tr_js,
    world,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180), pytest.mark.xdist_group("e2e")]

US_DATE = re.compile(r"\d{1,2}/\d{1,2}/\d{4}|\b[AP]M\b")


def _fill(page, *, name: str, workers: int, gpus: int, model: str) -> None:
    """A production job of the prod pool, as a researcher types it."""
    if not page.url.endswith("/t/acme/jobs/new/"):
        page.goto("/t/acme/jobs/new/")
    page.locator("input[name=name]").fill(name)
    page.locator("select[name=pool]").select_option("prod")
    page.locator("select[name=tier]").select_option("production")
    page.locator("input[name=image]").fill("registry.example.org/ml/trainer:1")
    page.locator("input[name=workers]").fill(str(workers))
    page.locator("select[name=gpu_model]").select_option(model)
    page.locator("input[name=gpus_per_worker]").fill(str(gpus))
    page.locator("input[name=cpu_per_worker]").fill("8")
    page.locator("input[name=memory_gib_per_worker]").fill("64")
    page.locator("input[name=max_run_hours]").fill("2")


def _verdict(page, kind: str):
    """The preview's one verdict, once it has settled on ``kind``."""
    preview = page.locator("#preview")
    verdict = preview.locator(f".verdict[data-verdict={kind}]")
    expect(verdict).to_have_count(1)
    expect(preview).not_to_have_attribute("aria-busy", "true")
    expect(preview.locator(".verdict")).to_have_count(1)   # exactly one
    return verdict


def _price(model: str, admin) -> None:
    """A rate card pricing the H800 (1.5382 per GPU-hour), CPU and memory."""
    import datetime as dt
    from decimal import Decimal

    from django.conf import settings

    from billing import services

    settings.TRAINYARD_CURRENCY = "USD"
    services.rate_card_create(
        actor=admin, effective_from=dt.date(2026, 1, 1), gpus=[{
            "gpu_model": model, "purchase_price": Decimal("30000"), "depreciation_months": 48,
            "power_watts": 700, "pue": Decimal("1.3"), "electricity_kwh": Decimal("0.20"),
            "operations_month": Decimal("365")}], cpu_core_hour=Decimal("0.0625"),
        memory_gib_hour=Decimal("0.01"))


def _submit(page):
    page.locator("#job-form button[type=submit].primary").click()


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_preview_says_what_submit_then_does(lang, new_page, world, cluster, bob,  # noqa: F811
                                                 platform_admin):
    from core.texts import render
    from jobs.models import TrainingJob
    from jobs.selectors.spec import worker_resources, worker_resources_text

    model = world["h800"]
    _price(model, platform_admin)
    page = new_page(lang)
    log_in(page, "bob", "/t/acme/jobs/new/")
    expect(page.locator("html")).to_have_attribute("lang", lang)
    # the form says which of request and limit the quota counts, before anything is typed
    expect(page.locator("#field-cpu_per_worker .helptext")).to_have_text(tr(
        lang, "The limit of each worker. Its pod requests half of it (all of it below one "
              "core), and your quota counts the request."))

    # -- fits: the prod pool's 8 cards, on the one H800 node of the small profile
    _fill(page, name="e2e-fits", workers=1, gpus=8, model=model)
    verdict = _verdict(page, "fits")
    with translation.override(lang):
        fits = translation.ngettext(
            "Fits now: it would start at once on %(n)s node (%(nodes)s, switch %(switch)s).",
            "Fits now: it would start at once on %(n)s nodes (%(nodes)s, switch %(switch)s).",
            1) % {"n": 1, "nodes": "h800-0", "switch": "switch-b1"}
        worker = worker_resources_text(worker_resources(
            {"cpu_per_worker": 8, "memory_gib_per_worker": 64}))
    if lang != "en":
        assert "Fits now" not in fits and "CPU per worker" not in worker["cpu"]
    expect(verdict).to_have_text(fits)
    preview = page.locator("#preview")
    expect(preview.locator(".worker-cpu")).to_have_text(worker["cpu"])   # 4 of 8 cores
    expect(preview.locator(".worker-memory")).to_have_text(worker["memory"])
    expect(preview.locator(".worker-cpu")).to_have_attribute("data-request", "4")
    # the cost the invoice would charge, part by part, for the maximum run time (2 h) and
    # the expected one (the policy's default of an hour: no history, none typed)
    cost = preview.locator("#preview-cost")
    expect(cost.locator("caption")).to_have_text(tr_js(
        lang, "What the invoice would charge (%(currency)s)", currency="USD"))
    for part, max_cost, expected_cost in (("gpu", "24.61", "12.31"), ("cpu", "1.00", "0.50"),
                                          ("memory", "1.28", "0.64"),
                                          ("total", "26.89", "13.45")):
        row = cost.locator(f"tr[data-part={part}]")
        expect(row.locator("td[data-run=max]")).to_have_text(max_cost)
        expect(row.locator("td[data-run=expected]")).to_have_text(expected_cost)
    expect(cost.locator("thead")).to_contain_text(tr_js(lang, "Expected run time"))
    shot(page, lang, "preview-fits", top=page.locator("body"))
    _submit(page)
    page.wait_for_url(re.compile(r"/t/acme/jobs/\d+/$"))
    fitted = TrainingJob.objects.get(name="e2e-fits")
    if fitted.state == "queued":   # the pass the submission enqueued has not run yet
        _cycle(cluster)
        fitted.refresh_from_db()
    assert fitted.state == "admitted" and list(fitted.placement) == ["h800-0"]
    resources = page.locator("[data-field=worker-resources]")
    expect(resources.locator("[data-field=cpu]")).to_have_text(worker["cpu"])
    expect(resources.locator("[data-field=memory]")).to_have_text(worker["memory"])
    _cycle(cluster, 10)

    # -- waits (the case): 4 more cards with 8 of the prod quota of 8 in use
    # (production never borrows); one verdict, and the pool's numbers agree with it
    _fill(page, name="e2e-waits", workers=1, gpus=4, model=model)
    verdict = _verdict(page, "waits")
    line = page.locator(f"#preview .dimension[data-key='gpu:{model}']")
    expect(line).to_have_attribute("data-in-use", "8")
    expect(line).to_contain_text("12")
    code = verdict.get_attribute("data-reason-code")
    assert code and code.startswith("jobs.wait.over_quota"), code
    said = verdict.inner_text()
    assert not US_DATE.search(said), said   # the server's date format, not the browser's
    assert "UTC" in said, said
    shot(page, lang, "preview-waits", top=page.locator("body"))
    _submit(page)
    page.wait_for_url(re.compile(r"/t/acme/jobs/\d+/$"))
    waiting = TrainingJob.objects.get(name="e2e-waits")
    assert waiting.state == "queued", waiting.state
    assert waiting.wait_reason["code"] == code
    with translation.override(lang):
        reason = render(waiting.wait_reason)
    assert reason in said, (reason, said)                    # the preview's reason ...
    expect(page.locator(".banner").first).to_contain_text(reason)   # ... is the page's
    expect(page.locator("h1 .badge[class*=state-]")).to_have_text(state_label(lang, "queued"))

    # -- refused: no node has 16 cards; 16 cards could never fit the pool's quota of 8
    too_wide = tr(lang, "No node has %(n)s %(m)s GPUs; the largest has %(most)s: use more "
                        "workers with fewer GPUs each.", n=16, m=model, most=8)
    too_big = tr(lang, "This job asks for %(w)s %(r)s but the %(p)s pool may hold at most "
                       "%(c)s, so it could never start (%(why)s), or use fewer workers or GPUs.",
                 w=16, r=model, p="prod", c=8,
                 why=tr(lang, "production jobs never borrow: ask for more quota first"))
    for name, workers, gpus, message in (("e2e-too-wide", 1, 16, too_wide),
                                         ("e2e-too-big", 2, 8, too_big)):
        _fill(page, name=name, workers=workers, gpus=gpus, model=model)
        field_error = page.locator(".field-error[data-field=gpus_per_worker]")
        expect(field_error).to_have_text(message)
        verdict = _verdict(page, "refused")
        expect(verdict).to_have_attribute("data-field", "gpus_per_worker")
        label = page.locator("label[for=id_gpus_per_worker]").inner_text().strip()
        expect(verdict).to_have_text(tr_js(lang, "Submit would refuse it.") + tr_js(
            lang, "%(field)s: %(message)s", field=label, message=message))
        shot(page, lang, f"preview-refused-{name}", top=page.locator("body"))
        _submit(page)
        summary = page.locator("#form-errors")
        expect(summary).to_be_visible()
        expect(summary).to_contain_text(message)       # Submit: the same words ...
        expect(field_error).to_have_text(message)      # ... at the same field
        assert not TrainingJob.objects.filter(name=name).exists()
        # after the refused Submit the preview still says the same, once
        verdict = _verdict(page, "refused")
        expect(verdict).to_have_attribute("data-field", "gpus_per_worker")
