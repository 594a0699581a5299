"""Notifications: a row in the portal and, where it matters, an e-mail.

The row stores a stored text (:mod:`core.texts`), so each reader sees it in their own
language; the e-mail is rendered in each recipient's preferred language (one mail per
language, one message per recipient), whoever caused it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from django.conf import settings
from django.core.mail import send_mass_mail
from django.db import transaction
from django.utils import translation

from core.texts import StoredText, english, render
from tenants.access import AnyUser
from tenants.choices import PlatformRoleName
from tenants.models import Notification, PlatformRole, Tenant
from tenants.selectors import languages_of


def notify(*, users: Iterable[AnyUser], tenant: Tenant | None, text: StoredText,
           link: str = "", email: bool = False) -> None:
    """Tell ``users`` ``text`` (a :func:`core.texts.message`, or a plain string); the
    e-mail goes out after the transaction commits (never for a change that was rolled
    back), and a mail failure never undoes the change."""
    users = [u for u in users if u is not None]
    Notification.objects.bulk_create(
        Notification(user=u, tenant=tenant, text=text, message=english(text)[:500], link=link)
        for u in users)
    recipients = [u for u in users if email and u.email]
    if not recipients:
        return
    languages = languages_of(recipients)
    groups: dict[str, list[str]] = defaultdict(list)
    for user in recipients:
        groups[languages.get(user.pk, settings.LANGUAGE_CODE)].append(user.email)
    url = f"{settings.SITE_URL.rstrip('/')}{link}" if link else settings.SITE_URL

    def send() -> None:
        # One message per recipient (no one sees who else was told), rendered once per
        # language, over one connection.
        messages = []
        for language, addresses in sorted(groups.items()):
            subject, body = email_content(text, url, language)
            messages += [(subject, body, None, [address]) for address in addresses]
        send_mass_mail(messages, fail_silently=True)
    transaction.on_commit(send)


def email_content(text: StoredText, url: str, language: str) -> tuple[str, str]:
    """The subject and body of a notification e-mail in ``language``. The subject is one
    line (a reason a person typed may hold line breaks; a header cannot)."""
    with translation.override(language):
        rendered = render(text)
    return f"[Trainyard] {' '.join(rendered.split())[:120]}", f"{rendered}\n\n{url}\n"


def notify_platform_admins(*, tenant: Tenant | None, text: StoredText, link: str) -> None:
    admins = [r.user for r in PlatformRole.objects.filter(
        role=PlatformRoleName.PLATFORM_ADMIN).select_related("user")]
    notify(users=admins, tenant=tenant, text=text, link=link, email=True)
