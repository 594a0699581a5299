"""Topology-aware scheduling's taint filter (Kueue).

kubernetes-sigs/kueue ``pkg/cache/scheduler/scheduling_simulator_default.go``: a node
whose ``NoSchedule``/``NoExecute`` taint the pod set does not tolerate is left out of
every topology domain (``FindMatchingUntoleratedTaint`` with ``IsSchedulingTaint``;
``ExclusionTaints`` in the pending message's statistics), the tolerations being the pod
template's and the ResourceFlavor's (``tas_flavor_snapshot.go``:
``podRequirements.Tolerations = append(info.Tolerations, s.tolerations...)``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

_SCHEDULING = ("NoSchedule", "NoExecute")


def untolerated(taints: Iterable[dict], tolerations: list,
                tolerated: Callable[[dict, list], bool]) -> bool:
    """Whether any scheduling taint of a node is tolerated by none of ``tolerations``."""
    return any(t.get("effect") in _SCHEDULING and not tolerated(t, tolerations)
               for t in taints or ())
