"""Kueue mode: the nodes a maintenance window frees, held for its target job (pure).

A window with a target job (``jobs.models.MaintenanceWindow.target_job``) holds the
nodes it freed for that job alone while it is open. In Kueue's terms, per window ``<id>``:

* a **ResourceFlavor** ``trainyard-window-<id>`` whose ``nodeLabels`` select only the held
  nodes (Trainyard labels them ``trainyard.io/maintenance-hold=<id>``,
  :data:`k8s_sync.maintenance.HOLD_LABEL`) and whose ``tolerations`` are the window's
  taint and the cordon (:func:`k8s_sync.maintenance.hold_tolerations`). Kueue adds both
  to the pods of a workload admitted on that flavor (``pkg/podset/podset.go``
  ``FromAssignment``: the flavor's ``nodeLabels`` into the node selector, its
  ``tolerations`` appended); no other flavor tolerates the taint, so no pod of another
  job lands there (kube-scheduler's ``TaintToleration`` and ``NodeUnschedulable``).
* a **ClusterQueue** ``trainyard-window-<id>`` in no cohort (it lends nothing and borrows
  nothing), open to the target's namespace only, with the held nodes' cards, cores and
  memory as the nominal quota of that one flavor: the only queue that offers the flavor
  (``pkg/scheduler/flavorassigner``: a workload is assigned only flavors of its own
  ClusterQueue's resource groups), and
* a **LocalQueue** ``trainyard-window-<id>`` in the target's namespace, which the target
  job is moved to while it is suspended (its ``kueue.x-k8s.io/queue-name`` label: Kueue
  moves its Workload, ``pkg/controller/jobframework/reconciler.go``
  ``QueueNameChange``).

The held capacity leaves the cohort's own quota while the hold lasts (``tenants.kueue``),
so no borrower is admitted by quota onto nodes it could not run on. The objects carry
Trainyard's Kueue labels (:func:`k8s_sync.kueue.owner_labels`): the Kueue converge writes
them while the hold is declared and prunes them once it is not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from k8s_sync import kueue
from k8s_sync.maintenance import HOLD_LABEL, hold_tolerations

__all__ = ["HoldSpec", "desired_objects", "held_capacity", "hold_name", "hold_objects"]

HOLD_PREFIX = "trainyard-window-"


def hold_name(window_id: int | str) -> str:
    """The flavor, ClusterQueue and LocalQueue of window ``window_id``'s hold."""
    return f"{HOLD_PREFIX}{window_id}"


@dataclass(frozen=True)
class HoldSpec:
    """One window's hold: the target job's ``namespace`` and the held nodes' ``amounts``
    by catalog key (``gpu:<model>``, ``cpu``, ``memory``; others are not counted)."""

    window_id: int
    namespace: str
    amounts: Mapping[str, Decimal] = field(default_factory=dict)
    topology: bool = False  # the flavor names Trainyard's Topology (as the GPU flavors do)

    @property
    def name(self) -> str:
        return hold_name(self.window_id)


def hold_objects(hold: HoldSpec) -> list[dict[str, Any]]:
    """The hold's ResourceFlavor, ClusterQueue and LocalQueue, in apply order."""
    name = hold.name
    meta = {"name": name, "labels": kueue.owner_labels()}
    flavor = {"apiVersion": kueue.KUEUE_API, "kind": "ResourceFlavor", "metadata": meta,
              "spec": {"nodeLabels": {HOLD_LABEL: str(hold.window_id)},
                       "tolerations": hold_tolerations(hold.window_id),
                       **({"topologyName": kueue.TOPOLOGY} if hold.topology else {})}}
    keys = sorted(k for k in hold.amounts if kueue.counted(k) and k.partition(":")[0] in (
        "cpu", "memory", "gpu"))
    resources = [{"name": kueue._resource_of(k)[1],
                  "nominalQuota": kueue._quantity(k, Decimal(hold.amounts[k]))} for k in keys]
    queue = {"apiVersion": kueue.KUEUE_API, "kind": "ClusterQueue", "metadata": dict(meta),
             "spec": {"namespaceSelector": {"matchLabels": {
                 "kubernetes.io/metadata.name": hold.namespace}},
                 "resourceGroups": [{"coveredResources": [r["name"] for r in resources],
                                     "flavors": [{"name": name, "resources": resources}]}],
                 "preemption": {"reclaimWithinCohort": "Never",
                                "withinClusterQueue": "Never"}}}
    local = {"apiVersion": kueue.KUEUE_API, "kind": "LocalQueue",
             "metadata": {**meta, "namespace": hold.namespace},
             "spec": {"clusterQueue": name}}
    return [flavor, queue, local]


def desired_objects(spec: kueue.KueueSpec) -> list[dict[str, Any]]:
    """Every Kueue object Trainyard wants (:func:`k8s_sync.kueue.desired_kueue_objects`)
    and then the holds' (``KueueSpec.holds``), in apply order."""
    return [*kueue.desired_kueue_objects(spec),
            *(obj for hold in spec.holds for obj in hold_objects(hold))]


def held_capacity(holds: tuple[HoldSpec, ...]) -> dict[str, Decimal]:
    """What the holds take out of the cohort, by catalog key."""
    total: dict[str, Decimal] = {}
    for hold in holds:
        for key, amount in hold.amounts.items():
            total[key] = total.get(key, Decimal(0)) + Decimal(amount)
    return total


def is_hold(name: str) -> bool:
    return name.startswith(HOLD_PREFIX)


