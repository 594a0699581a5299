"""Kueue's Workloads read back (pure): a Workload's conditions, admission and eviction
counts as :class:`WorkloadView`, and which job owns it. Split from ``k8s_sync.kueue``
(the builders), which re-exports every name here."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from k8s_sync import kueue_status


@dataclass(frozen=True)
class Condition:
    status: bool
    reason: str
    message: str
    at: dt.datetime | None


@dataclass(frozen=True)
class WorkloadView:
    """What Trainyard reads of one Workload: whose job it is, whether it is active, its
    conditions by type, and the flavors it was admitted on."""

    namespace: str
    name: str
    owner_kind: str
    owner_name: str
    active: bool
    queue_name: str
    cluster_queue: str
    conditions: Mapping[str, Condition]
    flavors: tuple[str, ...] = ()
    requeue_at: dt.datetime | None = None
    requeue_count: int = 0   # status.requeueState.count (PodsReady timeouts, Kueue v0.19)
    # status.schedulingStats.evictions: (reason, underlying cause, count), sorted
    evictions: tuple[tuple[str, str, int], ...] = ()

    def is_true(self, kind: str) -> bool:
        cond = self.conditions.get(kind)
        return bool(cond and cond.status)

    @property
    def admitted(self) -> bool:
        """Admitted, not finished, and not evicted since (Kueue keeps ``Admitted`` true
        while an evicted workload's pods stop)."""
        return self.is_true("Admitted") and not self.is_true("Finished") and (
            self.evicted is None)

    @property
    def evicted(self) -> Condition | None:
        """The Evicted condition when it holds for the current admission (a preemption,
        a deactivation, ...): true, and not older than the ``Admitted`` condition."""
        cond = self.conditions.get("Evicted")
        if not cond or not cond.status:
            return None
        admitted = self.conditions.get("Admitted")
        if (admitted is not None and admitted.status and admitted.at is not None
                and cond.at is not None and cond.at < admitted.at):
            return None  # an eviction before this admission
        return cond

    @property
    def requeue_limit_exceeded(self) -> bool:
        """Kueue gave up starting it (``k8s_sync.kueue_status.limit_exceeded``)."""
        return kueue_status.limit_exceeded(self.active, self.conditions)

    @property
    def pending(self) -> Condition | None:
        """Why it waits: the QuotaReserved condition when false (its reason is
        Kueue's: WaitingForQuota, NoMatchingFlavor, ExceedsMaxQuota, ...)."""
        cond = self.conditions.get("QuotaReserved")
        return cond if cond and not cond.status else None


def _time(value: object) -> dt.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def owner_of(meta: Mapping[str, Any]) -> tuple[str, str]:
    """(kind, name) of an object's owner: its controller, else its first owner."""
    refs: list[dict[str, Any]] = list(meta.get("ownerReferences") or [])
    owner: dict[str, Any] = next((ref for ref in refs if ref.get("controller")),
                                 refs[0] if refs else {})
    return str(owner.get("kind") or ""), str(owner.get("name") or "")


def conditions_by_type(conditions: Iterable[Mapping[str, Any]]) -> dict[str, Condition]:
    """A Workload's ``status.conditions`` by type (the last one of a type)."""
    return {
        str(c.get("type")): Condition(status=c.get("status") == "True",
                                      reason=str(c.get("reason") or ""),
                                      message=str(c.get("message") or ""),
                                      at=_time(c.get("lastTransitionTime")))
        for c in conditions if c.get("type")}


def workload_view(obj: Mapping[str, Any]) -> WorkloadView:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    owner_kind, owner_name = owner_of(meta)
    conditions = conditions_by_type(status.get("conditions") or [])
    admission = status.get("admission") or {}
    flavors = sorted({str(f) for psa in admission.get("podSetAssignments") or []
                      for f in (psa.get("flavors") or {}).values()})
    return WorkloadView(
        namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
        owner_kind=owner_kind, owner_name=owner_name,
        active=spec.get("active", True) is not False,
        queue_name=str(spec.get("queueName") or ""),
        cluster_queue=str(admission.get("clusterQueue") or ""),
        conditions=conditions, flavors=tuple(flavors),
        requeue_at=_time((status.get("requeueState") or {}).get("requeueAt")),
        requeue_count=int((status.get("requeueState") or {}).get("count") or 0),
        evictions=kueue_status.evictions_of(
            (status.get("schedulingStats") or {}).get("evictions") or []))


JOB_KINDS = ("PyTorchJob", "TrainJob")


def workloads_by_job(objects: Iterable[Mapping[str, Any]],
                     owner_kinds: tuple[str, ...] = JOB_KINDS
                     ) -> dict[tuple[str, str], WorkloadView]:
    """(namespace, job name) -> its Workload (the newest when a job has several); a job's
    name is unique in its namespace across the kinds Trainyard creates."""
    found: dict[tuple[str, str], tuple[str, WorkloadView]] = {}
    for obj in objects:
        view = workload_view(obj)
        if view.owner_kind not in owner_kinds or not view.owner_name:
            continue
        created = str((obj.get("metadata") or {}).get("creationTimestamp") or "")
        key = (view.namespace, view.owner_name)
        if key not in found or created >= found[key][0]:
            found[key] = (created, view)
    return {key: view for key, (_c, view) in found.items()}
