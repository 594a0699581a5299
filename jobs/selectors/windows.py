"""Maintenance windows (defragmentation): which are open, which to release, which nodes
they hold."""

from __future__ import annotations

from django.db.models import Q

from jobs.models import MaintenanceWindow

# --- maintenance windows --------------------------------------------------------------------


def open_windows(now):  # type: ignore[no-untyped-def]
    """Applied maintenance windows not yet released whose end has not come."""
    return MaintenanceWindow.objects.filter(status=MaintenanceWindow.Status.APPLIED,
                                            released_at__isnull=True, ends_at__gt=now)


def windows_to_release(now):  # type: ignore[no-untyped-def]
    """Windows that cordoned (or may have cordoned) nodes and ended or were cancelled."""

    return MaintenanceWindow.objects.filter(released_at__isnull=True,
                                            applied_at__isnull=False).filter(
        Q(status=MaintenanceWindow.Status.CANCELLED) | Q(ends_at__lte=now))


def maintenance_held_nodes(now) -> set[str]:  # type: ignore[no-untyped-def]
    """Nodes an open window frees: no new work goes there until it ends, whether or not
    the cordon has been applied or observed yet."""
    held: set[str] = set()
    for plan, nodes in open_windows(now).values_list("plan", "nodes"):
        held |= set(((plan or {}).get("applied") or {}).get("nodes") or [])
        held |= set(nodes or [])
    return held
