"""Recording what the cluster says: relists and watch events into k8s_sync's tables.

Against kubesim over HTTP (the ``cluster`` fixture points Trainyard's client at it).
"""

from __future__ import annotations

import pytest

from k8s_sync.client import get_client
from k8s_sync.models import (
    ClusterEvent,
    ObservedKind,
    ObservedNode,
    ObservedPod,
    ObservedPVC,
    ObservedQuota,
    ObservedStorageClass,
)
from k8s_sync.observe import KINDS, gpu_model_of, pod_requests, record_event, relist_all
from k8s_sync.signals import observed_changed
from k8s_sync.tests.observe_helpers import NS, namespace, pod, pytorchjob, quota
from kubesim.sim.profile import GPU_MODELS, RACK_LABEL, SWITCH_LABEL, load_profile

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(cluster):
    return get_client()


@pytest.fixture
def announced():
    """Every observed_changed signal sent during the test, as (kind, keys).

    The signal goes out on commit: wrap the recording calls in
    ``django_capture_on_commit_callbacks(execute=True)``.
    """
    seen: list[tuple[str, list[str]]] = []

    def receiver(sender, kind, keys, **kwargs):
        assert sender is KINDS[kind].model
        seen.append((kind, keys))
    observed_changed.connect(receiver)
    yield seen
    observed_changed.disconnect(receiver)


def test_relist_records_nodes_as_the_small_profile_defines_them(client):
    relist_all(client)
    profile = load_profile("small")
    nodes = {n.name: n for n in ObservedNode.objects.all()}
    expected_names = {f"{p['prefix']}{i}" for p in profile["pools"] for i in range(p["count"])}
    assert set(nodes) == expected_names
    for pool in profile["pools"]:
        for i in range(pool["count"]):
            node = nodes[f"{pool['prefix']}{i}"]
            assert node.schedulable and node.ready and not node.unschedulable
            assert node.rack in pool["racks"] and node.switch in pool["switches"]
            assert node.labels[RACK_LABEL] == node.rack
            assert node.labels[SWITCH_LABEL] == node.switch
            assert node.uid and node.resource_version and node.raw["kind"] == "Node"
            gpu = pool["gpu"]
            if not gpu:
                assert node.gpu_model == "" and node.gpu_count == 0
                assert "nvidia.com/gpu" not in node.allocatable
                continue
            model = GPU_MODELS[gpu["model"]]
            assert node.gpu_model == model["product"]
            assert node.gpu_count == gpu["count"]
            assert node.gpu_memory_mib == model["memory"]
            mig = gpu.get("mig")
            if mig:
                assert node.mig_strategy == mig["strategy"]
                for profile_name, per_gpu in mig["layout"].items():
                    assert node.allocatable[f"nvidia.com/mig-{profile_name}"] == str(
                        per_gpu * mig["gpus"])
                assert node.allocatable["nvidia.com/gpu"] == str(gpu["count"] - mig["gpus"])
            elif gpu.get("sharing"):
                sharing = gpu["sharing"]
                assert node.sharing_strategy == sharing["strategy"]
                assert node.gpu_replicas == sharing["replicas"]
                assert node.gpu_product.endswith("-SHARED")
                assert node.allocatable["nvidia.com/gpu.shared"] == str(
                    gpu["count"] * sharing["replicas"])
            else:
                assert node.allocatable["nvidia.com/gpu"] == str(gpu["count"])
                assert node.capacity["nvidia.com/gpu"] == str(gpu["count"])
    bookkeeping = ObservedKind.objects.get(kind="nodes")
    assert bookkeeping.object_count == len(expected_names) and bookkeeping.last_list_at


def test_relist_records_storage_classes(client):
    relist_all(client, ["storageclasses"])
    profile = load_profile("small")
    rows = {sc.name: sc for sc in ObservedStorageClass.objects.all()}
    assert set(rows) == {sc["name"] for sc in profile["storage_classes"]}
    for sc in profile["storage_classes"]:
        assert rows[sc["name"]].provisioner == sc["provisioner"]
        assert rows[sc["name"]].is_default == bool(sc.get("default"))


def test_pods_appear_with_phase_and_node_after_the_sim_advances(client, cluster):
    namespace(client)
    client.apply(pod("train-0", gpus=2, labels={
        "trainyard.io/tenant": "acme", "trainyard.io/pool": "prod", "trainyard.io/job": "j-7"}))
    relist_all(client, ["pods"])
    row = ObservedPod.objects.get(namespace=NS, name="train-0")
    assert row.phase == "Pending" and row.node_name == ""
    assert (row.tenant, row.pool, row.job) == ("acme", "prod", "j-7")
    assert row.requests["nvidia.com/gpu"] == "2" and row.requests["cpu"] == "1"
    cluster.advance(10)
    relist_all(client, ["pods"])
    row.refresh_from_db()
    assert row.phase == "Running"
    assert row.node_name.startswith(("a100-", "h800-"))  # a node with whole cards


def test_a_deleted_object_disappears_after_relist_and_the_change_is_announced(
        client, announced, django_capture_on_commit_callbacks):
    namespace(client)
    client.apply(pod("gone-soon"))
    client.apply(pod("stays"))
    with django_capture_on_commit_callbacks(execute=True):
        relist_all(client, ["pods"])
    assert announced == [("pods", [f"{NS}/gone-soon", f"{NS}/stays"])]
    client.ensure_absent("v1", "Pod", "gone-soon", NS)
    with django_capture_on_commit_callbacks(execute=True):
        relist_all(client, ["pods"])
    assert set(ObservedPod.objects.values_list("name", flat=True)) == {"stays"}
    assert announced[-1] == ("pods", [f"{NS}/gone-soon"])


def test_a_relist_of_an_unchanged_cluster_writes_no_rows(
        client, announced, django_assert_max_num_queries, django_capture_on_commit_callbacks):
    relist_all(client, ["nodes"])
    stamps = dict(ObservedNode.objects.values_list("name", "observed_at"))
    with django_assert_max_num_queries(10) as queries, \
            django_capture_on_commit_callbacks(execute=True):
        relist_all(client, ["nodes"])
    writes = [q["sql"] for q in queries.captured_queries
              if "observednode" in q["sql"] and not q["sql"].startswith("SELECT")]
    assert writes == []
    assert dict(ObservedNode.objects.values_list("name", "observed_at")) == stamps
    assert announced == []


def test_watch_events_are_idempotent_and_deletes_remove_the_row(
        client, announced, django_capture_on_commit_callbacks):
    namespace(client)
    created = client.apply(pod("p1"))
    spec = KINDS["pods"]
    with django_capture_on_commit_callbacks(execute=True):
        assert record_event(spec, "ADDED", created) == [f"{NS}/p1"]
        assert record_event(spec, "MODIFIED", created) == []  # same version: no write
        assert record_event(spec, "BOOKMARK", {"metadata": {"resourceVersion": "9"}}) == []
        assert record_event(spec, "DELETED", created) == [f"{NS}/p1"]
    assert not ObservedPod.objects.exists()
    assert announced == [("pods", [f"{NS}/p1"]), ("pods", [f"{NS}/p1"])]


def test_quota_status_hard_and_used_are_recorded_after_a_pod_is_created(client):
    namespace(client)
    client.apply(quota("compute", {"requests.cpu": "8", "requests.nvidia.com/gpu": "4",
                                   "pods": "10"}))
    client.apply(pod("q1", gpus=2, cpu="3"))
    relist_all(client, ["quotas"])
    row = ObservedQuota.objects.get(namespace=NS, name="compute")
    assert row.hard == {"requests.cpu": "8", "requests.nvidia.com/gpu": "4", "pods": "10"}
    assert row.used == {"requests.cpu": "3", "requests.nvidia.com/gpu": "2", "pods": "1"}


def test_pvcs_are_recorded_with_size_class_and_phase(client):
    namespace(client)
    client.apply({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                  "metadata": {"name": "ckpt", "namespace": NS},
                  "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "shared-nfs",
                           "resources": {"requests": {"storage": "100Gi"}}}})
    relist_all(client, ["pvcs"])
    row = ObservedPVC.objects.get(namespace=NS, name="ckpt")
    assert (row.storage_class, row.requested, row.requested_bytes) == (
        "shared-nfs", "100Gi", 100 * 2**30)
    assert row.phase in ("Pending", "Bound")


def test_failed_create_pod_events_are_recorded_and_ordinary_events_are_not(client, cluster):
    namespace(client)
    client.apply(quota("gpus", {"requests.nvidia.com/gpu": "1"}))
    client.create_if_absent(pytorchjob("too-big", gpus=2))
    cluster.advance(3)
    relist_all(client, ["events"])
    event = ClusterEvent.objects.get(reason="FailedCreatePod")
    assert event.involved_kind == "PyTorchJob" and event.involved_name == "too-big"
    assert event.involved_namespace == NS and event.type == "Warning"
    assert "exceeded quota" in event.message and event.last_seen
    assert set(ClusterEvent.objects.values_list("reason", flat=True)) <= {
        "FailedCreatePod", "FailedScheduling", "Preempted", "Unschedulable"}


def test_event_rows_outlive_the_cluster_copy(client, cluster):
    namespace(client)
    client.apply(quota("gpus", {"requests.nvidia.com/gpu": "0"}))
    client.create_if_absent(pytorchjob("refused", gpus=1))
    cluster.advance(2)
    relist_all(client, ["events"])
    assert ClusterEvent.objects.filter(reason="FailedCreatePod").exists()
    for event in client.list_objects("v1", "Event", NS):
        client.ensure_absent("v1", "Event", event["metadata"]["name"], NS)
    relist_all(client, ["events"])
    assert ClusterEvent.objects.filter(reason="FailedCreatePod").exists()


def test_unschedulable_pods_record_why_they_wait(client, cluster):
    namespace(client)
    client.apply(pod("huge", gpus=64))
    cluster.advance(3)
    relist_all(client, ["pods", "events"])
    row = ObservedPod.objects.get(name="huge")
    assert row.phase == "Pending" and row.reason == "Unschedulable" and row.message
    assert ClusterEvent.objects.filter(reason="FailedScheduling", involved_name="huge").exists()


def test_pod_requests_follow_the_scheduler_rules():
    spec = {"containers": [{"resources": {"requests": {"cpu": "500m"},
                                          "limits": {"nvidia.com/gpu": "1"}}},
                           {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
            "initContainers": [{"resources": {"requests": {"cpu": "4"}}}],
            "overhead": {"memory": "1Gi"}}
    assert pod_requests(spec) == {"cpu": "4", "memory": str(2 * 2**30),
                                  "nvidia.com/gpu": "1"}


@pytest.mark.parametrize(("product", "model"), [
    ("NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-SXM4-80GB"),
    ("NVIDIA-H100-NVL-MIG-1g.12gb", "NVIDIA-H100-NVL"),
    ("A100-SXM4-40GB-MIG-1g.5gb-SHARED", "A100-SXM4-40GB"),
    ("NVIDIA-L40S-SHARED", "NVIDIA-L40S"),
    ("", ""),
])
def test_gpu_model_strips_mig_and_shared_suffixes(product, model):
    assert gpu_model_of(product) == model


def test_preemption_events_are_recorded(client, cluster):
    namespace(client)
    for name, value in (("obs-low", 10), ("obs-high", 1000)):
        client.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                      "metadata": {"name": name}, "value": value})
    on_h800 = {"kubernetes.io/hostname": "h800-0"}
    low = pod("victim", gpus=8, node_selector=on_h800)
    low["spec"]["priorityClassName"] = "obs-low"
    client.apply(low)
    cluster.advance(5)
    high = pod("urgent", gpus=8, node_selector=on_h800)
    high["spec"]["priorityClassName"] = "obs-high"
    client.apply(high)
    cluster.advance(10)
    relist_all(client, ["pods", "events"])
    event = ClusterEvent.objects.get(reason="Preempted", involved_name="victim")
    assert event.involved_kind == "Pod" and "h800-0" in event.message
    assert ObservedPod.objects.get(name="victim").priority == 10


def test_event_rows_are_pruned_after_the_retention_period(client):
    from datetime import timedelta

    from django.utils import timezone

    from k8s_sync.observe import EVENT_RETENTION

    old = timezone.now() - EVENT_RETENTION - timedelta(hours=1)
    ClusterEvent.objects.create(namespace=NS, name="ancient", uid="u", resource_version="1",
                                reason="FailedCreatePod", last_seen=old, observed_at=old)
    ClusterEvent.objects.create(namespace=NS, name="recent", uid="v", resource_version="2",
                                reason="FailedCreatePod", last_seen=timezone.now(),
                                observed_at=old)
    relist_all(client, ["events"])
    assert list(ClusterEvent.objects.values_list("name", flat=True)) == ["recent"]


def test_an_unparseable_quantity_is_ignored_not_fatal():
    spec = {"containers": [{"resources": {"requests": {"cpu": "lots", "memory": "1Gi"}}}]}
    assert pod_requests(spec) == {"memory": str(2**30)}
