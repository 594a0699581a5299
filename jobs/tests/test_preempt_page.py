"""An admin's preemption from the pages (the job page and the platform queue): a button
for platform admins only, with a confirmation and a reason, that POSTs to the job action
view, which calls ``jobs.services.job_preempt``; errors are shown as messages, never a
500; the same in both admission backends (the backend's ``preempt`` is what differs)."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from core.texts import english
from jobs.choices import JobState
from jobs.models import TrainingJob
from jobs.tests.test_platform_queue import _job
from tenants.models import AuditEvent


def _url(job, action="preempt"):
    return reverse("jobs:action", kwargs={"slug": job.tenant.slug, "pk": job.pk,
                                          "action": action})


def _said(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


@pytest.fixture(params=["trainyard", "kueue"])
def backend(request, settings):
    settings.TRAINYARD_ADMISSION_BACKEND = request.param
    return request.param


def test_admins_see_the_preempt_button_and_researchers_do_not(login, platform_admin, alice,
                                                              bob, tenant_a, backend):
    running = _job(tenant_a, 1, state=JobState.RUNNING)
    queued = _job(tenant_a, 2)
    detail = reverse("jobs:detail", kwargs={"slug": "acme", "pk": running.pk})
    page = login(platform_admin).get(detail).content.decode()
    assert _url(running) in page and "data-confirm=\"Preempt job-acme-1?" in page
    assert 'name="reason"' in page
    queue = login(platform_admin).get(reverse("jobs:platform_queue")).content.decode()
    assert _url(running) in queue and _url(queued) not in queue  # only admitted or running
    for user in (alice, bob):  # the tenant's admin and a researcher: no button
        assert _url(running) not in login(user).get(detail).content.decode()


def test_the_post_preempts_with_the_reason_and_comes_back(login, platform_admin, tenant_a,
                                                          backend):
    job = _job(tenant_a, 1, state=JobState.RUNNING)
    here = reverse("jobs:platform_queue") + "?tenant=acme"
    response = login(platform_admin).post(_url(job), {"reason": "node maintenance",
                                                      "next": here})
    assert response.status_code == 302 and response["Location"] == here
    job.refresh_from_db()
    assert job.state == JobState.PREEMPTING and job.preempt_deadline is not None
    assert "node maintenance" in english(job.preempt_reason)
    assert job.transitions.filter(to_state="preempting", actor=platform_admin).exists()
    assert AuditEvent.objects.filter(action="job.preempt").count() == 1
    assert "is being preempted" in _said(response)[-1]


def test_errors_are_shown_not_a_500(login, platform_admin, bob, tenant_a, backend):
    job = _job(tenant_a, 1, state=JobState.RUNNING)
    # a researcher of the tenant: refused, nothing moves
    response = login(bob).post(_url(job), {"reason": "mine"})
    assert response.status_code == 302
    assert "Only a platform admin" in _said(response)[-1]
    # no reason
    response = login(platform_admin).post(_url(job), {"reason": "  "})
    assert response.status_code == 302 and "Give a reason" in _said(response)[-1]
    assert TrainingJob.objects.get(pk=job.pk).state == JobState.RUNNING
    # a queued job cannot be preempted
    queued = _job(tenant_a, 2)
    response = login(platform_admin).post(_url(queued), {"reason": "x"})
    assert response.status_code == 302 and "was not preempted" in _said(response)[-1]
    assert TrainingJob.objects.get(pk=queued.pk).state == JobState.QUEUED
    # another tenant's job through this tenant's URL: 404
    other = _job(tenant_a, 3, state=JobState.RUNNING)
    wrong = reverse("jobs:action", kwargs={"slug": "globex", "pk": other.pk,
                                           "action": "preempt"})
    assert login(bob).post(wrong, {"reason": "x"}).status_code == 404
    assert not AuditEvent.objects.filter(action="job.preempt").exists()
