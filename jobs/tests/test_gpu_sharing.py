"""Shared GPUs (time-slicing/MPS) and HAMi GPU-memory limits, from submission to pod.

The cluster is kubesim's default profile (a time-slicing L40S pool, an MPS A10 pool and a
HAMi L4 pool beside the whole-GPU ones), observed over HTTP as the watcher records it."""

from decimal import Decimal

import pytest
from kubernetes import client as k8s

from core.exceptions import ApplicationError
from jobs import services
from jobs.models import TrainingJob
from jobs.selectors import gpu_kind_label, inventory, job_spec
from jobs.tasks import admission_cycle
from jobs.validation import Inventory, SubmissionError, validate_submission
from k8s_sync.client import get_client
from k8s_sync.crd_validation import validate_pytorchjob
from k8s_sync.manifests import build_pytorchjob
from k8s_sync.observe import relist_all
from tenants import services as tenant_services
from tenants.access import access_for
from tenants.tasks import reconcile_cluster, reconcile_pool

L40S, A10, L4, H800 = "NVIDIA-L40S", "NVIDIA-A10", "NVIDIA-L4", "NVIDIA-H800"
INV = Inventory(gpus_per_node={H800: 8, L4: 4}, max_cpu=Decimal(64),
                max_memory_gib=Decimal(512), shared_per_node={L40S: 16},
                shared_memory_mib={L40S: 11517}, shared_strategies={L40S: ("time-slicing",)},
                hami_memory_mib={L4: 23034})


def data(**overrides):
    base = {"name": "share", "image": "registry.example.org/ml/trainer:1", "tier": "development",
            "workers": 1, "gpus_per_worker": 2, "gpu_model": L40S, "gpu_shared": True,
            "cpu_per_worker": 4, "memory_gib_per_worker": 16, "max_run_seconds": 3600}
    base.update(overrides)
    return base


def test_a_shared_submission_is_cleaned():
    clean = validate_submission(data(), pool="dev", inventory=INV)
    assert clean["gpu_shared"] is True and clean["gpu_model"] == L40S
    assert clean["gpu_memory_gib_per_card"] is None
    hami = validate_submission(data(gpu_model=L4, gpu_shared="false",
                                    gpu_memory_gib_per_card="8.5"), pool="dev", inventory=INV)
    assert hami["gpu_shared"] is False and hami["gpu_memory_gib_per_card"] == Decimal("8.5")


@pytest.mark.parametrize(("overrides", "field", "words"), [
    ({"gpu_model": H800}, "gpu_shared", "no shared NVIDIA-H800 GPUs"),
    ({"gpus_per_worker": 17}, "gpus_per_worker", "the largest has 16"),
    ({"mig_profile": "1g.10gb", "gpu_model": ""}, "gpu_shared", "no MIG profile"),
    ({"gpu_shared": "perhaps"}, "gpu_shared", "not yes or no"),
    ({"gpu_shared": False, "gpu_model": L4, "gpu_memory_gib_per_card": "-1"},
     "gpu_memory_gib_per_card", "positive"),
    ({"gpu_shared": False, "gpu_model": L4, "gpu_memory_gib_per_card": "lots"},
     "gpu_memory_gib_per_card", "not a number"),
    ({"gpu_shared": False, "gpu_model": L4, "gpu_memory_gib_per_card": 40},
     "gpu_memory_gib_per_card", "at most that"),
    ({"gpu_shared": False, "gpu_model": H800, "gpu_memory_gib_per_card": 8},
     "gpu_memory_gib_per_card", "HAMi serves no NVIDIA-H800"),
    ({"gpu_memory_gib_per_card": 8}, "gpu_memory_gib_per_card", "not to shared GPUs"),
])
def test_bad_sharing_input_names_the_field(overrides, field, words):
    with pytest.raises(SubmissionError) as exc:
        validate_submission(data(**overrides), pool="dev", inventory=INV)
    assert words in exc.value.errors[field]


def test_a_memory_limit_on_a_cluster_without_hami():
    with pytest.raises(SubmissionError) as exc:
        validate_submission(data(gpu_shared=False, gpu_model=H800, gpu_memory_gib_per_card=8),
                            pool="dev", inventory=Inventory(gpus_per_node={H800: 8},
                                                            max_cpu=Decimal(64),
                                                            max_memory_gib=Decimal(512)))
    assert "no HAMi nodes" in exc.value.errors["gpu_memory_gib_per_card"]


default_cluster = pytest.mark.kubesim(profile="default")


@pytest.fixture
def world(cluster, platform_admin, tenant_a, django_capture_on_commit_callbacks):
    reconcile_cluster.apply().get()
    relist_all(get_client())
    tenant_services.policy_update(actor=platform_admin,
                                  overcommit_factors={"gpu": 4, "cpu": 4, "memory": 4})
    for pool in tenant_a.pools.all():
        tenant_services.quota_set(actor=platform_admin, pool=pool, reason="test", amounts={
            "gpu-shared": 8, f"gpu:{L4}": 4, "gpu-memory": 200, "cpu": 128, "memory": 1024})
        reconcile_pool.apply(args=[pool.pk]).get()
    relist_all(get_client(), kinds=["quotas"])  # the pools are in the cluster, as observed
    return django_capture_on_commit_callbacks


def _submit(world, user, tenant, **overrides):
    with world(execute=True):
        return services.job_submit(access=access_for(user, tenant), actor=user, pool="dev",
                                   data=data(**overrides))


def _cycle(world, cluster, seconds=10.0):
    relist_all(get_client())
    with world(execute=True):
        admission_cycle.apply().get()
    cluster.advance(seconds, step=5)
    relist_all(get_client())


def _pods(cluster, job):
    return k8s.CoreV1Api(cluster.api_client).list_namespaced_pod(
        job.pool.namespace, label_selector=f"trainyard.io/job={job.pk}").items


@pytest.mark.django_db
@default_cluster
def test_the_inventory_sees_shared_and_hami_pools(cluster):
    relist_all(get_client())
    inv = inventory()
    assert inv.shared_per_node == {L40S: 16, A10: 8}
    assert inv.shared_strategies == {L40S: ("time-slicing",), A10: ("mps",)}
    assert inv.shared_memory_mib[A10] == 23028 // 2
    assert inv.hami_memory_mib == {L4: 23034}
    assert inv.gpus_per_node[L4] == 4  # cards, not HAMi's 40 vGPUs
    assert L40S not in inv.gpus_per_node  # its nodes advertise no whole nvidia.com/gpu


@pytest.mark.django_db
@default_cluster
@pytest.mark.timeout(120)
def test_a_shared_job_runs_on_a_shared_node(world, cluster, bob, tenant_a):
    job = _submit(world, bob, tenant_a, gpu_model=A10, gpus_per_worker=2)
    assert job.gpu_shared and job.gpu_kind == "shared"
    manifest = build_pytorchjob(job_spec(job))
    validate_pytorchjob(manifest)
    label = gpu_kind_label(job)
    assert "MPS" in label and "11 GiB" in label
    _cycle(world, cluster)
    job.refresh_from_db()
    pods = _pods(cluster, job)
    nodes = {n.metadata.name: n for n in k8s.CoreV1Api(cluster.api_client).list_node().items}
    assert job.state in ("admitted", "running"), (job.state, job.wait_reason)
    assert len(pods) == 1
    pod = pods[0]
    assert pod.spec.containers[0].resources.limits["nvidia.com/gpu.shared"] == "2"
    assert pod.spec.node_name.startswith("a10-mps-")
    assert nodes[pod.spec.node_name].metadata.labels["nvidia.com/gpu.product"] == (
        "NVIDIA-A10-SHARED")


@pytest.mark.django_db
@default_cluster
@pytest.mark.timeout(120)
def test_a_hami_job_carries_its_memory_limit(world, cluster, bob, tenant_a):
    job = _submit(world, bob, tenant_a, name="hami", gpu_model=L4, gpu_shared=False,
                  gpu_memory_gib_per_card="8", gpus_per_worker=2)
    assert job.gpu_kind == "hami" and job.gpu_memory_gib_per_card == Decimal(8)
    _cycle(world, cluster)
    job.refresh_from_db()
    assert job.state in ("admitted", "running"), (job.state, job.wait_reason)
    pod = _pods(cluster, job)[0]
    limits = pod.spec.containers[0].resources.limits
    assert (limits["nvidia.com/gpu"], limits["nvidia.com/gpumem"]) == ("2", "8192")
    assert pod.spec.node_name.startswith("l4-hami-")


@pytest.mark.django_db
@default_cluster
@pytest.mark.parametrize(("overrides", "field"), [
    ({"gpu_model": H800}, "gpu_shared"),
    ({"gpus_per_worker": 9, "gpu_model": A10}, "gpus_per_worker"),
    ({"gpu_shared": False, "gpu_model": L4, "gpu_memory_gib_per_card": 30},
     "gpu_memory_gib_per_card"),
])
def test_bad_sharing_input_creates_nothing(world, bob, tenant_a, overrides, field):
    with pytest.raises(ApplicationError) as err:
        _submit(world, bob, tenant_a, **overrides)
    assert err.value.field == field
    assert not TrainingJob.objects.exists()


@pytest.mark.django_db
def test_a_shared_gpu_on_a_cluster_without_shared_nodes(bob, quota):
    # the jobs tests' inventory: H800 and A100 nodes, nothing shared
    with pytest.raises(ApplicationError) as err:
        services.job_submit(access=access_for(bob, quota), actor=bob, pool="dev",
                            data=data(gpu_model=H800))
    assert err.value.field == "gpu_shared" and "no shared" in err.value.message
    assert not TrainingJob.objects.exists()
