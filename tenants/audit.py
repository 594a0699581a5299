"""The audit log's one writer: every service of every app records its AuditEvent here."""

from __future__ import annotations

from typing import Any

from core.texts import StoredText, english
from tenants.models import AuditEvent, Tenant

__all__ = ["record_audit"]


def record_audit(*, actor: Any, action: str, text: StoredText, tenant: Tenant | None = None,
                 tenant_id: int | None = None, **data: Any) -> AuditEvent:
    """One audit row, in the caller's transaction: ``text`` (a stored text, shown in the
    reader's language on the audit page) and its English rendering as ``summary``.

    ``actor``: the user who acted; ``None``, an anonymous user or anything that is not an
    authenticated user is recorded as the system. ``tenant`` (or only its ``tenant_id``,
    when the row is not at hand) scopes the row to a tenant's log. ``data``: the details
    (JSON), e.g. the amounts before and after.
    """
    authenticated = actor is not None and getattr(actor, "is_authenticated", False)
    if tenant is not None:
        tenant_id = tenant.pk
    return AuditEvent.objects.create(
        actor=actor if authenticated else None, tenant_id=tenant_id, action=action, text=text,
        summary=english(text)[:500], data=data)
