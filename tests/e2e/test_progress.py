"""The job page shows the job's own progress (issue 29, item 6): before any report it says
so and how to report; once the running job's rank-0 log prints a progress line and
Trainyard reads it, the page (refreshing itself, without a reload) shows the percentage
as a bar, the time left and when it expects to finish, and the last metrics. In English
and in Simplified Chinese, against kubesim over HTTP."""

from __future__ import annotations

import pytest
from django.utils import translation
from playwright.sync_api import expect

from tests.e2e import test_browser as flows
from tests.e2e.test_browser import LANGUAGES, _cycle, log_in, shot, tr

browser, new_page, world = flows.browser, flows.new_page, flows.world  # the fixtures

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180), pytest.mark.xdist_group("e2e")]


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_job_page_shows_the_reported_percentage_and_time_left(
        lang, new_page, world, cluster, bob, tenant_a):
    from jobs import progress, services
    from jobs.models import TrainingJob
    from jobs.tasks import read_progress
    from k8s_sync.client import get_client
    from k8s_sync.observe import relist_all
    from tenants.access import access_for

    job = services.job_submit(access=access_for(bob, tenant_a), actor=bob, pool="prod", data={
        "name": "e2e-progress", "image": "registry.example.org/ml/trainer:1",
        "tier": "production", "workers": 1, "gpus_per_worker": 1, "gpu_model": world["h800"],
        "cpu_per_worker": 8, "memory_gib_per_worker": 32, "max_run_seconds": 86400,
        "annotations": {"kubesim.trainyard.io/run-seconds": "3600"}})
    _cycle(cluster)
    _cycle(cluster, 30)
    job.refresh_from_db()
    assert job.state == "running", job.state

    page = new_page(lang)
    log_in(page, "bob", f"/t/acme/jobs/{job.pk}/")
    card = page.locator("#job-progress")
    expect(card.locator("h2")).to_have_text(tr(lang, "Progress"))
    expect(card).to_contain_text(tr(lang, "No progress reported yet."))
    expect(card.locator("code").first).to_contain_text("TRAINYARD_PROGRESS")
    shot(page, lang, "job-progress-none", top=card)

    cluster.advance(1200, step=10)
    relist_all(get_client())
    assert read_progress.apply().get()["written"] == 1
    job.refresh_from_db()
    said = job.progress
    assert 25 <= said["percent"] <= 40, said
    # the page refreshes itself (data-live): no reload
    percent = f"{said['percent']:.0f}"
    expect(card.locator("[data-progress-percent]")).to_have_text(
        tr(lang, "%(p)s%% done", p=percent))
    expect(card.locator("progress")).to_have_attribute("value", f"{said['percent']:.1f}")
    expect(card.locator("progress")).to_have_attribute("max", "100")
    with translation.override(lang):
        left = progress.duration_text(said["remaining_seconds"])
    remaining = card.locator("[data-progress-remaining]")
    expect(remaining).to_contain_text(left)
    # the expected end is a day, a time and a zone, as every ETA (core.when)
    expect(remaining.locator("time")).to_have_count(1)
    expect(card.locator("[data-progress-metrics]")).to_contain_text("loss")
    expect(card).not_to_contain_text(tr(lang, "No progress reported yet."))
    expect(card).to_contain_text(tr(
        lang, "The estimated start of the jobs waiting behind it uses this remaining time."))
    if lang != "en":
        expect(card).not_to_contain_text("left")
    shot(page, lang, "job-progress", top=card)
    assert TrainingJob.objects.get(pk=job.pk).state == "running"
