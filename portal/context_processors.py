"""Template context shared by every page: the tenant switcher and the user's roles."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from portal.reversing import slug_url
from tenants.access import is_finance, is_platform_admin
from tenants.choices import RequestStatus
from tenants.models import Notification, QuotaRequest
from tenants.selectors import tenants_listed_to


def navigation(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    match = getattr(request, "resolver_match", None)
    current_slug = match.kwargs.get("slug") if match else None
    admin = is_platform_admin(user)
    detail_url = slug_url("tenants:detail")  # one reverse for the whole switcher
    tenants = [{"slug": slug, "name": name, "status": status, "url": detail_url(slug)}
               for slug, name, status in tenants_listed_to(user)
               .values_list("slug", "name", "status")[:200]]
    # The tenant of the page, or the last one visited; never a slug the user cannot see
    # (a mistyped address shows the not-found page, not a switcher naming it).
    visible = {t["slug"] for t in tenants}
    current = next((s for s in (current_slug, request.session.get("tenant_slug"))
                    if s and (s in visible or (admin and len(tenants) >= 200))), None)
    return {
        "nav_unread": Notification.objects.filter(user=user, read_at__isnull=True).count(),
        "nav_pending_requests": QuotaRequest.objects.filter(status=RequestStatus.PENDING).count()
        if admin else 0,
        "nav_tenants": tenants,
        "nav_current_slug": current,
        "nav_platform_admin": admin,
        "nav_finance": is_finance(user),
    }
