"""One measured figure for waste: units idle while a job that fits them waits.

Pure (no database, no clock): :func:`idle_while_waiting` reads what one admission pass
saw and decided (the engine's inputs, ``nodes`` and ``jobs``, and its
:class:`~jobs.admission.types.Decisions`) and returns, per resource key (``gpu:<model>``,
``mig:<profile>``, ``shared:<model>``, the placement keys of
:attr:`JobView.resource_key <jobs.admission.types.JobView.resource_key>`), what was idle
after the pass and how much of it a waiting job could have taken, split by the cause read
from that job's wait reason (:func:`cause_of`). The admission loop records it on every
pass that explains (``jobs.idle_waiting.idle_waiting_record``); ``bench/idle_while_waiting.py``
replays a workload through ``decide()`` with it.

Definitions, per key:

* **capacity**: the key's units on every node of the inputs (schedulable or not), as
  :class:`~jobs.admission.capacity.Capacity` indexes them.
* **free** (idle): free units on *schedulable* nodes after this pass: each node's units
  minus what bound pods hold (``gpus_used``, ``mig_used``, ``shared_used``), minus the
  placements of admitted jobs whose pods are not bound yet, minus this pass's admissions.
  Units that preempting jobs (or this pass's victims) still hold are not free.
* **fits**: a waiting job (queued, not held, not admitted by the pass, with a wait reason)
  fits when its whole gang can be placed now on the free units, by the engine's own
  placement (:meth:`Capacity.place`: one node, or one switch for a multi-node gang),
  on the nodes it may use (a node dedicated to a tenant only for that tenant's jobs).
* **idle while waiting**: the waiting jobs are taken **greedily, one after the other, in
  the engine's queue order** (``WaitInfo.position_in_model``; without positions: tier,
  submission time, id), each key apart. A job that fits is placed on a copy of the free
  units, which it then takes: its whole demand is counted (under its cause) and the next
  jobs see only what is left. A job that no longer fits after the jobs before it is not
  counted. So no unit is counted twice, and per key
  ``sum(waiting.values()) <= free``: it is min(free units, units the fitting waiting jobs
  could take together), the min being reached by placement, not by clipping.

Causes (:data:`CAUSES`), from the waiting job's reason code (a reason given as a list, a
reason with its queue position, is read by its first element):

* ``soft_limit``: a quota-type wait of a development or batch job
  (:data:`QUOTA_CODES`: over its quota, ceiling or batch ceiling, in the GPU key or in
  another dimension, and ``jobs.never.no_quota``/``above_quota``/``above_ceiling``: asking
  more than its pool may hold; in Kueue mode Kueue's quota wait, ``jobs.wait.kueue.quota``),
  a limit idle capacity could have served;
* ``own_quota``: the same codes for a production job: production never borrows;
* ``reservation``: ``jobs.wait.reserved``, the units are held for a larger job's
  reserved start;
* ``cap``: a hard cap an admin set: ``jobs.wait.borrow_cap`` and any ``jobs.never.*``
  code with ``cap`` as a word of it;
* ``watermark``: ``jobs.wait.watermark``;
* ``other``: anything else (a job that fits while its reason speaks of capacity is
  usually waiting on a room a preemption promised it, or on the pass's order).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from core.choices import Tier
from jobs.choices import JobState

from .capacity import Capacity
from .types import TIER_RANK, TIERS, Decisions, JobView, NodeView, Text

CAUSES: tuple[str, ...] = ("soft_limit", "own_quota", "reservation", "cap", "watermark",
                           "other")
"""The causes, in the order pages show them."""

QUOTA_CODES: frozenset[str] = frozenset({
    "jobs.wait.over_quota", "jobs.wait.over_quota_wait", "jobs.wait.over_ceiling",
    "jobs.wait.over_batch_ceiling", "jobs.wait.over_quota_dim", "jobs.wait.over_ceiling_dim",
    "jobs.never.no_quota", "jobs.never.above_quota", "jobs.never.above_ceiling",
    # Kueue mode: Kueue's "insufficient unused quota" (its QuotaReserved reason, read
    # into jobs.backends.kueue.kueue_reason)
    "jobs.wait.kueue.quota",
})
"""Reasons of a job held back by its pool's quota (soft limit, or production's own quota)."""

CAP_CODES: frozenset[str] = frozenset({
    "jobs.wait.borrow_cap", "jobs.wait.borrow_cap_dim", "jobs.never.above_cap",
    "jobs.never.no_quota_capped",
})
"""Reasons of development or batch work held by the borrowing cap a platform admin set."""


def reason_code(reason: Text | None) -> str:
    """The code of a stored reason (the first of a list); "" for a plain string or none."""
    while isinstance(reason, list):
        reason = reason[0] if reason else None
    if isinstance(reason, dict):
        return str(reason.get("code") or "")
    return ""


def cause_of(reason: Text | None, tier: str) -> str:
    """The cause (one of :data:`CAUSES`) of a wait, from its reason and the job's tier."""
    code = reason_code(reason)
    if code in QUOTA_CODES:
        return "own_quota" if tier == Tier.PRODUCTION else "soft_limit"
    if code == "jobs.wait.reserved":
        return "reservation"
    if code == "jobs.wait.watermark":
        return "watermark"
    if code in CAP_CODES:
        return "cap"
    return "other"


@dataclass(frozen=True)
class KeyIdle:
    """One resource key after one pass (units of the key: GPUs, MIG instances, shares)."""

    key: str
    capacity: int
    """Units on every node."""
    free: int
    """Free units on schedulable nodes after the pass (idle)."""
    waiting: Mapping[str, int] = field(default_factory=dict)
    """Cause -> units idle while a waiting job that fits them waits (only causes > 0)."""

    @property
    def idle_waiting(self) -> int:
        """Units idle while work that fits waits, every cause (<= ``free``)."""
        return sum(self.waiting.values())


def idle_while_waiting(*, nodes: Sequence[NodeView], jobs: Sequence[JobView],
                       decisions: Decisions,
                       reasons: Mapping[int, Text] | None = None) -> dict[str, KeyIdle]:
    """Per resource key: capacity, free units after the pass, and the units idle while a
    fitting job waits, by cause (see the module docstring for the exact counting).

    ``reasons`` (job id -> reason) takes precedence over ``decisions.waiting``'s: pass it
    for a pass that did not explain (``decide(explain=False)`` returns no WaitInfo); a
    waiting job with neither is not counted. Every key of the nodes is in the result,
    with ``waiting`` empty when nothing waits on it.
    """
    cap = Capacity(nodes)
    by_id = {j.id: j for j in jobs}
    for job in jobs:   # admitted jobs' unbound pods: not in the nodes' use yet
        if job.state == JobState.ADMITTED and job.resource_key:
            cap.take(job.resource_key, job.placement, job.gpus_per_replica)
    admitted = set()
    for admission in decisions.admit:
        admitted.add(admission.job_id)
        taken = by_id.get(admission.job_id)
        if taken is not None and taken.resource_key and taken.state == JobState.QUEUED:
            cap.take(taken.resource_key, admission.placement, taken.gpus_per_replica)
    capacity: dict[str, int] = defaultdict(int)
    for (key, _name), slot in cap.index.items():
        capacity[key] += slot.cap
    free = {key: sum(max(s.free, 0) for s in cap.slots.get(key, ())) for key in capacity}

    candidates: list[tuple[tuple[object, ...], JobView, Text]] = []
    for job in jobs:
        if (job.state != JobState.QUEUED or job.held or job.id in admitted
                or not job.resource_key or free.get(job.resource_key, 0) <= 0):
            continue
        info = decisions.waiting.get(job.id)
        reason = reasons.get(job.id) if reasons is not None else None
        if reason is None:
            if info is None:
                continue
            reason = info.reason
        order = (job.resource_key,
                 info.position_in_model if info is not None else 1 << 30,
                 TIER_RANK.get(job.tier, len(TIERS)), job.submitted_at, job.id)
        candidates.append((order, job, reason))
    candidates.sort(key=lambda c: c[0])

    waiting: dict[str, dict[str, int]] = defaultdict(dict)
    left = dict(free)
    failed: dict[tuple[str, str, int], int] = {}   # (key, scope, per) -> fewest replicas failed
    for _order, job, reason in candidates:
        key, per, replicas = job.resource_key, job.gpus_per_replica, job.replicas
        if left.get(key, 0) < job.demand:
            continue
        memo = (key, cap.scope(key, job.tenant), per)
        if replicas >= failed.get(memo, 1 << 30):
            continue   # free only shrinks: a gang as large failed already
        plan = cap.place(key, job.tenant, replicas, per)
        if plan is None:
            failed[memo] = min(failed.get(memo, 1 << 30), replicas)
            continue
        for slot, count in plan:   # take it (the capacity is this function's own copy)
            slot.free -= count * per
        cap.changed(key)
        left[key] -= job.demand
        cause = cause_of(reason, job.tier)
        waiting[key][cause] = waiting[key].get(cause, 0) + job.demand
    return {key: KeyIdle(key, capacity[key], free[key], dict(waiting.get(key, {})))
            for key in sorted(capacity)}
