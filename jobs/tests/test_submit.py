"""Submitting, validating, cancelling jobs; transitions are conditional."""

from decimal import Decimal

import pytest

from core.exceptions import ApplicationError, Conflict, NotAllowed
from core.models import Policy
from jobs import services
from jobs.choices import JobState
from jobs.models import JobTransition, TrainingJob
from jobs.tests.conftest import H800, submission
from jobs.timeline import running_intervals, running_seconds
from tenants.access import access_for


def _submit(user, tenant, pool="dev", **overrides):
    return services.job_submit(access=access_for(user, tenant), actor=user, pool=pool,
                               data=submission(**overrides))


def test_a_valid_job_is_queued_with_a_transition(bob, quota):
    job = _submit(bob, quota)
    assert job.state == JobState.QUEUED and job.k8s_name.startswith(f"tj-{job.pk}-")
    assert [(t.from_state, t.to_state, t.reason) for t in job.transitions.all()] == [
        ("", "queued", "Submitted")]
    assert job.resource_key == f"gpu:{H800}" and job.total_gpus == 2


@pytest.mark.parametrize("overrides,field,message", [
    ({"image": "Not An Image"}, "image", "not a valid image reference"),
    ({"image": "registry.example.org/Team/x:1"}, "image", "not a valid image reference"),
    ({"gpu_model": "NVIDIA-B200"}, "gpu_model", "no GPU model “NVIDIA-B200”"),
    ({"gpu_model": ""}, "gpu_model", "Choose the GPU model"),
    ({"gpus_per_worker": 10}, "gpus_per_worker", "the largest has 8"),
    ({"workers": 0}, "workers", "1 to 64 workers"),
    ({"max_run_seconds": 90 * 86400}, "max_run_seconds", "30 days"),
    ({"max_run_seconds": "soon"}, "max_run_seconds", "not a number"),
    ({"tier": "production"}, "tier", "prod pool"),
    ({"mig_profile": "2g.20gb", "gpu_model": ""}, "mig_profile", "no MIG profile"),
    ({"mig_profile": "1g.10gb", "gpu_model": H800}, "mig_profile", "not both"),
    ({"env": {"TRAINYARD_RESUME": "1"}}, "env", "reserved"),
    ({"name": "Has Spaces"}, "name", "lower-case"),
    ({"cpu_per_worker": 1000}, "cpu_per_worker", "largest node"),
])
def test_bad_input_names_the_field_and_creates_nothing(bob, quota, overrides, field,
                                                       message):
    with pytest.raises(ApplicationError) as err:
        _submit(bob, quota, **overrides)
    assert err.value.field == field and message in err.value.message
    assert not TrainingJob.objects.exists()


def test_a_duplicate_name_is_a_conflict(bob, quota):
    _submit(bob, quota)
    with pytest.raises(Conflict, match="exists already"):
        _submit(bob, quota)
    assert TrainingJob.objects.count() == 1


def test_a_suspended_tenant_cannot_submit(bob, platform_admin, quota):
    from tenants import services as tenant_services

    tenant_services.tenant_suspend(access=access_for(platform_admin, quota),
                                   actor=platform_admin, reason="budget")
    quota.refresh_from_db()
    with pytest.raises(ApplicationError, match="suspended"):
        _submit(bob, quota)


def test_platform_staff_who_are_not_members_cannot_submit(finance_user, quota):
    with pytest.raises(NotAllowed):
        _submit(finance_user, quota)


def test_mig_and_cpu_only_jobs(bob, quota):
    # One slice per worker: a process sees one MIG device (two are refused, test_contract).
    mig = _submit(bob, quota, name="slices", mig_profile="1g.10gb", gpu_model="",
                  gpus_per_worker=1)
    assert mig.resource_key == "mig:1g.10gb" and mig.gpu_model == ""
    cpu = _submit(bob, quota, name="prep", gpus_per_worker=0, gpu_model="")
    assert cpu.resource_key == ""


def test_cancel_works_in_every_active_state_and_is_idempotent(bob, quota):
    for i, state in enumerate(["queued", "admitted", "running", "preempting"]):
        job = _submit(bob, quota, name=f"j{i}")
        TrainingJob.objects.filter(pk=job.pk).update(state=state)
        job.refresh_from_db()
        done = services.job_cancel(access=access_for(bob, quota), actor=bob, job=job)
        assert done.state == JobState.CANCELLED and done.finished_at is not None
        again = services.job_cancel(access=access_for(bob, quota), actor=bob, job=done)
        assert again.state == JobState.CANCELLED
        assert job.transitions.filter(to_state="cancelled").count() == 1


def test_a_transition_happens_once_even_if_asked_twice(bob, quota):
    job = _submit(bob, quota)
    first = services.job_transition(job_id=job.pk, from_states=["queued"], to_state="admitted",
                                    reason="Admitted")
    second = services.job_transition(job_id=job.pk, from_states=["queued"],
                                     to_state="admitted", reason="Admitted")
    assert (first, second) == (True, False)
    assert JobTransition.objects.filter(job=job, to_state="admitted").count() == 1


def test_hold_and_priority_need_a_platform_admin_and_a_reason(bob, platform_admin, quota):
    job = _submit(bob, quota)
    with pytest.raises(NotAllowed):
        services.job_hold(actor=bob, job=job, held=True, reason="x")
    with pytest.raises(ApplicationError, match="reason"):
        services.job_hold(actor=platform_admin, job=job, held=True, reason="")
    assert services.job_hold(actor=platform_admin, job=job, held=True, reason="maint").held
    assert services.job_set_priority(actor=platform_admin, job=job, priority=50,
                                     reason="deadline").priority == 50


def test_running_time_counts_only_running_stretches():
    import datetime as dt

    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    h = dt.timedelta(hours=1)
    transitions = [("queued", t0), ("admitted", t0 + h), ("running", t0 + 2 * h),
                   ("preempting", t0 + 5 * h), ("queued", t0 + 5.1 * h),
                   ("admitted", t0 + 6 * h), ("running", t0 + 7 * h)]
    assert running_intervals(transitions, t0 + 8 * h) == [(t0 + 2 * h, t0 + 5 * h),
                                                          (t0 + 7 * h, t0 + 8 * h)]
    assert running_seconds(transitions, t0 + 8 * h) == 4 * 3600


def test_a_job_that_could_never_start_is_refused(alice, bob, quota):
    """Production never borrows: above its pool's grant it could never start. Development
    and batch work may borrow any idle capacity unless a platform admin capped it."""
    prod = {"pool": "prod", "tier": "production"}
    with pytest.raises(ApplicationError, match="could never start") as err:
        _submit(alice, quota, workers=2, gpus_per_worker=8, **prod)  # 16 > the prod quota of 8
    assert err.value.field == "gpus_per_worker"
    assert "production jobs never borrow" in err.value.message
    with pytest.raises(ApplicationError, match="at most 0"):
        _submit(alice, quota, name="x", gpu_model="NVIDIA-A100-SXM4-80GB", gpus_per_worker=1,
                **prod)
    assert not TrainingJob.objects.exists()
    # development: no cap, so 16 cards (8 borrowed) and a model it was not granted may wait
    # for idle capacity
    assert _submit(bob, quota, workers=2, gpus_per_worker=8).state == JobState.QUEUED
    assert _submit(bob, quota, name="a100", gpu_model="NVIDIA-A100-SXM4-80GB",
                   gpus_per_worker=1).state == JobState.QUEUED


def test_a_borrowing_cap_bounds_development_and_batch_jobs(bob, quota):
    quota.borrowing_cap = Decimal(2)
    quota.save(update_fields=["borrowing_cap", "updated_at"])
    job = _submit(bob, quota, tier="batch", workers=2, gpus_per_worker=8)   # 16 = 8 x 2
    assert job.state == JobState.QUEUED
    with pytest.raises(ApplicationError, match="borrowing cap a platform admin set") as err:
        _submit(bob, quota, name="big", workers=3, gpus_per_worker=8)   # 24 > 16
    assert err.value.field == "gpus_per_worker"
    with pytest.raises(ApplicationError, match="at most 0"):   # not granted: 0 x 2
        _submit(bob, quota, name="x", gpu_model="NVIDIA-A100-SXM4-80GB", gpus_per_worker=1)
    # the policy's cap applies to tenants without their own
    quota.borrowing_cap = None
    quota.save(update_fields=["borrowing_cap", "updated_at"])
    policy = Policy.current()
    policy.borrowing_cap = Decimal("1.5")
    policy.save()
    with pytest.raises(ApplicationError, match="could never start"):
        _submit(bob, quota, name="dev", workers=2, gpus_per_worker=8)   # 16 > 12
    assert _submit(bob, quota, name="dev12", workers=2, gpus_per_worker=6).state == "queued"
