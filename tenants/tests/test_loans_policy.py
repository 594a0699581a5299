"""Quota loans between tenants, and the platform policy."""

import datetime as dt
from decimal import Decimal

import pytest
from django.utils import timezone

from core.exceptions import ApplicationError, Conflict, NotAllowed
from core.models import Policy
from tenants import selectors, services
from tenants.access import access_for
from tenants.models import Membership, Notification, QuotaGrant

H800 = "gpu:NVIDIA-H800"


@pytest.fixture
def lender(platform_admin, tenant_a, tenant_b, charlie):
    Membership.objects.filter(user=charlie, tenant=tenant_b).update(role="admin")
    pool = tenant_a.pools.get(kind="prod")
    services.quota_set(actor=platform_admin, pool=pool, amounts={H800: 8}, reason="t")
    return pool


def _offer(alice, tenant_a, lender, amount=3, days=7):
    return services.loan_propose(
        access=access_for(alice, tenant_a), actor=alice, lender_pool=lender, borrower="globex",
        borrower_pool="prod", resource=H800, amount=amount,
        ends_at=timezone.now() + dt.timedelta(days=days))


def test_a_loan_moves_quota_while_active_and_ends_on_its_date(alice, charlie, tenant_a,
                                                              tenant_b, lender):
    loan = _offer(alice, tenant_a, lender)
    assert Notification.objects.filter(user=charlie).exists()
    borrower_pool = tenant_b.pools.get(kind="prod")
    assert selectors.effective_grants(borrower_pool).get(H800, 0) == 0  # not yet accepted
    services.loan_decide(access=access_for(charlie, tenant_b), actor=charlie, loan=loan,
                         accept=True)
    assert selectors.effective_grants(lender)[H800] == 5
    assert selectors.effective_grants(borrower_pool)[H800] == 3
    spec = selectors.pool_spec(borrower_pool, storage_classes=set())
    assert spec.production_quota.to_hard()["requests.nvidia.com/gpu"] == "3"
    assert QuotaGrant.objects.get(pool=lender, superseded_at__isnull=True).amount == 8
    assert services.loans_expire(now=loan.ends_at - dt.timedelta(minutes=1)) == 0
    assert services.loans_expire(now=loan.ends_at) == 1
    assert selectors.effective_grants(lender)[H800] == 8
    assert selectors.effective_grants(borrower_pool).get(H800, 0) == 0


def test_loan_rules(alice, bob, charlie, tenant_a, tenant_b, lender):
    with pytest.raises(Conflict, match="at most 8 can be lent"):
        _offer(alice, tenant_a, lender, amount=9)
    with pytest.raises(NotAllowed):
        services.loan_propose(access=access_for(bob, tenant_a), actor=bob, lender_pool=lender,
                              borrower="globex", borrower_pool="prod", resource=H800, amount=1,
                              ends_at=timezone.now() + dt.timedelta(days=1))
    with pytest.raises(ApplicationError, match="no other tenant"):
        services.loan_propose(access=access_for(alice, tenant_a), actor=alice,
                              lender_pool=lender, borrower="acme", borrower_pool="prod",
                              resource=H800, amount=1,
                              ends_at=timezone.now() + dt.timedelta(days=1))
    loan = _offer(alice, tenant_a, lender, amount=6)
    with pytest.raises(Conflict, match="at most 2 can be lent"):
        _offer(alice, tenant_a, lender, amount=3)  # proposed loans count too
    with pytest.raises(NotAllowed):  # the lender cannot accept its own offer
        services.loan_decide(access=access_for(alice, tenant_a), actor=alice, loan=loan,
                             accept=True)
    services.loan_decide(access=access_for(charlie, tenant_b), actor=charlie, loan=loan,
                         accept=False)
    with pytest.raises(Conflict, match="declined already"):
        services.loan_decide(access=access_for(charlie, tenant_b), actor=charlie, loan=loan,
                             accept=True)


def test_policy_updates_are_checked(platform_admin, alice):
    services.policy_update(actor=platform_admin, overcommit_factors={"gpu": 1.2, "cpu": 2},
                           eviction_watermark=Decimal("0.9"))
    policy = Policy.current()
    assert policy.overcommit_factors == {"gpu": 1.2, "cpu": 2}
    for bad, message in [({"overcommit_factors": {"gpu": 0.5}}, "between 1 and 10"),
                         ({"overcommit_factors": {"warp": 2}}, "unknown resource"),
                         ({"eviction_watermark": Decimal("0.2")}, "watermark"),
                         ({"default_quota": {"prod": {"cpu": -1}}}, "zero or more"),
                         ({"speed_of_light": 1}, "Unknown policy")]:
        with pytest.raises(ApplicationError, match=message):
            services.policy_update(actor=platform_admin, **bad)
    assert Policy.current().eviction_watermark == Decimal("0.900")
    with pytest.raises(NotAllowed):
        services.policy_update(actor=alice, eviction_watermark=Decimal("0.8"))


def test_new_tenants_get_the_default_quota(platform_admin):
    services.policy_update(actor=platform_admin,
                           default_quota={"dev": {"cpu": 8, "gpu:NVIDIA-H800": 1}})
    tenant = services.tenant_create(actor=platform_admin, slug="fresh", name="Fresh",
                                    cost_center="c", contact_email="f@example.org")
    assert selectors.current_grants(tenant.pools.get(kind="dev")) == {
        "cpu": Decimal(8), H800: Decimal(1)}
    assert selectors.current_grants(tenant.pools.get(kind="prod")) == {}


def test_the_backstop_lets_borrowing_work_hold_any_idle_capacity(platform_admin, tenant_a):
    """Without a borrowing cap (the default), development and batch pods may borrow any
    idle capacity: the ResourceQuota must not refuse them, so it has no compute or GPU
    limit; production pods are held to the grant by the prod pool's scoped quota."""
    pool = tenant_a.pools.get(kind="prod")
    services.quota_set(actor=platform_admin, pool=pool, reason="t",
                       amounts={H800: 5, "cpu": 10, "storage:fast": 100})
    spec = selectors.pool_spec(pool, storage_classes=set())
    hard = spec.quota.to_hard()
    assert "requests.nvidia.com/gpu" not in hard and "requests.cpu" not in hard
    assert hard["fast.storageclass.storage.k8s.io/requests.storage"] == "100Gi"
    production = spec.production_quota.to_hard()
    assert production["requests.nvidia.com/gpu"] == "5" and production["requests.cpu"] == "10"
    assert selectors.pool_spec(tenant_a.pools.get(kind="dev"),
                               storage_classes=set()).production_quota is None


def test_a_capped_tenants_backstop_is_its_grant_times_the_cap(platform_admin, tenant_a):
    pool = tenant_a.pools.get(kind="prod")
    services.quota_set(actor=platform_admin, pool=pool, reason="t",
                       amounts={H800: 5, "cpu": 10, "storage:fast": 100})
    policy = Policy.current()
    policy.borrowing_cap = Decimal(1)   # the platform's cap: the grant itself
    policy.save()
    hard = selectors.pool_spec(pool, storage_classes=set()).quota.to_hard()
    assert hard["requests.nvidia.com/gpu"] == "5"
    services.tenant_update(access=access_for(platform_admin, tenant_a), actor=platform_admin,
                           quota_mode="overcommitted", borrowing_cap=Decimal("1.5"))
    tenant_a.refresh_from_db()
    pool.refresh_from_db()
    hard = selectors.pool_spec(pool, storage_classes=set()).quota.to_hard()
    assert hard["requests.nvidia.com/gpu"] == "7"  # floor(5 x 1.5): the tenant's cap wins
    assert hard["requests.cpu"] == "15"
    assert hard["fast.storageclass.storage.k8s.io/requests.storage"] == "100Gi"  # not elastic
