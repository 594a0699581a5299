"""The jobs app's receiver of ``k8s_sync.signals.observed_changed``: a recorded change of
jobs' PyTorchJobs or of pods in tenant namespaces enqueues one admission cycle, debounced;
nothing else does, and nothing runs inline (eager Celery enqueues nothing)."""

import pytest
from django.core.cache import cache
from django.utils import timezone

from jobs import receivers
from jobs.tasks import admission_cycle
from k8s_sync.models import ObservedWorkload
from k8s_sync.observe import KINDS, record_event
from k8s_sync.signals import observed_changed


@pytest.fixture
def enqueued(settings, monkeypatch):
    """Celery as in production (a worker, not eager); every enqueue recorded, none sent."""
    settings.CELERY_TASK_ALWAYS_EAGER = False
    calls: list[dict] = []
    monkeypatch.setattr(admission_cycle, "apply_async", lambda *a, **kw: calls.append(kw))
    cache.delete(receivers.KICK_KEY)
    yield calls
    cache.delete(receivers.KICK_KEY)


def _send(kind, keys):
    observed_changed.send(sender=KINDS[kind].model, kind=kind, keys=keys)


def test_a_pytorchjob_change_enqueues_one_cycle_after_the_debounce_window(enqueued):
    _send("pytorchjobs", ["ty-acme-dev/tj-1-llama"])
    assert enqueued == [{"countdown": receivers.KICK_DEBOUNCE_SECONDS,
                         "expires": receivers.KICK_DEBOUNCE_SECONDS + 8}]
    _send("pytorchjobs", ["ty-acme-dev/tj-2-bert"])  # within the window: that cycle covers it
    _send("pods", ["ty-acme-dev/tj-1-llama-master-0"])
    assert len(enqueued) == 1
    cache.delete(receivers.KICK_KEY)  # the window is over
    _send("pods", ["ty-acme-dev/tj-1-llama-master-0"])
    assert len(enqueued) == 2


@pytest.mark.parametrize(("kind", "keys"), [
    ("pods", ["kube-system/coredns-1", "default/debug"]),  # not a tenant namespace
    ("nodes", ["h800-0"]), ("quotas", ["ty-acme-dev/compute"]), ("events", ["ty-acme-dev/e"]),
    ("pytorchjobs", []),
])
def test_other_changes_enqueue_nothing(enqueued, kind, keys):
    _send(kind, keys)
    assert enqueued == []


def test_with_eager_celery_nothing_runs_inside_the_observer(enqueued, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    _send("pytorchjobs", ["ty-acme-dev/tj-1-llama"])
    assert enqueued == []


def test_a_broker_outage_never_reaches_the_observer(enqueued, monkeypatch):
    def down(*args, **kwargs):
        raise ConnectionError("broker down")
    monkeypatch.setattr(admission_cycle, "apply_async", down)
    assert receivers.admission_on_observed_change(
        sender=ObservedWorkload, kind="pytorchjobs", keys=["ty-acme-dev/tj-1"]) is False


@pytest.mark.django_db
def test_recording_a_pytorchjob_kicks_admission_on_commit(
        enqueued, django_capture_on_commit_callbacks):
    obj = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {
        "name": "tj-1-llama", "namespace": "ty-acme-dev", "uid": "u-1", "resourceVersion": "7",
        "labels": {"app.kubernetes.io/managed-by": "trainyard"},
        "creationTimestamp": timezone.now().isoformat()},
        "status": {"conditions": [{"type": "Running", "status": "True"}]}}
    with django_capture_on_commit_callbacks(execute=True):
        record_event(KINDS["pytorchjobs"], "ADDED", obj)
        assert enqueued == []  # not before the commit
    assert len(enqueued) == 1
    cache.delete(receivers.KICK_KEY)
    with django_capture_on_commit_callbacks(execute=True):
        record_event(KINDS["pytorchjobs"], "MODIFIED", obj)  # the same version: no change
    assert len(enqueued) == 1
