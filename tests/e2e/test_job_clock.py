"""One clock on a job's page (issue 29, item 3), in a real browser, in English and Chinese.

The cluster (kubesim) stamps objects, events and log lines with the wall clock, and the page
writes every time (the timeline, the events, the log lines) in one format: the reader's
language and time zone, with the day and the zone (``core.when``). A waiting job's first
event, the operator's ``PyTorchJobSuspended``, is explained in plain words (every job is
created suspended until it is admitted), not shown as a bare reason that reads like a
preemption.

Django's clock is frozen at the cluster's and moved with it (``time_machine``), so the
test's cluster and the portal read one clock, as a real cluster and the portal do.
"""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.utils import timezone, translation

from tests.e2e.test_browser import (  # noqa: F401 - fixtures
    LANGUAGES,
    browser,
    expect,
    log_in,
    new_page,
    shot,
    tr,
    world,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180), pytest.mark.xdist_group("e2e")]


def _times(locator) -> list[tuple[dt.datetime, str]]:
    """(instant, text) of every <time> element under ``locator``."""
    return [(dt.datetime.fromisoformat(t.get_attribute("datetime") or ""), t.inner_text())
            for t in locator.locator("time").all()]


def _written(lang: str, at: dt.datetime) -> str:
    """How the portal writes a moment for a reader of ``lang`` (the one format)."""
    from core.when import when_text

    with translation.override(lang), timezone.override("UTC"):
        return when_text(at, seconds=True)


def _event_time(page, reason: str) -> dt.datetime:
    item = page.locator(f'[data-live="events"] li[data-event="{reason}"]').first
    return dt.datetime.fromisoformat(item.locator("time").get_attribute("datetime") or "")


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_jobs_timeline_events_and_log_lines_read_one_clock(
        lang, new_page, world, cluster, bob):  # noqa: F811 - the fixtures above
    from jobs import services as job_services
    from jobs.models import TrainingJob
    from jobs.tasks import admission_cycle
    from jobs.tests.conftest import submission
    from k8s_sync.client import get_client
    from k8s_sync.observe import relist_all
    from tenants.access import access_for
    from tenants.models import Tenant

    clock = cluster.cluster.clock
    start = max(timezone.now(), clock.now()).replace(microsecond=0) + dt.timedelta(seconds=1)
    cluster.advance((start - clock.now()).total_seconds(), step=1000)
    with time_machine.travel(start, tick=False) as traveller:

        def advance(seconds: float, step: float = 5) -> None:
            """The cluster's clock and the portal's, moved together."""
            cluster.advance(seconds, step=step)
            traveller.shift(dt.timedelta(seconds=seconds))
            relist_all(get_client())
            admission_cycle.apply().get()

        acme = access_for(bob, Tenant.objects.get(slug="acme"))
        h800 = world["h800"]
        busy = job_services.job_submit(access=acme, actor=bob, pool="dev", data=submission(
            name="clock-busy", gpu_model=h800, gpus_per_worker=8,
            annotations={"kubesim.trainyard.io/run-seconds": "60"}))
        advance(10)   # the busy job holds every H800 for a minute
        job = job_services.job_submit(access=acme, actor=bob, pool="dev", data=submission(
            name="clock-wait", gpu_model=h800, gpus_per_worker=1,
            annotations={"kubesim.trainyard.io/run-seconds": "3600"}))
        advance(10)   # it waits, created suspended in the cluster
        job.refresh_from_db()
        assert job.state == "queued", job.state
        advance(60)   # the busy job ends; this one is admitted
        advance(10)   # its pods start
        advance(200, step=20)
        job.refresh_from_db()
        busy.refresh_from_db()
        assert (busy.state, job.state) == ("succeeded", "running")
        now = timezone.now()
        assert TrainingJob.objects.get(pk=job.pk).submitted_at >= start

        page = new_page(lang)
        log_in(page, "bob", f"/t/acme/jobs/{job.pk}/")
        panel = page.locator("#logs")
        expect(panel.locator("[data-log-text] time").first).to_be_visible()
        expect(panel).to_have_attribute("data-log-loaded", "1")
        timeline = _times(page.locator("ol.timeline"))
        events = _times(page.locator('[data-live="events"]'))
        lines = _times(panel.locator("[data-log-text]"))
        assert len(timeline) >= 3 and len(events) >= 5 and len(lines) >= 8

        # one format: every time reads as core.when writes it, with its day and zone
        for at, text in timeline + events + lines:
            assert text == _written(lang, at), (at, text)
            assert start <= at <= now, (start, at, now)   # one clock: none ahead of it
        # each list in order of its full time
        for shown in (timeline, events, lines):
            assert [at for at, _ in shown] == sorted(at for at, _ in shown)

        # they agree: queued, then suspended in the cluster; admitted, then resumed; the
        # container started, then its log
        states = page.locator("ol.timeline li")
        queued_at, admitted_at = timeline[0][0], timeline[1][0]
        expect(states.nth(1)).to_contain_text(tr(lang, "Admitted"))
        assert queued_at <= _event_time(page, "PyTorchJobSuspended") <= admitted_at
        assert admitted_at <= _event_time(page, "PyTorchJobResumed")
        started = _event_time(page, "Started")
        assert _event_time(page, "PyTorchJobResumed") <= started <= lines[0][0]
        assert started <= timeline[2][0]   # running: the cluster's time of it

        # the admission gate's suspend is explained, not a bare reason
        gate = page.locator('[data-live="events"] li[data-event="PyTorchJobSuspended"]')
        expect(gate.locator("[data-gate]")).to_have_text(tr(
            lang, "Created suspended, as every job is: the cluster starts its pods only "
                  "once the job is admitted. This is not a preemption."))
        expect(gate.locator(".badge")).to_have_text(tr(lang, "Admission"))
        expect(page.locator('[data-live="events"] .badge',
                            has_text="PyTorchJobSuspended")).to_have_count(0)
        shot(page, lang, "researcher-job-clock", top=page.locator('[data-live="timeline"]'))


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_reader_in_shanghai_reads_the_timeline_in_shanghai_time(
        lang, new_page, world, bob):  # noqa: F811 - the fixtures above
    """The browser's own zone (Playwright's ``timezone_id``), sent from the sign-in page on,
    is the one the page writes its times in, with the zone beside each."""
    from jobs.models import JobTransition, TrainingJob
    from tenants.models import Tenant

    tenant = Tenant.objects.get(slug="acme")
    job = TrainingJob.objects.create(
        tenant=tenant, pool=tenant.pools.get(kind="dev"), name="tz-probe", k8s_name="tz-probe",
        state="queued", image="t:1", tier="development", max_run_seconds=3600, workers=1,
        gpus_per_worker=1, gpu_model=world["h800"])
    at = timezone.now().replace(microsecond=0)
    JobTransition.objects.create(job=job, from_state="", to_state="queued", reason="Submitted",
                                 at=at)
    page = new_page(lang, zone="Asia/Shanghai")
    log_in(page, bob.username, f"/t/acme/jobs/{job.pk}/")
    from core.when import when_text

    with translation.override(lang), timezone.override("Asia/Shanghai"):
        shown = when_text(at, seconds=True)
    timeline = page.locator('[data-live="timeline"]')
    expect(timeline).to_contain_text(shown)
    assert "CST" in timeline.inner_text() and "UTC" not in timeline.inner_text()
