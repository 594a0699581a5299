"""Periodic observation: ``k8s_sync.relist`` relists every observed kind once.

The level-triggered safety net beside ``manage.py k8s_watch``: it repairs whatever a
lost watch event or a stopped watcher missed (see ``portal/schedules.py``). Idempotent:
a relist of an unchanged cluster writes only the bookkeeping.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from k8s_sync.client import get_client
from k8s_sync.observe import relist_all


@shared_task(name="k8s_sync.relist", queue="k8s")
def relist() -> dict[str, Any]:
    """Relist every observed kind (``observe.KINDS``); ``{kind: count|error}``."""
    return relist_all(get_client())
