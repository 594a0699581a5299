"""Every granted dimension binds, as a researcher meets it, against kubesim over HTTP: a
job within its GPU quota but over the pool's CPU quota waits with a CPU reason (it is
never admitted, so it never sits 'admitted' without pods while its GPUs count as used);
GPU-memory quota binds; a CPU-only job queues for CPU quota; a job above a dimension's
ceiling is refused at submission naming the field."""

from decimal import Decimal

import pytest
from kubernetes import client as k8s

from core.exceptions import ApplicationError
from core.texts import english, text_code
from jobs import services
from jobs.models import TrainingJob
from jobs.tests.conftest import cap_borrowing
from jobs.tests.conftest import cycle as _cycle
from k8s_sync.client import get_client
from k8s_sync.models import ObservedNode
from k8s_sync.observe import relist_all
from tenants import services as tenant_services
from tenants.access import access_for
from tenants.catalog import fmt_amount
from tenants.tasks import reconcile_cluster, reconcile_pool

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def world(cluster, platform_admin, tenant_a, django_capture_on_commit_callbacks):
    cap_borrowing(tenant_a)   # every dimension binds at the grant here
    reconcile_cluster.apply().get()
    relist_all(get_client())
    tenant_services.policy_update(actor=platform_admin,
                                  overcommit_factors={"gpu": 4, "cpu": 4, "memory": 4})
    h800 = ""
    for node in k8s.CoreV1Api(cluster.api_client).list_node().items:
        product = (node.metadata.labels or {}).get("nvidia.com/gpu.product", "")
        if "H800" in product and "MIG" not in product and "SHARED" not in product:
            h800 = product
    assert h800
    card_gib = Decimal(ObservedNode.objects.filter(gpu_model=h800).first().gpu_memory_mib) / 1024

    def grant(**amounts):
        pool = tenant_a.pools.get(kind="dev")
        tenant_services.quota_set(actor=platform_admin, pool=pool, reason="test",
                                  amounts={f"gpu:{h800}": 8, "cpu": 64, "memory": 512,
                                           **amounts})
        reconcile_pool.apply(args=[pool.pk]).get()
        relist_all(get_client())

    return {"h800": h800, "card_gib": card_gib, "grant": grant,
            "capture": django_capture_on_commit_callbacks}


def _submit(world, user, tenant, name, *, gpus=2, cpu=8, memory=32, model=None):
    with world["capture"](execute=True):
        return services.job_submit(access=access_for(user, tenant), actor=user, pool="dev", data={
            "name": name, "image": "registry.example.org/ml/trainer:1", "tier": "development",
            "workers": 1, "gpus_per_worker": gpus,
            "gpu_model": (world["h800"] if model is None else model) if gpus else "",
            "cpu_per_worker": cpu, "memory_gib_per_worker": memory, "max_run_seconds": 86400,
            "annotations": {"kubesim.trainyard.io/run-seconds": "3600"}})


def _job(job):
    return TrainingJob.objects.get(pk=job.pk)


def _ever_admitted(job):
    return "admitted" in _job(job).transitions.values_list("to_state", flat=True)


def test_within_gpu_quota_but_over_cpu_quota_waits_with_a_cpu_reason(world, cluster, bob,
                                                                      tenant_a):
    world["grant"](cpu=8)   # 8 cores of requests: one job of 16 cores (requests 8)
    first = _submit(world, bob, tenant_a, "first", cpu=16)
    second = _submit(world, bob, tenant_a, "second", cpu=16)   # within the GPU quota (4 of 8)
    for _ in range(4):
        _cycle(world, cluster, 15)
    assert _job(first).state == "running"
    waiting = _job(second)
    assert waiting.state == "queued" and not _ever_admitted(second)
    assert text_code(waiting.wait_reason) == "jobs.wait.borrow_cap_dim"
    assert english(waiting.wait_reason).startswith(
        "CPU: needs 8 CPU cores, 8 CPU cores in use, above the borrowing cap of 8 CPU cores")
    # the ResourceQuota counts the same requests: the cluster agrees the pool is full
    quota = k8s.CoreV1Api(cluster.api_client).list_namespaced_resource_quota("ty-acme-dev")
    used = {k: v for q in quota.items for k, v in (q.status.used or {}).items()}
    assert used["requests.cpu"] == "8"
    with world["capture"](execute=True):
        services.job_cancel(access=access_for(bob, tenant_a), actor=bob, job=first)
    for _ in range(40):   # the cancelled pods' requests count until they are gone
        _cycle(world, cluster, 15)
        if _job(second).state == "running":
            break
    assert _job(second).state == "running"


def test_gpu_memory_quota_binds(world, cluster, bob, tenant_a):
    three = int(3 * world["card_gib"])
    world["grant"](**{"gpu-memory": three})   # three cards' memory
    first = _submit(world, bob, tenant_a, "first", gpus=2)
    second = _submit(world, bob, tenant_a, "second", gpus=2)   # 4 cards: within gpu quota
    for _ in range(3):
        _cycle(world, cluster, 15)
    assert _job(first).state == "running"
    waiting = _job(second)
    assert waiting.state == "queued" and not _ever_admitted(second)
    two = fmt_amount((2 * world["card_gib"]).quantize(Decimal("0.001")))
    assert english(waiting.wait_reason).startswith(
        f"GPU memory: needs {two} GiB of GPU memory, {two} GiB of GPU memory in use, above "
        f"the borrowing cap of {three} GiB of GPU memory")


def test_a_cpu_only_job_waits_in_the_queue_when_cpu_quota_is_used_up(world, cluster, bob,
                                                                      tenant_a):
    world["grant"](cpu=4)
    first = _submit(world, bob, tenant_a, "prep", gpus=0, cpu=8)   # requests 4 cores
    second = _submit(world, bob, tenant_a, "prep-2", gpus=0, cpu=8)
    for _ in range(3):
        _cycle(world, cluster, 15)
    assert _job(first).state == "running"
    waiting = _job(second)
    assert waiting.state == "queued" and not _ever_admitted(second)
    assert text_code(waiting.wait_reason) == "jobs.wait.borrow_cap_dim"


def test_a_job_above_a_dimensions_ceiling_is_refused_naming_the_field(world, cluster, bob,
                                                                       tenant_a):
    world["grant"](cpu=8, **{"gpu-memory": int(world["card_gib"]) + 1})
    with pytest.raises(ApplicationError) as cpu:
        _submit(world, bob, tenant_a, "too-many-cores", gpus=1, cpu=32)
    assert cpu.value.field == "cpu_per_worker"
    assert "16 cores of CPU" in str(cpu.value) and "at most 8" in str(cpu.value)
    with pytest.raises(ApplicationError) as mem:
        _submit(world, bob, tenant_a, "too-much-gpu-memory", gpus=2)
    assert mem.value.field == "gpus_per_worker" and "GPU memory" in str(mem.value)
    assert not TrainingJob.objects.exists()
