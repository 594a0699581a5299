"""Allocation from observed pods, the daily usage history, and dynamic proposals."""

import datetime as dt
from decimal import Decimal

import pytest
from django.utils import timezone

from k8s_sync.models import ObservedNode, ObservedPod, ObservedPVC
from tenants import services
from tenants.models import QuotaRequest, UsageDaily
from tenants.tasks import propose_dynamic_quotas, sample_usage
from tenants.usage import allocation_by_namespace


@pytest.fixture
def observed(db):
    now = timezone.now()
    ObservedNode.objects.create(name="h1", uid="n1", resource_version="1", observed_at=now,
                                gpu_model="NVIDIA-H800", gpu_count=8, gpu_memory_mib=81920,
                                ready=True)
    ObservedNode.objects.create(name="m1", uid="n2", resource_version="1", observed_at=now,
                                gpu_model="NVIDIA-A100-SXM4-80GB", gpu_count=8,
                                gpu_memory_mib=81920, mig_strategy="mixed", ready=True)

    def pod(name, node, phase="Running", ns="ty-acme-prod", **requests):
        ObservedPod.objects.create(namespace=ns, name=name, uid=name, resource_version="1",
                                   observed_at=now, node_name=node, phase=phase,
                                   requests=requests)
    pod("train-0", "h1", cpu="8", memory="64Gi", **{"nvidia.com/gpu": "4"})
    pod("train-1", "h1", cpu="500m", memory="512Mi", **{"nvidia.com/gpu": "2"})
    pod("done", "h1", phase="Succeeded", **{"nvidia.com/gpu": "8"})
    pod("pending", "", phase="Pending", **{"nvidia.com/gpu": "8"})
    pod("slice", "m1", **{"nvidia.com/mig-1g.10gb": "3"})
    pod("other", "h1", ns="ty-globex-prod", **{"nvidia.com/gpu": "1"})
    ObservedPVC.objects.create(namespace="ty-acme-prod", name="data", uid="p",
                               resource_version="1", observed_at=now, storage_class="fast-ssd",
                               requested_bytes=100 * 1024**3)


def test_allocation_counts_bound_unfinished_pods_by_gpu_model(observed):
    usage = allocation_by_namespace(["ty-acme-prod"])["ty-acme-prod"]
    assert usage == {
        "cpu": Decimal("8.5"), "memory": Decimal("64.5"), "gpu:NVIDIA-H800": Decimal(6),
        "gpu-memory": Decimal(6 * 80 + 3 * 10), "mig:1g.10gb": Decimal(3),
        "storage:fast-ssd": Decimal(100), "pvcs": Decimal(1)}


def test_sampling_keeps_the_daily_peak_and_mean(observed, tenant_a, tenant_b):
    assert sample_usage.apply().get() > 0
    ObservedPod.objects.filter(name="train-1").delete()
    sample_usage.apply().get()
    row = UsageDaily.objects.get(pool__tenant=tenant_a, pool__kind="prod",
                                 resource="gpu:NVIDIA-H800")
    assert (row.peak, row.total, row.samples) == (Decimal(6), Decimal(10), 2)
    assert UsageDaily.objects.get(pool__tenant=tenant_b, pool__kind="prod",
                                  resource="gpu:NVIDIA-H800").peak == 1


def test_dynamic_tenants_get_proposals_an_admin_must_approve(platform_admin, tenant_a):
    tenant_a.quota_mode = "dynamic"
    tenant_a.save()
    pool = tenant_a.pools.get(kind="prod")
    services.quota_set(actor=platform_admin, pool=pool, amounts={"gpu:NVIDIA-H800": 16,
                                                                 "cpu": 64}, reason="start")
    today = timezone.now().date()
    for i in range(30):
        UsageDaily.objects.create(pool=pool, resource="gpu:NVIDIA-H800",
                                  day=today - dt.timedelta(days=i), peak=4 + i % 3)
        UsageDaily.objects.create(pool=pool, resource="cpu", day=today - dt.timedelta(days=i),
                                  peak=Decimal("53.334"))
    assert propose_dynamic_quotas.apply().get() == 1
    proposal = QuotaRequest.objects.get(pool=pool, source="dynamic", status="pending")
    items = {i.resource: (i.current_amount, i.requested_amount) for i in proposal.items.all()}
    assert items == {"gpu:NVIDIA-H800": (16, 8)}  # ceil(p95 6 x 1.2); cpu 64 stays 64
    assert "p95 of 30 daily peaks = 6" in proposal.formula
    assert propose_dynamic_quotas.apply().get() == 0  # the pending one stays a week
    QuotaRequest.objects.filter(pk=proposal.pk).update(
        created_at=timezone.now() - dt.timedelta(days=8))
    assert propose_dynamic_quotas.apply().get() == 1  # then a newer one replaces it
    assert QuotaRequest.objects.filter(pool=pool, status="pending").count() == 1
    assert pool.grants.get(resource="gpu:NVIDIA-H800", superseded_at__isnull=True).amount == 16


def test_gauges_count_gpu_memory_as_admission_does_for_shares_and_hami(db):
    """The gauges (observed pods) and admission (tenants.demand) derive a job's GPU memory
    from one definition: a share's labelled slice, a HAMi pod's per-card limit."""
    from k8s_sync.selectors import capacity_report
    from tenants.demand import card_facts, job_demand

    now = timezone.now()
    ObservedNode.objects.create(
        name="ts-0", uid="t0", resource_version="1", observed_at=now,
        gpu_model="NVIDIA-L40S", gpu_count=4, gpu_memory_mib=46068, ready=True,
        sharing_strategy="time-slicing", gpu_replicas=4,
        labels={"trainyard.io/gpu.shared-memory": "10240"},
        allocatable={"nvidia.com/gpu.shared": "16"})
    ObservedNode.objects.create(
        name="hami-0", uid="h0", resource_version="1", observed_at=now,
        gpu_model="NVIDIA-L4", gpu_count=4, gpu_memory_mib=23034, ready=True,
        labels={"gpu": "on"}, allocatable={"nvidia.com/gpu": "40"})
    for name, node, requests in (
            ("share-0", "ts-0", {"nvidia.com/gpu.shared": "3"}),
            ("hami-0", "hami-0", {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "8192"})):
        ObservedPod.objects.create(namespace="ty-acme-dev", name=name, uid=name,
                                   resource_version="1", observed_at=now, node_name=node,
                                   phase="Running", requests=requests)
    facts = card_facts(capacity_report().nodes)
    admitted = (job_demand(workers=1, gpus_per_worker=3, gpu_model="NVIDIA-L40S",
                           gpu_shared=True, facts=facts)["gpu-memory"]
                + job_demand(workers=1, gpus_per_worker=2, gpu_model="NVIDIA-L4",
                             gpu_memory_gib_per_card=8, facts=facts)["gpu-memory"])
    gauged = allocation_by_namespace(["ty-acme-dev"])["ty-acme-dev"]["gpu-memory"]
    assert gauged == admitted == Decimal(3 * 10 + 2 * 8)
