"""Issue 13, part G, as the user meets it: against kubesim over HTTP, through the admission
loop (``jobs.admission_cycle``), with kubesim's clock advanced past the tiers' grace.

* A static tenant within its guarantee gets its GPUs back from an overcommitted borrower
  within the development grace (before: it waited behind the borrower's same-tier jobs,
  nothing reclaimed).
* Batch work filling the cards is evicted down to the watermark when their nodes are
  under physical pressure (CPU requested), with nobody waiting (before: nothing was
  evicted unless a job within its quota waited). Issue 27: exclusive whole cards cannot
  be overloaded, so how many are allocated is no pressure: borrowed and batch work may
  fill every idle card.
"""

from decimal import Decimal

import pytest
from django.core.cache import cache
from kubernetes import client as k8s

from core.texts import english
from jobs import services
from jobs.models import TrainingJob
from jobs.tests.conftest import cycle as _cycle
from jobs.tests.conftest import states as _states
from k8s_sync.client import get_client
from k8s_sync.observe import relist_all
from k8s_sync.quantity import parse_quantity
from tenants import services as tenant_services
from tenants.access import access_for
from tenants.tasks import reconcile_cluster, reconcile_pool

pytestmark = pytest.mark.timeout(180)


def _h800(cluster):
    for node in k8s.CoreV1Api(cluster.api_client).list_node().items:
        product = (node.metadata.labels or {}).get("nvidia.com/gpu.product", "")
        if "H800" in product and "MIG" not in product and "SHARED" not in product:
            return product
    raise AssertionError("no H800 node in the profile")


@pytest.fixture
def world(cluster, platform_admin, tenant_a, tenant_b, django_capture_on_commit_callbacks):
    """acme (static) granted 4 H800 in dev, globex (overcommitted, elastic 1.5) granted 8:
    12 granted on 8 cards (GPU overcommit 1.5), so globex's guaranteed part is 4."""
    cache.clear()
    reconcile_cluster.apply().get()
    relist_all(get_client())
    tenant_services.policy_update(actor=platform_admin,
                                  overcommit_factors={"gpu": 1.5, "cpu": 4, "memory": 4})
    tenant_b.quota_mode = "overcommitted"
    tenant_b.borrowing_cap = Decimal("1.5")
    tenant_b.save(update_fields=["quota_mode", "borrowing_cap"])
    h800 = _h800(cluster)
    for tenant, gpus in ((tenant_a, 4), (tenant_b, 8)):
        pool = tenant.pools.get(kind="dev")
        tenant_services.quota_set(actor=platform_admin, pool=pool, reason="test", amounts={
            f"gpu:{h800}": gpus, "cpu": 128, "memory": 1024})
        reconcile_pool.apply(args=[pool.pk]).get()
    relist_all(get_client(), kinds=["quotas"])  # the pools are in the cluster, as observed
    return {"h800": h800, "capture": django_capture_on_commit_callbacks,
            "admin": platform_admin}


def _submit(world, user, tenant, name, tier, gpus, run_seconds=7200, cpu=8):
    with world["capture"](execute=True):
        return services.job_submit(access=access_for(user, tenant), actor=user, pool="dev", data={
            "name": name, "image": "registry.example.org/ml/trainer:1", "tier": tier,
            "workers": 1, "gpus_per_worker": gpus, "gpu_model": world["h800"],
            "cpu_per_worker": cpu, "memory_gib_per_worker": 32, "max_run_seconds": 86400,
            "annotations": {"kubesim.trainyard.io/run-seconds": str(run_seconds)}})


def _gpus_held(cluster, namespace):
    """nvidia.com/gpu requested by the pods of ``namespace`` that still hold their GPUs
    (bound, not finished: terminating pods hold them until they are gone)."""
    pods = k8s.CoreV1Api(cluster.api_client).list_namespaced_pod(namespace).items
    total = 0
    for pod in pods:
        if not pod.spec.node_name or pod.status.phase in ("Succeeded", "Failed"):
            continue
        for c in pod.spec.containers:
            req = (c.resources.requests or {}) if c.resources else {}
            total += int(parse_quantity(req.get("nvidia.com/gpu", "0")))
    return total


def test_a_static_tenant_within_its_guarantee_gets_its_gpus_back_within_the_grace(
        world, cluster, bob, charlie, tenant_a, tenant_b):
    borrowed = [_submit(world, charlie, tenant_b, f"sweep-{i}", "development", 2)
                for i in range(4)]
    _cycle(world, cluster)
    _cycle(world, cluster, 30)
    _cycle(world, cluster, 10)
    # all 8 cards: allocation is no pressure on exclusive cards, so globex, beyond its
    # guarantee of 4, borrows every idle one (issue 27)
    assert _states(*borrowed) == ["running"] * 4

    mine = _submit(world, bob, tenant_a, "needs-my-four", "development", 4)
    _cycle(world, cluster)
    preempting = [j for j in borrowed if _states(j) == ["preempting"]]
    assert len(preempting) == 2     # 4 reclaimed; globex keeps its guaranteed 4
    for job in preempting:
        victim = TrainingJob.objects.get(pk=job.pk)
        assert english(victim.preempt_reason) == (
            "returning NVIDIA-H800 above your guaranteed share: acme needs its guaranteed "
            "dev quota for a development job")
        grace = (victim.preempt_deadline - victim.transitions.latest("at").at).total_seconds()
        assert abs(grace - 300) < 2   # the development grace
    assert english(TrainingJob.objects.get(pk=mine.pk).wait_reason).startswith((
        "waiting for 2 development jobs to checkpoint and stop",   # the deciding cycle
        "waiting for 2 preempted jobs to checkpoint and stop"))    # the cycle the sync kicks

    waited = 0
    while _states(mine) != ["running"] and waited < 300 + 60:
        _cycle(world, cluster, 10)
        waited += 10
    assert _states(mine) == ["running"], waited
    assert waited <= 300 + 60   # the grace, then the pod start
    assert _gpus_held(cluster, "ty-acme-dev") == 4
    assert _gpus_held(cluster, "ty-globex-dev") == 4     # its guarantee, still running
    assert sorted(_states(*borrowed)) == ["queued", "queued", "running", "running"]
    for _ in range(3):   # and it stays so: nobody is evicted, nothing more is admitted
        _cycle(world, cluster, 10)
    assert _states(mine) == ["running"]
    assert sorted(_states(*borrowed)) == ["queued", "queued", "running", "running"]


def test_batch_filling_the_cards_is_evicted_down_to_the_watermark(
        world, cluster, charlie, tenant_b):
    # While the watermark is off (1.0), batch work fills all 8 cards, and requests 164 of
    # the node's 192 cores (41 each: half of 82)
    tenant_services.policy_update(actor=world["admin"], eviction_watermark=Decimal("1"))
    sweeps = [_submit(world, charlie, tenant_b, f"batch-{i}", "batch", 2, cpu=82)
              for i in range(4)]
    _cycle(world, cluster)
    _cycle(world, cluster, 30)
    _cycle(world, cluster, 10)
    assert _states(*sweeps) == ["running"] * 4
    assert _gpus_held(cluster, "ty-globex-dev") == 8

    # The platform admin sets it to 85%: nobody waits, yet the loop evicts down to it
    # (86% of the nodes' CPU requested; every card allocated is no pressure itself)
    tenant_services.policy_update(actor=world["admin"], eviction_watermark=Decimal("0.85"))
    _cycle(world, cluster)
    evicted = [j for j in sweeps if _states(j) == ["preempting"]]
    assert len(evicted) == 1     # 164 -> 123 of 192 cores
    job = TrainingJob.objects.get(pk=evicted[0].pk)
    assert english(job.preempt_reason).startswith(
        "NVIDIA-H800 are at 86% of their physical capacity, above the 85% eviction watermark")
    for _ in range(8):   # the batch grace is 30 s
        _cycle(world, cluster, 10)
    assert _gpus_held(cluster, "ty-globex-dev") == 6
    assert sorted(_states(*sweeps)) == ["queued", "running", "running", "running"]
    # the evicted job is not admitted again above the watermark, and says why
    job.refresh_from_db()
    assert job.state == "queued"
    assert "above the 85% eviction watermark" in english(job.wait_reason)


def test_every_idle_card_may_be_filled_under_the_watermark(world, cluster, charlie, tenant_b):
    """Issue 27: exclusive whole cards cannot be overloaded: batch work fills all 8 with
    an 85% watermark, and nothing is evicted while their nodes are not under pressure."""
    sweeps = [_submit(world, charlie, tenant_b, f"batch-{i}", "batch", 2) for i in range(4)]
    for seconds in (0, 30, 10, 10, 10):
        _cycle(world, cluster, seconds)
    assert _states(*sweeps) == ["running"] * 4
    assert _gpus_held(cluster, "ty-globex-dev") == 8


def test_batch_runs_beyond_the_pool_ceiling_on_idle_cards_and_yields_to_quota(
        world, cluster, bob, charlie, tenant_a, tenant_b):
    """Issue 15: acme (static, 4 H800 granted) runs 6 batch GPUs on idle cards (its batch
    ceiling: 4 x the GPU overcommit factor 1.5), the ResourceQuota lets the pods through,
    and the batch work yields, with the batch grace only, when globex needs its quota."""
    tenant_services.policy_update(actor=world["admin"], eviction_watermark=Decimal("1"))
    reconcile_pool.apply(args=[tenant_a.pools.get(kind="dev").pk]).get()
    sweeps = [_submit(world, bob, tenant_a, f"sweep-{i}", "batch", 2) for i in range(3)]
    _cycle(world, cluster)
    _cycle(world, cluster, 30)
    _cycle(world, cluster, 10)
    assert _states(*sweeps) == ["running"] * 3
    assert _gpus_held(cluster, "ty-acme-dev") == 6    # beyond its ceiling of 4

    theirs = _submit(world, charlie, tenant_b, "within-quota", "development", 4)
    _cycle(world, cluster)
    preempting = [j for j in sweeps if _states(j) == ["preempting"]]
    assert len(preempting) == 1    # 2 idle + 2 from the most recent batch job
    victim = TrainingJob.objects.get(pk=preempting[0].pk)
    grace = (victim.preempt_deadline - victim.transitions.latest("at").at).total_seconds()
    assert abs(grace - 30) < 2     # the batch grace, nothing more
    waited = 0
    while _states(theirs) != ["running"] and waited < 30 + 60:
        _cycle(world, cluster, 10)
        waited += 10
    assert _states(theirs) == ["running"]
    assert _gpus_held(cluster, "ty-acme-dev") == 4 and _gpus_held(cluster, "ty-globex-dev") == 4
