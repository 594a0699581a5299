"""Portal-level tasks.

Convention for every task in Trainyard: ``@shared_task(name="<app>.<verb>",
queue="<queue>")``, takes ids (never model instances), is idempotent, and retries only
on transient errors. Queues: ``default`` (light), ``k8s`` (cluster writes), ``billing``.
"""

from __future__ import annotations

from celery import shared_task
from django.core.cache import cache
from django.utils import timezone

HEARTBEAT_KEY = "portal:worker-heartbeat"


@shared_task(name="portal.heartbeat", queue="default")
def heartbeat() -> str:
    """Record that a worker ran a task now; idempotent (last write wins)."""
    stamp = timezone.now().isoformat()
    cache.set(HEARTBEAT_KEY, stamp, timeout=None)
    return stamp


@shared_task(name="portal.watchdog", queue="default")
def watchdog() -> dict[str, int]:
    """One pass of the progress watchdog (``portal.watchdog``): retries what is overdue,
    flags what stays so; idempotent."""
    from portal import watchdog as rules

    report = rules.run()
    return {"retrying": len(report.retrying), "flagged": len(report.flagged)}
