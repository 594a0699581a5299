"""Progress from the job itself (``jobs.progress``): the progress line and Trainer's
``trainerStatus`` read leniently (a bad report is skipped, never an error), and a running
job's reported remaining time moving the ETAs of the jobs waiting behind it."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from jobs.progress import fresh_remaining, from_trainer_status, last_report, parse_line

from .test_admission_helpers import NOW, job, node, quota, run

# -- the progress line -------------------------------------------------------------------------


def line(body, prefix=""):
    return f"{prefix}TRAINYARD_PROGRESS {body if isinstance(body, str) else json.dumps(body)}"


def test_a_full_line_with_a_log_timestamp_and_a_prefix():
    found = parse_line(line({"percent": 42.5, "remaining_seconds": 900, "step": 420,
                             "total_steps": 1000, "metrics": {"loss": 1.23, "acc": "0.91"}},
                            prefix="2026-12-07T10:11:12.123456789Z [rank0]: "))
    assert found is not None
    assert (found.percent, found.remaining_seconds, found.step, found.total_steps) == (
        42.5, 900, 420, 1000)
    assert found.metrics == (("loss", "1.23"), ("acc", "0.91"))
    assert found.reported_at == datetime(2026, 12, 7, 10, 11, 12, 123456, tzinfo=UTC)


def test_percent_or_remaining_alone_is_enough():
    assert parse_line(line({"percent": 0})).percent == 0
    assert parse_line(line({"remaining_seconds": 12.7})).remaining_seconds == 12
    assert parse_line(line({"percent": 100, "metrics": []})).metrics == ()


@pytest.mark.parametrize("text", [
    "", "no marker here", "TRAINYARD_PROGRESS", "TRAINYARD_PROGRESS{}",
    line("not json"), line("[1, 2]"), line("{}"), line({"step": 5}),
    line({"percent": 101}), line({"percent": -1}), line({"percent": "50"}),
    line({"percent": True}), line({"percent": None, "remaining_seconds": None}),
    line({"remaining_seconds": -5}), line({"percent": 5, "step": -1}),
    line({"percent": 5, "step": 1.5e300}), line('{"percent": NaN}'),
    line('{"percent": Infinity}'), line('{"percent": 5'), line("[" * 100000),
    line({"percent": 5, "pad": "x" * 5000}),
    "TRAINYARD_PROGRESSX {\"percent\": 5}",
])
def test_a_bad_line_is_skipped(text):
    assert parse_line(text) is None


def test_bad_metrics_are_skipped_alone_and_at_most_eight_kept():
    metrics = {"loss": 0.5, "": 1, "x" * 65: 1, "flag": True, "none": None, "nested": {"a": 1},
               "long": "v" * 65, **{f"m{i}": i for i in range(12)}}
    found = parse_line(line({"percent": 5, "metrics": metrics}))
    assert found is not None
    assert found.metrics == (("loss", "0.5"), *((f"m{i}", str(i)) for i in range(7)))
    # NaN is not JSON: the whole line is not a report
    assert parse_line(line(json.dumps({"percent": 5, "metrics": {"loss": float("nan")}}))) is None


def test_the_last_valid_line_of_a_log_wins():
    text = "\n".join([line({"percent": 10}), "step 5 loss 0.3", line({"percent": 20}),
                      line("garbage"), "the end"])
    assert last_report(text).percent == 20
    assert last_report("nothing\nat all") is None
    assert last_report("") is None


# -- Trainer's trainerStatus -------------------------------------------------------------------


def test_trainer_status_as_trainer_v2_reports_it():
    obj = {"status": {"trainerStatus": {
        "progressPercentage": 45, "estimatedRemainingSeconds": 3600,
        "metrics": [{"name": "loss", "value": "0.2347"}, {"name": "step", "value": "900"},
                    {"name": "accuracy", "value": "0.9876"}],
        "lastUpdatedTime": "2026-06-12T03:00:00Z"}}}
    found = from_trainer_status(obj)
    assert (found.percent, found.remaining_seconds, found.step) == (45, 3600, 900)
    assert found.metrics == (("loss", "0.2347"), ("step", "900"), ("accuracy", "0.9876"))
    assert found.reported_at == datetime(2026, 6, 12, 3, tzinfo=UTC)


@pytest.mark.parametrize("obj", [
    {}, {"status": None}, {"status": {}}, {"status": {"trainerStatus": None}},
    {"status": {"trainerStatus": "45%"}}, {"status": {"trainerStatus": {}}},
    {"status": {"trainerStatus": {"progressPercentage": 140}}},
    {"status": {"trainerStatus": {"progressPercentage": "45"}}},
    {"status": {"trainerStatus": {"metrics": [{"name": "loss", "value": "1"}]}}},
    [], "text",
])
def test_a_missing_or_bad_trainer_status_is_no_report(obj):
    assert from_trainer_status(obj) is None


def test_a_bad_update_time_or_metric_list_is_tolerated():
    found = from_trainer_status({"status": {"trainerStatus": {
        "progressPercentage": 5, "lastUpdatedTime": "2026-13-45T99:00:00Z",
        "metrics": "loss=1"}}})
    assert found.percent == 5 and found.reported_at is None and found.metrics == ()


# -- what counts for the ETA -------------------------------------------------------------------


def test_only_a_fresh_report_of_the_current_run_counts():
    now = datetime(2026, 12, 7, 12, tzinfo=UTC)
    stored = {"remaining_seconds": 600, "reported_at": "2026-12-07T11:55:00Z",
              "observed_at": "2026-12-07T11:56:00Z"}
    assert fresh_remaining(stored, now=now, started_at=now - timedelta(hours=1)) == (
        600.0, datetime(2026, 12, 7, 11, 55, tzinfo=UTC))
    # from before the job's current run (it was preempted and started again)
    assert fresh_remaining(stored, now=now, started_at=now - timedelta(minutes=2)) is None
    # too old
    assert fresh_remaining(stored, now=now + timedelta(minutes=20), started_at=None) is None
    # a cluster clock ahead of Trainyard's: the report is as old as Trainyard's reading
    ahead = {**stored, "reported_at": "2026-12-07T15:00:00Z"}
    assert fresh_remaining(ahead, now=now, started_at=None)[1] == datetime(
        2026, 12, 7, 11, 56, tzinfo=UTC)
    assert fresh_remaining({"percent": 50, "reported_at": "2026-12-07T11:55:00Z"}, now=now,
                           started_at=None) is None
    assert fresh_remaining(None, now=now, started_at=None) is None


def test_a_waiting_jobs_eta_moves_with_the_running_jobs_reported_remaining_time():
    nodes = [node("n1")]
    holder = job(10, tenant="globex", state="running", gpus=8, on="n1",
                 started_at=NOW - timedelta(minutes=10), expected_seconds=3600.0)
    quotas = [quota("acme"), quota("globex")]
    d = run(nodes, [holder, job(1, gpus=8)], quotas)
    assert d.waiting[1].eta_p50 == NOW + timedelta(minutes=50)  # History / the estimate
    # the job says it has 20 minutes left, as of 2 minutes ago: 18 from now
    reported = replace(holder, reported_remaining_seconds=1200.0,
                       reported_at=NOW - timedelta(minutes=2))
    d = run(nodes, [reported, job(1, gpus=8)], quotas)
    assert d.waiting[1].eta_p50 == NOW + timedelta(minutes=18)
    assert d.waiting[1].eta_p90 == NOW + timedelta(minutes=18 * 1.2)
    # a later report of more time moves it back
    later = replace(reported, reported_remaining_seconds=4800.0, reported_at=NOW)
    d = run(nodes, [later, job(1, gpus=8)], quotas)
    assert d.waiting[1].eta_p50 == NOW + timedelta(minutes=80)
    # "done in a moment": p90 stays two minutes above it, and the maximum run caps both
    ending = replace(holder, reported_remaining_seconds=30.0, reported_at=NOW)
    d = run(nodes, [ending, job(1, gpus=8)], quotas)
    assert d.waiting[1].eta_p50 == NOW + timedelta(seconds=30)
    assert d.waiting[1].eta_p90 == NOW + timedelta(seconds=150)
    capped = replace(later, max_run_seconds=1800.0)
    d = run(nodes, [capped, job(1, gpus=8)], quotas)
    assert d.waiting[1].eta_p50 == d.waiting[1].eta_p90 == NOW + timedelta(minutes=20)


# -- what is shown ------------------------------------------------------------------------------


@pytest.mark.parametrize("stored", [
    None, "text", [], {}, {"percent": "x", "metrics": 5}, {"percent": float("nan")},
    {"percent": 250, "remaining_seconds": -3, "step": "7", "metrics": ["a", {"name": "b"}]},
    {"reported_at": "not a time", "observed_at": 12},
])
def test_a_stored_report_of_any_shape_is_shown_without_an_error(stored):
    from types import SimpleNamespace

    from jobs.progress import shown

    job = SimpleNamespace(progress=stored, state="running", started_at=None)
    found = shown(job, now=datetime(2026, 12, 7, tzinfo=UTC))
    if not isinstance(stored, dict):
        assert found is None
        return
    assert found.percent is None or 0 <= found.percent <= 100
    assert found.remaining_seconds is None or found.remaining_seconds >= 0
    assert isinstance(found.metrics, list) and found.as_dict()["source"] == ""
    assert found.current is False


def test_the_time_left_reads_as_people_say_it():
    from jobs.progress import duration_text

    assert [duration_text(s) for s in (None, 0, 59, 60, 3599, 3600, 3660 * 5, 86400 * 3 + 7200)
            ] == ["", "under a minute", "under a minute", "1 min", "59 min", "1 h 00 min",
                  "5 h 05 min", "3 d 2 h"]


# -- the page and the API, from a stored report ---------------------------------------------


@pytest.fixture
def reported(bob, quota):
    from django.utils import timezone

    from jobs import services
    from jobs.models import TrainingJob
    from jobs.tests.conftest import submission
    from tenants.access import access_for

    job = services.job_submit(access=access_for(bob, quota), actor=bob, pool="dev",
                              data=submission(name="reporter"))
    now = timezone.now()

    def set_report(*, state="running", age_minutes=1, started_minutes=30):
        at = now - timedelta(minutes=age_minutes)
        TrainingJob.objects.filter(pk=job.pk).update(
            state=state, started_at=now - timedelta(minutes=started_minutes), progress={
                "percent": 61.5, "remaining_seconds": 1500, "step": 615, "total_steps": 1000,
                "metrics": [{"name": "loss", "value": "0.4321"}],
                "reported_at": at.isoformat(), "observed_at": at.isoformat(), "source": "log"})
        return job

    return set_report


def test_the_page_and_the_api_say_the_same_of_a_fresh_report(reported, login, api, bob):
    job = reported()
    page = login(bob).get(f"/t/acme/jobs/{job.pk}/").content.decode()
    body = api(bob).get(f"/api/v1/tenants/acme/jobs/{job.pk}/").json()["progress"]
    assert (body["percent"], body["remaining_seconds"], body["step"], body["total_steps"]) == (
        61.5, 1500, 615, 1000)
    assert body["metrics"] == [{"name": "loss", "value": "0.4321"}] and body["current"] is True
    assert body["source"] == "log" and body["expected_end"] > body["reported_at"]
    assert 'value="61.5"' in page and "62% done" in page and "step 615 of 1000" in page
    assert "Estimated time left: 25 min" in page and "0.4321" in page
    assert "uses this remaining time" in page and "No progress reported yet." not in page


def test_a_stale_report_is_shown_as_such_and_a_finished_jobs_has_no_time_left(
        reported, login, api, bob):
    job = reported(age_minutes=40)
    page = login(bob).get(f"/t/acme/jobs/{job.pk}/").content.decode()
    assert "Not reported in the last 15 minutes of its current run" in page
    assert api(bob).get(f"/api/v1/tenants/acme/jobs/{job.pk}/").json()["progress"][
        "current"] is False
    job = reported(age_minutes=1, started_minutes=0)  # from before its current run
    page = login(bob).get(f"/t/acme/jobs/{job.pk}/").content.decode()
    assert "Not reported in the last 15 minutes of its current run" in page
    job = reported(state="succeeded")
    page = login(bob).get(f"/t/acme/jobs/{job.pk}/").content.decode()
    assert "62% done" in page and "left" not in page.split('id="job-progress"')[1].split(
        "</section>")[0]
    assert api(bob).get(f"/api/v1/tenants/acme/jobs/{job.pk}/").json()["progress"][
        "current"] is False


def test_a_pass_reads_the_reports_again_only_after_a_new_one_was_stored(
        reported, django_assert_num_queries, django_capture_on_commit_callbacks):
    from django.utils import timezone

    from jobs import progress

    job = reported()
    running = {job.pk: timezone.now() - timedelta(minutes=30)}
    with django_capture_on_commit_callbacks(execute=True):
        progress.record(job.pk, {**job.__class__.objects.get(pk=job.pk).progress,
                                 "remaining_seconds": 900})
    with django_assert_num_queries(1):
        assert progress.reported_remaining(running, now=timezone.now())[job.pk][0] == 900
    with django_assert_num_queries(0):  # nothing new: kept
        assert progress.reported_remaining(running, now=timezone.now())[job.pk][0] == 900
    # later, the report is stale: judged at every pass, without reading it again
    with django_assert_num_queries(0):
        assert progress.reported_remaining(
            running, now=timezone.now() + timedelta(minutes=20)) == {}
    with django_capture_on_commit_callbacks(execute=True):
        progress.record(job.pk, {**job.__class__.objects.get(pk=job.pk).progress,
                                 "remaining_seconds": 60})
    with django_assert_num_queries(1):
        assert progress.reported_remaining(running, now=timezone.now())[job.pk][0] == 60
