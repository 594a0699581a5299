"""Fixtures of the jobs tests: an observed GPU inventory and a quota for tenant A."""

import pytest
from django.utils import timezone

from k8s_sync.models import ObservedNode, ObservedQuota
from k8s_sync.naming import RESOURCE_QUOTA_NAME
from tenants import services as tenant_services

H800 = "NVIDIA-H800"
A100 = "NVIDIA-A100-SXM4-80GB"


@pytest.fixture
def inventory(db):
    """Two H800 nodes of 8 and one A100 node with MIG slices, as the observer records."""
    now = timezone.now()
    for i in range(2):
        ObservedNode.objects.create(
            name=f"h800-{i}", uid=f"h{i}", resource_version="1", observed_at=now,
            gpu_product=H800, gpu_model=H800, gpu_count=8, gpu_memory_mib=81920, ready=True,
            switch="switch-b1",
            allocatable={"cpu": "192", "memory": "2Ti", "nvidia.com/gpu": "8", "pods": "110"})
    ObservedNode.objects.create(
        name="a100-mig-0", uid="m0", resource_version="1", observed_at=now, gpu_product=A100,
        gpu_model=A100, gpu_count=8, gpu_memory_mib=81920, ready=True, mig_strategy="mixed",
        switch="switch-a3",
        allocatable={"cpu": "128", "memory": "1Ti", "nvidia.com/gpu": "4",
                     "nvidia.com/mig-1g.10gb": "12", "nvidia.com/mig-3g.40gb": "4"})


@pytest.fixture
def quota(platform_admin, tenant_a, inventory):
    """tenant_a's pools with quota, set up in the cluster: the watcher has recorded each
    pool's ResourceQuota (admission waits for a pool the cluster does not show)."""
    for kind in ("prod", "dev"):
        pool = tenant_a.pools.get(kind=kind)
        tenant_services.quota_set(actor=platform_admin, pool=pool,
                                  reason="test", amounts={f"gpu:{H800}": 8, "cpu": 256,
                                                          "memory": 2048, "mig:1g.10gb": 4})
        ObservedQuota.objects.create(namespace=pool.namespace, name=RESOURCE_QUOTA_NAME,
                                     uid=f"q-{kind}", resource_version="1",
                                     observed_at=timezone.now())
    return tenant_a


def submission(**overrides):
    data = {"name": "llama-ft", "image": "registry.example.org/team/trainer:1.4",
            "tier": "development", "workers": 1, "gpus_per_worker": 2, "gpu_model": H800,
            "cpu_per_worker": 8, "memory_gib_per_worker": 64, "max_run_seconds": 3600,
            "command": ["python", "train.py"], "args": [], "env": {"EPOCHS": "3"}}
    data.update(overrides)
    return data


def cycle(world, cluster, seconds=0.0):
    """One admission pass as a worker runs it, after ``seconds`` of kubesim time and a
    relist of what the cluster reports: every observed kind, the PyTorchJobs the loop
    reads included, as the watcher would have recorded them (``world["capture"]`` runs
    on-commit tasks)."""
    from jobs.tasks import admission_cycle
    from k8s_sync.client import get_client
    from k8s_sync.observe import relist_all

    if seconds:
        cluster.advance(seconds, step=5)
    relist_all(get_client())
    with world["capture"](execute=True):
        return admission_cycle.apply().get()


def states(*jobs):
    """The jobs' states as stored now."""
    from jobs.models import TrainingJob

    return [TrainingJob.objects.get(pk=j.pk).state for j in jobs]


def cap_borrowing(*tenants, factor=1) -> None:
    """A platform admin caps these tenants' borrowing (development and batch jobs may hold
    ``factor`` x the grant; 1: the grant itself): for tests whose point is that a quota
    binds exactly, as it did before work-conserving admission (issue 27)."""
    for tenant in tenants:
        tenant.borrowing_cap = factor
        tenant.save(update_fields=["borrowing_cap", "updated_at"])
