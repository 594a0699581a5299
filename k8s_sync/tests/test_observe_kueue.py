"""Kueue's Workloads as an observed kind ("kueueworkloads", ObservedKueueWorkload): only
those of Trainyard's jobs, read back exactly as ``kueue.workload_view`` reads the object,
by job and without ``raw``; and the watcher keeps going on a cluster without Kueue."""

from __future__ import annotations

import threading

import pytest

from k8s_sync import kueue
from k8s_sync.client import get_client
from k8s_sync.kueue_observe import keeps_workload, workload_views, workloads_observed
from k8s_sync.models import ObservedKind, ObservedKueueWorkload
from k8s_sync.observe import KINDS, Backoff, Reflector, record_event, record_relist, relist_all
from k8s_sync.tests.test_kueue import _workload

pytestmark = pytest.mark.django_db
SPEC = KINDS["kueueworkloads"]


def _admitted(name="pytorchjob-j7-abcde", owner="j7", created="2026-01-01T00:00:00Z"):
    obj = _workload(name=name, owner=owner, conditions=[
        ("QuotaReserved", "True", "QuotaReserved", ""), ("Admitted", "True", "Admitted", "")],
        admission={"clusterQueue": "ty-acme-dev", "podSetAssignments": [
            {"name": "master", "flavors": {"nvidia.com/gpu": "gpu-nvidia-h800"}}]},
        requeueState={"count": 1, "requeueAt": "2026-01-01T00:05:00Z"},
        schedulingStats={"evictions": [
            {"reason": "Preempted", "underlyingCause": "", "count": 2},
            {"reason": "PodsReadyTimeout", "underlyingCause": "WaitForStart", "count": 1}]})
    obj["metadata"].update(uid=f"uid-{name}", resourceVersion="7",
                           creationTimestamp=created)
    return obj


def test_the_kind_watches_every_workload_and_keeps_only_trainyards():
    assert (SPEC.api_version, SPEC.kind) == ("kueue.x-k8s.io/v1beta2", "Workload")
    assert SPEC.model is ObservedKueueWorkload and SPEC.prune and not SPEC.shared
    assert SPEC.label_selector == ""  # Kueue copies none of the job's labels
    ours = _workload()
    assert keeps_workload(ours)
    elsewhere = _workload()
    elsewhere["metadata"]["namespace"] = "ml-team"
    orphan = _workload()
    orphan["metadata"]["ownerReferences"] = []
    batch_job = _workload()
    batch_job["metadata"]["ownerReferences"][0]["kind"] = "Job"
    assert not any(keeps_workload(o) for o in (elsewhere, orphan, batch_job))


def test_a_recorded_workload_reads_back_as_the_object_does_by_its_job(
        django_assert_num_queries):
    pending = _workload(name="pytorchjob-j8-xyz", owner="j8", active=False, conditions=[
        ("QuotaReserved", "False", "WaitingForQuota", "insufficient quota")])
    pending["metadata"].update(uid="u8", resourceVersion="3")
    stranger = _workload(name="pytorchjob-x-1", owner="x")
    stranger["metadata"].update(namespace="ml-team", uid="ux", resourceVersion="4")
    objects = [_admitted(), pending, stranger]
    assert len(record_relist(SPEC, objects, "10")) == 2
    assert ObservedKueueWorkload.objects.count() == 2 and workloads_observed()
    assert record_relist(SPEC, objects, "10") == []  # idempotent: nothing written again
    with django_assert_num_queries(1):
        views = workload_views([("ty-acme-dev", "j7"), ("ty-acme-dev", "j8"),
                                ("ty-acme-dev", "not-submitted")])
    assert views == {key: view for key, view in kueue.workloads_by_job(objects).items()
                     if key[0] == "ty-acme-dev"}
    assert views[("ty-acme-dev", "j7")].admitted
    assert views[("ty-acme-dev", "j7")].requeue_at is not None
    assert views[("ty-acme-dev", "j7")].requeue_count == 1
    assert views[("ty-acme-dev", "j7")].evictions == (
        ("PodsReadyTimeout", "WaitForStart", 1), ("Preempted", "", 2))
    assert not views[("ty-acme-dev", "j8")].active
    assert workload_views([("ty-acme-dev", "j8")]).keys() == {("ty-acme-dev", "j8")}


def test_the_newest_workload_of_a_job_wins_and_a_deleted_one_goes():
    old = _admitted(name="pytorchjob-j7-old", created="2026-01-01T00:00:00Z")
    new = _workload(name="pytorchjob-j7-new", conditions=[
        ("QuotaReserved", "False", "WaitingForQuota", "")])
    new["metadata"].update(uid="u-new", resourceVersion="9",
                           creationTimestamp="2026-01-02T00:00:00Z")
    record_relist(SPEC, [new, old], "10")
    assert workload_views([("ty-acme-dev", "j7")])[("ty-acme-dev", "j7")].name == new[
        "metadata"]["name"]
    record_event(SPEC, "DELETED", new)
    assert workload_views([("ty-acme-dev", "j7")])[("ty-acme-dev", "j7")].name == old[
        "metadata"]["name"]


def test_without_kueue_the_kind_fails_and_retries_and_the_others_are_recorded(cluster):
    """As the TrainJob kind without Kubeflow Trainer: the kind's list fails (recorded on
    the health page), its reflector backs off and retries, nothing else stops."""
    client = get_client()
    client.ensure_absent("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                         "workloads.kueue.x-k8s.io")
    result = relist_all(client)
    assert str(result["kueueworkloads"]).startswith("error:")
    assert result["nodes"] == 6 and isinstance(result["pytorchjobs"], int)
    bookkeeping = ObservedKind.objects.get(kind="kueueworkloads")
    assert bookkeeping.failing and bookkeeping.last_list_at is None
    assert not workloads_observed()

    sleeps: list[float] = []
    r = Reflector(client, SPEC, backoff=Backoff(base=0.01, cap=0.02, jitter=False),
                  sleep=sleeps.append)  # no max_failures: as k8s_watch runs it
    watchdog = threading.Timer(20, r.stop)
    watchdog.daemon = True
    watchdog.start()
    r.run(until=lambda: r.failures >= 3)  # never raises: it keeps retrying
    watchdog.cancel()
    assert r.failures == 3 and sleeps == [0.01, 0.02, 0.02] and r.lists == 0
