"""The admission loop applies a pass's decisions in bulk (``services.job_transitions``)
and still never twice: a second pass deciding on the same snapshot (a racing or repeated
pass) moves nothing, writes no transition and asks for no cluster write."""

import datetime as dt

import pytest
from django.core.cache import cache
from django.utils import timezone

from jobs import selectors, services, tasks
from jobs.backends import trainyard
from jobs.models import JobTransition, TrainingJob
from jobs.tests.conftest import submission
from tenants.access import access_for


def _submit(bob, tenant, capture, n, gpus=2):
    jobs = []
    with capture(execute=False):
        for i in range(n):
            jobs.append(services.job_submit(access=access_for(bob, tenant), actor=bob,
                                            pool="dev", data=submission(
                                                name=f"bulk-{i}", gpus_per_worker=gpus)))
    return jobs


def test_two_passes_deciding_on_one_snapshot_admit_each_job_once(
        quota, bob, monkeypatch, django_capture_on_commit_callbacks):
    jobs = _submit(bob, quota, django_capture_on_commit_callbacks, 3)
    now = timezone.now()
    decisions = selectors.decide_with_pools_absent(selectors.admission_inputs(now))
    assert sorted(a.job_id for a in decisions[0].admit) == sorted(j.pk for j in jobs)
    # the second pass decided before the first one's writes: it holds the same decisions
    monkeypatch.setattr(selectors, "decide_with_pools_absent", lambda inputs, **_: decisions)
    with django_capture_on_commit_callbacks(execute=False) as first:
        assert trainyard._decide_and_apply(now)["admitted"] == 3
    with django_capture_on_commit_callbacks(execute=False) as second:
        assert trainyard._decide_and_apply(now)["admitted"] == 0
    assert [TrainingJob.objects.get(pk=j.pk).state for j in jobs] == ["admitted"] * 3
    assert JobTransition.objects.filter(to_state="admitted").count() == 3
    assert len(first) == 1  # one batched sync task for the three admissions
    assert second == []


def test_bulk_transitions_move_only_jobs_still_in_the_expected_state(
        quota, bob, django_capture_on_commit_callbacks):
    a, b, c = _submit(bob, quota, django_capture_on_commit_callbacks, 3)
    # b moved by someone else first (a cancel)
    assert services.job_transition(job_id=b.pk, from_states=["queued"], to_state="cancelled",
                                   reason="Cancelled")
    at = timezone.now() - dt.timedelta(seconds=5)
    moved = services.job_transitions(
        moves=[services.Move(j.pk, fields={"placement": [f"h800-{i}"]}, message=f"m{i}")
               for i, j in enumerate((a, b, c))],
        from_states=["queued"], to_state="admitted", reason="Admitted", at=at,
        stamp=["admitted_at"], wait_reason="")
    assert moved == [a.pk, c.pk]
    again = services.job_transitions(moves=[services.Move(a.pk, fields={"placement": []})],
                                     from_states=["queued"], to_state="admitted",
                                     reason="Admitted")
    assert again == []
    rows = {j.pk: TrainingJob.objects.get(pk=j.pk) for j in (a, b, c)}
    assert [rows[j.pk].state for j in (a, b, c)] == ["admitted", "cancelled", "admitted"]
    assert rows[c.pk].placement == ["h800-2"] and rows[a.pk].placement == ["h800-0"]
    admitted = JobTransition.objects.filter(to_state="admitted").order_by("job_id")
    assert [(t.job_id, t.from_state, t.message) for t in admitted] == [
        (a.pk, "queued", "m0"), (c.pk, "queued", "m2")]
    # each kept after the job's previous transition (its submission, just now), stamped
    for t in admitted:
        submitted = JobTransition.objects.get(job_id=t.job_id, to_state="queued").at
        assert t.at == max(at, submitted) == rows[t.job_id].admitted_at


def test_moves_of_one_call_set_the_same_fields(quota, bob, django_capture_on_commit_callbacks):
    a, b = _submit(bob, quota, django_capture_on_commit_callbacks, 2)
    with pytest.raises(ValueError):
        services.job_transitions(moves=[services.Move(a.pk, fields={"placement": []}),
                                        services.Move(b.pk)],
                                 from_states=["queued"], to_state="admitted",
                                 reason="Admitted")
    assert JobTransition.objects.filter(to_state="admitted").count() == 0



def test_a_pass_applies_nothing_when_another_pass_applied_after_it_read(
        quota, bob, monkeypatch, django_capture_on_commit_callbacks):
    """Pass A decides to admit job 1 (the pool's whole quota); before A applies, job 1
    is held, job 2 arrives and pass B admits job 2. A must not admit job 1 on top."""
    (first,) = _submit(bob, quota, django_capture_on_commit_callbacks, 1, gpus=8)
    monkeypatch.setattr(cache, "add", lambda *a, **k: True)  # passes overlap
    real = trainyard._decide

    def decide_then_race(now, **kwargs):
        decided = real(now, **kwargs)
        assert [a.job_id for a in decided[0].admit] == [first.pk]
        monkeypatch.setattr(trainyard, "_decide", real)
        TrainingJob.objects.filter(pk=first.pk).update(held=True)
        with django_capture_on_commit_callbacks(execute=False):
            second = services.job_submit(access=access_for(bob, quota), actor=bob, pool="dev",
                                         data=submission(name="late", gpus_per_worker=8))
        with django_capture_on_commit_callbacks(execute=False):
            assert tasks.admission_cycle.apply().get()["admitted"] == 1
        assert TrainingJob.objects.get(pk=second.pk).state == "admitted"
        return decided

    monkeypatch.setattr(trainyard, "_decide", decide_then_race)
    with django_capture_on_commit_callbacks(execute=False):
        result = tasks.admission_cycle.apply().get()
    assert result["skipped"] == "another cycle applied first"
    assert TrainingJob.objects.get(pk=first.pk).state == "queued"
    assert JobTransition.objects.filter(to_state="admitted").count() == 1


@pytest.mark.parametrize("incremental", [False, True])
def test_the_loop_admits_the_same_with_the_incremental_engine(
        quota, bob, settings, django_capture_on_commit_callbacks, incremental):
    """``TRAINYARD_INCREMENTAL_ADMISSION`` switches the loop to the incremental engine
    (``jobs.admission.incremental.loop_engine``); the same jobs are admitted, and a pass
    after one that changed nothing reuses what it decided."""
    from jobs.admission.incremental import loop_engine

    settings.TRAINYARD_INCREMENTAL_ADMISSION = incremental
    jobs = _submit(bob, quota, django_capture_on_commit_callbacks, 6, gpus=4)
    engine = loop_engine()
    before = dict(engine.stats)
    with django_capture_on_commit_callbacks(execute=False):
        counts = trainyard._decide_and_apply(timezone.now())
    states = sorted(TrainingJob.objects.get(pk=j.pk).state for j in jobs)
    for _ in range(2):  # the first changes nothing, the second sees nothing changed
        with django_capture_on_commit_callbacks(execute=False):
            assert trainyard._decide_and_apply(timezone.now())["admitted"] == 0
    assert counts["admitted"] == states.count("admitted") > 0
    assert engine.stats["passes"] - before.get("passes", 0) == (3 if incremental else 0)
    if incremental:
        assert engine.stats["groups_reused"] > before.get("groups_reused", 0)
