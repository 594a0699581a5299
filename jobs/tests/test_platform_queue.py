"""The platform queue: filters, sorting and pages from the query string, row actions that
come back to the same view, and bad values that are ignored and named, never a 500."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs.choices import JobState
from jobs.models import TrainingJob

URL = reverse("jobs:platform_queue")


def _job(tenant, n, *, state=JobState.QUEUED, tier="development", pool="dev", gpus=1,
         model="H800", mig="", priority=0, held=False, position=None, minutes_ago=0):
    job = TrainingJob.objects.create(
        tenant=tenant, pool=tenant.pools.get(kind=pool), name=f"job-{tenant.slug}-{n}",
        image="trainer:1", tier=tier, max_run_seconds=3600, workers=1, gpus_per_worker=gpus,
        gpu_model=model, mig_profile=mig, state=state, priority=priority, held=held,
        position_in_model=position)
    TrainingJob.objects.filter(pk=job.pk).update(
        submitted_at=timezone.now() - dt.timedelta(minutes=minutes_ago))
    return job


def _names(response) -> list[str]:
    return re.findall(r'<tr data-job="\d+">.*?>(job-[a-z]+-\d+)</a>',
                      response.content.decode(), re.S)


@pytest.fixture
def queue(tenant_a, tenant_b):
    return [
        _job(tenant_a, 1, gpus=8, priority=5, position=2, minutes_ago=30, tier="production",
             pool="prod"),
        _job(tenant_a, 2, gpus=2, position=1, minutes_ago=10, held=True),
        _job(tenant_b, 3, gpus=1, model="A100", mig="1g.10gb", position=3, minutes_ago=50),
        _job(tenant_b, 4, state=JobState.RUNNING, gpus=4, minutes_ago=90, tier="batch"),
        _job(tenant_b, 5, state=JobState.SUCCEEDED, gpus=4),  # not active: never listed
    ]


def test_filters_sorting_and_bookmarkable_query(login, platform_admin, queue):
    client = login(platform_admin)
    assert _names(client.get(URL)) == ["job-acme-2", "job-acme-1", "job-globex-3",
                                       "job-globex-4"]  # engine's order, others after
    assert _names(client.get(URL, {"tenant": "globex"})) == ["job-globex-3", "job-globex-4"]
    assert _names(client.get(URL, {"pool": "prod"})) == ["job-acme-1"]
    assert _names(client.get(URL, {"tier": "batch"})) == ["job-globex-4"]
    assert _names(client.get(URL, {"state": "running"})) == ["job-globex-4"]
    assert _names(client.get(URL, {"gpu_model": "1g.10gb"})) == ["job-globex-3"]
    assert _names(client.get(URL, {"held": "yes"})) == ["job-acme-2"]
    assert _names(client.get(URL, {"held": "no", "tenant": "acme"})) == ["job-acme-1"]
    assert _names(client.get(URL, {"sort": "-gpus"}))[:2] == ["job-acme-1", "job-globex-4"]
    assert _names(client.get(URL, {"sort": "-wait"}))[0] == "job-globex-4"  # longest wait
    assert _names(client.get(URL, {"sort": "-priority"}))[0] == "job-acme-1"
    assert _names(client.get(URL, {"sort": "submitted"}))[-1] == "job-acme-2"
    page = client.get(URL, {"tenant": "acme", "sort": "gpus"}).content.decode()
    # a column's link keeps the filters and turns the order round
    assert 'href="?tenant=acme&amp;sort=-gpus"' in page
    assert 'aria-sort="ascending"' in page


@pytest.mark.parametrize("params", [
    {"tenant": "nobody"}, {"state": "succeeded"}, {"tier": "x"}, {"held": "maybe"},
    {"sort": "name; drop"}, {"page": "-3"}, {"gpu_model": "<b>"}, {"pool": "sandbox"},
])
def test_a_bad_value_is_ignored_and_named_never_a_500(login, platform_admin, queue, params):
    response = login(platform_admin).get(URL, params)
    assert response.status_code == 200
    assert len(_names(response)) == 4  # the filter was ignored: every active job
    if "page" not in params:
        assert b'id="queue-ignored"' in response.content


def test_pages_of_fifty(login, platform_admin, tenant_a):
    TrainingJob.objects.bulk_create(
        TrainingJob(tenant=tenant_a, pool=tenant_a.pools.get(kind="dev"), name=f"job-acme-{i}",
                    image="t:1", tier="development", max_run_seconds=60, workers=1,
                    gpus_per_worker=1, gpu_model="H800", state=JobState.QUEUED,
                    position_in_model=i + 1)
        for i in range(60))
    client = login(platform_admin)
    first = client.get(URL, {"tenant": "acme"})
    assert len(_names(first)) == 50 and b"1 / 2" in first.content
    assert b'href="?tenant=acme&amp;page=2"' in first.content
    assert len(_names(client.get(URL, {"tenant": "acme", "page": "2"}))) == 10


def test_row_actions_come_back_to_the_view_and_cancel_asks(login, platform_admin, queue):
    client = login(platform_admin)
    page = client.get(URL, {"tenant": "acme"}).content.decode()
    cancel = re.search(r'<form[^>]*action="[^"]*/cancel/"[^>]*>', page).group(0)
    assert "data-confirm=" in cancel
    here = f"{URL}?tenant=acme"
    job = queue[0]
    response = client.post(reverse("jobs:action", kwargs={
        "slug": "acme", "pk": job.pk, "action": "hold"}), {"next": here, "reason": "disk"})
    assert response.status_code == 302 and response.url == here
    assert TrainingJob.objects.get(pk=job.pk).held
    client.post(reverse("jobs:action", kwargs={"slug": "acme", "pk": job.pk,
                                               "action": "priority"}),
                {"priority": "70", "reason": "deadline", "next": here})
    assert TrainingJob.objects.get(pk=job.pk).priority == 70
    away = client.post(reverse("jobs:action", kwargs={
        "slug": "acme", "pk": job.pk, "action": "release"}),
        {"next": "https://evil.example.org/", "reason": "ok"})
    assert away.url == reverse("jobs:detail", kwargs={"slug": "acme", "pk": job.pk})


def test_only_platform_admins(login, alice):
    assert login(alice).get(URL).status_code == 404


def test_a_nul_in_the_query_is_refused_before_the_page(login, platform_admin, queue):
    """portal.middleware refuses a NUL in the address for every page (Postgres cannot
    store it): a 400 with the reason, never a 500."""
    response = login(platform_admin).get(URL, {"pool": "\x00"})
    assert response.status_code == 400
    assert b"NUL" in response.content
