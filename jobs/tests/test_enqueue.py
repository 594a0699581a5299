"""``jobs.enqueue``: tasks enqueued by their stable names, after the commit, as a direct
call of the task would (its ``delay``, its queue, eager in the tests)."""

import pytest
from celery import current_app

from jobs import enqueue
from jobs.models import AdmissionState


@pytest.fixture
def sent(monkeypatch):
    calls = []
    for name in (enqueue.SYNC_JOB, enqueue.SYNC_JOBS, enqueue.ADMISSION_CYCLE,
                 enqueue.APPLY_MAINTENANCE_WINDOWS):
        task = current_app.tasks[name]
        monkeypatch.setattr(task, "delay", lambda *a, name=name: calls.append((name, a)))
        monkeypatch.setattr(task, "apply_async",
                            lambda args=(), name=name, **kw: calls.append((name, tuple(args), kw)))
    return calls


def test_every_name_is_a_registered_task_on_its_queue():
    queues = {name: current_app.tasks[name].queue for name in (
        enqueue.SYNC_JOB, enqueue.SYNC_JOBS, enqueue.ADMISSION_CYCLE,
        enqueue.APPLY_MAINTENANCE_WINDOWS)}
    assert queues == {"jobs.sync_job": "k8s", "jobs.sync_jobs": "k8s",
                      "jobs.admission_cycle": "default",
                      "jobs.apply_maintenance_windows": "default"}
    with pytest.raises(KeyError):  # never sent blind to the default queue
        enqueue.send("jobs.no_such_task")


def test_enqueues_wait_for_the_commit_and_a_rollback_sends_nothing(
        db, sent, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        enqueue.schedule_sync(7)
        enqueue.kick_admission()
        enqueue.schedule_windows()
        assert sent == []  # nothing before the commit
    assert len(callbacks) == 3
    assert sent == [("jobs.sync_job", (7,)), ("jobs.admission_cycle", ()),
                    ("jobs.apply_maintenance_windows", ())]


def test_syncs_go_in_batches_of_sync_batch(db, sent, django_capture_on_commit_callbacks):
    ids = [*range(1, 2 * enqueue.SYNC_BATCH + 51), 1, 2]  # repeats sent once
    with django_capture_on_commit_callbacks(execute=True):
        enqueue.schedule_syncs(ids)
    assert [(name, len(args[0])) for name, args in sent] == [
        ("jobs.sync_jobs", enqueue.SYNC_BATCH), ("jobs.sync_jobs", enqueue.SYNC_BATCH),
        ("jobs.sync_jobs", 50)]
    assert sent[0][1][0][:2] == [1, 2]


def test_options_go_to_apply_async(db, sent):
    enqueue.send(enqueue.SYNC_JOB, 3, countdown=5)
    enqueue.send(enqueue.ADMISSION_CYCLE, countdown=1, expires=9)
    assert sent == [("jobs.sync_job", (3,), {"countdown": 5}),
                    ("jobs.admission_cycle", (), {"countdown": 1, "expires": 9})]


def test_a_task_enqueued_by_name_runs_eagerly_in_the_tests(db):
    assert current_app.conf.task_always_eager
    enqueue.send(enqueue.ADMISSION_CYCLE)  # a whole pass, here and now
    assert AdmissionState.objects.get(pk=1).last_cycle_at is not None
