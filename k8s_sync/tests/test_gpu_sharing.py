"""Shared GPUs (time-slicing/MPS) and HAMi vGPUs: the JobSpec, its PyTorchJob, and what
kubesim's default profile (one pool of each kind) reports and schedules."""

from __future__ import annotations

from decimal import Decimal

import pytest

from k8s_sync.client import get_client
from k8s_sync.crd_validation import validate_pytorchjob
from k8s_sync.manifests import build_pytorchjob, desired_cluster_objects, desired_pool_objects
from k8s_sync.observe import relist_all
from k8s_sync.reconcile import converge
from k8s_sync.selectors import capacity_report, node_capacity
from k8s_sync.specs import JobSpec, PoolSpec
from kubesim.sim.profile import GPU_MODELS

BASE = {"job_id": 41, "tenant_slug": "obs", "pool": "prod", "tier": "production",
        "image": "pytorch/pytorch:2.4.0", "max_run_seconds": 3600, "grace_seconds": 30,
        "checkpoint_interval_seconds": 600, "worker_replicas": 1}


def pod_spec(manifest: dict, role: str = "Master") -> dict:
    return manifest["spec"]["pytorchReplicaSpecs"][role]["template"]["spec"]


def test_a_shared_job_requests_shares_on_the_shared_product():
    spec = JobSpec(**BASE, gpus_per_replica=3, gpu_product="NVIDIA-L40S", gpu_shared=True,
                   sharing_strategy="time-slicing")
    manifest = build_pytorchjob(spec)
    validate_pytorchjob(manifest)
    pod = pod_spec(manifest)
    resources = pod["containers"][0]["resources"]
    assert resources["requests"]["nvidia.com/gpu.shared"] == "3"
    assert resources["limits"]["nvidia.com/gpu.shared"] == "3"
    assert "nvidia.com/gpu" not in resources["limits"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-L40S-SHARED",
                                   "nvidia.com/gpu.sharing-strategy": "time-slicing"}
    assert manifest["spec"]["nprocPerNode"] == "1"  # shares may be replicas of one card


def test_a_hami_job_requests_vgpus_with_memory_and_cores_per_card():
    spec = JobSpec(**BASE, gpus_per_replica=2, gpu_product="NVIDIA-L4",
                   gpu_memory_mib_per_card=8192, gpu_cores_percent=50)
    manifest = build_pytorchjob(spec)
    validate_pytorchjob(manifest)
    resources = pod_spec(manifest, "Worker")["containers"][0]["resources"]
    for side in ("requests", "limits"):
        assert resources[side]["nvidia.com/gpu"] == "2"
        assert resources[side]["nvidia.com/gpumem"] == "8192"
        assert resources[side]["nvidia.com/gpucores"] == "50"
    assert manifest["spec"]["nprocPerNode"] == "2"  # HAMi's vGPUs are on distinct cards


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"gpus_per_replica": 1, "mig_profile": "1g.10gb", "gpu_shared": True}, "gpu_shared"),
    ({"gpus_per_replica": 0, "gpu_shared": True}, "gpu_shared"),
    ({"gpus_per_replica": 1, "gpu_product": "NVIDIA-L40S", "gpu_shared": 1}, "gpu_shared"),
    ({"gpus_per_replica": 1, "gpu_product": "NVIDIA-L40S-SHARED"}, "gpu_product"),
    ({"gpus_per_replica": 1, "gpu_product": "NVIDIA-L40S", "sharing_strategy": "mps"},
     "sharing_strategy"),
    ({"gpus_per_replica": 1, "gpu_product": "NVIDIA-L40S", "gpu_shared": True,
      "sharing_strategy": "vgpu"}, "sharing_strategy"),
    ({"gpus_per_replica": 1, "gpu_product": "NVIDIA-L4", "gpu_memory_mib_per_card": 0},
     "gpu_memory_mib_per_card"),
    ({"gpus_per_replica": 1, "gpu_product": "NVIDIA-L4", "gpu_memory_mib_per_card": 1.5},
     "gpu_memory_mib_per_card"),
    ({"gpus_per_replica": 1, "mig_profile": "1g.10gb", "gpu_memory_mib_per_card": 1024},
     "gpu_memory_mib_per_card"),
    ({"gpus_per_replica": 1, "gpu_product": "NVIDIA-L40S", "gpu_shared": True,
      "gpu_memory_mib_per_card": 1024}, "gpu_memory_mib_per_card"),
    ({"gpus_per_replica": 0, "gpu_memory_mib_per_card": 1024}, "gpu_memory_mib_per_card"),
    ({"gpus_per_replica": 1, "gpu_product": "NVIDIA-L4", "gpu_cores_percent": 101},
     "gpu_cores_percent"),
])
def test_bad_sharing_fields_name_the_field(kwargs, field):
    with pytest.raises(ValueError) as exc:
        JobSpec(**BASE, **kwargs)
    assert str(exc.value).startswith(f"{field}:")


def test_a_placement_selecting_another_product_conflicts_with_the_shared_label():
    with pytest.raises(ValueError, match=r"^placement:"):
        JobSpec(**BASE, gpus_per_replica=1, gpu_product="NVIDIA-L40S", gpu_shared=True,
                placement={"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L40S"}})
    JobSpec(**BASE, gpus_per_replica=1, gpu_product="NVIDIA-L40S", gpu_shared=True,
            placement={"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L40S-SHARED"}})


pytestmark_db = pytest.mark.django_db
default_cluster = pytest.mark.kubesim(profile="default")


@pytestmark_db
@default_cluster
def test_capacity_of_shared_and_hami_pools(cluster):
    relist_all(get_client())
    nodes = {n.name: n for n in capacity_report().nodes}
    ts, mps, hami = nodes["l40s-ts-0"], nodes["a10-mps-0"], nodes["l4-hami-0"]
    # shared pools carry the base model (GFD's -SHARED removed) and their shares
    assert (ts.gpu_model, ts.sharing_strategy, ts.shared_allocatable) == (
        "NVIDIA-L40S", "time-slicing", 16)
    assert ts.shared_memory_mib == GPU_MODELS["L40S"]["memory"] // 4
    assert (mps.gpu_model, mps.sharing_strategy, mps.shared_allocatable) == (
        "NVIDIA-A10", "mps", 8)
    assert mps.shared_memory_mib == GPU_MODELS["A10"]["memory"] // 2
    assert ts.whole_allocatable == mps.whole_allocatable == 0
    # HAMi: 40 vGPUs are 4 cards
    assert hami.gpu_model == "NVIDIA-L4" and hami.hami and hami.vgpus_per_card == 10
    assert (hami.cards, hami.whole_allocatable, hami.shared_allocatable) == (4, 4, 0)
    assert nodes["h800-0"].shared_memory_mib == 0 and not nodes["h800-0"].hami
    models = {m.gpu_model: m for m in capacity_report().models}
    assert models["NVIDIA-L40S"].shared_allocatable == 32
    assert models["NVIDIA-L4"].whole_allocatable == 8


def _job(**kwargs) -> JobSpec:
    return JobSpec(**{**BASE, **kwargs}, suspend=False)


@pytestmark_db
@default_cluster
def test_shared_and_hami_jobs_run_on_their_pools_and_count(cluster):
    client = get_client()
    pool = PoolSpec(tenant_slug="obs", pool="prod", tenant_group="oidc:obs")
    converge(client, [*desired_cluster_objects(), *desired_pool_objects(pool)])
    shared_job = _job(job_id=51, gpus_per_replica=2, gpu_product="NVIDIA-A10", gpu_shared=True)
    hami_job = _job(job_id=52, worker_replicas=0, gpus_per_replica=2, gpu_product="NVIDIA-L4",
                    gpu_memory_mib_per_card=8192)
    for spec in (shared_job, hami_job):
        client.create_if_absent(build_pytorchjob(spec))
    cluster.advance(15)
    relist_all(client)
    from k8s_sync.models import ObservedPod

    pods = list(ObservedPod.objects.filter(namespace="ty-obs-prod"))
    shared = [p for p in pods if p.name.startswith(shared_job.name + "-")]
    hami = [p for p in pods if p.name.startswith(hami_job.name + "-")]
    assert len(shared) == 2 and len(hami) == 1
    assert all(p.node_name.startswith("a10-mps-") for p in shared)
    assert all(p.requests["nvidia.com/gpu.shared"] == "2" for p in shared)
    assert hami[0].node_name.startswith("l4-hami-")
    assert hami[0].requests["nvidia.com/gpumem"] == "8192"
    nodes = {n.name: n for n in capacity_report().nodes}
    assert sum(nodes[p.node_name].shared_allocated for p in shared) >= 4
    share = GPU_MODELS["A10"]["memory"] // 2
    assert sum(n.memory_allocated_mib for n in nodes.values()
               if n.name.startswith("a10-mps-")) == 4 * share
    node = nodes[hami[0].node_name]
    assert (node.hami_vgpus_allocated, node.hami_memory_allocated_mib) == (2, 2 * 8192)
    assert node.whole_allocated == 1  # 16 GiB of the node's 4 x 22.5 GiB cards: 1 card's worth


def test_hami_node_capacity_counts_vgpus_without_a_limit_as_whole_cards():
    from k8s_sync.models import ObservedNode
    from k8s_sync.observe import parse_node

    labels = {"nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.count": "4",
              "nvidia.com/gpu.memory": "23034", "gpu": "on"}
    obj = {"metadata": {"name": "n", "labels": labels},
           "status": {"allocatable": {"nvidia.com/gpu": "40"},
                      "conditions": [{"type": "Ready", "status": "True"}]}}
    node = ObservedNode(name="n", labels=labels, **parse_node(obj))
    cap = node_capacity(node, {"nvidia.com/gpu": Decimal(3), "nvidia.com/gpumem": Decimal(2048),
                               "trainyard.io/hami-vgpus-with-gpumem": Decimal(1)})
    assert (cap.whole_allocatable, cap.vgpus_per_card, cap.hami_vgpus_allocated) == (4, 10, 3)
    assert cap.hami_memory_allocated_mib == 2048 + 2 * 23034
    assert cap.whole_allocated == 3
