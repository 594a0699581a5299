"""Who may do what: the one place that answers permission questions about tenants.

A user sees a tenant when they are a member of it, a platform admin or finance. For
everybody else the tenant does not exist: lookups raise 404, never 403, so slugs and
ids of other teams do not leak.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import Http404
from django.utils.translation import gettext as _

from core.exceptions import NotAllowed
from tenants.choices import MembershipRole, PlatformRoleName
from tenants.models import Membership, PlatformRole, Tenant

# A request's user: authenticated or anonymous. Typed loosely on purpose: django-stubs
# cannot see that @login_required and DRF's IsAuthenticated rule out AnonymousUser.
AnyUser = Any


def platform_roles(user: AnyUser) -> frozenset[str]:
    """The platform-wide roles of ``user``, cached on the user object per request."""
    if not user.is_authenticated:
        return frozenset()
    cached = getattr(user, "_trainyard_platform_roles", None)
    if cached is None:
        roles = set(PlatformRole.objects.filter(user=user).values_list("role", flat=True))
        if getattr(user, "is_superuser", False):
            roles.add(PlatformRoleName.PLATFORM_ADMIN)
        cached = frozenset(roles)
        user._trainyard_platform_roles = cached  # type: ignore[union-attr]
    return cached


def is_platform_admin(user: AnyUser) -> bool:
    return PlatformRoleName.PLATFORM_ADMIN in platform_roles(user)


def is_finance(user: AnyUser) -> bool:
    return PlatformRoleName.FINANCE in platform_roles(user)


def sees_all_tenants(user: AnyUser) -> bool:
    """Platform admins and finance see every tenant (finance read-only)."""
    return is_platform_admin(user) or is_finance(user)


@dataclass(frozen=True)
class TenantAccess:
    """What one user may do in one tenant."""

    tenant: Tenant
    role: str | None  # the membership role, None for platform staff without membership
    platform_admin: bool
    finance: bool

    @property
    def is_member(self) -> bool:
        return self.role is not None

    @property
    def can_admin(self) -> bool:
        """Manage members, request quota: tenant admins and platform admins."""
        return self.role == MembershipRole.ADMIN or self.platform_admin

    @property
    def can_submit(self) -> bool:
        """Submit work: members of an active tenant."""
        return self.is_member and self.tenant.is_active

    @property
    def can_manage_tenant(self) -> bool:
        """Edit, suspend, reactivate the tenant itself: platform admins."""
        return self.platform_admin

    @property
    def can_request_quota(self) -> bool:
        """Ask for quota: tenant admins, and members where the tenant allows it."""
        return self.role == MembershipRole.ADMIN or (
            self.is_member and self.tenant.members_may_request_quota)

    def require_member(self) -> None:
        if not self.is_member:
            raise NotAllowed(_("Only members of this tenant can submit jobs."))

    def require_request_quota(self) -> None:
        if not self.can_request_quota:
            raise NotAllowed(_("Only a tenant admin can request quota for this tenant."))

    def require_admin(self) -> None:
        if not self.can_admin:
            raise NotAllowed(_("Only a tenant admin or a platform admin can do this."))

    def require_platform_admin(self) -> None:
        if not self.platform_admin:
            raise NotAllowed(_("Only a platform admin can do this."))


def access_for(user: AnyUser, tenant: Tenant) -> TenantAccess | None:
    """The user's access to ``tenant``, or None when the tenant is invisible to them."""
    if not user.is_authenticated:
        return None
    role = (
        Membership.objects.filter(user=user, tenant=tenant).values_list("role", flat=True).first()
    )
    admin, finance = is_platform_admin(user), is_finance(user)
    if role is None and not (admin or finance):
        return None
    return TenantAccess(tenant=tenant, role=role, platform_admin=admin, finance=finance)


def require_platform_admin(user: AnyUser) -> None:
    if not is_platform_admin(user):
        raise NotAllowed(_("Only a platform admin can do this."))


def platform_admin_or_404(user: AnyUser) -> None:
    """Platform pages do not exist for anyone but platform admins (404, not 403)."""
    if not is_platform_admin(user):
        raise Http404
