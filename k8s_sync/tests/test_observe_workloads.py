"""Trainyard's PyTorchJobs as an observed kind ("pytorchjobs", ObservedWorkload): through a
relist and through the watch, with their conditions, replica counts and suspend flag,
idempotently, only the managed ones, and deletions removing the row.

Against kubesim over HTTP, whose simulated training operator writes the status.
"""

from __future__ import annotations

import threading

import pytest
from django.utils import timezone

from k8s_sync import naming
from k8s_sync.client import get_client
from k8s_sync.models import ObservedKind, ObservedWorkload
from k8s_sync.observe import KINDS, Backoff, Reflector, parse_pytorchjob, record_event, relist_all
from k8s_sync.selectors import observed_counts, workload_statuses
from k8s_sync.signals import observed_changed
from k8s_sync.tests.observe_helpers import NS, namespace, pytorchjob

pytestmark = pytest.mark.django_db
MANAGED = naming.managed_labels()
SPEC = KINDS["pytorchjobs"]


@pytest.fixture
def client(cluster):
    client = get_client()
    namespace(client)
    return client


@pytest.fixture
def announced():
    seen: list[tuple[str, list[str]]] = []

    def receiver(sender, kind, keys, **kwargs):
        seen.append((kind, keys))
    observed_changed.connect(receiver)
    yield seen
    observed_changed.disconnect(receiver)


def _types(row: ObservedWorkload, status: str = "True") -> set[str]:
    return {c["type"] for c in row.conditions if c["status"] == status}


def test_the_kind_is_registered_for_the_watcher_with_the_managed_selector():
    assert SPEC.api_version == "kubeflow.org/v1" and SPEC.kind == "PyTorchJob"
    assert SPEC.model is ObservedWorkload and SPEC.shared and SPEC.prune
    assert SPEC.label_selector == "app.kubernetes.io/managed-by=trainyard"


def test_a_relist_records_managed_pytorchjobs_with_their_conditions_idempotently(
        client, cluster, announced, django_capture_on_commit_callbacks,
        django_assert_max_num_queries):
    client.create_if_absent(pytorchjob("ours", gpus=1, worker_replicas=1, labels=MANAGED,
                                       run_seconds=60))
    client.create_if_absent(pytorchjob("someone-elses", gpus=1))
    cluster.advance(20, step=5)
    with django_capture_on_commit_callbacks(execute=True):
        relist_all(client, ["pytorchjobs"])
    row = ObservedWorkload.objects.get()  # the unmanaged one is not recorded
    assert (row.api_version, row.kind, row.namespace, row.name) == (
        "kubeflow.org/v1", "PyTorchJob", NS, "ours")
    assert row.uid and row.resource_version and row.created_at and not row.suspended
    assert {"Created", "Running"} <= _types(row)
    assert row.active == 2 and row.replica_statuses["Master"]["active"] == 1
    assert row.replica_statuses["Worker"]["active"] == 1
    for cond in row.conditions:
        assert set(cond) <= {"type", "status", "reason", "message", "lastTransitionTime"}
        assert cond["reason"].startswith("PyTorchJob") and cond["lastTransitionTime"]
    assert row.labels == MANAGED and row.raw["kind"] == "PyTorchJob"
    assert announced == [("pytorchjobs", [f"{NS}/ours"])]
    bookkeeping = ObservedKind.objects.get(kind="pytorchjobs")
    assert bookkeeping.object_count == 1 and bookkeeping.last_list_at
    assert observed_counts()["pytorchjobs"] == 1

    stamp = row.observed_at
    with django_assert_max_num_queries(10) as queries, \
            django_capture_on_commit_callbacks(execute=True):
        relist_all(client, ["pytorchjobs"])  # nothing changed in the cluster
    assert [q["sql"] for q in queries.captured_queries
            if "observedworkload" in q["sql"] and not q["sql"].startswith("SELECT")] == []
    assert ObservedWorkload.objects.get().observed_at == stamp
    assert len(announced) == 1

    cluster.advance(90, step=5)  # the pods ran their 60 s
    relist_all(client, ["pytorchjobs"])
    row.refresh_from_db()
    assert "Succeeded" in _types(row) and "Running" not in _types(row) and row.active == 0
    status = workload_statuses()[(NS, "ours")]
    assert "Succeeded" in status.true_conditions() and status.active == 0

    client.ensure_absent("kubeflow.org/v1", "PyTorchJob", "ours", NS)
    relist_all(client, ["pytorchjobs"])
    assert not ObservedWorkload.objects.exists()
    assert workload_statuses() == {}


def test_the_watch_follows_a_pytorchjob_from_suspended_to_running_to_deleted(client, cluster):
    sleeps: list[float] = []
    r = Reflector(client, SPEC, backoff=Backoff(base=0.01, cap=0.04, jitter=False),
                  watch_timeout=1, sleep=sleeps.append, activity_interval=0)
    watchdog = threading.Timer(20, r.stop)  # never hang the suite
    watchdog.daemon = True
    watchdog.start()

    def row():
        return ObservedWorkload.objects.filter(namespace=NS, name="watched").first()

    threading.Timer(0.3, lambda: (
        client.create_if_absent(pytorchjob("stranger", gpus=1)),  # not ours: never recorded
        client.create_if_absent(pytorchjob("watched", gpus=1, labels=MANAGED, suspend=True)),
        cluster.advance(2))).start()
    r.run(until=lambda: row() is not None and "Suspended" in _types(row()))
    assert row().suspended and row().active == 0
    assert not ObservedWorkload.objects.filter(name="stranger").exists()

    threading.Timer(0.3, lambda: (
        client.patch("kubeflow.org/v1", "PyTorchJob", "watched",
                     {"spec": {"runPolicy": {"suspend": False}}}, NS),
        cluster.advance(20, step=5))).start()
    r.run(until=lambda: "Running" in _types(row()))
    assert not row().suspended and row().active == 1 and "Suspended" in _types(row(), "False")

    threading.Timer(0.3, lambda: client.ensure_absent(
        "kubeflow.org/v1", "PyTorchJob", "watched", NS)).start()
    r.run(until=lambda: row() is None)
    assert row() is None and sleeps == []
    # run() lists once as it starts, before each change is made: every change above
    # arrived through the watch
    assert r.lists == 3 and r.events >= 3
    watchdog.cancel()


def test_watch_events_are_idempotent_and_a_delete_removes_the_row(
        client, announced, django_capture_on_commit_callbacks):
    created, _ = client.create_if_absent(pytorchjob("evented", gpus=1, labels=MANAGED))
    with django_capture_on_commit_callbacks(execute=True):
        assert record_event(SPEC, "ADDED", created) == [f"{NS}/evented"]
        assert record_event(SPEC, "MODIFIED", created) == []  # same version: no write
        assert record_event(SPEC, "DELETED", created) == [f"{NS}/evented"]
    assert not ObservedWorkload.objects.exists()
    assert announced == [("pytorchjobs", [f"{NS}/evented"])] * 2


def test_another_kind_in_the_shared_table_survives_a_pytorchjob_relist(client):
    """The table is shared by job kinds: a PyTorchJob relist prunes only PyTorchJob rows."""
    ObservedWorkload.objects.create(
        api_version="trainer.kubeflow.org/v1alpha1", kind="TrainJob", namespace=NS,
        name="v2-job", uid="u-1", resource_version="1", observed_at=timezone.now())
    ObservedWorkload.objects.create(
        api_version="kubeflow.org/v1", kind="PyTorchJob", namespace=NS, name="vanished",
        uid="u-2", resource_version="1", observed_at=timezone.now())
    client.create_if_absent(pytorchjob("v2-job", gpus=1, labels=MANAGED))  # the same name
    relist_all(client, ["pytorchjobs"])
    assert sorted(ObservedWorkload.objects.values_list("kind", "name")) == [
        ("PyTorchJob", "v2-job"), ("TrainJob", "v2-job")]
    assert ObservedKind.objects.get(kind="pytorchjobs").object_count == 1
    assert set(workload_statuses()) == {(NS, "v2-job")}
    assert set(workload_statuses("trainer.kubeflow.org/v1alpha1", "TrainJob")) == {
        (NS, "v2-job")}


def test_parse_keeps_the_condition_fields_as_the_api_said_them():
    obj = {"metadata": {"name": "j"}, "spec": {"runPolicy": {"suspend": True}}, "status": {
        "conditions": [{"type": "Created", "status": "True", "reason": "PyTorchJobCreated",
                        "message": "made", "lastTransitionTime": "2026-01-01T00:00:00Z",
                        "lastUpdateTime": "2026-01-01T00:00:00Z"},
                       {"type": "Running", "status": "False"}],
        "replicaStatuses": {"Master": {"active": 1}, "Worker": {"active": 3, "failed": 1},
                            "Launcher": {}}}}
    parsed = parse_pytorchjob(obj)
    assert parsed["suspended"] is True and parsed["active"] == 4
    assert parsed["conditions"] == [
        {"type": "Created", "status": "True", "reason": "PyTorchJobCreated", "message": "made",
         "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "Running", "status": "False"}]
    assert parse_pytorchjob({"metadata": {"name": "new"}}) == {
        "suspended": False, "conditions": [], "replica_statuses": {}, "active": 0}


def test_workload_statuses_of_some_keys_read_only_those(db):
    """What the admission pass reads: the workloads of the jobs it can move, by
    (namespace, name), not every workload ever recorded nor a namesake elsewhere."""
    for ns, name in (("team-a-dev", "j1"), ("team-a-dev", "j2"), ("team-b-dev", "j1"),
                     ("team-b-dev", "j3")):
        ObservedWorkload.objects.create(
            api_version="kubeflow.org/v1", kind="PyTorchJob", namespace=ns, name=name,
            uid=f"{ns}-{name}", resource_version="1", observed_at=timezone.now())
    got = workload_statuses(keys=[("team-a-dev", "j1"), ("team-b-dev", "j3"),
                                  ("team-b-dev", "absent")])
    assert set(got) == {("team-a-dev", "j1"), ("team-b-dev", "j3")}
    assert workload_statuses(keys=[]) == {}
    assert len(workload_statuses()) == 4
