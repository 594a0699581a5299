"""Kueue mode's input read from tenants' state (tenants.kueue.kueue_spec): grants as
nominal quota, loans moving nominal quota from lender to borrower, no borrowing limit for
development and batch unless a platform admin set a borrowing cap, production never
borrowing, the observed capacity (what nobody was granted is the cohort's own quota),
suspended tenants and pools not yet in the cluster."""

from datetime import timedelta
from decimal import Decimal

from django.utils import timezone

from k8s_sync import kueue
from k8s_sync.models import ObservedNode
from tenants import services
from tenants.choices import LoanStatus, QuotaMode, TenantStatus
from tenants.kueue import kueue_spec
from tenants.models import Pool, QuotaLoan

H800 = "gpu:NVIDIA-H800"


def _grant(admin, tenant, amounts):
    for pool in tenant.pools.all():
        services.quota_set(actor=admin, pool=pool, reason="test", amounts=amounts)
    Pool.objects.filter(tenant=tenant).update(synced_version=1)


def _queues():
    return {q.name: q for q in kueue_spec().queues}


def _gpu(cq_obj):
    for group in cq_obj["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            for res in flavor["resources"]:
                if res["name"] == "nvidia.com/gpu":
                    return res
    return None


def test_grants_loans_and_ceilings_become_each_pools_queues(platform_admin, tenant_a, tenant_b):
    _grant(platform_admin, tenant_a, {H800: 4, "cpu": 64, "storage:standard": 100})
    _grant(platform_admin, tenant_b, {H800: 2, "cpu": 64})
    queues = _queues()
    assert set(queues) == {"ty-acme-prod", "ty-acme-prod-batch", "ty-acme-dev",
                           "ty-acme-dev-batch", "ty-globex-prod", "ty-globex-prod-batch",
                           "ty-globex-dev", "ty-globex-dev-batch"}
    assert queues["ty-acme-dev"].nominal == {H800: Decimal(4), "cpu": Decimal(64)}  # no storage
    # no borrowing cap: development and batch borrow any idle capacity (no borrowingLimit)
    assert queues["ty-acme-dev"].borrowing is None
    assert queues["ty-acme-dev-batch"].nominal == {}
    assert queues["ty-acme-dev-batch"].borrowing is None
    tenant_a.borrowing_cap = Decimal(1)   # capped at the grant
    tenant_a.save()
    queues = _queues()
    assert queues["ty-acme-dev"].borrowing == {H800: 0, "cpu": 0}
    assert queues["ty-acme-dev-batch"].borrowing[H800] == 4
    tenant_a.borrowing_cap = None
    tenant_a.save()

    # a loan moves nominal quota from the lender's queue to the borrower's
    QuotaLoan.objects.create(lender=tenant_a.pools.get(kind="dev"),
                             borrower=tenant_b.pools.get(kind="dev"), resource=H800,
                             amount=Decimal(3), ends_at=timezone.now() + timedelta(days=1),
                             status=LoanStatus.ACTIVE)
    queues = _queues()
    assert queues["ty-acme-dev"].nominal[H800] == 1
    assert queues["ty-globex-dev"].nominal[H800] == 5
    built = {o["metadata"]["name"]: o for o in kueue.desired_kueue_objects(kueue_spec())
             if o["kind"] == "ClusterQueue"}
    assert _gpu(built["ty-globex-dev"])["nominalQuota"] == "5"
    assert _gpu(built["ty-acme-dev"])["nominalQuota"] == "1"
    # a loan is a guaranteed transfer, not cohort lending: no queue gets a lendingLimit
    # (README, "Loans in Kueue mode"), and the cohort's nominal total is unchanged
    assert not any("lendingLimit" in r for cq in built.values()
                   for g in cq["spec"]["resourceGroups"] for f in g["flavors"]
                   for r in f["resources"])
    assert sum(int(_gpu(cq)["nominalQuota"]) for cq in built.values()) == 2 * (4 + 2)


def test_an_elastic_tenant_borrows_to_its_ceiling_in_dev_but_production_never(
        platform_admin, tenant_a):
    tenant_a.quota_mode = QuotaMode.OVERCOMMITTED
    tenant_a.borrowing_cap = Decimal("1.5")
    tenant_a.save()
    _grant(platform_admin, tenant_a, {H800: 4})
    queues = _queues()
    assert queues["ty-acme-dev"].borrowing[H800] == 2
    built = {o["metadata"]["name"]: o for o in kueue.desired_kueue_objects(kueue_spec())
             if o["kind"] == "ClusterQueue"}
    assert _gpu(built["ty-acme-dev"])["borrowingLimit"] == "2"
    assert _gpu(built["ty-acme-prod"])["borrowingLimit"] == "0"


def test_a_suspended_tenant_has_no_quota_and_a_pool_not_in_the_cluster_no_queue(
        platform_admin, tenant_a, tenant_b):
    _grant(platform_admin, tenant_a, {H800: 4})
    _grant(platform_admin, tenant_b, {H800: 4})
    Pool.objects.filter(tenant=tenant_b, kind="prod").update(synced_version=0)
    tenant_a.status = TenantStatus.SUSPENDED
    tenant_a.save()
    queues = _queues()
    assert queues["ty-acme-dev"].nominal == {} and queues["ty-acme-dev-batch"].borrowing == {}
    assert "ty-globex-prod" not in queues and queues["ty-globex-dev"].nominal[H800] == 4


def _nodes(count=2):
    """``count`` observed H800 nodes of 8 cards, 64 cores and 512 GiB each."""
    for i in range(count):
        ObservedNode.objects.create(
            name=f"h800-{i}", uid=f"u{i}", resource_version="1", observed_at=timezone.now(),
            gpu_product="NVIDIA-H800", gpu_model="NVIDIA-H800", gpu_count=8,
            gpu_memory_mib=81559, ready=True,
            allocatable={"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"})


def _built():
    return kueue.desired_kueue_objects(kueue_spec())


def test_the_capacity_nobody_was_granted_is_the_cohorts_own_quota(platform_admin, tenant_a):
    """Kueue lends only the nominal quota its cohort adds up to; the engine lends any idle
    card: 16 cards observed, 8 granted (4 + 4), so the cohort holds 8 of its own."""
    assert kueue_spec().capacity == {}   # no node observed yet: the cohort has nothing
    _nodes()
    _grant(platform_admin, tenant_a, {H800: 4, "cpu": 16})
    spec = kueue_spec()
    assert spec.capacity == {H800: 16, "cpu": 128, "memory": 1024}  # no gpu-memory
    cohort = next(o for o in _built() if o["kind"] == "Cohort")
    assert _gpu(cohort) == {"name": "nvidia.com/gpu", "nominalQuota": "8"}
    assert kueue.cohort_quota(spec) == {H800: 8, "cpu": 96, "memory": 1024}
    # a grant raised takes its cards from the cohort's own quota
    services.quota_set(actor=platform_admin, pool=tenant_a.pools.get(kind="prod"),
                       reason="more", amounts={H800: 10, "cpu": 16})
    assert kueue.cohort_quota(kueue_spec())[H800] == 2


def test_a_queue_covers_a_model_it_was_not_granted_and_borrows_it_without_a_cap(
        platform_admin, tenant_a):
    _nodes()
    ObservedNode.objects.create(
        name="a100-0", uid="a", resource_version="1", observed_at=timezone.now(),
        gpu_product="NVIDIA-A100-SXM4-80GB", gpu_model="NVIDIA-A100-SXM4-80GB", gpu_count=8,
        gpu_memory_mib=81920, ready=True,
        allocatable={"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"})
    _grant(platform_admin, tenant_a, {H800: 4})
    queues = {o["metadata"]["name"]: o for o in _built() if o["kind"] == "ClusterQueue"}
    a100 = kueue.gpu_flavor_name("NVIDIA-A100-SXM4-80GB")

    def quota(cq, flavor):
        return next(r for g in cq["spec"]["resourceGroups"] for f in g["flavors"]
                    if f["name"] == flavor for r in f["resources"])

    assert quota(queues["ty-acme-dev"], a100) == {"name": "nvidia.com/gpu",
                                                  "nominalQuota": "0"}   # no limit
    assert quota(queues["ty-acme-dev-batch"], a100) == {"name": "nvidia.com/gpu",
                                                        "nominalQuota": "0"}
    assert quota(queues["ty-acme-prod"], a100)["borrowingLimit"] == "0"
    tenant_a.borrowing_cap = Decimal(2)   # capped: x2 of what it has, 0 x 2 of the rest
    tenant_a.save()
    queues = {o["metadata"]["name"]: o for o in _built() if o["kind"] == "ClusterQueue"}
    assert quota(queues["ty-acme-dev"], a100)["borrowingLimit"] == "0"
    h800 = kueue.gpu_flavor_name("NVIDIA-H800")
    assert quota(queues["ty-acme-dev"], h800)["borrowingLimit"] == "4"
    assert quota(queues["ty-acme-dev-batch"], h800)["borrowingLimit"] == "8"
