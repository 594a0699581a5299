"""Cordoning nodes for a maintenance window (pure): the patch that cordons or uncordons.

``kubectl cordon`` sets ``spec.unschedulable: true`` on the Node and ``uncordon`` clears
it (kubectl's ``drain.RunCordonOrUncordon`` patches only that field); the scheduler then
places no new pod there (the node lifecycle controller adds the
``node.kubernetes.io/unschedulable:NoSchedule`` taint), while running pods stay.
Trainyard also puts its own taint ``trainyard.io/maintenance=<window id>:NoSchedule`` on a
node it cordons, so anyone reading the node sees why and for which window, and a release
removes exactly its own taint.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["HOLD_LABEL", "MAINTENANCE_KEY", "UNSCHEDULABLE_TAINT", "cordon_patch",
           "hold_label_patch", "hold_tolerations", "is_cordoned", "maintenance_taint"]

MAINTENANCE_KEY = "trainyard.io/maintenance"
#: The label on a node a window holds for its target job (value: the window id): what
#: the window's Kueue ResourceFlavor selects (``k8s_sync.kueue_hold``).
HOLD_LABEL = "trainyard.io/maintenance-hold"
#: The taint the node lifecycle controller puts on a cordoned node (``TaintNodeUnschedulable``).
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


def maintenance_taint(window_id: int | str) -> dict[str, str]:
    return {"key": MAINTENANCE_KEY, "value": str(window_id), "effect": "NoSchedule"}


def is_cordoned(node: Mapping[str, Any]) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return all(a.get(k) == b.get(k) for k in ("key", "value", "effect"))


def cordon_patch(node: Mapping[str, Any], *, unschedulable: bool,
                 taint: Mapping[str, str] | None = None,
                 keep_unschedulable: bool = False,
                 taint_only: bool = False) -> dict[str, Any] | None:
    """The merge patch that cordons (``unschedulable=True``, adding ``taint``) or
    uncordons (removing ``taint``; ``spec.unschedulable`` cleared unless
    ``keep_unschedulable``) ``node``, or None when it already is so. Other taints are
    kept; the patch carries the node's resourceVersion, so a concurrent change fails with
    a 409 (retry) instead of losing someone else's taint. ``taint_only``: the taint
    without the cordon (a node held for one job in Kueue mode: Kueue's topology-aware
    scheduling leaves cordoned nodes out, ``pkg/cache/scheduler/tas_nodes_cache.go``)."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    taints = list(spec.get("taints") or [])
    others = [t for t in taints if taint is None or not _same(t, taint)]
    wanted_taints = [*others, dict(taint)] if (unschedulable and taint) else others
    wanted_flag = (unschedulable and not taint_only) or (
        (keep_unschedulable or taint_only) and is_cordoned(node))
    if is_cordoned(node) == wanted_flag and taints == wanted_taints:
        return None
    patch_spec: dict[str, Any] = {"unschedulable": True if wanted_flag else None}
    if taints != wanted_taints:
        patch_spec["taints"] = wanted_taints or None
    return {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "spec": patch_spec}


def hold_tolerations(window_id: int | str) -> list[dict[str, str]]:
    """What the pods of a window's target job tolerate to run on the nodes it holds: the
    window's taint and the cordon (kube-scheduler's ``NodeUnschedulable`` filter lets a
    pod tolerating ``node.kubernetes.io/unschedulable:NoSchedule`` onto a cordoned node,
    ``pkg/scheduler/framework/plugins/nodeunschedulable``)."""
    return [{"key": MAINTENANCE_KEY, "operator": "Equal", "value": str(window_id),
             "effect": "NoSchedule"},
            {"key": UNSCHEDULABLE_TAINT, "operator": "Exists", "effect": "NoSchedule"}]


def hold_label_patch(node: Mapping[str, Any], window_id: int | str | None
                     ) -> dict[str, Any] | None:
    """The merge patch that labels ``node`` held for window ``window_id`` (None: removes
    the label), or None when it already is so."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    wanted = None if window_id is None else str(window_id)
    if labels.get(HOLD_LABEL) == wanted:
        return None
    return {"metadata": {"labels": {HOLD_LABEL: wanted}}}
