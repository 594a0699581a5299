"""Tenant services: creation, suspension, members; bad input changes nothing."""

import pytest

from core.exceptions import ApplicationError, Conflict, NotAllowed
from tenants import services
from tenants.access import access_for
from tenants.models import AuditEvent, Membership, Pool, Tenant
from tenants.selectors import tenant_access_or_404


def _create(actor, slug="vision", **kw):
    fields = {"name": "Vision", "cost_center": "CC-1", "contact_email": "v@example.org", **kw}
    return services.tenant_create(actor=actor, slug=slug, **fields)


def test_it_creates_a_tenant_with_both_pools_and_an_audit_row(platform_admin, alice):
    tenant = _create(platform_admin, admins=[alice])
    assert sorted(Pool.objects.filter(tenant=tenant).values_list("kind", flat=True)) == [
        "dev", "prod"]
    assert Membership.objects.get(tenant=tenant, user=alice).role == "admin"
    assert AuditEvent.objects.filter(tenant=tenant, action="tenant.create").count() == 1
    assert {p.namespace for p in tenant.pools.all()} == {"ty-vision-prod", "ty-vision-dev"}


def test_a_duplicate_slug_is_a_conflict_and_writes_nothing(platform_admin, tenant_a):
    before = (Tenant.objects.count(), Pool.objects.count(), AuditEvent.objects.count())
    with pytest.raises(Conflict, match="already exists"):
        _create(platform_admin, slug=tenant_a.slug)
    assert (Tenant.objects.count(), Pool.objects.count(), AuditEvent.objects.count()) == before


@pytest.mark.parametrize("slug", ["", "Vision", "9lives", "ends-", "has_underscore",
                                  "x" * 41, "spaces here", "ünïcode"])
def test_an_invalid_slug_is_refused(platform_admin, slug):
    with pytest.raises(ApplicationError) as err:
        _create(platform_admin, slug=slug)
    assert err.value.field == "slug"
    assert not Tenant.objects.exists()


def test_an_invalid_email_is_refused(platform_admin):
    with pytest.raises(ApplicationError) as err:
        _create(platform_admin, contact_email="not-an-email")
    assert err.value.field == "contact_email"
    assert not Tenant.objects.exists()


def test_only_platform_admins_create_tenants(alice, finance_user):
    for user in (alice, finance_user):
        with pytest.raises(NotAllowed):
            _create(user)
    assert not Tenant.objects.exists()


def test_suspend_and_reactivate_are_idempotent(platform_admin, tenant_a):
    access = access_for(platform_admin, tenant_a)
    services.tenant_suspend(access=access, actor=platform_admin, reason="unpaid bill")
    services.tenant_suspend(access=access, actor=platform_admin, reason="unpaid bill")
    tenant_a.refresh_from_db()
    assert tenant_a.status == "suspended" and tenant_a.suspended_reason == "unpaid bill"
    assert AuditEvent.objects.filter(action="tenant.suspend").count() == 1
    services.tenant_reactivate(access=access, actor=platform_admin)
    services.tenant_reactivate(access=access, actor=platform_admin)
    tenant_a.refresh_from_db()
    assert tenant_a.is_active and tenant_a.suspended_reason == ""
    assert AuditEvent.objects.filter(action="tenant.reactivate").count() == 1


def test_suspension_needs_a_reason_and_a_platform_admin(platform_admin, alice, tenant_a):
    with pytest.raises(ApplicationError, match="why"):
        services.tenant_suspend(access=access_for(platform_admin, tenant_a),
                                actor=platform_admin, reason="  ")
    with pytest.raises(NotAllowed):
        services.tenant_suspend(access=access_for(alice, tenant_a), actor=alice, reason="x")
    tenant_a.refresh_from_db()
    assert tenant_a.is_active


def test_a_suspended_tenant_cannot_submit_but_members_still_see_it(platform_admin, bob,
                                                                   tenant_a):
    assert tenant_access_or_404(bob, "acme").can_submit
    services.tenant_suspend(access=access_for(platform_admin, tenant_a), actor=platform_admin,
                            reason="security review")
    access = tenant_access_or_404(bob, "acme")
    assert access.is_member and not access.can_submit


def test_update_never_changes_the_slug(platform_admin, tenant_a):
    access = access_for(platform_admin, tenant_a)
    with pytest.raises(ApplicationError, match="cannot be changed"):
        services.tenant_update(access=access, actor=platform_admin, slug="other")
    tenant = services.tenant_update(access=access, actor=platform_admin, name="Acme Robotics")
    assert tenant.name == "Acme Robotics" and tenant.slug == "acme"


def test_tenant_admin_adds_a_member_by_name_or_email(alice, charlie, tenant_a, tenant_b):
    access = access_for(alice, tenant_a)
    first = services.membership_add(access=access, actor=alice, user="charlie@example.org")
    again = services.membership_add(access=access, actor=alice, user="charlie")
    assert first.pk == again.pk and first.role == "member"
    assert AuditEvent.objects.filter(action="membership.add").count() == 1


def test_adding_an_unknown_user_is_a_clear_error(alice, tenant_a):
    count = Membership.objects.count()
    with pytest.raises(ApplicationError, match="no user “ghost”"):
        services.membership_add(access=access_for(alice, tenant_a), actor=alice, user="ghost")
    assert Membership.objects.count() == count


def test_adding_a_member_again_with_another_role_is_a_conflict(alice, bob, tenant_a):
    with pytest.raises(Conflict, match="already"):
        services.membership_add(access=access_for(alice, tenant_a), actor=alice, user="bob",
                                role="admin")
    assert Membership.objects.get(user=bob, tenant=tenant_a).role == "member"


def test_members_cannot_manage_members(bob, charlie, tenant_a, tenant_b):
    with pytest.raises(NotAllowed):
        services.membership_add(access=access_for(bob, tenant_a), actor=bob, user="charlie")


def test_the_last_admin_can_be_neither_removed_nor_demoted(alice, bob, tenant_a):
    access = access_for(alice, tenant_a)
    admin = Membership.objects.get(user=alice, tenant=tenant_a)
    with pytest.raises(Conflict, match="last admin"):
        services.membership_remove(access=access, actor=alice, membership=admin)
    with pytest.raises(Conflict, match="last admin"):
        services.membership_set_role(access=access, actor=alice, membership=admin,
                                     role="member")
    assert Membership.objects.get(pk=admin.pk).role == "admin"
    # With a second admin, the first may step down.
    bobs = Membership.objects.get(user=bob, tenant=tenant_a)
    services.membership_set_role(access=access, actor=alice, membership=bobs, role="admin")
    services.membership_remove(access=access, actor=alice, membership=admin)
    assert not Membership.objects.filter(pk=admin.pk).exists()
    services.membership_remove(access=access, actor=alice, membership=admin)  # idempotent


def test_platform_roles_are_granted_and_revoked_idempotently(platform_admin, bob):
    services.platform_role_set(actor=platform_admin, user=bob, role="finance", granted=True)
    services.platform_role_set(actor=platform_admin, user=bob, role="finance", granted=True)
    assert list(bob.platform_roles.values_list("role", flat=True)) == ["finance"]
    services.platform_role_set(actor=platform_admin, user=bob, role="finance", granted=False)
    assert not bob.platform_roles.exists()
    with pytest.raises(Conflict):
        services.platform_role_set(actor=platform_admin, user=platform_admin,
                                   role="platform_admin", granted=False)


def test_user_create_validates_and_refuses_duplicates(platform_admin, bob):
    with pytest.raises(Conflict):
        services.user_create(actor=platform_admin, username="bob", email="b@x.org",
                             password="a-long-enough-pass-123")
    with pytest.raises(ApplicationError) as err:
        services.user_create(actor=platform_admin, username="newbie", email="n@x.org",
                             password="123")
    assert err.value.field == "password"
    user = services.user_create(actor=platform_admin, username="newbie", email="n@x.org",
                                password="a-long-enough-pass-123")
    assert user.check_password("a-long-enough-pass-123")
