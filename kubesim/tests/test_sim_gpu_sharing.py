"""The default profile's shared-GPU pools (time-slicing, MPS) and HAMi vGPU pool.

HAMi (Project-HAMi/HAMi): its device plugin registers only ``nvidia.com/gpu`` (cards x
deviceSplitCount); ``nvidia.com/gpumem`` (MiB per card) and ``nvidia.com/gpucores`` (% of
a card) are pod limits its scheduler extender checks card by card (they are
``ignoredByScheduler`` for kube-scheduler, so never node allocatable).
"""

from __future__ import annotations

import pytest

from kubesim.sim.harness import SimHarness, make_pod
from kubesim.sim.profile import load_profile

NS = "team-a"
L4 = "NVIDIA-L4"


@pytest.fixture(scope="module")
def default_nodes():
    h = SimHarness("default", seed=1)
    return {n["metadata"]["name"]: n for n in h.store.list("nodes")}


@pytest.fixture
def h():
    h = SimHarness("default", seed=3)
    h.namespace(NS)
    return h


def create(h, pod):
    return h.store.create("pods", pod, namespace=NS)


def node_of(h, name):
    return h.pod(NS, name)["spec"].get("nodeName")


def message(h, name):
    conds = (h.pod(NS, name).get("status") or {}).get("conditions") or []
    return next((c.get("message", "") for c in conds if c.get("type") == "PodScheduled"), "")


def test_default_profile_has_time_slicing_mps_and_hami_pools(default_nodes):
    ts, mps, hami = default_nodes["l40s-ts-0"], default_nodes["a10-mps-0"], default_nodes[
        "l4-hami-0"]
    # GFD with renameByDefault: -SHARED product, replicas and strategy labels
    assert ts["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-L40S-SHARED"
    assert ts["metadata"]["labels"]["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert ts["metadata"]["labels"]["nvidia.com/gpu.replicas"] == "4"
    assert ts["status"]["allocatable"]["nvidia.com/gpu.shared"] == "16"
    assert ts["status"]["allocatable"]["nvidia.com/gpu"] == "0"
    assert mps["metadata"]["labels"]["nvidia.com/gpu.sharing-strategy"] == "mps"
    assert mps["metadata"]["labels"]["nvidia.com/mps.capable"] == "true"
    assert mps["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A10-SHARED"
    assert mps["status"]["allocatable"]["nvidia.com/gpu.shared"] == "8"
    assert mps["metadata"]["labels"]["trainyard.io/gpu.shared-memory"] == str(23028 // 2)
    # HAMi: vGPUs as nvidia.com/gpu, base product, gpu=on, the register annotation
    labels, annotations = hami["metadata"]["labels"], hami["metadata"]["annotations"]
    assert labels["gpu"] == "on" and labels["nvidia.com/gpu.product"] == L4
    assert hami["status"]["allocatable"]["nvidia.com/gpu"] == "40"
    assert not any(k in hami["status"]["allocatable"]
                   for k in ("nvidia.com/gpumem", "nvidia.com/gpucores"))
    cards = [c for c in annotations["hami.io/node-nvidia-register"].split(":") if c]
    assert len(cards) == 4
    _uuid, count, mem, cores, typ, _numa, health, index, mode = cards[0].split(",")
    assert (count, mem, cores, typ, health, index, mode) == (
        "10", "23034", "100", "NVIDIA-NVIDIA L4", "true", "0", "hami-core")
    assert annotations["hami.io/node-handshake"].startswith("Reported ")


def test_hami_with_mig_or_sharing_is_refused():
    pool = {"name": "x", "gpu": {"model": "L4", "hami": True,
                                 "sharing": {"strategy": "mps", "replicas": 2}}}
    with pytest.raises(ValueError, match="HAMi"):
        load_profile({"pools": [pool]})


def test_shared_pod_lands_on_the_shared_pool(h):
    pod = make_pod("s", resources={"nvidia.com/gpu.shared": "2"},
                   node_selector={"nvidia.com/gpu.product": "NVIDIA-A10-SHARED"})
    create(h, pod)
    h.advance(5)
    assert node_of(h, "s").startswith("a10-mps-")
    assert len(h.sim.gpu_assignment(NS, "s")) == 2


def test_hami_memory_is_checked_per_card(h):
    sel = {"nvidia.com/gpu.product": L4}
    # 4 pods of 2 vGPUs x 16 GiB: 2 cards each, at most one such vGPU per 22.5 GiB card,
    # so 2 pods per node (4 cards) and the 5th waits although vGPU slots are left.
    for i in range(5):
        create(h, make_pod(f"p{i}", gpus=2, node_selector=sel,
                           resources={"nvidia.com/gpumem": "16384"}))
    h.advance(5)
    placed = {f"p{i}": node_of(h, f"p{i}") for i in range(5)}
    assert sorted(n for n in placed.values() if n) == ["l4-hami-0", "l4-hami-0",
                                                        "l4-hami-1", "l4-hami-1"]
    waiting = next(p for p, n in placed.items() if not n)
    assert "Insufficient nvidia.com/gpumem" in message(h, waiting)
    for p, n in placed.items():
        if n:
            devices = h.sim.gpu_assignment(NS, p)
            assert len({d["gpu"] for d in devices}) == 2  # distinct cards
    # a small one still fits beside them (6 GiB free per card)
    create(h, make_pod("small", gpus=1, node_selector=sel,
                       resources={"nvidia.com/gpumem": "4096", "nvidia.com/gpucores": "20"}))
    h.advance(5)
    assert node_of(h, "small").startswith("l4-hami-")


def test_hami_vgpu_without_memory_takes_the_whole_card(h):
    sel = {"nvidia.com/gpu.product": L4}
    create(h, make_pod("whole", gpus=4, node_selector=sel))
    h.advance(5)
    node = node_of(h, "whole")
    assert node.startswith("l4-hami-")
    other = "l4-hami-1" if node == "l4-hami-0" else "l4-hami-0"
    create(h, make_pod("whole2", gpus=4, node_selector=sel))
    create(h, make_pod("more", gpus=1, node_selector={**sel, "kubernetes.io/hostname": node},
                       resources={"nvidia.com/gpumem": "1024"}))
    h.advance(5)
    assert node_of(h, "whole2") == other
    assert node_of(h, "more") is None  # every card of that node is held whole


def test_gpumem_needs_a_hami_node(h):
    create(h, make_pod("nohami", gpus=1,
                       node_selector={"nvidia.com/gpu.product": "NVIDIA-H800"},
                       resources={"nvidia.com/gpumem": "1024"}))
    h.advance(5)
    assert node_of(h, "nohami") is None
    assert "node(s) had no HAMi vGPU devices" in message(h, "nohami")
