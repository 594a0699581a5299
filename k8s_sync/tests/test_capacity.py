"""The capacity inventory matches what kubesim's small profile defines, and counts pods.

Expected numbers are computed from the profile YAML (kubesim's loader), not copied from
the selector's output.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

import pytest

from k8s_sync.client import get_client
from k8s_sync.models import ObservedNode
from k8s_sync.observe import relist_all
from k8s_sync.selectors import capacity_report, mig_profile_memory_mib
from k8s_sync.tests.observe_helpers import namespace, pod
from kubesim.sim.profile import GPU_MODELS, load_profile

pytestmark = pytest.mark.django_db


def expected_from_profile(name: str = "small") -> dict[str, dict]:
    out: dict[str, dict] = defaultdict(lambda: {
        "nodes": 0, "cards": 0, "memory_mib": 0, "whole": 0, "shared": 0,
        "mig": defaultdict(int)})
    for pool in load_profile(name)["pools"]:
        gpu = pool["gpu"]
        if not gpu:
            continue
        model = GPU_MODELS[gpu["model"]]
        row, n = out[model["product"]], pool["count"]
        row["nodes"] += n
        row["cards"] += n * gpu["count"]
        row["memory_mib"] += n * gpu["count"] * model["memory"]
        if gpu.get("mig"):
            mig = gpu["mig"]
            row["whole"] += n * (gpu["count"] - mig["gpus"])
            for profile, per_gpu in mig["layout"].items():
                row["mig"][profile] += n * per_gpu * mig["gpus"]
        elif gpu.get("sharing"):
            row["shared"] += n * gpu["count"] * gpu["sharing"]["replicas"]
        else:
            row["whole"] += n * gpu["count"]
    return out


@pytest.fixture
def client(cluster):
    client = get_client()
    relist_all(client)
    return client


def test_capacity_per_model_matches_the_profile(client):
    expected = expected_from_profile()
    report = capacity_report()
    assert {m.gpu_model for m in report.models} == set(expected)
    for m in report.models:
        want = expected[m.gpu_model]
        assert (m.nodes, m.schedulable_nodes, m.cards, m.memory_mib) == (
            want["nodes"], want["nodes"], want["cards"], want["memory_mib"])
        assert (m.whole_allocatable, m.whole_allocated) == (want["whole"], 0)
        assert m.whole_free_schedulable == want["whole"]
        assert {x.profile: x.allocatable for x in m.mig} == dict(want["mig"])
        assert all(x.allocated == 0 for x in m.mig)
        assert (m.shared_allocatable, m.shared_allocated) == (want["shared"], 0)
    assert report.totals["cards"] == sum(w["cards"] for w in expected.values())
    assert report.totals["nodes"] == sum(p["count"] for p in load_profile("small")["pools"])
    assert report.observed_at is not None


def test_per_node_rows_carry_topology_memory_and_mig_profiles(client):
    profile = load_profile("small")
    nodes = {n.name: n for n in capacity_report().nodes}
    for pool in profile["pools"]:
        node = nodes[f"{pool['prefix']}0"]
        assert node.rack in pool["racks"] and node.switch == pool["switches"][0]
        assert node.schedulable
        if not pool["gpu"]:
            assert node.gpu_model == "" and node.cards == 0 and node.mig == ()
            continue
        model = GPU_MODELS[pool["gpu"]["model"]]
        assert node.card_memory_mib == model["memory"]
        assert node.memory_mib == pool["gpu"]["count"] * model["memory"]
        mig = pool["gpu"].get("mig")
        for x in node.mig:
            assert x.allocatable == mig["layout"][x.profile] * mig["gpus"]
            gib = int(x.profile.split(".")[1].removesuffix("gb"))
            assert x.memory_mib == gib * 1024
        if pool["gpu"].get("sharing"):
            sharing = pool["gpu"]["sharing"]
            assert node.sharing_strategy == sharing["strategy"]
            assert node.share_memory_mib == model["memory"] // sharing["replicas"]
    # GPU nodes first, then the CPU-only ones
    assert [n.gpu_model != "" for n in capacity_report().nodes] == sorted(
        [n.gpu_model != "" for n in nodes.values()], reverse=True)


def test_allocated_counts_gpu_requests_of_running_pods_per_node(client, cluster):
    namespace(client)
    client.apply(pod("whole", gpus=3, node_selector={"kubernetes.io/hostname": "h800-0"}))
    client.apply(pod("slice", gpus=2, resource="nvidia.com/mig-1g.10gb"))
    client.apply(pod("share", gpus=5, resource="nvidia.com/gpu.shared"))
    cluster.advance(10)
    relist_all(client, ["pods"])
    report = capacity_report()
    nodes = {n.name: n for n in report.nodes}
    assert nodes["h800-0"].whole_allocated == 3 and nodes["h800-0"].whole_free == 5
    assert {x.profile: x.allocated for x in nodes["a100-mig-0"].mig}["1g.10gb"] == 2
    assert nodes["shared-0"].shared_allocated == 5
    h800, l40s = GPU_MODELS["H800"]["memory"], GPU_MODELS["L40S"]["memory"]
    replicas = next(p for p in load_profile("small")["pools"]
                    if p["name"] == "shared")["gpu"]["sharing"]["replicas"]
    assert nodes["h800-0"].memory_allocated_mib == 3 * h800
    assert nodes["a100-mig-0"].memory_allocated_mib == 2 * 10 * 1024
    assert nodes["shared-0"].memory_allocated_mib == 5 * (l40s // replicas)
    assert report.totals["memory_allocated_mib"] == (
        3 * h800 + 2 * 10 * 1024 + 5 * (l40s // replicas))
    by_model = {m.gpu_model: m for m in report.models}
    assert by_model["NVIDIA-H800"].whole_allocated == 3
    assert report.totals["mig_allocated"] == 2 and report.totals["shared_allocated"] == 5
    # a deleted pod holds its cards through its grace period (30 s), as the scheduler sees it
    client.ensure_absent("v1", "Pod", "whole", "ty-obs-prod")
    cluster.advance(5)
    relist_all(client, ["pods"])
    assert {n.name: n for n in capacity_report().nodes}["h800-0"].whole_allocated == 3
    cluster.advance(40)
    relist_all(client, ["pods"])
    assert {n.name: n for n in capacity_report().nodes}["h800-0"].whole_allocated == 0


def test_a_cordoned_node_is_not_schedulable_and_its_cards_are_not_free(client):
    client.patch("v1", "Node", "h800-0", {"spec": {"unschedulable": True}})
    relist_all(client, ["nodes"])
    assert ObservedNode.objects.get(name="h800-0").unschedulable
    model = {m.gpu_model: m for m in capacity_report().models}["NVIDIA-H800"]
    assert model.schedulable_nodes == 0 and model.whole_free_schedulable == 0
    assert model.whole_allocatable == 8


def test_the_report_costs_a_fixed_number_of_queries(client, django_assert_max_num_queries):
    with django_assert_max_num_queries(3):
        capacity_report(["trainyard.io/switch"])
    capacity_report()  # the policy row exists from here on
    with django_assert_max_num_queries(4):  # + the configured topology levels
        capacity_report()


@pytest.mark.parametrize(("profile", "mib"), [
    ("1g.10gb", 10240), ("3g.40gb", 40960), ("7g.80gb", 81920), ("1g.5gb", 5120), ("odd", None)])
def test_mig_memory_comes_from_the_profile_name(profile, mib):
    assert mig_profile_memory_mib(profile) == mib


def _node(**kwargs):
    from k8s_sync.observe import parse_node

    labels = kwargs.pop("labels")
    obj = {"metadata": {"name": "n", "labels": labels},
           "status": {"allocatable": kwargs.pop("allocatable"),
                      "conditions": [{"type": "Ready", "status": "True"}]}}
    return ObservedNode(name="n", labels=labels, **parse_node(obj))


def test_a_mig_single_node_counts_its_gpus_as_mig_instances():
    from k8s_sync.selectors import node_capacity

    node = _node(labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
                         "nvidia.com/gpu.count": "56", "nvidia.com/gpu.memory": "4864",
                         "nvidia.com/mig.strategy": "single"},
                 allocatable={"nvidia.com/gpu": "56"})
    cap = node_capacity(node, {"nvidia.com/gpu": Decimal(3)})
    assert cap.gpu_model == "NVIDIA-A100-SXM4-40GB"
    assert (cap.whole_allocatable, cap.whole_allocated) == (0, 0)
    assert [(m.profile, m.allocatable, m.allocated, m.memory_mib) for m in cap.mig] == [
        ("1g.5gb", 56, 3, 5120)]


def test_time_slicing_without_rename_counts_replicas_as_shared():
    from k8s_sync.selectors import node_capacity

    node = _node(labels={"nvidia.com/gpu.product": "Tesla-T4-SHARED", "nvidia.com/gpu.count": "2",
                         "nvidia.com/gpu.memory": "15360", "nvidia.com/gpu.replicas": "4",
                         "nvidia.com/gpu.sharing-strategy": "time-slicing"},
                 allocatable={"nvidia.com/gpu": "8"})
    cap = node_capacity(node, {"nvidia.com/gpu": Decimal(5)})
    assert (cap.whole_allocatable, cap.shared_allocatable, cap.shared_allocated) == (0, 8, 5)
    assert cap.share_memory_mib == 15360 // 4 and cap.memory_mib == 2 * 15360
