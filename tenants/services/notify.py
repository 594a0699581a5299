"""Notifications: a row in the portal and, where it matters, an e-mail."""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django.core.mail import send_mail

from tenants.access import AnyUser
from tenants.choices import PlatformRoleName
from tenants.models import Notification, PlatformRole, Tenant


def notify(*, users: Iterable[AnyUser], tenant: Tenant | None, message: str, link: str = "",
           email: bool = False) -> None:
    """Tell ``users``; the e-mail goes out after the transaction commits (never for a
    change that was rolled back), and a mail failure never undoes the change."""
    from django.db import transaction

    users = [u for u in users if u is not None]
    Notification.objects.bulk_create(
        Notification(user=u, tenant=tenant, message=message[:500], link=link) for u in users)
    recipients = [u.email for u in users if email and u.email]
    if recipients:
        url = f"{settings.SITE_URL.rstrip('/')}{link}" if link else settings.SITE_URL

        def send() -> None:
            send_mail(subject=f"[Trainyard] {message[:120]}", message=f"{message}\n\n{url}\n",
                      from_email=None, recipient_list=recipients, fail_silently=True)
        transaction.on_commit(send)


def notify_platform_admins(*, tenant: Tenant | None, message: str, link: str) -> None:
    admins = [r.user for r in PlatformRole.objects.filter(
        role=PlatformRoleName.PLATFORM_ADMIN).select_related("user")]
    notify(users=admins, tenant=tenant, message=message, link=link, email=True)
