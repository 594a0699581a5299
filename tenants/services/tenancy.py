"""Tenants, members, accounts and platform roles."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from core.choices import PoolKind
from core.exceptions import ApplicationError, Conflict
from core.models import Policy
from core.texts import english, message
from tenants import texts
from tenants.access import AnyUser, TenantAccess, require_platform_admin
from tenants.audit import record_audit
from tenants.choices import MembershipRole, PlatformRoleName, TenantStatus
from tenants.models import (
    Membership,
    PlatformRole,
    Pool,
    QuotaGrant,
    Tenant,
)
from tenants.services._common import (
    _clean,
    _egress_cidrs,
    _schedule_nodes_sync,
    _schedule_sync,
)

User = get_user_model()


def tenant_create(*, actor: AnyUser, slug: str, name: str, cost_center: str,
                  contact_email: str, contact_name: str = "", billing_address: str = "",
                  admins: list[AnyUser] | None = None) -> Tenant:
    """Create a tenant with its prod and dev pools; platform admins only.

    A duplicate slug is a Conflict; nothing is written then.
    """
    require_platform_admin(actor)
    slug = (slug or "").strip()
    tenant = Tenant(slug=slug, name=name.strip(), cost_center=cost_center.strip(),
                    contact_email=contact_email.strip(), contact_name=contact_name.strip(),
                    billing_address=billing_address.strip())
    _clean(tenant, exclude=["slug"])
    _clean_slug(tenant)
    try:
        with transaction.atomic():
            tenant.save()
            pools = Pool.objects.bulk_create([Pool(tenant=tenant, kind=k)
                                              for k in PoolKind.values])
            _default_quota(actor, pools)
            for user in admins or []:
                Membership.objects.create(user=user, tenant=tenant, role=MembershipRole.ADMIN)
            record_audit(actor=actor, action="tenant.create", tenant=tenant,
                         text=message(texts.AUDIT_TENANT_CREATE, tenant=slug), slug=slug)
            _schedule_sync(tenant)
    except IntegrityError:
        raise Conflict(_("A tenant with the slug “%(slug)s” already exists.") % {"slug": slug},
                       field="slug") from None
    return tenant


def _clean_slug(tenant: Tenant) -> None:
    """Check the slug's shape, then that it is free (the unique index is the last guard)."""
    try:
        tenant.clean_fields(exclude=[f.name for f in Tenant._meta.fields if f.name != "slug"])
    except ValidationError as exc:
        raise ApplicationError(exc.message_dict["slug"][0], field="slug") from None
    if Tenant.objects.filter(slug=tenant.slug).exists():
        raise Conflict(
            _("A tenant with the slug “%(slug)s” already exists.") % {"slug": tenant.slug},
            field="slug",
        )


def tenant_update(*, access: TenantAccess, actor: AnyUser, **fields: Any) -> Tenant:
    """Change name, cost center, contact, quota mode, elastic ceiling, whether members
    may request quota, or the tenant's egress CIDRs (platform admins); the slug never
    changes (it names namespaces)."""
    access.require_platform_admin()
    allowed = {"name", "cost_center", "contact_email", "contact_name", "billing_address",
               "quota_mode",
               "borrowing_cap", "members_may_request_quota", "egress_cidrs"}
    unknown = set(fields) - allowed
    if unknown:
        raise ApplicationError(_("These fields cannot be changed: %(f)s")
                               % {"f": ", ".join(sorted(unknown))})
    if "egress_cidrs" in fields:  # the tenant's own egress destinations, beside the policy's
        fields["egress_cidrs"] = _egress_cidrs(fields["egress_cidrs"])
    tenant = Tenant.objects.get(pk=access.tenant.pk)
    cleaned = {k: v.strip() if isinstance(v, str) else v for k, v in fields.items()}
    changed = {k: v for k, v in cleaned.items() if getattr(tenant, k) != v}
    if not changed:
        return tenant
    for key, value in changed.items():
        setattr(tenant, key, value)
    _clean(tenant, exclude=["slug"])
    with transaction.atomic():
        tenant.save(update_fields=[*changed, "updated_at"])
        record_audit(actor=actor, action="tenant.update", tenant=tenant,
                     text=message(texts.AUDIT_TENANT_UPDATE, fields=", ".join(sorted(changed)),
                                  tenant=tenant.slug),
                     changes={k: str(v) for k, v in changed.items()})
        if "quota_mode" in changed or "borrowing_cap" in changed or "egress_cidrs" in changed:
            _schedule_sync(tenant)
    return tenant


def tenant_suspend(*, access: TenantAccess, actor: AnyUser, reason: str) -> Tenant:
    """Suspend: no new work is accepted; data, namespaces and history stay. Idempotent."""
    access.require_platform_admin()
    reason = (reason or "").strip()
    if not reason:
        raise ApplicationError(_("Say why the tenant is suspended; its members will see it."),
                               field="reason")
    with transaction.atomic():
        tenant = Tenant.objects.select_for_update().get(pk=access.tenant.pk)
        if tenant.status == TenantStatus.SUSPENDED and tenant.suspended_reason == reason:
            return tenant
        tenant.status = TenantStatus.SUSPENDED
        tenant.suspended_reason = reason
        tenant.suspended_at = timezone.now()
        tenant.save(update_fields=["status", "suspended_reason", "suspended_at", "updated_at"])
        record_audit(actor=actor, action="tenant.suspend", tenant=tenant,
                     text=message(texts.AUDIT_TENANT_SUSPEND, tenant=tenant.slug, reason=reason),
                     reason=reason)
        _schedule_sync(tenant)
    return tenant


def tenant_reactivate(*, access: TenantAccess, actor: AnyUser) -> Tenant:
    """Lift a suspension. Idempotent."""
    access.require_platform_admin()
    with transaction.atomic():
        tenant = Tenant.objects.select_for_update().get(pk=access.tenant.pk)
        if tenant.status == TenantStatus.ACTIVE:
            return tenant
        tenant.status = TenantStatus.ACTIVE
        tenant.suspended_reason = ""
        tenant.suspended_at = None
        tenant.save(update_fields=["status", "suspended_reason", "suspended_at", "updated_at"])
        record_audit(actor=actor, action="tenant.reactivate", tenant=tenant,
                     text=message(texts.AUDIT_TENANT_REACTIVATE, tenant=tenant.slug))
        _schedule_sync(tenant)
    return tenant


def _find_user(identifier: str) -> AnyUser:
    identifier = (identifier or "").strip()
    if not identifier:
        raise ApplicationError(_("Name a user by user name or e-mail."), field="user")
    user = User.objects.filter(username=identifier).first()
    if user is None and "@" in identifier:
        matches = list(User.objects.filter(email__iexact=identifier)[:2])
        if len(matches) == 1:
            user = matches[0]
    if user is None:
        raise ApplicationError(
            _("There is no user “%(u)s”. Ask a platform admin to create the account first.")
            % {"u": identifier}, field="user")
    return user


def _check_role(role: str) -> None:
    if role not in MembershipRole.values:
        raise ApplicationError(_("Unknown role “%(r)s”; use member or admin.") % {"r": role},
                               field="role")


def membership_add(*, access: TenantAccess, actor: AnyUser, user: str,
                   role: str = MembershipRole.MEMBER) -> Membership:
    """Add ``user`` (user name or e-mail) to the tenant; tenant or platform admins only.

    Idempotent: adding an existing member with the same role returns the membership;
    with another role it is a Conflict (change the role instead).
    """
    access.require_admin()
    _check_role(role)
    target = _find_user(user)
    existing = Membership.objects.filter(user=target, tenant=access.tenant).first()
    if existing is not None:
        if existing.role == role:
            return existing
        raise Conflict(_("%(u)s is already a %(r)s of this tenant; change the role instead.")
                       % {"u": target.get_username(), "r": existing.get_role_display()},
                       field="user")
    with transaction.atomic():
        membership, created = Membership.objects.get_or_create(
            user=target, tenant=access.tenant, defaults={"role": role})
        if created:
            record_audit(actor=actor, action="membership.add", tenant=access.tenant,
                         text=message(texts.AUDIT_MEMBER_ADD, user=target.get_username(),
                                      role=role),
                         user=target.get_username(), role=role)
    return membership


def membership_set_role(*, access: TenantAccess, actor: AnyUser,
                        membership: Membership, role: str) -> Membership:
    """Change a member's role; the last tenant admin cannot be demoted."""
    access.require_admin()
    _check_role(role)
    with transaction.atomic():
        current = Membership.objects.select_for_update().get(pk=membership.pk,
                                                             tenant=access.tenant)
        if current.role == role:
            return current
        if current.role == MembershipRole.ADMIN:
            _require_another_admin(access.tenant, current)
        current.role = role
        current.save(update_fields=["role"])
        record_audit(actor=actor, action="membership.role", tenant=access.tenant,
                     text=message(texts.AUDIT_MEMBER_ROLE, user=current.user.get_username(),
                                  role=role),
                     user=current.user.get_username(), role=role)
    return current


def membership_remove(*, access: TenantAccess, actor: AnyUser,
                      membership: Membership) -> None:
    """Remove a member; the last tenant admin cannot be removed. Idempotent."""
    access.require_admin()
    with transaction.atomic():
        current = (Membership.objects.select_for_update()
                   .filter(pk=membership.pk, tenant=access.tenant).first())
        if current is None:
            return
        if current.role == MembershipRole.ADMIN:
            _require_another_admin(access.tenant, current)
        username = current.user.get_username()
        current.delete()
        record_audit(actor=actor, action="membership.remove", tenant=access.tenant,
                     text=message(texts.AUDIT_MEMBER_REMOVE, user=username), user=username)


def _require_another_admin(tenant: Tenant, leaving: Membership) -> None:
    """Raise unless the tenant keeps an admin once ``leaving`` stops being one.

    Called inside the caller's transaction; locks the tenant's admin rows so two
    concurrent demotions cannot both pass.
    """
    others = (Membership.objects.select_for_update()
              .filter(tenant=tenant, role=MembershipRole.ADMIN).exclude(pk=leaving.pk))
    if not others.exists():
        raise Conflict(_("%(u)s is the last admin of this tenant. Make someone else an admin "
                         "first.") % {"u": leaving.user.get_username()})


def user_create(*, actor: AnyUser, username: str, email: str, password: str,
                first_name: str = "", last_name: str = "") -> AnyUser:
    """Create a portal account (platform admins). Password rules are Django's validators."""
    require_platform_admin(actor)
    username = (username or "").strip()
    if not username:
        raise ApplicationError(_("A user name is required."), field="username")
    if User.objects.filter(username=username).exists():
        raise Conflict(_("The user name “%(u)s” is taken.") % {"u": username}, field="username")
    user = User(username=username, email=email.strip(), first_name=first_name.strip(),
                last_name=last_name.strip())
    _clean(user, exclude=["password"])
    try:
        validate_password(password, user)
    except ValidationError as exc:
        raise ApplicationError(" ".join(exc.messages), field="password") from None
    user.set_password(password)
    with transaction.atomic():
        user.save()
        record_audit(actor=actor, action="user.create",
                     text=message(texts.AUDIT_USER_CREATE, user=username), user=username)
    return user


def platform_role_set(*, actor: AnyUser, user: AnyUser, role: str,
                      granted: bool) -> None:
    """Grant or revoke a platform role; idempotent. A platform admin cannot revoke their own."""
    require_platform_admin(actor)
    if role not in PlatformRoleName.values:
        raise ApplicationError(_("Unknown platform role “%(r)s”.") % {"r": role}, field="role")
    if (not granted and role == PlatformRoleName.PLATFORM_ADMIN
            and user.pk == actor.pk):
        raise Conflict(_("You cannot remove your own platform admin role."))
    with transaction.atomic():
        if granted:
            changed = PlatformRole.objects.get_or_create(user=user, role=role)[1]
        else:
            changed = PlatformRole.objects.filter(user=user, role=role).delete()[0] > 0
        if changed:
            verb = "granted" if granted else "revoked"
            record_audit(actor=actor, action=f"platform_role.{verb}",
                         text=message(
                             texts.AUDIT_ROLE_GRANT if granted else texts.AUDIT_ROLE_REVOKE,
                             role=role, user=user.get_username()),
                         user=user.get_username(), role=role)


# --- deletion -------------------------------------------------------------------------------


def tenant_delete(*, access: TenantAccess, actor: AnyUser, confirm: str) -> Tenant:
    """Start deleting a tenant's namespaces and everything in them (platform admins).

    ``confirm`` must repeat the tenant's slug. The tenant row, its history and its
    invoices stay (status *deleted*), so the slug is never reused. Idempotent.
    """
    access.require_platform_admin()
    tenant = access.tenant
    if (confirm or "").strip() != tenant.slug:
        raise ApplicationError(_("Type the tenant's slug “%(s)s” to confirm.") % {"s": tenant.slug},
                               field="confirm")
    with transaction.atomic():
        tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
        if tenant.status in (TenantStatus.DELETING, TenantStatus.DELETED):
            return tenant
        tenant.status = TenantStatus.DELETING
        tenant.save(update_fields=["status", "updated_at"])
        record_audit(actor=actor, action="tenant.delete", tenant=tenant,
                     text=message(texts.AUDIT_TENANT_DELETE, tenant=tenant.slug))
        _schedule_sync(tenant)
        _schedule_nodes_sync()  # its dedicated nodes return to the shared pool
    return tenant


def tenant_mark_deleted(*, tenant_id: int) -> None:
    """The namespaces are gone: the tenant is deleted (called by the reconcile task)."""
    with transaction.atomic():
        updated = Tenant.objects.filter(pk=tenant_id, status=TenantStatus.DELETING).update(
            status=TenantStatus.DELETED, updated_at=timezone.now())
        if updated:
            Membership.objects.filter(tenant_id=tenant_id).delete()
            record_audit(actor=None, tenant_id=tenant_id, action="tenant.deleted",
                               text=message(texts.AUDIT_TENANT_DELETED))


def _default_quota(actor: AnyUser, pools: list[Pool]) -> None:
    """Grant a new tenant's pools the policy's default quota (in the same transaction)."""
    defaults = Policy.current().default_quota or {}
    reason = message(texts.GRANT_DEFAULT_QUOTA)
    for pool in pools:
        for key, amount in (defaults.get(pool.kind) or {}).items():
            QuotaGrant.objects.create(pool=pool, resource=key, amount=Decimal(str(amount)),
                                      granted_by=actor, reason=english(reason),
                                      reason_text=reason)
