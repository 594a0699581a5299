"""Every ETA shown is recorded and measured against the start (jobs.eta_records,
jobs.selectors.eta): what is recorded, when ``started_at`` is filled, the accuracy of a
pool's recent estimates on the job page and in the API; and both admission paths (the
Celery pass, the admission service) record what they explain, against kubesim."""

import datetime as dt

import pytest
from django.utils import timezone

from jobs import eta_records, services
from jobs.admission import WaitInfo
from jobs.choices import JobState
from jobs.models import EtaRecord, TrainingJob
from jobs.selectors.eta import MIN_SAMPLES, eta_accuracy
from jobs.tests.conftest import cap_borrowing, submission
from jobs.tests.conftest import cycle as _cycle
from jobs.tests.conftest import states as _states
from jobs.tests.test_lifecycle import _submit, world  # noqa: F401 (a fixture)
from jobs.transitions import Move, job_transitions, record_waiting
from tenants.access import access_for

REASON = {"code": "jobs.wait.capacity", "args": {}}


@pytest.fixture(autouse=True)
def _no_etas_remembered():
    """What this process last recorded (``eta_records._LAST``) starts empty: job ids of
    rolled-back tests come again."""
    eta_records._LAST.clear()


@pytest.fixture
def jobs(bob, quota):
    return [services.job_submit(access=access_for(bob, quota), actor=bob, pool="dev",
                                data=submission(name=f"job-{i}")) for i in range(3)]


def _wait(p50, p90, position=1):
    return WaitInfo(position, position, p50, p90, REASON)


def _records(job):
    return list(EtaRecord.objects.filter(job=job).order_by("id").values_list(
        "eta_p50", "eta_p90", "started_at"))


def test_the_first_eta_and_each_that_moves_past_the_tolerance_are_recorded(jobs):
    job, other, held = jobs
    now = timezone.now().replace(microsecond=0)
    p50, p90 = now + dt.timedelta(minutes=30), now + dt.timedelta(minutes=50)
    record_waiting({job.pk: _wait(p50, p90), other.pk: _wait(p50, p90, 2),
                    held.pk: _wait(None, None, 3)}, now)
    assert _records(job) == [(p50, p90, None)] and len(_records(other)) == 1
    assert _records(held) == []   # no ETA shown: nothing to measure
    # 30 s later the same ETA, then one 40 s off (within the tolerance): nothing new
    later = now + dt.timedelta(seconds=30)
    record_waiting({job.pk: _wait(p50, p90)}, later)
    record_waiting({job.pk: _wait(p50 + dt.timedelta(seconds=40), p90)}, later)
    assert len(_records(job)) == 1
    # drifting by small steps is measured against the last record, not the last value
    # (the tolerance: 5% of the 30 minutes' wait)
    record_waiting({job.pk: _wait(p50 + dt.timedelta(seconds=80), p90)}, later)
    assert len(_records(job)) == 1
    record_waiting({job.pk: _wait(p50 + dt.timedelta(seconds=120), p90)}, later)
    assert len(_records(job)) == 2
    # the p90 alone moving 20 minutes is a new ETA shown
    record_waiting({job.pk: _wait(p50 + dt.timedelta(seconds=120),
                                  p90 + dt.timedelta(minutes=20))}, later)
    assert [r[1] for r in _records(job)] == [p90, p90, p90 + dt.timedelta(minutes=20)]
    assert set(EtaRecord.objects.filter(job=job).values_list("pool_id", "tier")) == {
        (job.pool_id, job.tier)}


def test_admission_fills_the_start_of_the_open_records_only(jobs):
    job, other, _ = jobs
    now = timezone.now().replace(microsecond=0)
    eta = now + dt.timedelta(minutes=10)
    record_waiting({job.pk: _wait(eta, eta), other.pk: _wait(eta, eta, 2)}, now)
    at = now
    assert job_transitions(moves=[Move(job.pk)], from_states=[JobState.QUEUED],
                           to_state=JobState.ADMITTED, reason="Admitted", at=at) == [job.pk]
    admitted_at = job.transitions.get(to_state=JobState.ADMITTED).at
    assert [r[2] for r in _records(job)] == [admitted_at]
    assert [r[2] for r in _records(other)] == [None]
    # preempted and queued again: its new ETA gets its own start; the first keeps its own
    TrainingJob.objects.filter(pk=job.pk).update(state=JobState.QUEUED, eta_p50=None,
                                                 eta_p90=None)
    record_waiting({job.pk: _wait(eta, eta)}, now)
    assert len(_records(job)) == 2   # a job's first ETA after a start: always recorded
    services.job_transition(job_id=job.pk, from_states=[JobState.QUEUED],
                            to_state=JobState.ADMITTED, reason="Admitted")
    first, second = _records(job)
    assert first[2] == admitted_at and second[2] is not None and second[2] > admitted_at


def test_records_past_the_retention_are_pruned(jobs):
    job = jobs[0]
    now = timezone.now()
    old = now - dt.timedelta(days=EtaRecord.RETENTION_DAYS + 1)
    EtaRecord.objects.create(job=job, pool=job.pool, tier=job.tier, predicted_at=old,
                             eta_p50=old, eta_p90=old, started_at=old)
    EtaRecord.objects.create(job=job, pool=job.pool, tier=job.tier, predicted_at=now,
                             eta_p50=now, eta_p90=now)
    assert eta_records.prune(now) == 1
    assert EtaRecord.objects.filter(job=job).count() == 1


def _sample(job, *, wait_min, error_min, p90_after_min, tier=None, ago_days=1.0):
    """A record predicted ``wait_min`` before a start ``ago_days`` ago, its p50
    ``error_min`` off and its p90 ``p90_after_min`` after the start (negative: before)."""
    started = timezone.now() - dt.timedelta(days=ago_days)
    predicted = started - dt.timedelta(minutes=wait_min)
    EtaRecord.objects.create(job=job, pool=job.pool, tier=tier or job.tier,
                             predicted_at=predicted,
                             eta_p50=started + dt.timedelta(minutes=error_min),
                             eta_p90=started + dt.timedelta(minutes=p90_after_min),
                             started_at=started)


def test_accuracy_is_the_median_error_and_the_share_started_by_p90(jobs):
    job = jobs[0]
    assert eta_accuracy(job.pool_id, job.tier).samples == 0
    # 20 samples of the tier: errors 1..20 min (alternating early and late), waits 60 min;
    # 15 started by their p90
    for i in range(1, 21):
        _sample(job, wait_min=60, error_min=i if i % 2 else -i,
                p90_after_min=5 if i <= 15 else -1)
    _sample(job, wait_min=60, error_min=1, p90_after_min=5, ago_days=9)   # out of the window
    a = eta_accuracy(job.pool_id, job.tier)
    assert (a.samples, a.jobs, a.tier, a.window_days, a.enough) == (20, 1, job.tier, 7, True)
    assert a.median_error_seconds == pytest.approx(10.5 * 60)
    assert a.median_relative_error == pytest.approx(10.5 / 60)
    assert a.p90_coverage == pytest.approx(0.75)
    # another tier of the pool with too few of its own: the whole pool is measured
    b = eta_accuracy(job.pool_id, "batch")
    assert (b.samples, b.tier) == (20, "")
    # and a pool with too few samples says so
    EtaRecord.objects.all().delete()
    for i in range(MIN_SAMPLES - 1):
        _sample(job, wait_min=30, error_min=i, p90_after_min=1)
    assert not eta_accuracy(job.pool_id, job.tier).enough


def test_the_job_page_and_the_api_show_the_accuracy_beside_the_eta(login, api, bob, jobs):
    job, running, _ = jobs
    now = timezone.now()
    record_waiting({job.pk: _wait(now + dt.timedelta(minutes=30),
                                  now + dt.timedelta(minutes=45))}, now)
    TrainingJob.objects.filter(pk=running.pk).update(state=JobState.RUNNING)
    url = f"/api/v1/tenants/acme/jobs/{job.pk}/"
    few = api(bob).get(url).json()["eta_accuracy"]
    assert few["samples"] == 0 and few["enough"] is False
    page = login(bob).get(f"/t/acme/jobs/{job.pk}/").content.decode()
    assert "Too few jobs started in this pool in the last 7 days (0 estimates)" in page
    for i in range(MIN_SAMPLES):
        _sample(running, wait_min=40, error_min=12, p90_after_min=3 if i < 17 else -3)
    data = api(bob).get(url).json()["eta_accuracy"]
    assert data == {"samples": 20, "jobs": 1, "median_error_seconds": 720.0,
                    "median_relative_error": 0.3, "p90_coverage": 0.85, "window_days": 7,
                    "tier": job.tier, "enough": True}
    page = login(bob).get(f"/t/acme/jobs/{job.pk}/").content.decode()
    assert ("Estimates in this pool were off by a median of 12 min; 85% of them were "
            "followed by a start by their 90% time (last 7 days: 1 job, 20 estimates)") in page
    # a job not waiting has none
    assert api(bob).get(f"/api/v1/tenants/acme/jobs/{running.pk}/").json()[
        "eta_accuracy"] is None
    listed = {j["id"]: j for j in api(bob).get("/api/v1/tenants/acme/jobs/").json()["results"]}
    assert listed[job.pk]["eta_accuracy"]["samples"] == 20


# -- both admission paths, against kubesim -----------------------------------------------


def _fill_and_wait(world, alice, tenant_a):  # noqa: F811
    cap_borrowing(tenant_a)   # the second waits for the first (no borrowing)
    first = _submit(world, alice, tenant_a, "first", "development", "dev", world["h800"],
                    run_seconds=300)
    behind = _submit(world, alice, tenant_a, "behind", "development", "dev", world["h800"],
                     run_seconds=300)
    return first, behind


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_celery_pass_records_the_etas_it_explains_and_the_start(
        world, cluster, alice, tenant_a):  # noqa: F811
    first, behind = _fill_and_wait(world, alice, tenant_a)
    _cycle(world, cluster)
    assert sorted(_states(first, behind)) == ["admitted", "queued"]
    waiting = first if _states(first) == ["queued"] else behind
    [(p50, p90, started)] = _records(waiting)
    assert started is None and p50 <= p90
    for _ in range(40):
        if _states(waiting) != ["queued"]:
            break
        _cycle(world, cluster, 30)
    assert _states(waiting) != ["queued"]
    records = _records(waiting)
    assert records and all(r[2] is not None for r in records)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_admission_service_records_the_etas_it_explains(
        world, cluster, alice, tenant_a):  # noqa: F811
    from jobs.models import AdmissionState
    from jobs.tests.test_admission_service import _pass, _service

    service = _service()
    _pass(world, service, cluster)
    first, behind = _fill_and_wait(world, alice, tenant_a)
    AdmissionState.objects.filter(pk=1).update(explained_at=None)
    _pass(world, service)
    waiting = [j for j in (first, behind) if _states(j) == ["queued"]]
    assert len(waiting) == 1
    [(p50, p90, started)] = _records(waiting[0])
    assert started is None and p50 <= p90
