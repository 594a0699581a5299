"""Helpers shared by the tenants services: model validation, sync scheduling (audit rows:
``tenants.audit.record_audit``)."""

from __future__ import annotations

from typing import Any

from celery import current_app
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F

from core.exceptions import ApplicationError
from tenants.models import Pool, Tenant
from tenants.network import parse_cidrs

__all__ = ["_clean", "_egress_cidrs", "_schedule_nodes_sync", "_schedule_pools",
           "_schedule_sync"]


def _schedule_sync(tenant: Tenant) -> None:
    """Mark the tenant's pools as needing a sync and enqueue it once the commit lands.

    Call inside the transaction that made the change. If the broker is down the enqueue
    fails quietly (``robust``): the pools stay *pending* and the periodic resync picks
    them up, so nothing is lost.
    """
    _schedule_pools(list(Pool.objects.filter(tenant=tenant).values_list("pk", flat=True)))


def _task(name: str) -> Any:
    """A tenants task by its stable name (``tenants.tasks`` imports the services, so they
    enqueue by name; ``tenants.apps`` imports the tasks in every process)."""
    return current_app.tasks[name]


def _schedule_pools(pool_ids: list[int]) -> None:
    Pool.objects.filter(pk__in=pool_ids).update(desired_version=F("desired_version") + 1)
    for pool_id in pool_ids:
        def enqueue(pool_id: int = pool_id) -> None:
            _task("tenants.reconcile_pool").delay(pool_id)
        transaction.on_commit(enqueue, robust=True)


def _clean(instance: Any, *, exclude: list[str] | None = None) -> None:
    """Run model validation; the first message becomes an ApplicationError."""
    try:
        instance.full_clean(exclude=exclude)
    except ValidationError as exc:
        field, messages = next(iter(exc.message_dict.items()))
        raise ApplicationError(f"{messages[0]}", field=None if field == "__all__" else field,
                               extra={"errors": exc.message_dict}) from None


def _schedule_nodes_sync() -> None:
    def enqueue() -> None:
        _task("tenants.reconcile_nodes").delay()
    transaction.on_commit(enqueue, robust=True)


def _egress_cidrs(value: Any) -> list[str]:
    """Normalised, de-duplicated egress CIDRs (policy's or a tenant's); an
    ApplicationError on ``egress_cidrs`` naming the first bad entry."""
    try:
        return parse_cidrs(value)
    except ValueError as exc:
        raise ApplicationError(str(exc), field="egress_cidrs") from None
