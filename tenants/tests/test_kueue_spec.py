"""Kueue mode's input read from tenants' state (tenants.kueue.kueue_spec): grants as
nominal quota, loans moving nominal quota from lender to borrower, the elastic ceiling as
the development borrowing limit, the batch ceiling, suspended tenants and pools not yet
in the cluster."""

from datetime import timedelta
from decimal import Decimal

from django.utils import timezone

from k8s_sync import kueue
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
