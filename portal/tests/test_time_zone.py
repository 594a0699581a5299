"""Times on pages in the reader's time zone: the browser's zone, kept in the
``trainyard_tz`` cookie (static/js/confirm.js), activated by
``portal.middleware.TimeZoneMiddleware``; a zone the database does not know is ignored."""

import datetime as dt
import zoneinfo

import pytest
from django.urls import reverse
from django.utils import timezone

from core.when import when_text
from jobs.models import JobTransition, TrainingJob


def _job_page(client, tenant):
    job = TrainingJob.objects.create(
        tenant=tenant, pool=tenant.pools.get(kind="dev"), name="tz", k8s_name="tz",
        state="queued", image="t:1", tier="development", max_run_seconds=3600, workers=1,
        gpus_per_worker=1, gpu_model="NVIDIA-H800")
    at = timezone.now().replace(microsecond=0)
    JobTransition.objects.create(job=job, from_state="", to_state="queued", reason="Submitted",
                                 at=at)
    page = client.get(reverse("jobs:detail", kwargs={"slug": tenant.slug, "pk": job.pk}))
    assert page.status_code == 200
    body = page.content.decode()
    return body[body.index('data-live="timeline"'):body.index('data-live="pods"')], at


@pytest.mark.parametrize("cookie", ["Asia/Shanghai", "America%2FNew_York"])
def test_the_timeline_speaks_the_readers_zone(tenant_a, login, bob, cookie):
    client = login(bob)
    client.cookies["trainyard_tz"] = cookie
    card, at = _job_page(client, tenant_a)
    zone = zoneinfo.ZoneInfo(cookie.replace("%2F", "/"))
    with timezone.override(zone):
        shown = when_text(at, seconds=True)
    assert shown in card
    assert shown.split()[-1] in ("CST", "EST", "EDT")   # the zone is written beside it
    local = at.astimezone(zone)
    assert local.strftime("%H:%M:%S") in card


@pytest.mark.parametrize("cookie", ["Mars/Olympus", "../../etc/passwd", "x" * 300, ""])
def test_a_zone_the_database_does_not_know_is_ignored(tenant_a, login, bob, cookie):
    client = login(bob)
    client.cookies["trainyard_tz"] = cookie
    card, at = _job_page(client, tenant_a)
    with timezone.override(dt.UTC):
        assert when_text(at, seconds=True) in card
