"""The chaos run's invariant checker (``scripts/chaos.py``, ``make chaos``) on a small
synthetic database: it passes a consistent history and names each kind of breakage."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from django.utils import timezone

from core.tests.scripts import load_script

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "chaos.py"


@pytest.fixture(scope="module")
def chaos():
    return load_script(SCRIPT, "chaos_script")


def _job(tenant, pool, bob, name, state, gpus=1):
    from jobs.models import TrainingJob

    return TrainingJob.objects.create(
        tenant=tenant, pool=pool, name=name, image="x", tier="production",
        max_run_seconds=3600, state=state, workers=1, gpus_per_worker=gpus,
        gpu_model="NVIDIA-H800", submitted_by=bob)


def _history(job, steps, start):
    from jobs.models import JobTransition

    previous = ""
    for minutes, state, reason in steps:
        JobTransition.objects.create(job=job, from_state=previous, to_state=state,
                                     reason=reason, at=start + dt.timedelta(minutes=minutes))
        previous = state


@pytest.mark.django_db
def test_the_checker_passes_a_consistent_history_and_names_what_broke(chaos, tenant_a, bob):
    from billing.models import GpuUsage
    from jobs.models import JobTransition
    from tenants.models import Notification, QuotaGrant

    now = timezone.now().replace(microsecond=0)
    start = now - dt.timedelta(hours=2)
    prod = tenant_a.pools.get(kind="prod")
    QuotaGrant.objects.create(pool=prod, resource="gpu:NVIDIA-H800", amount=2)
    done = _job(tenant_a, prod, bob, "done", "succeeded")
    _history(done, [(0, "queued", "Submitted"), (1, "admitted", "Admitted"),
                    (2, "running", "Running"), (12, "succeeded", "Succeeded")], start)
    requeued = _job(tenant_a, prod, bob, "requeued", "failed")
    _history(requeued, [(0, "queued", "Submitted"), (3, "admitted", "Admitted"),
                        (20, "queued", "NotStarted"), (21, "admitted", "Admitted"),
                        (40, "failed", "NotStarted")], start)
    for text in ("back in the queue", "failed"):
        Notification.objects.create(user=bob, tenant=tenant_a, message=text,
                                    link=f"/t/{tenant_a.slug}/jobs/{requeued.pk}/")
    # what stopped its pods, told once when the cluster reported it (jobs.problems)
    problem = {"code": "jobs.notify.job", "args": {"job": "requeued", "text": {
        "code": "jobs.problem.notify", "args": {"cause": {
            "code": "jobs.problem.image_pull", "args": {}}, "next": ""}}}}
    Notification.objects.create(user=bob, tenant=tenant_a, message="cannot be pulled",
                                text=problem, link=f"/t/{tenant_a.slug}/jobs/{requeued.pk}/")
    day = timezone.localdate(start + dt.timedelta(minutes=2))
    seconds = 600 if timezone.localdate(start + dt.timedelta(minutes=12)) == day else None
    if seconds is None:   # the run crossed midnight: the ledger splits it by day
        pytest.skip("the synthetic run crosses a day boundary")
    usage = GpuUsage.objects.create(job=done, tenant=tenant_a, pool=prod, day=day, devices=1,
                                    seconds=seconds, billed_period=day.replace(day=1))

    checks = {c.name: c for c in chaos.check_all(now=now)}
    assert all(c.ok for c in checks.values()), [(c.name, c.problems) for c in checks.values()]
    assert "2 jobs, 3 admissions" in checks["no job admitted twice; every transition chains"].detail

    # a ledger that lost seconds, a notification sent twice, a job admitted twice
    GpuUsage.objects.filter(pk=usage.pk).update(seconds=seconds - 60)
    Notification.objects.create(user=bob, tenant=tenant_a, message="failed",
                                link=f"/t/{tenant_a.slug}/jobs/{requeued.pk}/")
    Notification.objects.create(user=bob, tenant=tenant_a, message="cannot be pulled",
                                text=problem, link=f"/t/{tenant_a.slug}/jobs/{requeued.pk}/")
    JobTransition.objects.create(job=done, from_state="admitted", to_state="admitted",
                                 reason="Admitted", at=start + dt.timedelta(minutes=1, seconds=30))
    blink = _job(tenant_a, prod, bob, "blink", "succeeded")
    _history(blink, [(0, "queued", "Submitted"), (50, "admitted", "Admitted"),
                     (60, "succeeded", "Succeeded")], start)
    failed = {c.name: c.problems for c in chaos.check_all(now=now) if not c.ok}
    assert set(failed) == {"no job admitted twice; every transition chains",
                           "the ledger equals the running intervals",
                           "every notification sent once"}
    history = failed["no job admitted twice; every transition chains"]
    assert any("admitted from admitted" in p for p in history)
    assert any(p.startswith(f"job {blink.pk}: succeeded without a recorded run") for p in history)
    assert failed["the ledger equals the running intervals"] == [
        f"job {done.pk}: ledger {seconds - 60}s != {seconds}s running"]
    assert failed["every notification sent once"] == [
        f"job {requeued.pk}: 3 notifications for 2 events",
        f"sent twice: job {requeued.pk}: told twice of jobs.problem.image_pull"]


def test_the_ceiling_replay_and_the_progress_rule(chaos):
    t = dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)
    S = chaos.Step
    demand = {1: ("acme/prod", {"gpu:H800": 1}), 2: ("acme/prod", {"gpu:H800": 1}),
              3: ("acme/prod", {"gpu:H800": 1})}
    steps = [S(1, t, 1, "queued", "admitted"), S(2, t, 2, "queued", "admitted"),
             S(1, t + dt.timedelta(minutes=1), 3, "admitted", "succeeded"),
             S(3, t + dt.timedelta(minutes=1), 4, "queued", "admitted")]
    ok = chaos.check_ceilings(steps, demand, {"acme/prod": {"gpu:H800": 2}})
    assert ok.ok and "peak 2 gpu:H800 of 2" in ok.detail   # the release counted first
    over = chaos.check_ceilings([*steps, S(1, t + dt.timedelta(minutes=2), 5, "succeeded",
                                           "admitted")], demand, {"acme/prod": {"gpu:H800": 2}})
    assert not over.ok and over.problems == ["acme/prod held 3 gpu:H800 > ceiling 2 at 12:02:00"]

    J = chaos.JobNow
    now = t + dt.timedelta(minutes=10)
    jobs = [J(1, "running", True, True, t, None, True), J(2, "queued", True, False, None, None,
                                                          True),
            J(3, "admitted", True, False, t, None, True), J(4, "succeeded", True, True, t, None,
                                                            True)]
    progress = chaos.check_progress(jobs, {1: True, 4: True}, now=now,
                                    grace=dt.timedelta(minutes=2))
    assert not progress.ok and progress.problems == [
        f"job 3: admitted without progress since {t}",
        "job 4: runs in the cluster but is not admitted"]
