"""The watcher's row index and its coalesced batches (observe_record.RowIndex, issue 28).

A batch of watch events is one write per object (its last state; a DELETED after its
changes removes the row) and, with the reflector's index loaded, reads nothing first. The
index is what the table holds: loaded by a relist (after a watch gap, or at a restart),
kept by its own writes; one made stale by another writer costs a write, never a row.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from k8s_sync.models import ObservedPod, ObservedWorkload
from k8s_sync.observe import KINDS, Reflector, RowIndex, record_events, record_relist
from k8s_sync.signals import observed_changed
from k8s_sync.tests.observe_helpers import NS, namespace
from k8s_sync.tests.observe_helpers import pod as pod_manifest

pytestmark = pytest.mark.django_db
PODS = KINDS["pods"]


def pod(name: str, uid: str, rv: int, phase: str = "Pending") -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "uid": uid, "resourceVersion": str(rv),
                         "labels": {"trainyard.io/tenant": "acme"}},
            "spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "2"}}}]},
            "status": {"phase": phase}}


def table() -> dict[tuple[str, str], tuple[str, str]]:
    return {(ns, name): (uid, rv) for ns, name, uid, rv in ObservedPod.objects.values_list(
        "namespace", "name", "uid", "resource_version")}


def loaded(*objects: dict) -> RowIndex:
    index = RowIndex()
    record_relist(PODS, list(objects), "1", index=index)
    return index


def statements(queries: CaptureQueriesContext, verb: str) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if verb in q["sql"].split(" ", 3)[:3]]


def test_several_events_of_one_pod_in_a_batch_are_one_write_of_its_last_state():
    index = loaded()
    with CaptureQueriesContext(connection) as queries:
        keys = record_events(PODS, [("ADDED", pod("a", "u1", 5)),
                                    ("MODIFIED", pod("a", "u1", 6, "Running")),
                                    ("ADDED", pod("b", "u2", 7)),
                                    ("MODIFIED", pod("a", "u1", 8, "Succeeded"))], index=index)
    assert keys == [f"{NS}/a", f"{NS}/b"]
    inserts = statements(queries, "INSERT")
    assert len(inserts) == 1 and inserts[0].startswith("2 times")  # one executemany, 2 rows
    assert statements(queries, "SELECT") == []  # the index answered
    row = ObservedPod.objects.get(name="a")
    assert (row.phase, row.resource_version, row.raw["status"]["phase"]) == (
        "Succeeded", "8", "Succeeded")
    assert row.requests == {"cpu": "2"} and row.labels == {"trainyard.io/tenant": "acme"}
    assert index.rows == table() == {(NS, "a"): ("u1", "8"), (NS, "b"): ("u2", "7")}


def test_a_deleted_after_its_changes_wins_and_a_pod_born_and_gone_in_a_batch_writes_nothing():
    index = loaded(pod("a", "u1", 5))
    with CaptureQueriesContext(connection) as queries:
        keys = record_events(PODS, [("MODIFIED", pod("a", "u1", 6)),
                                    ("DELETED", pod("a", "u1", 7)),
                                    ("ADDED", pod("brief", "u9", 8)),
                                    ("DELETED", pod("brief", "u9", 9))], index=index)
    assert keys == [f"{NS}/a"]
    assert statements(queries, "INSERT") == [] and len(statements(queries, "DELETE")) == 1
    assert table() == {} and index.rows == {}


def test_deleted_then_added_again_under_the_same_name_is_the_new_pods_row():
    index = loaded(pod("a", "u1", 5))
    keys = record_events(PODS, [("DELETED", pod("a", "u1", 6)),
                                ("ADDED", pod("a", "u2", 7))], index=index)
    assert keys == [f"{NS}/a"]
    assert table() == index.rows == {(NS, "a"): ("u2", "7")}
    # the old pod's late DELETED does not remove the new one's row
    assert record_events(PODS, [("DELETED", pod("a", "u1", 6))], index=index) == []
    assert table() == {(NS, "a"): ("u2", "7")}


def test_the_same_batch_twice_writes_nothing_the_second_time():
    index = loaded()
    batch = [("ADDED", pod("a", "u1", 5)), ("ADDED", pod("b", "u2", 6))]
    assert record_events(PODS, batch, index=index) == [f"{NS}/a", f"{NS}/b"]
    with CaptureQueriesContext(connection) as queries:
        assert record_events(PODS, batch, index=index) == []
    assert statements(queries, "INSERT") == statements(queries, "SELECT") == []


def test_a_relist_after_a_watch_gap_makes_the_index_the_table_again():
    index = loaded(pod("a", "u1", 5), pod("b", "u2", 6), pod("c", "u3", 7))
    # during the gap: a was deleted, b changed, d created, c unchanged
    changed = record_relist(PODS, [pod("b", "u2", 9), pod("c", "u3", 7), pod("d", "u4", 10)],
                            "10", index=index)
    assert sorted(changed) == [f"{NS}/a", f"{NS}/b", f"{NS}/d"]
    assert index.rows == table() == {(NS, "b"): ("u2", "9"), (NS, "c"): ("u3", "7"),
                                     (NS, "d"): ("u4", "10")}
    assert record_events(PODS, [("MODIFIED", pod("b", "u2", 9))], index=index) == []


def test_a_stale_index_costs_a_write_never_a_row():
    index = loaded(pod("a", "u1", 5))
    # another writer (the relist task) removed a's row and recorded b's
    ObservedPod.objects.filter(name="a").delete()
    record_relist(PODS, [pod("b", "u2", 6)], "6")  # no index: ours does not know
    assert index.rows == {(NS, "a"): ("u1", "5")}
    keys = record_events(PODS, [("MODIFIED", pod("a", "u1", 7)),
                                ("MODIFIED", pod("b", "u2", 8))], index=index)
    assert keys == [f"{NS}/a", f"{NS}/b"]
    assert table() == {(NS, "a"): ("u1", "7"), (NS, "b"): ("u2", "8")}


def test_without_an_index_the_batch_looks_its_rows_up_and_ends_the_same():
    record_relist(PODS, [pod("a", "u1", 5)], "5")
    with CaptureQueriesContext(connection) as queries:
        assert record_events(PODS, [("MODIFIED", pod("a", "u1", 5))]) == []
    assert len(statements(queries, "SELECT")) == 1 and statements(queries, "INSERT") == []


def test_the_signal_names_the_kind_and_every_key_once(django_capture_on_commit_callbacks):
    index = loaded(pod("a", "u1", 5))
    sent = []

    def receiver(sender, kind, keys, **kwargs):
        sent.append((sender, kind, keys))
    observed_changed.connect(receiver)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            record_events(PODS, [("ADDED", pod("b", "u2", 6)), ("MODIFIED", pod("b", "u2", 7)),
                                 ("DELETED", pod("a", "u1", 8))], index=index)
    finally:
        observed_changed.disconnect(receiver)
    assert sent == [(ObservedPod, "pods", [f"{NS}/a", f"{NS}/b"])]


def test_a_shared_tables_kinds_keep_apart_in_writes_and_deletes():
    jobs, index = KINDS["pytorchjobs"], RowIndex()

    def job(name: str, uid: str, rv: int, kind: str = "PyTorchJob",
            api_version: str = "kubeflow.org/v1") -> dict:
        return {"apiVersion": api_version, "kind": kind,
                "metadata": {"name": name, "namespace": NS, "uid": uid,
                             "resourceVersion": str(rv)}, "spec": {}, "status": {}}
    record_relist(KINDS["trainjobs"], [job("x", "t1", 3, "TrainJob",
                                           "trainer.kubeflow.org/v1alpha1")], "3")
    record_relist(jobs, [], "3", index=index)
    assert record_events(jobs, [("ADDED", job("x", "p1", 4))], index=index) == [f"{NS}/x"]
    assert record_events(jobs, [("DELETED", job("x", "p1", 5))], index=index) == [f"{NS}/x"]
    assert list(ObservedWorkload.objects.values_list("kind", "uid")) == [("TrainJob", "t1")]


@pytest.fixture
def client(cluster):
    from k8s_sync.client import get_client

    client = get_client()
    namespace(client)
    return client


def test_a_restarted_reflector_relists_into_a_new_index_and_records_without_lookups(client):
    client.apply(pod_manifest("one"))
    first = Reflector(client, PODS)
    first.relist()
    assert (NS, "one") in first.index.rows and first.index.loaded
    client.apply(pod_manifest("two"))
    restarted = Reflector(client, PODS)  # a new process: an empty index until it relists
    assert not restarted.index.loaded
    restarted.relist()
    assert restarted.index.rows == table()
    stored = client.read("v1", "Pod", "two", NS)
    changed = {**stored, "metadata": {**stored["metadata"], "resourceVersion": "999999"}}
    with CaptureQueriesContext(connection) as queries:
        restarted._record([("MODIFIED", changed)], "")
    assert statements(queries, "SELECT") == []
    assert ObservedPod.objects.get(name="two").resource_version == "999999"
