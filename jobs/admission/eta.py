"""Run times and estimated start times.

**Run times** (:class:`RunTimes`): a job's run time p50/p90 comes from History, the most
specific key with enough samples first: (tenant, tier, template, GPU model), then
(tenant, tier, GPU model), then (tenant, tier). The submitter's own estimate, when given,
is taken as the median and spread like History's (p90/p50 of the samples, else
``SPREAD``). Every figure is capped by the job's ``max_run_seconds`` (it is stopped then).
p90 equals p50 only when it is certain (the cap is reached). A running job's remaining
time is conditional on how long it has run: the quantiles of the samples longer than that,
minus it; past every sample, a share of its age, and never past its maximum run. A
running job that reported its own remaining time (``JobView.reported_remaining_seconds``,
fresh) is taken at its word: that, less the time since the report, is the p50, and
:data:`REPORTED_SPREAD` above it the p90.

**Start times** (:func:`simulate`): per resource key, node by node, the queue is played
forward in the engine's order against the holders' expected releases (on the nodes they
hold, so a gang that needs one whole node or one switch waits for one), within each
pool's ceiling, with the engine's reservation rule: the first job in order that does not
fit gets the nodes it will fit on at the earliest time they are expected free (its
*reservation*, :func:`reserve`); a later job starts before it only when it would not delay
it (expected to end, at its p90, by the reserved start, or leaving the reserved room
intact). Two runs: holders and queued jobs at their p50 times, then at their p90 times.
New arrivals and future preemptions are not modelled, nor are quota changes: a grant
raised or lowered moves ETAs, and no estimate can foresee it.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .capacity import Capacity, Plan, Slot
    from .types import History, JobView

TPK = tuple[str, str, str]

MIN_SAMPLES = 5
"""Samples a specific History key needs before it is used (the broadest key: one)."""

SPREAD = 1.6
"""p90 / p50 of a run time known only from the submitter's estimate."""

OVERDUE = (0.25, 1.0)
"""A running job past every sample (or past its p90): remaining p50 and p90 as shares of
its age so far (capped by its maximum run time)."""

REPORTED_SPREAD = (1.2, 120.0)
"""The p90 of a remaining time the job reported itself: the report x 1.2, and at least
two minutes above it (the job's own estimate is an estimate too)."""


def quantile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted values (nearest rank)."""
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


class RunTimes:
    """Run-time quantiles from History (memoised per key for one pass)."""

    def __init__(self, history: History, default_seconds: float) -> None:
        self.history = history
        self.default = default_seconds
        self._samples: dict[tuple[str, ...], tuple[float, ...]] = {}
        self._totals: dict[tuple[object, ...], tuple[float, float]] = {}

    def samples(self, job: JobView) -> tuple[float, ...]:
        keys: list[tuple[str, ...]] = []
        if job.template:
            keys.append((job.tenant, job.tier, job.template, job.gpu_model))
        keys += [(job.tenant, job.tier, job.gpu_model), (job.tenant, job.tier)]
        memo = keys[0]
        found = self._samples.get(memo)
        if found is None:
            found = ()
            for n, key in enumerate(keys):
                values = self.history.durations.get(key, ())
                values = tuple(sorted(v for v in values if v > 0))
                if len(values) >= (1 if n == len(keys) - 1 else MIN_SAMPLES):
                    found = values
                    break
            self._samples[memo] = found
        return found

    def total(self, job: JobView) -> tuple[float, float]:
        """(p50, p90) of the whole run in seconds (memoised per pass by what it reads: a
        queue holds many jobs of one tenant, tier and shape)."""
        memo = (job.tenant, job.tier, job.template, job.gpu_model, job.expected_seconds,
                job.max_run_seconds)
        found = self._totals.get(memo)
        if found is None:
            found = self._totals[memo] = self._total(job)
        return found

    def _total(self, job: JobView) -> tuple[float, float]:
        samples = self.samples(job)
        estimate = job.expected_seconds
        if estimate is not None and estimate > 0:
            spread = SPREAD
            if len(samples) >= 2:
                spread = max(quantile(samples, 0.9) / max(quantile(samples, 0.5), 1.0), 1.0)
            p50, p90 = estimate, estimate * spread
        elif samples:
            p50, p90 = quantile(samples, 0.5), quantile(samples, 0.9)
        else:
            p50, p90 = self.default, 2 * self.default
        cap = job.max_run_seconds
        if cap is not None and cap > 0:
            p50, p90 = min(p50, cap), min(p90, cap)
        return p50, max(p90, p50)

    def remaining(self, job: JobView, elapsed: float,
                  now_ts: float | None = None) -> tuple[float, float]:
        """(p50, p90) seconds left of a job that has run ``elapsed`` seconds (its own
        fresh report, at ``now_ts``, when it made one)."""
        elapsed = max(elapsed, 0.0)
        cap = job.max_run_seconds
        left_cap = max(cap - elapsed, 0.0) if cap is not None and cap > 0 else math.inf
        said, said_at = job.reported_remaining_seconds, job.reported_at
        if said is not None and said_at is not None and now_ts is not None:
            r50 = max(said - max(now_ts - said_at.timestamp(), 0.0), 0.0)
            r90 = max(r50 * REPORTED_SPREAD[0], r50 + REPORTED_SPREAD[1])
            r50, r90 = min(r50, left_cap), min(r90, left_cap)
            return r50, max(r90, r50)
        samples = self.samples(job)
        longer = [s for s in samples if s > elapsed] if not (
            job.expected_seconds and job.expected_seconds > 0) else []
        if longer:
            r50, r90 = quantile(longer, 0.5) - elapsed, quantile(longer, 0.9) - elapsed
        else:
            p50, p90 = self.total(job)
            if elapsed < p50:
                r50, r90 = p50 - elapsed, p90 - elapsed
            else:   # overdue: it has outlived the estimate
                r50 = max((p90 - elapsed) / 2, OVERDUE[0] * elapsed)
                r90 = max(p90 - elapsed, OVERDUE[1] * elapsed)
        r50, r90 = min(r50, left_cap), min(r90, left_cap)
        return max(r50, 0.0), max(r90, r50, 0.0)


# -- reservations ---------------------------------------------------------------------------


@dataclass
class Reservation:
    """The room the first waiting job of a resource key is promised at ``at`` (seconds
    from now): the nodes it fits on once the releases up to then are counted (``extra``
    per slot, on top of each slot's free units)."""

    job_id: int
    at: float
    tenant: str
    replicas: int
    per: int
    extra: dict[Slot, int] = field(default_factory=dict)
    order: int = 0
    """The head's index in the simulated queue (the simulation only)."""

    def allows(self, cap: Capacity, key: str, plan: Plan, per: int, end: float) -> bool:
        """Whether a job placed on ``plan`` (``per`` units a replica) now and expected to
        end at ``end`` leaves the reserved start as it is."""
        if end <= self.at + 1e-6:
            return True
        for slot, n in plan:
            slot.free -= n * per
        ok = cap.place(key, self.tenant, self.replicas, self.per, self.extra) is not None
        for slot, n in plan:
            slot.free += n * per
        return ok

    def started(self, plan: Plan, per: int, end: float) -> None:
        """A job started on ``plan`` and ends at ``end``: by the reserved start its units
        are free again when it ends before."""
        if end <= self.at + 1e-6:
            for slot, n in plan:
                self.extra[slot] = self.extra.get(slot, 0) + n * per


Release = tuple[float, tuple[tuple[str, int], ...]]
"""(seconds from now, ((node, units), ...)) of one holder."""


def reserve(cap: Capacity, key: str, job_id: int, tenant: str, replicas: int, per: int,
            releases: Sequence[Release]) -> Reservation | None:
    """The earliest time the gang fits, counting the releases in time order, and the room
    then; None when it does not fit even once every release is counted."""
    extra: dict[Slot, int] = {}
    ordered = sorted(releases, key=lambda r: r[0])
    usable = {id(s) for s in cap.eligible(key, tenant)}
    base = sum(max(s.free, 0) for s in cap.eligible(key, tenant))
    need = replicas * per
    added = 0
    i = 0
    while i < len(ordered):
        at = ordered[i][0]
        while i < len(ordered) and ordered[i][0] <= at:
            for name, units in ordered[i][1]:
                slot = cap.index.get((key, name))
                if slot is not None:
                    extra[slot] = extra.get(slot, 0) + units
                    if id(slot) in usable:
                        added += units
            i += 1
        if base + added >= need and cap.place(key, tenant, replicas, per, extra) is not None:
            return Reservation(job_id, max(at, 0.0), tenant, replicas, per, extra)
    return None


# -- the forward simulation -----------------------------------------------------------------


@dataclass(frozen=True)
class Queued:
    """One waiting job in the simulation."""

    id: int
    tenant: str
    tpk: TPK
    replicas: int
    per: int
    d50: float
    d90: float
    limit: int
    """The most its pool may hold of the key with it (its ceiling; a batch job's batch
    ceiling)."""
    batch: bool = False
    """A batch job counts every job of its pool against ``limit``; any other job only the
    pool's non-batch jobs (batch work yields to it)."""

    @property
    def units(self) -> int:
        return self.replicas * self.per


@dataclass
class KeySim:
    """One resource key's state for the simulation; times are seconds from now."""

    cap: Capacity
    """The key's slots alone, each ``free`` as now (after this pass's admissions)."""
    key: str
    releases: list[tuple[float, float, int, TPK, tuple[tuple[str, int], ...], bool]] = field(
        default_factory=list)
    """(end p50, end p90, units, tenant pool key, units per node, batch) of every holder."""
    queue: list[Queued] = field(default_factory=list)
    """Waiting jobs in admission order."""


def simulate(sim: KeySim, which: int) -> dict[int, float]:
    """Start time (seconds from now) of each queued job, at p50 (which=0) or p90 (1) times.

    Jobs that never start in the simulation are absent from the result.
    """
    key = sim.key
    cap = sim.cap.copy_key(key)
    events: list[tuple[float, int, int, TPK, tuple[tuple[str, int], ...], bool]] = []
    use_all: dict[TPK, int] = defaultdict(int)
    use_nb: dict[TPK, int] = defaultdict(int)
    for seq, (end50, end90, units, tpk, nodes, batch) in enumerate(sim.releases):
        events.append((max(end50 if which == 0 else end90, 0.0), seq, units, tpk, nodes, batch))
        use_all[tpk] += units
        if not batch:
            use_nb[tpk] += units
    heapq.heapify(events)
    seq = len(events)
    queue = sim.queue
    buckets: dict[tuple[int, int, str, float], list[int]] = defaultdict(list)
    for idx, q in enumerate(queue):   # indexes ascend: already heaps
        buckets[(q.replicas, q.per, cap.scope(key, q.tenant), q.d90)].append(idx)
    blocked: dict[TPK, list[int]] = defaultdict(list)
    started: dict[int, float] = {}
    res: Reservation | None = None
    t = 0.0
    while True:
        failed: set[tuple[int, int, str]] = set()
        stuck: set[tuple[int, int, str, float]] = set()
        while True:
            best, where = -1, None
            for bkey, heap in buckets.items():
                if heap and bkey not in stuck and (best < 0 or heap[0] < best):
                    best, where = heap[0], bkey
            if where is None:
                break
            q = queue[best]
            if (use_all if q.batch else use_nb)[q.tpk] + q.units > q.limit:
                heapq.heappop(buckets[where])
                blocked[q.tpk].append(best)
                continue
            shape = where[:3]
            plan = None if shape in failed or cap.free_total(key, q.tenant) < q.units else (
                cap.place(key, q.tenant, q.replicas, q.per))
            if plan is None:
                failed.add(shape)
                stuck.add(where)
                if res is None:
                    future = [(e[0] - t, e[4]) for e in events]
                    res = reserve(cap, key, q.id, q.tenant, q.replicas, q.per, future)
                    if res is not None:
                        res.at += t
                        res.order = best
                continue
            if res is not None and res.job_id != q.id and best > res.order and not res.allows(
                    cap, key, plan, q.per, t + q.d90):
                stuck.add(where)
                continue
            heapq.heappop(buckets[where])
            end = t + (q.d50 if which == 0 else q.d90)
            if res is not None:
                if res.job_id == q.id or best < res.order:
                    res = None   # the head starts, or a job ahead of it: reserve again
                else:
                    res.started(plan, q.per, end)
            for slot, n in plan:
                slot.free -= n * q.per
            cap.changed(key)
            started[q.id] = t
            use_all[q.tpk] += q.units
            if not q.batch:
                use_nb[q.tpk] += q.units
            nodes = tuple((slot.name, n * q.per) for slot, n in plan)
            heapq.heappush(events, (end, seq, q.units, q.tpk, nodes, q.batch))
            seq += 1
        if not events or len(started) == len(queue):
            break
        t = events[0][0]
        while events and events[0][0] <= t:
            _, _, units, tpk, nodes, batch = heapq.heappop(events)
            for name, n in nodes:
                freed = cap.index.get((key, name))
                if freed is not None:
                    freed.free += n
                    if res is not None and res.extra.get(freed):
                        res.extra[freed] = max(res.extra[freed] - n, 0)
            cap.changed(key)
            use_all[tpk] -= units
            if not batch:
                use_nb[tpk] -= units
            for idx in blocked.pop(tpk, ()):
                q = queue[idx]
                heapq.heappush(buckets[(q.replicas, q.per, cap.scope(key, q.tenant), q.d90)],
                               idx)
    return started


def spread_loose(cap: Capacity, key: str, units: int, per: int,
                 taken: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """Nodes a holder of unknown placement most likely frees: ``units`` in replicas of
    ``per`` on the slots with the most units held (``taken``: already attributed)."""
    out: list[tuple[str, int]] = []
    held = sorted(((s.cap - max(s.free, 0) - taken.get(s.name, 0), s.name)
                   for s in cap.slots.get(key, [])), reverse=True)
    left = units
    for amount, name in held:
        if left <= 0:
            break
        n = min(left, max(amount, 0) // max(per, 1) * max(per, 1))
        if n > 0:
            out.append((name, n))
            left -= n
    return tuple(out)
