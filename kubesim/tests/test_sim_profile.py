"""Cluster profiles and the Node objects built from them."""

from __future__ import annotations

import pytest
from kubernetes.client import ApiClient

from kubesim.sim.harness import SimHarness
from kubesim.sim.nodes import build_nodes
from kubesim.sim.profile import SWITCH_LABEL, load_profile


def _deser(obj: dict, kind: str):
    return ApiClient()._ApiClient__deserialize(obj, kind)


@pytest.mark.parametrize("name", ["small", "default", "large"])
def test_profiles_build_schema_complete_nodes(name):
    prof = load_profile(name)
    nodes = build_nodes(prof, "2026-01-05T08:00:00Z")
    assert len(nodes) == sum(p["count"] for p in prof["pools"])
    for node, _inv in nodes:
        v1 = _deser(node, "V1Node")
        assert v1.status.node_info.kubelet_version.startswith("v1.")
        assert {c.type for c in v1.status.conditions} >= {"Ready", "MemoryPressure"}
        assert node["status"]["allocatable"]["cpu"]
        assert node["metadata"]["labels"][SWITCH_LABEL]


def test_small_profile_gpu_labels_and_capacity():
    nodes = {
        n["metadata"]["name"]: n
        for n, _ in build_nodes(load_profile("small"), "2026-01-05T08:00:00Z")
    }
    assert set(nodes) == {"a100-0", "a100-1", "h800-0", "a100-mig-0", "shared-0", "cpu-0"}
    a = nodes["a100-0"]
    assert a["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    assert a["metadata"]["labels"]["nvidia.com/gpu.memory"] == "81920"
    assert a["metadata"]["labels"]["nvidia.com/gpu.count"] == "8"
    assert a["metadata"]["labels"]["nvidia.com/gpu.family"] == "ampere"
    assert a["status"]["capacity"]["nvidia.com/gpu"] == "8"
    assert (
        nodes["a100-0"]["metadata"]["labels"][SWITCH_LABEL]
        != nodes["a100-1"]["metadata"]["labels"][SWITCH_LABEL]
    )
    h = nodes["h800-0"]
    assert h["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H800"
    assert h["metadata"]["labels"]["nvidia.com/gpu.family"] == "hopper"
    mig = nodes["a100-mig-0"]
    assert mig["metadata"]["labels"]["nvidia.com/mig.strategy"] == "mixed"
    assert mig["status"]["allocatable"]["nvidia.com/gpu"] == "4"
    assert mig["status"]["allocatable"]["nvidia.com/mig-3g.40gb"] == "4"
    assert mig["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] == "12"
    assert mig["metadata"]["labels"]["nvidia.com/mig-1g.10gb.count"] == "12"
    sh = nodes["shared-0"]
    assert sh["status"]["allocatable"]["nvidia.com/gpu.shared"] == "16"
    assert sh["status"]["allocatable"]["nvidia.com/gpu"] == "0"
    assert sh["metadata"]["labels"]["nvidia.com/gpu.replicas"] == "4"
    assert sh["metadata"]["labels"]["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert sh["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-L40S-SHARED"
    assert sh["metadata"]["labels"]["trainyard.io/gpu.shared-memory"] == str(46068 // 4)
    cpu = nodes["cpu-0"]
    assert "nvidia.com/gpu" not in cpu["status"]["capacity"]
    assert "nvidia.com/gpu.product" not in cpu["metadata"]["labels"]


def test_gpu_uuids_are_stable_and_unique():
    a = build_nodes(load_profile("small"), "2026-01-05T08:00:00Z")
    b = build_nodes(load_profile("small"), "2026-01-06T08:00:00Z")
    ua = [g.uuid for _, inv in a for g in inv.gpus]
    ub = [g.uuid for _, inv in b for g in inv.gpus]
    assert ua == ub
    assert len(set(ua)) == len(ua) == 8 * 4 + 4


@pytest.mark.parametrize(
    "bad, msg",
    [
        ({"pools": []}, "no pools"),
        ({"pools": [{"name": "x", "gpu": {"model": "B300"}}]}, "unknown GPU model"),
        (
            {
                "pools": [
                    {
                        "name": "x",
                        "gpu": {
                            "model": "A100-SXM4-80GB",
                            "mig": {"gpus": 1, "layout": {"3g.40gb": 3}},
                        },
                    }
                ]
            },
            "does not fit",
        ),
        (
            {
                "pools": [
                    {
                        "name": "x",
                        "gpu": {"model": "L40S", "mig": {"gpus": 1, "layout": {"1g.10gb": 1}}},
                    }
                ]
            },
            "not available",
        ),
        ({"pools": [{"name": "x"}, {"name": "x"}]}, "duplicate"),
    ],
)
def test_invalid_profiles_are_refused(bad, msg):
    with pytest.raises(ValueError, match=msg):
        load_profile(bad)


def test_unknown_profile_name():
    with pytest.raises(FileNotFoundError, match="small"):
        load_profile("no-such-profile")


def test_bootstrap_is_idempotent_and_creates_storage_classes():
    h = SimHarness("small")
    n1 = h.store.list("nodes")
    h.sim.bootstrap()
    assert len(h.store.list("nodes")) == len(n1) == 6
    scs = {s["metadata"]["name"] for s in h.store.list("storageclasses.storage.k8s.io")}
    assert {"fast-ssd", "shared-nfs"} <= scs
    for n in h.store.list("nodes"):
        _deser(n, "V1Node")
