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


def window_targets(now) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Node -> the open window holding it for its target job, for windows whose target
    job is still active (``MaintenanceWindow.target_job``): that job alone may be placed
    there (``jobs.admission``: the node is dedicated to ``window:<id>``)."""
    from jobs.choices import ACTIVE_STATES

    held: dict[str, int] = {}
    for pk, plan, nodes in open_windows(now).filter(
            target_job__state__in=ACTIVE_STATES).values_list("pk", "plan", "nodes"):
        for name in held_nodes_of(plan, nodes):
            held.setdefault(name, pk)
    return held


def held_nodes_of(plan, nodes) -> list[str]:  # type: ignore[no-untyped-def]
    """The nodes a window frees and holds: those its plan emptied and those it cordoned,
    not those someone else had cordoned before it (they stay out of use)."""
    applied = (plan or {}).get("applied") or {}
    before = set(applied.get("already_cordoned") or [])
    return sorted({*(applied.get("nodes") or []), *(nodes or [])} - before)


def target_windows(now) -> dict[int, int]:  # type: ignore[no-untyped-def]
    """Active job id -> the open window whose freed nodes are held for it."""
    from jobs.choices import ACTIVE_STATES

    return dict(open_windows(now).filter(target_job__state__in=ACTIVE_STATES).values_list(
        "target_job_id", "pk"))


def window_scope(window_id: int) -> str:
    """The dedication of the nodes a window holds for its target job (``NodeView``)."""
    return f"window:{window_id}"
