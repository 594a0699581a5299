"""Issue 31: guarantees below a grant in Kueue mode, read from tenants' state
(``tenants.kueue.kueue_spec``): an overcommitted-mode tenant's queues have its guaranteed
part as nominal quota (the number its quota page shows) and reach the rest of the grant
by borrowing; the nominal quotas of the cohort add up to the cluster, no more; no queue
gets a lendingLimit."""

from decimal import Decimal

from django.utils import timezone

from k8s_sync import kueue
from k8s_sync.models import ObservedNode
from tenants import services
from tenants.choices import QuotaMode
from tenants.kueue import kueue_spec
from tenants.models import Pool

H800 = "gpu:NVIDIA-H800"


def _gpu(cq_obj):
    return next(r for g in cq_obj["spec"]["resourceGroups"] for f in g["flavors"]
                for r in f["resources"] if r["name"] == "nvidia.com/gpu")


def test_an_overcommitted_tenants_queues_hold_its_guarantee_and_borrow_the_rest(
        platform_admin, tenant_a, tenant_b):
    ObservedNode.objects.create(
        name="h800-0", uid="u0", resource_version="1", observed_at=timezone.now(),
        gpu_product="NVIDIA-H800", gpu_model="NVIDIA-H800", gpu_count=8,
        gpu_memory_mib=81559, ready=True,
        allocatable={"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"})
    services.policy_update(actor=platform_admin,
                           overcommit_factors={"gpu": 1.5, "cpu": 4, "memory": 4})
    tenant_b.quota_mode = QuotaMode.OVERCOMMITTED
    tenant_b.save()
    # 8 cards: acme (static) 4; globex (overcommitted) 6 + 2 = 8, half of it guaranteed
    for tenant, kind, cards, cpu in ((tenant_a, "dev", 4, 16), (tenant_a, "prod", 0, 0),
                                     (tenant_b, "dev", 6, 32), (tenant_b, "prod", 2, 16)):
        services.quota_set(actor=platform_admin, pool=tenant.pools.get(kind=kind),
                           reason="t", amounts={H800: cards, "cpu": cpu})
    Pool.objects.update(synced_version=1)
    queues = {q.name: q for q in kueue_spec().queues}
    assert queues["ty-globex-dev"].nominal == {H800: 3, "cpu": 32}   # CPU: all backed
    assert queues["ty-globex-dev"].borrowing is None                 # no cap: any idle
    assert queues["ty-globex-prod"].nominal == {H800: 1, "cpu": 16}
    assert queues["ty-globex-prod"].borrowing == {H800: 1, "cpu": 0}  # up to its grant
    assert queues["ty-acme-dev"].nominal == {H800: 4, "cpu": 16}     # static: its grant
    built = {o["metadata"]["name"]: o for o in kueue.desired_kueue_objects(kueue_spec())
             if o["kind"] in ("ClusterQueue", "Cohort")}
    assert _gpu(built["ty-globex-prod"]) == {"name": "nvidia.com/gpu", "nominalQuota": "1",
                                             "borrowingLimit": "1"}
    assert _gpu(built["ty-globex-dev"]) == {"name": "nvidia.com/gpu", "nominalQuota": "3"}
    # the nominal quotas add up to the 8 cards: the cohort owns none, Kueue admits no card
    # that does not exist; and nothing is kept from being lent (no lendingLimit)
    assert sum(int(_gpu(o)["nominalQuota"]) for name, o in built.items()
               if name != "trainyard") == 8
    assert _gpu(built["trainyard"])["nominalQuota"] == "0"
    assert "lendingLimit" not in repr(built)
    # capped at 1.5 x its grant: development borrows up to that ceiling from its guarantee
    tenant_b.borrowing_cap = Decimal("1.5")
    tenant_b.save()
    queues = {q.name: q for q in kueue_spec().queues}
    assert queues["ty-globex-dev"].borrowing[H800] == 9 - 3
    assert queues["ty-globex-dev-batch"].borrowing[H800] == 9
