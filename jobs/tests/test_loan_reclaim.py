"""Issue 17: loans that give back, against kubesim over HTTP through the admission loop.

A job that runs on quota its pool borrows is marked with the loan at admission; when the
loan ends, the lender's job that needs the cards reclaims it through the normal
preemption path, after its tier's grace, with the reason naming the lender. A lender
cannot lend what its running jobs use."""

import datetime as dt

import pytest
from django.utils import timezone

from core.exceptions import ApplicationError, Conflict
from core.texts import english
from jobs import services
from jobs.models import TrainingJob
from jobs.tests.conftest import cap_borrowing, cycle, states
from jobs.tests.test_lifecycle import _model
from k8s_sync.client import get_client
from k8s_sync.observe import relist_all
from tenants import services as tenant_services
from tenants.access import access_for
from tenants.models import Membership
from tenants.tasks import reconcile_cluster, reconcile_pool

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def world(cluster, platform_admin, tenant_a, tenant_b, charlie,
          django_capture_on_commit_callbacks):
    """acme's dev pool holds the 8 H800 cards of the profile, globex's dev pool none. (Half
    of them on loan keeps use below the eviction watermark, so only the reclaim moves.)"""
    Membership.objects.filter(user=charlie, tenant=tenant_b).update(role="admin")
    cap_borrowing(tenant_a, tenant_b)   # the loan, not idle capacity, is what globex runs on
    reconcile_cluster.apply().get()
    relist_all(get_client())
    h800 = _model(cluster, "H800")
    for tenant, cards in ((tenant_a, 8), (tenant_b, 0)):
        pool = tenant.pools.get(kind="dev")
        tenant_services.quota_set(actor=platform_admin, pool=pool, reason="test", amounts={
            f"gpu:{h800}": cards, "cpu": 64, "memory": 512})
        reconcile_pool.apply(args=[pool.pk]).get()
    relist_all(get_client(), kinds=["quotas"])
    return {"h800": h800, "capture": django_capture_on_commit_callbacks,
            "lender": tenant_a.pools.get(kind="dev")}


def _submit(world, user, tenant, name, gpus=8):
    with world["capture"](execute=True):
        return services.job_submit(access=access_for(user, tenant), actor=user, pool="dev", data={
            "name": name, "image": "registry.example.org/ml/trainer:1", "tier": "development",
            "workers": 1, "gpus_per_worker": gpus, "gpu_model": world["h800"],
            "cpu_per_worker": 8, "memory_gib_per_worker": 32, "max_run_seconds": 86400,
            "annotations": {"kubesim.trainyard.io/run-seconds": "7200"}})


def _lend(world, alice, tenant_a, amount):
    return tenant_services.loan_propose(
        access=access_for(alice, tenant_a), actor=alice, lender_pool=world["lender"],
        borrower="globex", borrower_pool="dev", resource=f"gpu:{world['h800']}",
        amount=amount, ends_at=timezone.now() + dt.timedelta(days=7))


def test_a_loan_ending_mid_run_reclaims_the_borrowers_job_after_its_grace(
        world, cluster, alice, bob, charlie, tenant_a, tenant_b):
    loan = _lend(world, alice, tenant_a, 4)
    with world["capture"](execute=True):
        tenant_services.loan_decide(access=access_for(charlie, tenant_b), actor=charlie,
                                    loan=loan, accept=True)
    relist_all(get_client(), kinds=["quotas"])
    borrowed = _submit(world, charlie, tenant_b, "on-loan", gpus=4)
    cycle(world, cluster)
    cycle(world, cluster, 30)
    assert states(borrowed) == ["running"]
    assert TrainingJob.objects.get(pk=borrowed.pk).loan_id == loan.pk   # persisted

    # while the loan runs, the lender keeps 4 cards: it cannot ask for 8
    with pytest.raises(ApplicationError, match="at most 4"):
        _submit(world, bob, tenant_a, "too-early")

    with world["capture"](execute=True):
        tenant_services.loan_end(loan=loan, actor=alice, access=access_for(alice, tenant_a))
    cycle(world, cluster, 10)
    assert states(borrowed) == ["running"]   # nobody needs the cards yet: it keeps running
    mine = _submit(world, bob, tenant_a, "lender-needs-it")
    cycle(world, cluster, 10)
    job = TrainingJob.objects.get(pk=borrowed.pk)
    assert job.state == "preempting"
    assert english(job.preempt_reason).startswith("the loan from acme/dev ended")
    grace = (job.preempt_deadline - timezone.now()).total_seconds()
    assert 240 < grace <= 300   # the development tier's grace, not an immediate kill
    for _ in range(40):
        cycle(world, cluster, 20)
        if states(mine) == ["running"]:
            break
    assert states(borrowed, mine) == ["queued", "running"]
    assert TrainingJob.objects.get(pk=borrowed.pk).restart_count == 1

    # the lender now runs its 8 cards: it cannot lend any of them
    with pytest.raises(Conflict, match="uses 8 of"):
        _lend(world, alice, tenant_a, 1)
