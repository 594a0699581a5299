"""A failure shown at once, in the browser (issue 29, item 4), in English and Chinese: a job
whose image cannot be pulled for now says so on its badge, its list row and its page's
banner, with what Trainyard does next and when, while its state stays "admitted"; a job
whose image does not exist has failed after its first attempt and says why."""

from __future__ import annotations

import pytest
from django.utils import translation

from tests.e2e.test_browser import (  # noqa: F401  (fixtures)
    LANGUAGES,
    _cycle,
    browser,
    log_in,
    new_page,
    shot,
    state_label,
    tr,
    world,
)

# skipped with test_browser when playwright or chromium is missing
expect = pytest.importorskip("playwright.sync_api").expect

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180), pytest.mark.xdist_group("e2e")]


def _submit(world, bob, tenant_a, name, pull):  # noqa: F811
    from jobs import services
    from tenants.access import access_for

    return services.job_submit(access=access_for(bob, tenant_a), actor=bob, pool="dev", data={
        "name": name, "image": "registry.example.org/ml/trainer:1", "tier": "development",
        "workers": 1, "gpus_per_worker": 4, "gpu_model": world["h800"], "cpu_per_worker": 8,
        "memory_gib_per_worker": 32, "max_run_seconds": 86400,
        "annotations": {"kubesim.trainyard.io/image-pull": pull,
                        "kubesim.trainyard.io/run-seconds": "3600"}})


def _shown(job, lang):
    from jobs.models import TrainingJob
    from jobs.problem_text import shown

    with translation.override(lang):
        return shown(TrainingJob.objects.get(pk=job.pk))


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_job_whose_image_cannot_be_pulled_says_so_at_once(
        lang, new_page, world, cluster, bob, tenant_a):  # noqa: F811
    from core.models import Policy

    Policy.objects.filter(pk=Policy.current().pk).update(pod_start_deadline_seconds=600,
                                                        pod_start_attempts=3)
    flaky = _submit(world, bob, tenant_a, "e2e-flaky", "unavailable")   # a registry's 503
    typo = _submit(world, bob, tenant_a, "e2e-typo", "not-found")      # no such image
    _cycle(cluster)
    _cycle(cluster, 10)  # the pods are bound; the kubelet's first pull fails
    pulling, missing = _shown(flaky, lang), _shown(typo, lang)
    assert pulling is not None and pulling.code == "image_pull"
    assert missing is not None and missing.code == "image_missing"

    page = new_page(lang)
    log_in(page, "bob", "/t/acme/jobs/")
    row = page.locator("tbody tr", has=page.get_by_role("link", name="e2e-flaky", exact=True))
    expect(row.locator(".badge.state-admitted")).to_have_text(state_label(lang, "admitted"))
    expect(row.locator(".badge[data-problem=image_pull]")).to_have_text(
        tr(lang, "image pull failing"))
    expect(row.locator(".problem")).to_contain_text(pulling.cause)
    expect(row.locator(".problem")).to_contain_text(pulling.next)
    expect(row.locator(".problem")).to_contain_text("503 Service Unavailable")
    failed = page.locator("tbody tr", has=page.get_by_role("link", name="e2e-typo", exact=True))
    expect(failed.locator(".badge.state-failed")).to_have_text(state_label(lang, "failed"))
    expect(failed.locator(".badge[data-problem=image_missing]")).to_have_text(
        tr(lang, "image not found"))
    expect(failed.locator(".problem")).to_contain_text("registry.example.org/ml/trainer:1: "
                                                       "not found")
    shot(page, lang, "job-problem-list")

    row.get_by_role("link", name="e2e-flaky", exact=True).click()
    banner = page.locator("#job-problem")
    expect(banner).to_be_visible()
    expect(page.locator("h1 .badge.state-admitted")).to_have_text(state_label(lang, "admitted"))
    expect(page.locator("h1 .badge[data-problem=image_pull]")).to_have_text(
        tr(lang, "image pull failing"))
    expect(banner.locator("[data-field=problem-cause]")).to_have_text(pulling.cause)
    expect(banner.locator("[data-field=problem-next]")).to_have_text(pulling.next)
    expect(banner.locator("[data-field=problem-next]")).to_contain_text(
        "1" if lang != "en" else "attempt 1 of 3")
    shot(page, lang, "job-problem-banner")

    page.goto(f"/t/acme/jobs/{typo.pk}/")
    banner = page.locator("#job-problem")
    expect(banner.locator("[data-field=problem-cause]")).to_have_text(missing.cause)
    expect(banner.locator("[data-field=problem-next]")).to_have_text(missing.next)
    expect(page.locator("h1 .badge.state-failed")).to_have_text(state_label(lang, "failed"))
