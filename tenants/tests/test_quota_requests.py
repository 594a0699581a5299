"""The quota request workflow: submit, approve (amended), reject, overcommit, races."""

import datetime as dt
import threading
from decimal import Decimal

import pytest
from django.core import mail
from django.db import connection
from django.utils import timezone

from core.exceptions import ApplicationError, Conflict, NotAllowed
from core.models import Policy
from k8s_sync.models import ObservedNode
from tenants import services
from tenants.access import access_for
from tenants.models import AuditEvent, Notification, QuotaGrant, QuotaRequest
from tenants.quota import guaranteed_share, overcommit_violation, propose_amount

H800 = "gpu:NVIDIA-H800"


@pytest.fixture
def h800_nodes(db):
    """Two observed H800 nodes of 8 cards: capacity 16 H800, 128 cores, 1 TiB."""
    now = timezone.now()
    for i in range(2):
        ObservedNode.objects.create(
            name=f"h800-{i}", uid=f"u{i}", resource_version="1", observed_at=now,
            gpu_product="NVIDIA-H800", gpu_model="NVIDIA-H800", gpu_count=8,
            gpu_memory_mib=81559, ready=True,
            allocatable={"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"})


def _submit(user, tenant, amounts, pool="prod", **kw):
    return services.quota_request_submit(
        access=access_for(user, tenant), actor=user, pool=tenant.pools.get(kind=pool),
        amounts=amounts, justification=kw.pop("justification", "new model"), **kw)


def test_a_request_is_approved_with_an_amended_amount(alice, platform_admin, tenant_a,
                                                      h800_nodes,
                                                      django_capture_on_commit_callbacks):
    request = _submit(alice, tenant_a, {H800: 8, "cpu": 32})
    assert Notification.objects.filter(user=platform_admin).count() == 1
    with django_capture_on_commit_callbacks() as callbacks:
        services.quota_request_approve(actor=platform_admin, request=request,
                                       amended={H800: 6}, note="6 now, more next month")
    for callback in callbacks:
        if callback.__name__ == "send":  # the e-mail; the sync is tested elsewhere
            callback()
    request.refresh_from_db()
    assert request.status == "approved"
    grants = dict(QuotaGrant.objects.filter(pool__tenant=tenant_a, superseded_at__isnull=True)
                  .values_list("resource", "amount"))
    assert grants == {H800: Decimal(6), "cpu": Decimal(32)}
    assert {i.resource: i.approved_amount for i in request.items.all()} == {
        H800: Decimal(6), "cpu": Decimal(32)}
    note = Notification.objects.get(user=alice)
    assert "approved" in note.message and "gpu:NVIDIA-H800=6" in note.message
    assert any("approved" in m.subject for m in mail.outbox)
    actions = list(AuditEvent.objects.filter(tenant=tenant_a).values_list("action", flat=True))
    assert {"quota_request.submit", "quota_request.approve", "quota.set"} <= set(actions)


def test_a_rejection_needs_a_reason_and_tells_the_requester(alice, platform_admin, tenant_a):
    request = _submit(alice, tenant_a, {"cpu": 8})
    with pytest.raises(ApplicationError, match="reason"):
        services.quota_request_reject(actor=platform_admin, request=request, reason=" ")
    services.quota_request_reject(actor=platform_admin, request=request, reason="no budget")
    assert "rejected: no budget" in Notification.objects.get(user=alice).message
    assert not QuotaGrant.objects.exists()


def test_deciding_twice_or_ones_own_request_is_refused(alice, platform_admin, tenant_a):
    request = _submit(alice, tenant_a, {"cpu": 8})
    services.quota_request_approve(actor=platform_admin, request=request)
    with pytest.raises(Conflict, match="approved already"):
        services.quota_request_approve(actor=platform_admin, request=request)
    with pytest.raises(Conflict):
        services.quota_request_reject(actor=platform_admin, request=request, reason="x")
    from tenants.models import Membership

    Membership.objects.create(user=platform_admin, tenant=tenant_a, role="admin")
    own = _submit(platform_admin, tenant_a, {"cpu": 16})
    with pytest.raises(NotAllowed, match="own request"):
        services.quota_request_approve(actor=platform_admin, request=own)
    assert QuotaRequest.objects.get(pk=own.pk).status == "pending"


@pytest.mark.parametrize("amounts,message", [
    ({"cpu": -1}, "zero or more"), ({"cpu": "ten"}, "not a number"),
    ({"gpus": 2}, "unknown resource"), ({H800: "2.5"}, "whole number"),
    ({"memory": "16Gi"}, "not a number"), ({}, "at least one"),
])
def test_bad_request_input_is_refused_and_changes_nothing(alice, tenant_a, amounts, message):
    with pytest.raises(ApplicationError, match=message):
        _submit(alice, tenant_a, amounts)
    assert not QuotaRequest.objects.exists()


def test_who_may_request(alice, bob, charlie, tenant_a, tenant_b):
    with pytest.raises(NotAllowed):
        _submit(bob, tenant_a, {"cpu": 4})
    tenant_a.members_may_request_quota = True
    tenant_a.save()
    assert _submit(bob, tenant_a, {"cpu": 4}).requested_by == bob
    with pytest.raises(ApplicationError, match=r"justification|why"):
        _submit(alice, tenant_a, {"cpu": 4}, justification="")
    with pytest.raises(ApplicationError, match="future"):
        _submit(alice, tenant_a, {"cpu": 4},
                valid_until=timezone.now() - dt.timedelta(days=1))


def test_approving_beyond_the_overcommit_limit_is_refused_with_the_numbers(
        alice, charlie, platform_admin, tenant_a, tenant_b, h800_nodes):
    services.quota_set(actor=platform_admin, pool=tenant_b.pools.get(kind="prod"),
                       amounts={H800: 12}, reason="b")
    request = _submit(alice, tenant_a, {H800: 8})
    with pytest.raises(Conflict) as err:
        services.quota_request_approve(actor=platform_admin, request=request)
    assert err.value.message == (
        "gpu:NVIDIA-H800: approving 8 would bring total grants to 20, above the limit of "
        "16 (1 x capacity 16); at most 4 can be granted to this pool.")
    assert QuotaRequest.objects.get(pk=request.pk).status == "pending"
    policy = Policy.current()
    policy.overcommit_factors = {"gpu": 1.25}
    policy.save()
    services.quota_request_approve(actor=platform_admin, request=request)
    assert QuotaRequest.objects.get(pk=request.pk).status == "approved"


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="needs Postgres row locks")
def test_two_approvals_racing_cannot_together_exceed_the_limit(django_user_model):
    from tenants.models import Membership, PlatformRole, Pool, Tenant

    now = timezone.now()
    ObservedNode.objects.create(name="n", uid="u", resource_version="1", observed_at=now,
                                gpu_model="NVIDIA-H800", gpu_count=16, ready=True,
                                allocatable={"nvidia.com/gpu": "16"})
    admin = django_user_model.objects.create_user("boss")
    PlatformRole.objects.create(user=admin, role="platform_admin")
    requests = []
    for slug in ("one", "two"):
        tenant = Tenant.objects.create(slug=slug, name=slug, cost_center="c",
                                       contact_email="c@x.org")
        Pool.objects.create(tenant=tenant, kind="prod")
        lead = django_user_model.objects.create_user(f"lead-{slug}")
        Membership.objects.create(user=lead, tenant=tenant, role="admin")
        requests.append(_submit(lead, tenant, {H800: 10}))
    barrier, outcomes = threading.Barrier(2), []

    def approve(request):
        try:
            barrier.wait()
            services.quota_request_approve(actor=admin, request=request)
            outcomes.append("approved")
        except Conflict:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=approve, args=(r,)) for r in requests]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(outcomes) == ["approved", "refused"]
    total = sum(QuotaGrant.objects.filter(superseded_at__isnull=True).values_list(
        "amount", flat=True))
    assert total == 10


def test_temporary_quota_ends_by_itself(alice, platform_admin, tenant_a):
    pool = tenant_a.pools.get(kind="prod")
    services.quota_set(actor=platform_admin, pool=pool, amounts={"cpu": 8}, reason="base")
    until = timezone.now() + dt.timedelta(days=7)
    request = _submit(alice, tenant_a, {"cpu": 64}, valid_until=until)
    services.quota_request_approve(actor=platform_admin, request=request)
    assert services.quota_expire_temporary(now=until - dt.timedelta(hours=1)) == 0
    assert services.quota_expire_temporary(now=until + dt.timedelta(seconds=1)) == 1
    assert services.quota_expire_temporary(now=until + dt.timedelta(seconds=2)) == 0
    current = QuotaGrant.objects.get(pool=pool, resource="cpu", superseded_at__isnull=True)
    assert current.amount == 8 and current.reason == "temporary quota ended"


def test_a_requester_or_tenant_admin_can_withdraw(alice, bob, tenant_a):
    request = _submit(alice, tenant_a, {"cpu": 4})
    with pytest.raises(NotAllowed):
        services.quota_request_cancel(access=access_for(bob, tenant_a), actor=bob,
                                      request=request)
    services.quota_request_cancel(access=access_for(alice, tenant_a), actor=alice,
                                  request=request)
    assert QuotaRequest.objects.get(pk=request.pk).status == "cancelled"


def test_overcommit_and_guarantee_arithmetic():
    assert overcommit_violation(resource_key="cpu", capacity=None, granted_elsewhere=Decimal(9),
                                new_amount=Decimal(9), factor=Decimal(1)) is None
    assert overcommit_violation(resource_key="cpu", capacity=Decimal(10),
                                granted_elsewhere=Decimal(4), new_amount=Decimal(6),
                                factor=Decimal(1)) is None
    assert guaranteed_share(capacity=Decimal(16), granted_static=Decimal(8),
                            granted_overcommitted=Decimal(16)) == Decimal("0.5")
    assert guaranteed_share(capacity=Decimal(16), granted_static=Decimal(20),
                            granted_overcommitted=Decimal(4)) == 0
    assert guaranteed_share(capacity=Decimal(16), granted_static=Decimal(0),
                            granted_overcommitted=Decimal(8)) == 1


def test_dynamic_proposals_follow_the_formula():
    peaks = [Decimal(n) for n in range(1, 31)]  # p95 of 1..30 is 29
    amount, formula = propose_amount(daily_peaks=peaks, current=Decimal(10), idle_rate=None,
                                     headroom=Decimal("0.2"), idle_threshold=Decimal("0.5"))
    assert amount == 35 and "p95 of 30 daily peaks = 29" in formula  # ceil(29 x 1.2 = 34.8)
    lowered, formula = propose_amount(daily_peaks=peaks, current=Decimal(10), idle_rate=0.7,
                                      headroom=Decimal("0.2"), idle_threshold=Decimal("0.5"))
    assert lowered == 28 and "idle rate 70%" in formula  # ceil(34.8 x (0.3 + 0.5) = 27.84)
    assert propose_amount(daily_peaks=[], current=Decimal(1), idle_rate=None,
                          headroom=Decimal(0), idle_threshold=Decimal(1)) is None
    assert propose_amount(daily_peaks=[Decimal(5)], current=Decimal(5), idle_rate=None,
                          headroom=Decimal(0), idle_threshold=Decimal(1)) is None
    assert propose_amount(daily_peaks=[Decimal(100)], current=Decimal(98), idle_rate=None,
                          headroom=Decimal(0), idle_threshold=Decimal(1)) is None  # < 5%
