"""A queued job's page says how far to believe its ETA (issue 29, item 5), in a real browser,
in English and Simplified Chinese: too few samples at first, then the median error and the
share of starts by the 90% time of recent estimates in its pool; and a job whose ETA is
earlier than one ahead of it says why. No cluster needed: the page reads stored rows."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import translation

from tests.e2e.test_browser import (  # noqa: F401 (fixtures)
    LANGUAGES,
    browser,
    expect,
    log_in,
    new_page,
    shot,
    tr,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120), pytest.mark.xdist_group("e2e")]


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_job_page_shows_how_far_recent_etas_were_right(lang, new_page, tenant_a, bob):  # noqa: F811
    from django.utils import timezone

    from core.texts import render
    from jobs.models import EtaRecord, TrainingJob

    dev = tenant_a.pools.get(kind="dev")
    now = timezone.now()

    def make(name, **fields):
        return TrainingJob.objects.create(
            tenant=tenant_a, pool=dev, name=name, image="trainer:1", tier="development",
            max_run_seconds=3600, workers=1, gpus_per_worker=1, gpu_model="NVIDIA-H800",
            cpu_per_worker=8, memory_gib_per_worker=32, **fields)

    reason = [{"code": "jobs.wait.capacity", "args": {}},
              {"code": "jobs.wait.backfill_smaller",
               "args": {"n": {"code": "jobs.ordinal", "args": {"n": 2}}}}]
    job = make("waiting", state="queued", position_in_pool=3, position_in_model=3,
               eta_p50=now + dt.timedelta(minutes=30), eta_p90=now + dt.timedelta(minutes=50),
               wait_reason=reason)
    page = new_page(lang)
    log_in(page, "bob", f"/t/acme/jobs/{job.pk}/", switch_to=lang)
    line = page.locator("#eta-accuracy")
    expect(line).to_have_text(tr(
        lang, "Too few jobs started in this pool in the last %(d)s days (%(s)s estimates) "
              "to say how far to believe this estimate.", d=7, s=0))
    # the row says why it may start before the job ahead of it, in the reader's language
    expect(page.locator("[data-live=banners] .banner").first).to_contain_text(
        render(reason[1], lang))

    # 20 estimates of jobs that started in the last days: 12 minutes off, 17 by their p90
    done = make("done", state="succeeded")
    for i in range(20):
        started = now - dt.timedelta(hours=2 + i)
        EtaRecord.objects.create(
            job=done, pool=dev, tier="development", predicted_at=started - dt.timedelta(hours=1),
            eta_p50=started - dt.timedelta(minutes=12),
            eta_p90=started + dt.timedelta(minutes=5 if i < 17 else -5), started_at=started)
    page.reload()
    singular = ("Estimates in this pool were off by a median of %(m)s min; %(c)s%% of them "
                "were followed by a start by their 90%% time (last %(d)s days: %(n)s job, "
                "%(s)s estimates).")
    with translation.override(lang):
        said = translation.ngettext(singular, singular.replace("job,", "jobs,"), 1)
    assert lang == "en" or said != singular, "not in the catalogue"
    expect(line).to_have_text(said % {"m": 12, "c": 85, "d": 7, "n": 1, "s": 20})
    shot(page, lang, "job-eta-accuracy")
