"""The cluster side of maintenance windows (defragmentation): cordon what open windows
free, uncordon what ended or cancelled windows held.

``jobs.apply_maintenance_windows`` (``jobs.tasks``) opens the due windows
(``services.window_apply``: the jobs its plan moves are preempted), then calls
:func:`hold_window_nodes` and :func:`release_windows`; a transient API error retries
the whole pass there. Level-triggered and idempotent: a second run writes nothing.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone

from jobs import selectors, services
from jobs.models import MaintenanceWindow
from k8s_sync.client import get_client
from k8s_sync.maintenance import cordon_patch, is_cordoned, maintenance_taint
from tenants.kueue import kueue_on


def open_due(now: dt.datetime) -> int:
    """Open every scheduled window whose start has come (``services.window_apply``: the
    jobs its plan moves are preempted). Returns the jobs moved."""
    due = MaintenanceWindow.objects.filter(status=MaintenanceWindow.Status.SCHEDULED,
                                           starts_at__lte=now)
    return sum(services.window_apply(window_id=w.pk, now=now) for w in due)


def hold_window_nodes(now: dt.datetime) -> int:
    """Cordon what open windows free. A node already cordoned by someone else is
    remembered as such and left alone (at the end it stays cordoned); a node the window
    cordoned and someone uncordoned is cordoned again. Returns nodes patched."""
    windows = list(selectors.open_windows(now))
    if not windows:
        return 0
    client = get_client()
    nodes = {n["metadata"]["name"]: n for n in client.list_objects("v1", "Node")}
    patched = 0
    for window in windows:
        applied = (window.plan or {}).get("applied") or {}
        ours, before = set(window.nodes or []), set(applied.get("already_cordoned") or [])
        fresh: list[str] = []
        found: list[str] = []
        for name in applied.get("nodes") or []:
            node = nodes.get(name)
            if node is None or name in before:
                continue
            if name not in ours:
                (found if is_cordoned(node) else fresh).append(name)
        if (fresh or found) and not services.window_nodes_hold(
                window_id=window.pk, cordoned=fresh, already=found):
            continue  # cancelled or released meanwhile
        taint = maintenance_taint(window.pk)
        # Kueue mode, nodes held for a target job: tainted, not cordoned (jobs.window_kueue)
        only = kueue_on() and window.target_job_id is not None
        for name in sorted(ours | set(fresh)):
            if name in nodes and cordon_patch(nodes[name], unschedulable=True, taint=taint,
                                              taint_only=only) is not None:
                client.set_node_unschedulable(name, True, taint=taint, taint_only=only)
                patched += 1
        if fresh:  # cancelled and released while we cordoned: give them back now
            window.refresh_from_db()
            if window.released_at is not None or window.status != window.Status.APPLIED:
                for name in fresh:
                    client.set_node_unschedulable(name, False, taint=taint)
                services.window_released(window_id=window.pk)
    return patched


def release_windows(now: dt.datetime) -> int:
    windows = list(selectors.windows_to_release(now))
    if not windows:
        return 0
    client = get_client()
    return sum(_release(client, window.pk) for window in windows)


def _release(client: Any, window_id: int) -> int:
    """Uncordon exactly the nodes the window cordoned (a node another open window also
    holds only loses this window's taint), then stamp the window released."""
    window = MaintenanceWindow.objects.get(pk=window_id)
    others = set()
    for nodes in selectors.open_windows(timezone.now()).exclude(pk=window_id).values_list(
            "nodes", flat=True):
        others |= set(nodes or [])
    for name in window.nodes or []:
        client.set_node_unschedulable(name, False, taint=maintenance_taint(window_id),
                                      keep_unschedulable=name in others)
    return int(services.window_released(window_id=window_id))
