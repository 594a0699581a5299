"""RDMA NICs, the dimension added through the registry (``core.resources``), against
kubesim over HTTP: the H800 nodes of the ``small`` profile advertise
``rdma/hca_shared_devices_a`` (Mellanox/k8s-rdma-shared-dev-plugin's default resource);
a pool granted ``rdma`` gets it in its ResourceQuota, the catalog offers it, a job asks
``rdma_per_worker`` and its pods request it, the engine holds a job above the grant with
an RDMA reason, the gauges count what the pods request, and a job above the pool's
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
from k8s_sync.observe import relist_all
from tenants import services as tenant_services
from tenants.access import access_for
from tenants.capacity import capacity_by_resource, offered_resources
from tenants.catalog import Resource
from tenants.selectors import quota_overview
from tenants.tasks import reconcile_cluster, reconcile_pool
from tenants.usage import allocation_by_namespace

pytestmark = pytest.mark.timeout(120)

RDMA = "rdma/hca_shared_devices_a"


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

    def grant(**amounts):
        pool = tenant_a.pools.get(kind="dev")
        tenant_services.quota_set(actor=platform_admin, pool=pool, reason="test",
                                  amounts={f"gpu:{h800}": 8, "cpu": 64, "memory": 512,
                                           **amounts})
        reconcile_pool.apply(args=[pool.pk]).get()
        relist_all(get_client())

    return {"h800": h800, "grant": grant, "capture": django_capture_on_commit_callbacks}


def _submit(world, user, tenant, name, *, workers=1, rdma=1):
    with world["capture"](execute=True):
        return services.job_submit(access=access_for(user, tenant), actor=user, pool="dev", data={
            "name": name, "image": "registry.example.org/ml/trainer:1", "tier": "development",
            "workers": workers, "gpus_per_worker": 1, "gpu_model": world["h800"],
            "rdma_per_worker": rdma, "cpu_per_worker": 4, "memory_gib_per_worker": 16,
            "max_run_seconds": 86400,
            "annotations": {"kubesim.trainyard.io/run-seconds": "3600"}})


def _job(job):
    return TrainingJob.objects.get(pk=job.pk)


def test_nodes_advertise_rdma_and_the_catalog_offers_it(world, cluster):
    nodes = k8s.CoreV1Api(cluster.api_client).list_node().items
    with_rdma = [n.metadata.name for n in nodes if RDMA in (n.status.allocatable or {})]
    assert with_rdma and all(n.startswith("h800-") for n in with_rdma)
    capacity = capacity_by_resource()
    assert capacity["rdma"] == Decimal(1000 * len(with_rdma))
    assert Resource.parse("rdma") in offered_resources(capacity)
    assert Resource.parse("rdma").unit_for(1) == "NIC"


def test_rdma_quota_binds_in_the_engine_and_in_the_resourcequota(world, cluster, bob,
                                                                 tenant_a):
    world["grant"](rdma=2)
    quota = k8s.CoreV1Api(cluster.api_client).list_namespaced_resource_quota("ty-acme-dev")
    hard = {k: v for q in quota.items for k, v in (q.spec.hard or {}).items()}
    assert hard[f"requests.{RDMA}"] == "2"
    first = _submit(world, bob, tenant_a, "first", workers=2)       # 2 NICs: the grant
    second = _submit(world, bob, tenant_a, "second", workers=1)     # GPUs within quota
    for _ in range(4):
        _cycle(world, cluster, 15)
    assert _job(first).state == "running"
    pods = k8s.CoreV1Api(cluster.api_client).list_namespaced_pod("ty-acme-dev").items
    asked = [p.spec.containers[0].resources.requests.get(RDMA) for p in pods
             if p.metadata.name.startswith(_job(first).k8s_name)]
    assert asked and set(asked) == {"1"}
    waiting = _job(second)
    assert waiting.state == "queued"
    assert "admitted" not in waiting.transitions.values_list("to_state", flat=True)
    assert text_code(waiting.wait_reason) == "jobs.wait.borrow_cap_dim"
    assert english(waiting.wait_reason).startswith("RDMA NICs: needs 1 RDMA NIC, 2 RDMA NICs "
                                                   "in use")
    # the gauge counts what the pods request, as admission counts the job
    used = {k: v for q in k8s.CoreV1Api(cluster.api_client).list_namespaced_resource_quota(
        "ty-acme-dev").items for k, v in (q.status.used or {}).items()}
    assert used[f"requests.{RDMA}"] == "2"
    relist_all(get_client())
    assert allocation_by_namespace(["ty-acme-dev"])["ty-acme-dev"]["rdma"] == Decimal(2)
    # the quota page's and API's row: granted, in use (what admission counts), limited
    dev = next(p for p in quota_overview(tenant_a) if p["pool"].kind == "dev")
    row = next(r for r in dev["rows"] if r["key"] == "rdma")
    assert (row["granted"], row["used"], row["limited"]) == (Decimal(2), Decimal(2), True)
    assert row["resource"].label() == "RDMA NICs"


def test_a_job_above_the_rdma_ceiling_is_refused_naming_the_field(world, bob, tenant_a):
    world["grant"](rdma=1)
    with pytest.raises(ApplicationError) as refused:
        _submit(world, bob, tenant_a, "too-many", workers=2)
    assert refused.value.field == "rdma_per_worker"
    assert not TrainingJob.objects.filter(name="too-many").exists()


def test_kueue_covers_rdma_with_its_own_flavor():
    from k8s_sync.kueue import KueueSpec, QueueSpec, desired_kueue_objects
    spec = KueueSpec(queues=(QueueSpec("acme", "dev", "dev",
                                       nominal={"cpu": Decimal(8), "rdma": Decimal(2)}),),
                     capacity={"cpu": Decimal(64), "rdma": Decimal(1000)})
    objects = desired_kueue_objects(spec)
    assert any(o["kind"] == "ResourceFlavor" and o["metadata"]["name"] == "trainyard-rdma"
               for o in objects)
    queue = next(o for o in objects if o["kind"] == "ClusterQueue"
                 and o["metadata"]["name"].endswith("-dev") and "rdma" not in o["metadata"][
                     "name"])
    groups = queue["spec"]["resourceGroups"]
    rdma = next(g for g in groups if g["coveredResources"] == [RDMA])
    assert rdma["flavors"][0]["name"] == "trainyard-rdma"
    assert rdma["flavors"][0]["resources"][0]["nominalQuota"] == "2"
    assert groups[0]["coveredResources"] == ["cpu", "memory"]


@pytest.fixture
def kueue_world(cluster, settings, platform_admin, tenant_a, django_capture_on_commit_callbacks):
    """Kueue mode: tenant_a's dev pool granted 4 H800 and 1 RDMA NIC, borrowing capped at
    the grant (so Kueue's ClusterQueue has borrowingLimit 0 and the grant binds)."""
    from jobs.tests.test_kueue_mode import _model, kueue_configured

    settings.TRAINYARD_ADMISSION_BACKEND = "kueue"
    cap_borrowing(tenant_a)
    kueue_configured(cluster)
    reconcile_cluster.apply().get()
    relist_all(get_client())
    h800 = _model(cluster, "H800")
    dev = tenant_a.pools.get(kind="dev")
    tenant_services.quota_set(actor=platform_admin, pool=dev, reason="test", amounts={
        f"gpu:{h800}": 4, "cpu": 128, "memory": 1024, "rdma": 1})
    reconcile_pool.apply(args=[dev.pk]).get()
    relist_all(get_client(), kinds=["quotas"])
    return {"h800": h800, "capture": django_capture_on_commit_callbacks}


def test_kueue_mode_admits_by_the_rdma_quota(kueue_world, cluster, bob, tenant_a):
    from jobs.tests.test_kueue_mode import _cq

    cq = _cq("ty-acme-dev")
    rdma = [r for g in cq["spec"]["resourceGroups"] for f in g["flavors"]
            for r in f["resources"] if r["name"] == RDMA]
    assert rdma == [{"name": RDMA, "nominalQuota": "1", "borrowingLimit": "0"}]
    first = _submit(kueue_world, bob, tenant_a, "first")
    second = _submit(kueue_world, bob, tenant_a, "second")   # GPUs within quota: 2 of 4
    for _ in range(6):
        _cycle(kueue_world, cluster, 15)
        if _job(first).state == "running" and _job(second).wait_reason:
            break
    assert _job(first).state == "running"
    waiting = _job(second)
    assert waiting.state == "queued", waiting.state
    assert RDMA in english(waiting.wait_reason), english(waiting.wait_reason)
    # it waits for the first to finish, not "never": Kueue says NoMatchingFlavor for the
    # GPU group's other models beside the RDMA group's quota wait (resolveNoFitReason)
    assert "can never" not in english(waiting.wait_reason), english(waiting.wait_reason)
    assert "insufficient unused quota" in english(waiting.wait_reason)
