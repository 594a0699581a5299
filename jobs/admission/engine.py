"""``decide()``: one admission pass over the whole cluster.

Steps, all deterministic (ties break by id or name):

1. Account capacity: free units per node and resource key (``gpus - gpus_used`` minus the
   placements of admitted jobs whose pods are not bound yet), quota use per tenant pool
   and key (running + admitted + preempting), and the GPUs of preempting jobs that are
   about to be released.
2. Order the queue: tier, then fair share across tenants (current use against nominal
   quota plus decayed history, updated as each job is taken, so tenants interleave),
   then ``priority``, then submission time, then id. Held jobs are left out.
3. In that order, admit each job whose gang fits free capacity and its pool's quota
   (nominal, else borrowing up to the ceiling; batch always on idle capacity only, up to
   the pool's batch ceiling, and not counted against the quota of the pool's other jobs,
   which reclaim it first). The first job of a resource key that waits for capacity gets
   a reservation (``eta.reserve``: the nodes it fits on at the earliest expected time);
   a later job is admitted only when it does not delay it (it ends, at its p90, by then,
   or leaves the reserved room intact), else it waits (``jobs.wait.reserved``).
   A job that does not fit may claim capacity that preempting jobs are about to release,
   or, when within its nominal quota (or a higher tier), preempt just enough victims:
   batch and borrowers first, lowest tier first, most recently admitted first. Its room
   is then reserved for the rest of the pass.

   **Guarantees hold.** A pool's guarantee (``PoolQuota.guaranteed``, default its nominal
   quota; for an overcommitted-mode tenant its grant times the guaranteed share, the
   number its quota page shows) is protected: a non-batch job whose pool's use plus its
   demand stays within that pool's guarantee may preempt non-production jobs of *any*
   pool given a guarantee below its nominal quota that holds more than *its own*
   guarantee (a borrower of the overcommitted part), even jobs of the same tier admitted
   within nominal quota (pools without one keep the borrowing rule: jobs admitted above
   nominal, while the pool is still above it); lowest tier first, then most
   recently admitted, each victim with its tier's grace (``Policy.grace_seconds``); a
   victim is taken only while its pool is still above its guarantee (counting the victims
   already chosen), and only as many as the job needs. Work admitted above its pool's
   guarantee is marked ``borrowing``. Work admitted above its pool's own grant, on quota
   the pool borrows through a loan (``PoolQuota.loans_in``), is marked with that loan
   (``Admission.loan``); once the loan has ended (``JobView.loan_ended``) it is reclaimable
   like borrowed work, while its pool is still above its (now lower) nominal quota, with
   its tier's grace and the reason ``jobs.preempt.loan_ended`` naming the lender.
4. **The watermark is a hard line on physical use**, per resource key (GPU model or MIG
   profile: the nodes that carry it). Use is the larger of the units allocated (as the
   engine accounts them, admitted-but-unbound placements included) and ``physical[key]``
   × capacity, where ``physical`` is what the cluster reports (allocated share of the
   cards, framebuffer used on shared cards where DCGM reports it, CPU and memory
   requested on the key's nodes; see ``k8s_sync.selectors.physical_use``); units of
   preempting jobs and of this pass's victims count as gone, this pass's admissions and
   promised rooms as taken. Preemptible work (development, batch) beyond its pool's
   guarantee is *gated*: it is neither admitted nor given room by reclaim when that would
   take use above ``watermark × capacity`` (it waits with ``jobs.wait.watermark``).
   Production work, and development work within its pool's guarantee, is not gated: the
   watermark bounds what runs beyond the guarantees, and evicting guaranteed work would
   only re-admit it on the next pass. Then, whether or not anyone waits, while use is
   above the watermark the engine preempts, each with its tier's grace: batch jobs, then
   development jobs of pools above their nominal quota, then development jobs of pools
   above their guarantee; most recently admitted first; never production, never work
   within its pool's guarantee (``jobs.preempt.watermark_use``). A victim's physical
   footprint is assumed to be its allocation; the next pass measures again.
5. For every waiting job: positions, ETA p50/p90 (``eta.simulate``, node by node with
   the same reservation rule) and a reason; a job above its quota is told to use the
   batch tier only when it would start now as a batch job.

Cost: O(J log J) for the ordering and the ETA simulation, O(nodes of the key) per
placement attempt, with memoised failures so a long queue of jobs that do not fit stays
cheap.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from core.choices import Tier
from jobs.choices import JobState
from tenants.demand import dimension_only_when_granted

from . import text
from .capacity import Capacity, Plan, Slot, plan_nodes
from .eta import TPK, Release, Reservation, RunTimes, reserve, spread_loose
from .explain import _BATCH, _BORROW, _NOMINAL, _OVER, Explainer, _ts
from .types import (
    ACTIVE_STATES,
    TIER_RANK,
    TIERS,
    Admission,
    Decisions,
    History,
    JobView,
    NodeView,
    Policy,
    PoolQuota,
    Preemption,
    Text,
)

_HELD: Text = {"code": "jobs.wait.held", "args": {}}
_NO_CPU_NODE: Text = {"code": "jobs.never.no_cpu_node", "args": {}}

_UNBOUNDED = 1 << 62
"""The quota of a key that does not bind (the placement key of shares, whose quota is the
``gpu-shared`` dimension; ``gpu-memory`` where it was never granted)."""

_DimShort = tuple[str, int, int, int, int]
"""The dimension a job is over: (key, wanted, used, nominal, ceiling)."""

_Outcome = tuple[tuple[int, ...], Text, bool, bool, bool]
"""A turned-away job's outcome: (state it saw, reason, never, capacity-bound, nominal)."""

_MAX_VICTIMS = 256
"""Victims considered for one reclaim attempt (the most preferred ones)."""


def decide(*, nodes: Sequence[NodeView], jobs: Sequence[JobView], quotas: Sequence[PoolQuota],
           policy: Policy, history: History, now: datetime,
           physical: Mapping[str, float] | None = None) -> Decisions:
    """Decide admissions and preemptions, and explain every waiting job.

    Pure: reads only its arguments (``now`` is the clock). Returns at most one decision
    per job: an :class:`Admission` (queued jobs), a :class:`Preemption` (running or
    admitted jobs, never production ones, never jobs already preempting), or — for every
    queued job not admitted — a :class:`WaitInfo`. Every admission fits free capacity
    (no node over-allocated, counting admitted-but-unbound placements), its pool's
    ceiling, and places a multi-node gang under one switch. A preemption is only made
    for a job that then fits (its room reserved), or for watermark eviction.

    ``physical``: measured use (0..1 of capacity) per resource key; a key that is absent
    counts its allocation only (step 4 of the module docstring).
    """
    return _Pass(nodes, jobs, quotas, policy, history, now, physical).run()


def _worst(a: str, b: str) -> str:
    """The combined mode of two dimensions: over beats borrow beats nominal/batch."""
    if _OVER in (a, b):
        return _OVER
    if _BORROW in (a, b):
        return _BORROW
    return a


def _mode(batch: bool, units: int, use_nb: int, use_all: int, nominal: int,
          ceiling: int) -> str:
    """How a job would be admitted given its pool's use: within nominal, borrowing, batch,
    or not at all (over). A non-batch job does not count the pool's batch jobs: they yield
    to it (its own pool's batch jobs are reclaimed when the room is needed)."""
    if batch:
        return _BATCH if use_all + units <= ceiling else _OVER
    if use_nb + units <= nominal and use_nb + units <= ceiling:
        return _NOMINAL
    if ceiling > nominal and use_nb + units <= ceiling:
        return _BORROW
    return _OVER


class _Pass(Explainer):
    """The working state of one ``decide()`` call."""

    def __init__(self, nodes: Sequence[NodeView], jobs: Sequence[JobView],
                 quotas: Sequence[PoolQuota], policy: Policy, history: History,
                 now: datetime, physical: Mapping[str, float] | None = None) -> None:
        self.policy = policy
        self.physical = dict(physical or {})
        self._wm_base: dict[str, float] = {}
        self._wm_capacity: dict[str, int] = {}
        self.evicted_units: dict[str, int] = defaultdict(int)    # victims of this pass
        self.promised_units: dict[str, int] = defaultdict(int)   # rooms promised this pass
        self.history = history
        self.now = now
        self.now_ts = now.timestamp()
        self.cap = Capacity(nodes)
        self.quota: dict[tuple[str, str], PoolQuota] = {(q.tenant, q.pool): q for q in quotas}
        self.decisions = Decisions()
        self.admitted: dict[int, Admission] = {}
        self.victims: dict[int, Preemption] = {}
        self.reasons: dict[int, Text] = {}
        self.capacity_bound: set[int] = set()   # reasons that get a queue-position suffix
        self.never: set[int] = set()            # cannot start without a change: no ETA
        self.nominal_waiting: dict[str, int] = defaultdict(int)
        self.new_alloc: dict[str, int] = defaultdict(int)
        self.place_fail: dict[tuple[str, str, int], int] = {}
        self.reclaim_fail: set[tuple[object, ...]] = set()
        self._durations: dict[int, tuple[float, float]] = {}
        self.runtimes = RunTimes(history, policy.default_duration_seconds)
        self.over_quota: list[JobView] = []   # non-batch jobs above quota (suggest_batch)
        self.reservations: dict[str, Reservation] = {}   # key -> its head's reservation
        self._why: dict[tuple[object, ...], Text] = {}
        self._outcomes: dict[tuple[object, ...], _Outcome] = {}
        self._holders: dict[tuple[str, int], Text] = {}
        self._holder_cache: dict[str, tuple[list[float], list[int], list[str]]] = {}
        self._limits: dict[tuple[str, str, str, bool], tuple[int, int]] = {}

        ordered = sorted(jobs, key=lambda j: j.id)
        self.active = [j for j in ordered if j.state in ACTIVE_STATES]
        self.queued = [j for j in ordered if j.state == JobState.QUEUED]
        self.use_nb: dict[TPK, int] = defaultdict(int)    # non-batch use per tenant pool key
        self.use_all: dict[TPK, int] = defaultdict(int)   # including batch
        self.tenant_use: dict[str, int] = defaultdict(int)
        self.pending: dict[str, dict[Slot, int]] = defaultdict(dict)
        # units preempting jobs of unknown placement are releasing (aggregate only)
        self.pending_loose: dict[str, int] = defaultdict(int)
        # units of preempting (or just-preempted) jobs, per pool: use that is going away
        self.releasing_nb: dict[TPK, int] = defaultdict(int)
        self.releasing_all: dict[TPK, int] = defaultdict(int)
        self.preempting_units: dict[str, int] = defaultdict(int)
        self.preempting: dict[str, list[JobView]] = defaultdict(list)
        self.candidates: dict[str, list[JobView]] = defaultdict(list)
        # the other dimensions (cpu, memory, gpu-memory, gpu-shared) per tenant pool key
        self.dim_nb: dict[TPK, int] = defaultdict(int)
        self.dim_all: dict[TPK, int] = defaultdict(int)
        self.dim_rel_nb: dict[TPK, int] = defaultdict(int)
        self.dim_rel_all: dict[TPK, int] = defaultdict(int)
        self.dim_version: dict[tuple[str, str], int] = defaultdict(int)
        self._dim_limits: dict[tuple[str, str, str, bool], tuple[int, int]] = {}
        self.cpu_free: dict[str, list[int]] = {
            n.name: [n.cpu - n.cpu_used, n.memory - n.memory_used]
            for n in self.cap.cpu_nodes if n.cpu > 0}
        for job in self.active:
            key, units = job.resource_key, job.demand
            if job.dims:
                self.account_dims(job, job.dims)
                if job.state == JobState.PREEMPTING:
                    self.release_dims(job)
                if job.state == JobState.ADMITTED:   # unbound replicas: not in the nodes' use yet
                    self.take_cpu(job, job.placement, sign=-1)
            if job.state == JobState.ADMITTED and key:
                self.cap.take(key, job.placement, job.gpus_per_replica)
            if not key:
                continue
            tpk = (job.tenant, job.pool, key)
            self.use_all[tpk] += units
            if job.tier != Tier.BATCH:
                self.use_nb[tpk] += units
            self.tenant_use[job.tenant] += units
            if job.state == JobState.PREEMPTING:
                self.preempting[key].append(job)
                self.preempting_units[key] += units
                self.releasing_all[tpk] += units
                if job.tier != Tier.BATCH:
                    self.releasing_nb[tpk] += units
                if not job.placement:
                    self.pending_loose[key] += units
                for name in job.placement:
                    slot = self.cap.index.get((key, name))
                    if slot is not None and slot.schedulable:
                        pend = self.pending[key]
                        pend[slot] = pend.get(slot, 0) + job.gpus_per_replica
            elif job.tier != Tier.PRODUCTION:
                self.candidates[key].append(job)
        for cands in self.candidates.values():
            cands.sort(key=self._victim_order)
        self.alloc_start = {key: sum(s.cap - s.free for s in slots)
                            for key, slots in self.cap.slots.items()}
        self.free_start = {key: {s.name: s.free for s in slots}
                           for key, slots in self.cap.slots.items()}
        self.nominal_total: dict[str, int] = defaultdict(int)
        for q in quotas:   # GPUs, MIG instances and shares: the units of the fair share
            self.nominal_total[q.tenant] += sum(
                v for k, v in q.nominal.items() if k.startswith(("gpu:", "mig:"))
                or k == "gpu-shared")

    # -- helpers -------------------------------------------------------------------------

    def _victim_order(self, job: JobView) -> tuple[int, int, float, int]:
        """Batch and borrowers (above nominal, or above an explicit guarantee) first,
        lowest tier first, most recently admitted first."""
        preferred = 0 if (job.tier == Tier.BATCH or job.borrowing or job.loan_ended
                          or self.above_explicit_guarantee(job)) else 1
        return (preferred, -TIER_RANK.get(job.tier, len(TIERS)),
                -_ts(job.admitted_at or job.started_at, self.now_ts), -job.id)

    def durations(self, job: JobView) -> tuple[float, float]:
        """(p50, p90) run time in seconds (:class:`jobs.admission.eta.RunTimes`)."""
        found = self._durations.get(job.id)
        if found is None:
            found = self._durations[job.id] = self.runtimes.total(job)
        return found

    def end_offsets(self, job: JobView) -> tuple[float, float]:
        """When a holder releases its GPUs, seconds from now (p50, p90): a running job
        after its expected remaining time given how long it has run."""
        if job.state == JobState.PREEMPTING:
            end = _ts(job.preempt_deadline, self.now_ts) - self.now_ts
            return max(end, 0.0), max(end, 0.0)
        if job.state == JobState.RUNNING:
            elapsed = self.now_ts - _ts(job.started_at or job.admitted_at, self.now_ts)
            return self.runtimes.remaining(job, elapsed)
        return self.durations(job)

    def limits(self, job: JobView, key: str) -> tuple[int, int]:
        """(nominal, ceiling) of the job's pool for ``key``; (0, 0) without a quota. A batch
        job's ceiling is the pool's batch ceiling (``PoolQuota.batch_ceiling``) when higher."""
        batch = job.tier == Tier.BATCH
        memo = (job.tenant, job.pool, key, batch)
        cached = self._limits.get(memo)
        if cached is None and key.startswith("shared:"):   # counted as "gpu-shared"
            cached = self._limits[memo] = (_UNBOUNDED, _UNBOUNDED)
        if cached is None:
            quota = self.quota.get((job.tenant, job.pool))
            nominal = quota.nominal.get(key, 0) if quota is not None else 0
            ceiling = quota.ceiling.get(key, nominal) if quota is not None else 0
            if batch and quota is not None and quota.batch_ceiling:
                ceiling = max(ceiling, quota.batch_ceiling.get(key, 0))
            cached = self._limits[memo] = (nominal, max(nominal, ceiling))
        return cached

    def grace(self, tier: str) -> int:
        return int(self.policy.grace_seconds.get(tier, 0))

    # -- guarantees and the watermark (steps 3 and 4 of the module docstring) ---------------

    def guaranteed(self, tenant: str, pool: str, key: str) -> int:
        """The pool's guarantee for ``key``: ``PoolQuota.guaranteed``, capped by nominal;
        all of nominal when none is given."""
        quota = self.quota.get((tenant, pool))
        if quota is None:
            return 0
        if key.startswith("shared:"):   # shares are granted as "gpu-shared", every model
            key = "gpu-shared"
        nominal = quota.nominal.get(key, 0)
        if quota.guaranteed is None or key not in quota.guaranteed:
            return nominal
        return max(0, min(nominal, quota.guaranteed[key]))

    def above_guarantee(self, job: JobView, extra: int = 0) -> bool:
        """Whether the job's pool holds more non-batch units of its key than its guarantee
        (what is being preempted, and ``extra`` units, counted as gone)."""
        key = job.resource_key
        tpk = (job.tenant, job.pool, key)
        return (self.use_nb[tpk] - self.releasing_nb[tpk] - extra
                > self.guaranteed(job.tenant, job.pool, key))

    def above_explicit_guarantee(self, job: JobView) -> bool:
        """:meth:`above_guarantee` for pools given an explicit guarantee below nominal."""
        quota = self.quota.get((job.tenant, job.pool))
        if quota is None or not quota.guaranteed or job.tier == Tier.BATCH:
            return False
        return self.above_guarantee(job)

    def within_guarantee(self, job: JobView, key: str) -> bool:
        """Whether a queued non-batch job keeps its pool within its guarantee."""
        if job.tier == Tier.BATCH:
            return False
        tpk = (job.tenant, job.pool, key)
        return (self.use_nb[tpk] - self.releasing_nb[tpk] + job.demand
                <= self.guaranteed(job.tenant, job.pool, key))

    def wm_capacity(self, key: str) -> int:
        cached = self._wm_capacity.get(key)
        if cached is None:
            cached = self._wm_capacity[key] = self.cap.capacity_total(key)
        return cached

    def wm_limit(self, key: str) -> float:
        return self.policy.watermark * self.wm_capacity(key)

    def wm_use(self, key: str) -> float:
        """Projected physical use of ``key`` in units (step 4 of the module docstring)."""
        base = self._wm_base.get(key)
        if base is None:
            capacity = self.wm_capacity(key)
            measured = min(max(float(self.physical.get(key, 0.0)), 0.0), 1.0) * capacity
            base = self._wm_base[key] = max(float(self.alloc_start.get(key, 0)), measured)
        return (base + self.new_alloc.get(key, 0) + self.promised_units.get(key, 0)
                - self.preempting_units.get(key, 0) - self.evicted_units.get(key, 0))

    def gated(self, job: JobView, key: str, freed: int = 0) -> bool:
        """Whether the watermark keeps the job out: preemptible work beyond its pool's
        guarantee that would take use above the watermark (``freed``: units of victims
        chosen for it, counted as gone)."""
        if job.tier == Tier.PRODUCTION or self.wm_capacity(key) <= 0:
            return False
        if self.policy.watermark >= 1.0 and not self.physical:
            return False   # allocation alone never exceeds the capacity
        if self.within_guarantee(job, key):
            return False
        return self.wm_use(key) - freed + job.demand > self.wm_limit(key) + 1e-9

    def _percent(self, units: float, key: str) -> int:
        capacity = self.wm_capacity(key)
        return round(100 * units / capacity) if capacity else 0

    def watermark_wait(self, job: JobView, key: str) -> Text:
        use = self.wm_use(key)
        return {"code": "jobs.wait.watermark",
                "args": {"resource": text.resource_name(key),
                         "use": self._percent(use, key),
                         "after": self._percent(use + job.demand, key),
                         "percent": round(self.policy.watermark * 100)}}

    # -- the other dimensions (cpu, memory, gpu-memory, gpu-shared) ------------------------

    def dim_limits(self, job: JobView, dim: str) -> tuple[int, int]:
        """(nominal, ceiling) of the job's pool for a dimension: what is not granted is
        zero, except the dimensions that bind only where granted (gpu-memory)."""
        tpk = (job.tenant, job.pool, dim, job.tier == Tier.BATCH)
        cached = self._dim_limits.get(tpk)
        if cached is None:
            quota = self.quota.get((job.tenant, job.pool))
            if (quota is None or dim not in quota.nominal) and dimension_only_when_granted(dim):
                cached = (_UNBOUNDED, _UNBOUNDED)
            else:
                cached = self.limits(job, dim)
            self._dim_limits[tpk] = cached
        return cached

    def account_dims(self, job: JobView, dims: tuple[tuple[str, int], ...],
                     sign: int = 1) -> None:
        for dim, amount in dims:
            tpk = (job.tenant, job.pool, dim)
            self.dim_all[tpk] += sign * amount
            if job.tier != Tier.BATCH:
                self.dim_nb[tpk] += sign * amount
        self.dim_version[(job.tenant, job.pool)] += 1

    def release_dims(self, job: JobView) -> None:
        """Count a preempting job's (or a victim's) other dimensions as going away."""
        for dim, amount in job.dims:
            tpk = (job.tenant, job.pool, dim)
            self.dim_rel_all[tpk] += amount
            if job.tier != Tier.BATCH:
                self.dim_rel_nb[tpk] += amount
        self.dim_version[(job.tenant, job.pool)] += 1

    def dims_mode(self, job: JobView, *, releasing: bool = False,
                  victims: Sequence[JobView] = ()) -> tuple[str, _DimShort | None]:
        """The worst mode over the job's other dimensions (nominal < borrow < over; batch
        when all fit a batch job) and, when over, the first dimension that is: a job is
        admitted only when every dimension fits. ``releasing``: count what preempting jobs
        and victims release as gone; ``victims``: also what these (of its pool) would."""
        batch = job.tier == Tier.BATCH
        worst = _BATCH if batch else _NOMINAL
        for dim, amount in job.dims:
            tpk = (job.tenant, job.pool, dim)
            nominal, ceiling = self.dim_limits(job, dim)
            nb, al = self.dim_nb[tpk], self.dim_all[tpk]
            if releasing:
                nb -= self.dim_rel_nb[tpk]
                al -= self.dim_rel_all[tpk]
            for v in victims:
                if v.tenant == job.tenant and v.pool == job.pool:
                    freed = dict(v.dims).get(dim, 0)
                    al -= freed
                    if v.tier != Tier.BATCH:
                        nb -= freed
            mode = _mode(batch, amount, nb, al, nominal, ceiling)
            if mode == _OVER:
                used = al if batch or ceiling > nominal or al + amount > ceiling else nb
                return _OVER, (dim, amount, used, nominal, ceiling)
            if mode == _BORROW:
                worst = _BORROW
        return worst, None

    def dims_never(self, job: JobView) -> Text | None:
        """Why the job could never start as it is: a dimension above what its pool may
        ever hold (None when every dimension could fit an idle pool)."""
        batch = job.tier == Tier.BATCH
        for dim, amount in job.dims:
            nominal, ceiling = self.dim_limits(job, dim)
            limit = ceiling if batch or ceiling > nominal else nominal
            if amount <= limit:
                continue
            if limit == 0:
                return {"code": "jobs.never.no_quota",
                        "args": {"pool": text.pool(job.pool),
                                 "resource": text.resource_name(dim)}}
            code = ("jobs.never.above_ceiling" if limit == ceiling and ceiling > nominal
                    else "jobs.never.above_quota")
            return {"code": code, "args": {"amount": text.amount(amount, dim),
                                           "pool": text.pool(job.pool),
                                           "limit": text.amount(limit, dim)}}
        return None

    def why_dim(self, job: JobView, short: _DimShort) -> Text:
        """"CPU: needs 12 cores, 8 of your dev quota of 16 in use"."""
        dim, wanted, used, nominal, ceiling = short
        batch = job.tier == Tier.BATCH
        over_ceiling = batch or ceiling > nominal
        return {"code": "jobs.wait.over_ceiling_dim" if over_ceiling
                else "jobs.wait.over_quota_dim",
                "args": {"resource": text.resource_name(dim), "pool": text.pool(job.pool),
                         "wanted": text.amount(wanted, dim), "used": text.amount(used, dim),
                         "quota": text.amount(ceiling if over_ceiling else nominal, dim)}}

    # -- ordering ------------------------------------------------------------------------

    def order(self, queued: list[JobView]) -> list[JobView]:
        """Tier, then fair share (recomputed as each job is taken), priority, submission, id.

        A tenant's share = units it holds (GPUs and MIG instances alike, all pools) / its
        total nominal quota + decayed GPU-seconds / (total nominal × half-life / ln 2),
        i.e. both terms are 1.0 for a tenant that has used exactly its quota all along.
        """
        groups: dict[int, dict[str, list[JobView]]] = defaultdict(lambda: defaultdict(list))
        for job in queued:
            groups[TIER_RANK.get(job.tier, len(TIERS))][job.tenant].append(job)
        use = dict(self.tenant_use)
        half_life = max(self.policy.fair_share_half_life_seconds, 1.0) / math.log(2)

        def share(tenant: str) -> float:
            nominal = max(self.nominal_total.get(tenant, 0), 1)
            past = self.history.usage.get(tenant, 0.0)
            return use.get(tenant, 0) / nominal + past / (nominal * half_life)

        result: list[JobView] = []
        for rank in sorted(groups):
            per_tenant = groups[rank]
            heap: list[tuple[float, int, float, int, str]] = []
            for tenant, lst in per_tenant.items():
                lst.sort(key=lambda j: (-j.priority, j.submitted_at, j.id))
                head = lst[0]
                heap.append((share(tenant), -head.priority, head.submitted_at.timestamp(),
                             head.id, tenant))
            heapq.heapify(heap)
            pointer = dict.fromkeys(per_tenant, 0)
            while heap:
                tenant = heapq.heappop(heap)[4]
                lst = per_tenant[tenant]
                at = pointer[tenant]
                while True:   # keep taking while this tenant stays ahead of the next one
                    job = lst[at]
                    at += 1
                    result.append(job)
                    use[tenant] = use.get(tenant, 0) + job.demand
                    if at == len(lst):
                        break
                    head = lst[at]
                    entry = (share(tenant), -head.priority, head.submitted_at.timestamp(),
                             head.id, tenant)
                    if heap and heap[0] < entry:
                        heapq.heappush(heap, entry)
                        break
                pointer[tenant] = at
        return result

    # -- the pass ------------------------------------------------------------------------

    def run(self) -> Decisions:
        unheld = [j for j in self.queued if not j.held]
        order = self.order(unheld)
        for job in order:
            self.consider(job)
        self.watermark()
        for job in self.over_quota:
            self.suggest_batch(job)
        held = sorted((j for j in self.queued if j.held),
                      key=lambda j: (TIER_RANK.get(j.tier, len(TIERS)), j.submitted_at, j.id))
        for job in held:
            self.reasons[job.id] = _HELD
            self.never.add(job.id)
        waiting = [j for j in order if j.id not in self.admitted] + held
        self.explain(waiting)
        self.decisions.admit = sorted(self.admitted.values(), key=lambda a: a.job_id)
        self.decisions.preempt = sorted(self.victims.values(), key=lambda p: p.job_id)
        return self.decisions

    def consider(self, job: JobView) -> None:
        """Admit, promise room to, or explain one job; identical jobs that found nothing
        changed since the last one of their kind was turned away reuse its outcome."""
        key = job.resource_key
        if not key:
            self.admit_cpu(job)
            return
        tpk = (job.tenant, job.pool, key)
        kind = (tpk, job.tier, job.priority, job.replicas, job.gpus_per_replica, job.dims,
                self.durations(job)[1])
        state = (self.cap.version(key), self.use_nb[tpk], self.use_all[tpk],
                 self.releasing_nb[tpk], self.releasing_all[tpk], len(self.victims),
                 self.dim_version[(job.tenant, job.pool)])
        cached = self._outcomes.get(kind)
        if cached is not None and cached[0] == state:
            _, reason, never, capacity, nominal = cached
            self.block(job, reason, never=never, capacity=capacity)
            if nominal:
                self.nominal_waiting[key] += 1
            return
        waiting_before = self.nominal_waiting[key]
        self.decide_one(job, key)
        after = (self.cap.version(key), self.use_nb[tpk], self.use_all[tpk],
                 self.releasing_nb[tpk], self.releasing_all[tpk], len(self.victims),
                 self.dim_version[(job.tenant, job.pool)])
        if job.id not in self.admitted and after == state:
            self._outcomes[kind] = (state, self.reasons[job.id], job.id in self.never,
                                    job.id in self.capacity_bound,
                                    self.nominal_waiting[key] != waiting_before)

    def decide_one(self, job: JobView, key: str) -> None:
        units = job.demand
        tenant, replicas, per = job.tenant, job.replicas, job.gpus_per_replica
        if not self.cap.eligible(key, tenant):
            self.block(job, {"code": "jobs.never.no_node_has",
                             "args": {"resource": text.resource_name(key)}}, never=True)
            return
        if not self.cap.fits_empty(key, tenant, replicas, per):
            node_max, switch_max = self.cap.largest(key, tenant)
            if per > node_max:
                self.block(job, {"code": "jobs.never.replica_too_large",
                                 "args": {"per": text.amount(per, key), "largest": node_max}},
                           never=True)
            else:
                self.block(job, {"code": "jobs.never.gang_too_large",
                                 "args": {"replicas": replicas, "per": text.amount(per, key),
                                          "largest": switch_max}}, never=True)
            return
        nominal, ceiling = self.limits(job, key)
        tpk = (tenant, job.pool, key)
        batch = job.tier == Tier.BATCH
        limit = ceiling if batch or ceiling > nominal else nominal
        if units > limit:
            if limit == 0:
                self.block(job, {"code": "jobs.never.no_quota",
                                 "args": {"pool": text.pool(job.pool),
                                          "resource": text.resource_name(key)}}, never=True)
            else:
                code = ("jobs.never.above_ceiling" if limit == ceiling and ceiling > nominal
                        else "jobs.never.above_quota")
                self.block(job, {"code": code,
                                 "args": {"amount": text.amount(units, key),
                                          "pool": text.pool(job.pool), "limit": limit}},
                           never=True)
            return
        never = self.dims_never(job) if job.dims else None
        if never is not None:
            self.block(job, never, never=True)
            return
        nb, al = self.use_nb[tpk], self.use_all[tpk]
        key_mode = _mode(batch, units, nb, al, nominal, ceiling)
        mode = _worst(key_mode, self.dims_mode(job)[0]) if job.dims else key_mode
        gated = mode != _OVER and self.gated(job, key)   # above the watermark (step 4)
        if not gated and mode != _OVER and al + units <= ceiling:   # pool's batch jobs count
            plan = self.place(key, tenant, replicas, per)
            if plan is not None:
                res = self.reservations.get(key)
                d90 = self.durations(job)[1]
                if res is not None and not res.allows(self.cap, key, plan, per, d90):
                    # backfill only what does not delay the head's reserved start
                    self.block(job, {"code": "jobs.wait.reserved",
                                     "args": {"at": text.when(
                                         self.now + timedelta(seconds=res.at), self.now)}},
                               capacity=True)
                    return
                self.admit(job, key, plan, borrowing=mode == _BORROW or (
                    not batch and nb + units > self.guaranteed(tenant, job.pool, key)))
                if res is not None:
                    res.started(plan, per, d90)
                return
        # Waiting: what the job will be once the pool's preempting jobs are gone.
        key_mode = _mode(batch, units, nb - self.releasing_nb[tpk],
                         al - self.releasing_all[tpk], nominal, ceiling)
        short = None
        mode = key_mode
        if job.dims:
            dim_mode, short = self.dims_mode(job, releasing=True)
            mode = _worst(key_mode, dim_mode)
        if not (batch and mode == _OVER) and self.reclaim(job, key, mode, nominal, ceiling):
            return
        if gated and mode != _OVER and self.place(key, tenant, replicas, per) is not None:
            # it would fit now: the watermark alone keeps it out (else: the usual reason)
            self.block(job, self.watermark_wait(job, key), capacity=True)
            return
        if mode == _NOMINAL:
            self.nominal_waiting[key] += 1
        if key_mode != _OVER and short is not None:   # over the quota of another dimension
            self.block(job, self.why_dim(job, self.dims_mode(job)[1] or short))
            return
        self.block(job, self.why(job, key, key_mode, nominal, ceiling),
                   capacity=mode != _OVER)
        if key_mode == _OVER and not batch:
            self.over_quota.append(job)
        if mode != _OVER and not gated and key not in self.reservations:
            found = reserve(self.cap, key, job.id, tenant, replicas, per, self.releases(key))
            if found is not None:
                self.reservations[key] = found

    def releases(self, key: str) -> list[Release]:
        """When and where the holders of ``key`` free their units (p50), for the head's
        reservation: running and admitted jobs (this pass's too) at their expected end,
        what preempting jobs release and nobody was promised at their deadline."""
        out: list[Release] = []
        taken: dict[str, int] = {}
        for job in self.active:
            if (job.resource_key != key or job.id in self.victims
                    or job.state == JobState.PREEMPTING):
                continue
            nodes = self.release_nodes(job, key, taken)
            out.append((self.end_offsets(job)[0], nodes))
        by_id = {j.id: j for j in self.queued}
        for admission in self.admitted.values():
            job = by_id[admission.job_id]
            if job.resource_key == key:
                per_node: dict[str, int] = defaultdict(int)
                for name in admission.placement:
                    per_node[name] += job.gpus_per_replica
                out.append((self.durations(job)[0], tuple(per_node.items())))
        deadlines: dict[str, float] = {}
        for job in self.preempting.get(key, ()):
            end = max(_ts(job.preempt_deadline, self.now_ts) - self.now_ts, 0.0)
            for name in job.placement:
                deadlines[name] = max(deadlines.get(name, 0.0), end)
        for slot, units in self.pending.get(key, {}).items():
            if units > 0:
                out.append((deadlines.get(slot.name, 0.0), ((slot.name, units),)))
        return out

    def release_nodes(self, job: JobView, key: str,
                      taken: dict[str, int]) -> tuple[tuple[str, int], ...]:
        """The units a holder frees per node (its placement; for one without, the
        nodes it most likely holds)."""
        if job.placement:
            per_node: dict[str, int] = defaultdict(int)
            for name in job.placement:
                per_node[name] += job.gpus_per_replica
            return tuple(per_node.items())
        nodes = spread_loose(self.cap, key, job.demand, job.gpus_per_replica, taken)
        for name, n in nodes:
            taken[name] = taken.get(name, 0) + n
        return nodes

    def suggest_batch(self, job: JobView) -> None:
        """A job above its quota is told to use the batch tier only when, as a batch job,
        it would be admitted now (the pool's batch ceiling, the watermark, free room that
        no reservation holds); else only to wait or ask for more quota."""
        reason = self.reasons.get(job.id)
        if not isinstance(reason, dict) or reason.get("code") != "jobs.wait.over_quota":
            return
        if not self.batch_would_start(job):
            self.reasons[job.id] = {"code": "jobs.wait.over_quota_wait",
                                    "args": reason["args"]}

    def batch_would_start(self, job: JobView) -> bool:
        key = job.resource_key
        as_batch = replace(job, tier=Tier.BATCH)
        tpk = (job.tenant, job.pool, key)
        _, ceiling = self.limits(as_batch, key)
        if self.use_all[tpk] + job.demand > ceiling or self.gated(as_batch, key):
            return False
        if job.dims and self.dims_mode(as_batch)[0] == _OVER:
            return False
        plan = self.cap.place(key, job.tenant, job.replicas, job.gpus_per_replica)
        if plan is None:
            return False
        res = self.reservations.get(key)
        return res is None or res.allows(self.cap, key, plan, job.gpus_per_replica,
                                         self.durations(job)[1])

    def block(self, job: JobView, reason: Text, *, never: bool = False,
              capacity: bool = False) -> None:
        self.reasons[job.id] = reason
        if never:
            self.never.add(job.id)
        if capacity:
            self.capacity_bound.add(job.id)

    def place(self, key: str, tenant: str, replicas: int, per: int) -> Plan | None:
        """Place on free capacity; failures are memoised (free only shrinks during a pass)."""
        memo = (key, self.cap.scope(key, tenant), per)
        failed = self.place_fail.get(memo)
        if failed is not None and replicas >= failed:
            return None
        plan = self.cap.place(key, tenant, replicas, per)
        if plan is None:
            self.place_fail[memo] = replicas if failed is None else min(failed, replicas)
        return plan

    def admit(self, job: JobView, key: str, plan: Plan, *, borrowing: bool) -> None:
        per = job.gpus_per_replica
        for slot, count in plan:
            slot.free -= count * per
        self.cap.changed(key)
        self.admitted[job.id] = Admission(job.id, plan_nodes(plan), borrowing,
                                          self.loan_of(job, key))
        self.account(job, key, job.demand)
        self.new_alloc[key] += job.demand
        if job.dims and self.cpu_free:
            self.take_cpu(job, self.admitted[job.id].placement)

    def loan_of(self, job: JobView, key: str) -> int | None:
        """The loan a job about to be admitted runs on: the pool's non-batch use with the
        job, above its own grant (nominal minus the loans it borrows), falls in that loan's
        units (stacked in ``PoolQuota.loans_in`` order; above them all: the last one)."""
        quota = self.quota.get((job.tenant, job.pool))
        loans = (quota.loans_in or {}).get(key, ()) if quota is not None else ()
        if not loans or job.tier == Tier.BATCH:
            return None
        top = self.use_nb[(job.tenant, job.pool, key)] + job.demand
        stacked = quota.nominal.get(key, 0) - sum(units for _id, units in loans) if quota else 0
        if top <= stacked:
            return None
        for loan_id, units in loans:
            stacked += units
            if top <= stacked:
                return loan_id
        return loans[-1][0]

    def account(self, job: JobView, key: str, units: int) -> None:
        """Count a job that is admitted or promised room: its key and every dimension."""
        tpk = (job.tenant, job.pool, key)
        self.use_all[tpk] += units
        if job.tier != Tier.BATCH:
            self.use_nb[tpk] += units
        if job.dims:
            self.account_dims(job, job.dims)

    def admit_cpu(self, job: JobView) -> None:
        """A CPU-only job: no GPU quota, but its pool's cpu and memory quota (it queues like
        any job); one schedulable node per replica with room for it, round robin."""
        nodes = [n for n in self.cap.cpu_nodes if n.dedicated_to in ("", job.tenant)]
        if not nodes:
            self.block(job, _NO_CPU_NODE, never=True)
            return
        mode = _NOMINAL
        if job.dims:
            never = self.dims_never(job)
            if never is not None:
                self.block(job, never, never=True)
                return
            mode, short = self.dims_mode(job)
            if mode == _OVER and short is not None:
                self.block(job, self.why_dim(job, short))
                return
        placement = self.place_cpu(job, nodes)
        if placement is None:
            self.block(job, {"code": "jobs.wait.cpu_room", "args": {}}, capacity=True)
            return
        self.admitted[job.id] = Admission(job.id, placement, mode == _BORROW)
        if job.dims:
            self.account_dims(job, job.dims)

    @staticmethod
    def per_replica_cpu(job: JobView) -> tuple[int, int]:
        dims = dict(job.dims)
        replicas = max(job.replicas, 1)
        return -(-dims.get("cpu", 0) // replicas), -(-dims.get("memory", 0) // replicas)

    def take_cpu(self, job: JobView, nodes: Sequence[str], *, sign: int = -1) -> None:
        """Change the free CPU and memory of ``nodes`` by one replica of ``job`` each."""
        cpu, memory = self.per_replica_cpu(job)
        for name in nodes:
            room = self.cpu_free.get(name)
            if room is not None:
                room[0] += sign * cpu
                room[1] += sign * memory

    def place_cpu(self, job: JobView, nodes: list[NodeView]) -> tuple[str, ...] | None:
        """One node per replica, round robin over the nodes with room for a replica's CPU
        and memory (nodes that report none are not checked); None when they have none."""
        replicas = max(job.replicas, 1)
        cpu, memory = self.per_replica_cpu(job)
        placement: list[str] = []
        start = 0
        for _ in range(replicas):
            for step in range(len(nodes)):
                node = nodes[(start + step) % len(nodes)]
                room = self.cpu_free.get(node.name)
                if room is None or (room[0] >= cpu and room[1] >= memory):
                    if room is not None:
                        room[0] -= cpu
                        room[1] -= memory
                    placement.append(node.name)
                    start = (start + step + 1) % len(nodes)
                    break
            else:
                for name in placement:   # give back what the replicas placed so far took
                    room = self.cpu_free.get(name)
                    if room is not None:
                        room[0] += cpu
                        room[1] += memory
                return None
        return tuple(placement)

    # -- reclaim -------------------------------------------------------------------------

    def eligible_victim(self, victim: JobView, job: JobView, mode: str,
                        within_g: bool = False) -> bool:
        if victim.id in self.victims or victim.tier == Tier.PRODUCTION:
            return False
        if victim.tier == Tier.BATCH:
            return job.tier != Tier.BATCH
        if (self.policy.preempt_lower_priority_within_tenant
                and victim.tenant == job.tenant and victim.pool == job.pool
                and victim.tier == job.tier and victim.priority < job.priority):
            return True
        if mode in (_BORROW, _BATCH):
            return False
        if TIER_RANK.get(victim.tier, 99) > TIER_RANK.get(job.tier, 99):
            return True
        if (victim.borrowing or victim.loan_ended) and self.pool_borrows(victim):
            return True
        # the guarantee rule (step 3), for pools given a guarantee below their nominal
        # quota (above nominal, the borrowing rule above already applies)
        return within_g and self.above_explicit_guarantee(victim)

    def only_by_guarantee(self, victim: JobView, job: JobView) -> bool:
        """Whether the victim is eligible only because its pool is above its guarantee."""
        if (victim.tier == Tier.BATCH
                or TIER_RANK.get(victim.tier, 99) > TIER_RANK.get(job.tier, 99)):
            return False
        if (self.policy.preempt_lower_priority_within_tenant
                and victim.tenant == job.tenant and victim.pool == job.pool
                and victim.tier == job.tier and victim.priority < job.priority):
            return False
        return not ((victim.borrowing or victim.loan_ended) and self.pool_borrows(victim))

    def pool_borrows(self, victim: JobView) -> bool:
        """Whether the victim's pool still uses more than its nominal quota (not counting
        what is already being preempted): a job admitted as a borrower whose pool has since
        fallen back within nominal is not reclaimed."""
        tpk = (victim.tenant, victim.pool, victim.resource_key)
        nominal, _ = self.limits(victim, victim.resource_key)
        return self.use_nb[tpk] - self.releasing_nb[tpk] > nominal

    def reclaim(self, job: JobView, key: str, mode: str, nominal: int, ceiling: int) -> bool:
        """Make room: capacity preempting jobs are about to release, then victims.

        Returns True when the job's room is now promised (its reason says what it waits
        for); the free part of that room is reserved for the rest of the pass.
        """
        tenant, replicas, per, units = job.tenant, job.replicas, job.gpus_per_replica, job.demand
        tpk = (tenant, job.pool, key)
        eff_nb = self.use_nb[tpk] - self.releasing_nb[tpk]
        eff_all = self.use_all[tpk] - self.releasing_all[tpk]
        within_ceiling = (eff_all if job.tier == Tier.BATCH else eff_nb) + units <= ceiling
        pend = self.pending.get(key, {})
        loose = self.pending_loose.get(key, 0)
        usable = {id(s) for s in self.cap.eligible(key, tenant)}
        free = self.cap.free_total(key, tenant)

        def fits(extra: dict[Slot, int], loose_units: int) -> Plan | None:
            """A placement on free + ``extra``; or, when units of unknown placement are being
            freed, an empty plan if the room exists in aggregate (the best that can be
            proven without knowing their nodes); None when it does not fit."""
            found = self.cap.place(key, tenant, replicas, per, extra)
            if found is None and loose_units and (
                    free + sum(v for s, v in extra.items() if id(s) in usable) + loose_units
                    >= units):
                return []
            return found

        within_g = mode == _NOMINAL and self.within_guarantee(job, key)
        if mode != _OVER and within_ceiling and (pend or loose) and not self.gated(job, key):
            promised = fits(pend, loose)
            if promised is not None:
                self.await_preempting(job, key, promised, pend)
                return True
        if mode == _BATCH:
            return False
        if mode == _OVER and not self.policy.preempt_lower_priority_within_tenant:
            return False
        memo = (key, tenant, job.pool, job.tier, mode, job.priority, replicas, per, job.dims,
                within_g)
        if memo in self.reclaim_fail:
            return False

        def own(victim: JobView) -> bool:
            """The victim's units count against the same pool's quota as the job's."""
            return victim.tenant == tenant and victim.pool == job.pool

        cands = [v for v in self.candidates.get(key, ())
                 if self.eligible_victim(v, job, mode, within_g)]
        # victims eligible only as pools above their guarantee: taken while still above it
        by_guarantee = {v.id for v in cands if within_g and self.only_by_guarantee(v, job)}
        over_g: dict[TPK, int] = {}
        if mode == _OVER or not within_ceiling:
            cands.sort(key=lambda v: 0 if own(v) else 1)  # stable: keeps victim order
        cands = cands[:_MAX_VICTIMS]
        if not cands:
            self.reclaim_fail.add(memo)
            return False
        base = free + sum(v for s, v in pend.items() if id(s) in usable) + loose

        def freed_by(victim: JobView) -> list[Slot]:
            slots = []
            for name in victim.placement:
                slot = self.cap.index.get((key, name))
                if slot is not None and id(slot) in usable:
                    slots.append(slot)
            return slots

        def own_units(victims: list[JobView]) -> tuple[int, int]:
            """(non-batch, all) units of the job's own pool among ``victims``."""
            mine = [v for v in victims if own(v)]
            return (sum(v.demand for v in mine if v.tier != Tier.BATCH),
                    sum(v.demand for v in mine))

        def quota_ok(victims: list[JobView]) -> bool:
            own_nb, own_all = own_units(victims)
            if mode == _OVER and eff_nb - own_nb + units > nominal:
                return False
            if job.dims and self.dims_mode(job, releasing=True, victims=victims)[0] == _OVER:
                return False   # a victim of its pool frees its whole demand, every dimension
            if job.tier != Tier.BATCH:   # the pool's batch work does not count (it yields)
                return eff_nb - own_nb + units <= ceiling
            return eff_all - own_all + units <= ceiling

        extra: dict[Slot, int] = dict(pend)
        chosen: list[JobView] = []
        freed = 0
        unplaced = loose   # units freed on nodes the engine does not know
        plan: Plan | None = None
        for victim in cands:
            if victim.id in by_guarantee:
                vtpk = (victim.tenant, victim.pool, key)
                left = over_g.get(vtpk)
                if left is None:
                    left = (self.use_nb[vtpk] - self.releasing_nb[vtpk]
                            - self.guaranteed(victim.tenant, victim.pool, key))
                if left <= 0:
                    continue
                over_g[vtpk] = left - victim.demand
            chosen.append(victim)
            if victim.placement:
                for slot in freed_by(victim):
                    extra[slot] = extra.get(slot, 0) + victim.gpus_per_replica
                    freed += victim.gpus_per_replica
            else:
                unplaced += victim.demand
                freed += victim.demand
            if base + freed < units or not quota_ok(chosen) or self.gated(
                    job, key, sum(v.demand for v in chosen)):
                continue
            plan = fits(extra, unplaced)
            if plan is not None:
                break
        if plan is None:
            self.reclaim_fail.add(memo)
            return False
        for victim in reversed(list(chosen)):  # just enough: drop victims not needed
            trial = dict(extra)
            trial_unplaced = unplaced
            if victim.placement:
                for slot in freed_by(victim):
                    trial[slot] -= victim.gpus_per_replica
            else:
                trial_unplaced -= victim.demand
            rest = [v for v in chosen if v is not victim]
            if not quota_ok(rest) or self.gated(job, key, sum(v.demand for v in rest)):
                continue
            trial_plan = fits(trial, trial_unplaced)
            if trial_plan is not None:
                chosen, extra, unplaced, plan = rest, trial, trial_unplaced, trial_plan
        if not chosen:   # what preempting jobs release is enough after all
            self.await_preempting(job, key, plan, pend)
            return True
        if loose:
            self.pending_loose[key] = 0   # counted in this job's room
        for victim in chosen:
            self.victims[victim.id] = Preemption(
                victim.id, self.victim_reason(victim, job, key, victim.id in by_guarantee),
                self.grace(victim.tier), job.id)
            self.release(victim)
        self.reserve(key, plan, per, pend)
        self.account(job, key, units)
        self.promised_units[key] += units
        deadline = self.now + timedelta(seconds=max(self.grace(v.tier) for v in chosen))
        self.block(job, {"code": "jobs.wait.victims",
                         "args": {"n": len(chosen), "tiers": text.tiers({v.tier for v in chosen}),
                                  "by": text.when(deadline, self.now)}})
        return True

    def await_preempting(self, job: JobView, key: str, plan: Plan,
                         pend: dict[Slot, int]) -> None:
        """Promise the job the room preempting jobs are releasing (``plan``; empty when
        only known in aggregate) and say whom it waits for."""
        per, units = job.gpus_per_replica, job.demand
        short = {s.name for s, n in plan if n * per > max(s.free, 0)}
        awaited = [j for j in self.preempting.get(key, ())
                   if short.intersection(j.placement) or not j.placement]
        if not plan:
            self.pending_loose[key] -= min(self.pending_loose.get(key, 0), units)
        self.reserve(key, plan, per, pend)
        self.account(job, key, units)
        self.promised_units[key] += units
        deadline = max((j.preempt_deadline for j in awaited if j.preempt_deadline is not None),
                       default=self.now)
        count = max(len(awaited), 1)
        self.block(job, {"code": "jobs.wait.preempted",
                         "args": {"n": count, "by": text.when(deadline, self.now)}})

    def release(self, victim: JobView) -> None:
        """Count a victim's units as going away (they stay held: no admission into them)."""
        vtpk = (victim.tenant, victim.pool, victim.resource_key)
        self.evicted_units[victim.resource_key] += victim.demand
        self.releasing_all[vtpk] += victim.demand
        if victim.tier != Tier.BATCH:
            self.releasing_nb[vtpk] += victim.demand
        if victim.dims:
            self.release_dims(victim)

    def reserve(self, key: str, plan: Plan, per: int, pend: dict[Slot, int]) -> None:
        """Hold the room of a promised job: free units first, then units being released."""
        self.cap.changed(key)
        for slot, count in plan:
            need = count * per
            from_free = min(max(slot.free, 0), need)
            slot.free -= from_free
            rest = need - from_free
            if rest and pend.get(slot):
                pend[slot] -= min(rest, pend[slot])

    def victim_reason(self, victim: JobView, job: JobView, key: str,
                      by_guarantee: bool = False) -> Text:
        name = text.resource_name(key)
        if by_guarantee:
            return {"code": "jobs.preempt.guarantee",
                    "args": {"resource": name, "tenant": job.tenant,
                             "pool": text.pool(job.pool), "tier": text.tier(job.tier)}}
        if victim.tier == Tier.BATCH:
            return {"code": "jobs.preempt.batch",
                    "args": {"tier": text.tier(job.tier), "tenant": job.tenant,
                             "resource": name}}
        if (victim.tenant, victim.pool, victim.tier) == (job.tenant, job.pool, job.tier) and (
                victim.priority < job.priority):
            return {"code": "jobs.preempt.priority",
                    "args": {"priority": job.priority, "theirs": victim.priority,
                             "resource": name}}
        if victim.loan_ended and self.pool_borrows(victim):
            return {"code": "jobs.preempt.loan_ended",
                    "args": {"lender": victim.loan_lender, "resource": name,
                             "tenant": job.tenant, "pool": text.pool(job.pool),
                             "tier": text.tier(job.tier)}}
        if victim.borrowing:
            return {"code": "jobs.preempt.return_borrowed",
                    "args": {"resource": name, "tenant": job.tenant,
                             "pool": text.pool(job.pool), "tier": text.tier(job.tier)}}
        if TIER_RANK.get(victim.tier, 99) > TIER_RANK.get(job.tier, 99):
            return {"code": "jobs.preempt.tier",
                    "args": {"tier": text.tier(job.tier), "theirs": text.tier(victim.tier),
                             "resource": name}}
        return {"code": "jobs.preempt.priority",
                "args": {"priority": job.priority, "theirs": victim.priority,
                         "resource": name}}

    # -- watermark -----------------------------------------------------------------------

    def watermark(self) -> None:
        """Step 4: while a key's projected use is above the watermark, whether or not anyone
        waits, evict batch jobs, then development jobs of pools above their nominal quota,
        then of pools above their guarantee; most recently admitted first."""
        percent = round(self.policy.watermark * 100)
        for key in sorted(self.cap.slots):
            limit = self.wm_limit(key)
            use = self.wm_use(key)
            if use <= limit + 1e-9:
                continue
            reason: Text = {"code": "jobs.preempt.watermark_use",
                            "args": {"resource": text.resource_name(key),
                                     "use": self._percent(use, key), "percent": percent}}

            def rank(j: JobView) -> int:
                if j.tier == Tier.BATCH:
                    return 0
                return 1 if self.pool_borrows(j) else 2

            pool = [j for j in self.active
                    if j.resource_key == key and j.state in (JobState.RUNNING, JobState.ADMITTED)
                    and j.id not in self.victims and j.tier != Tier.PRODUCTION
                    and (j.tier == Tier.BATCH or self.above_guarantee(j))]
            pool.sort(key=lambda j: (rank(j), -_ts(j.admitted_at or j.started_at, self.now_ts),
                                     -j.id))
            for victim in pool:
                if self.wm_use(key) <= limit + 1e-9:
                    break
                if victim.tier != Tier.BATCH and not self.above_guarantee(victim):
                    continue   # its pool is back within its guarantee with the evictions so far
                self.victims[victim.id] = Preemption(victim.id, reason,
                                                     self.grace(victim.tier), None)
                self.release(victim)

    def victims_units(self, key: str) -> list[int]:
        by_id = {j.id: j for j in self.active if j.resource_key == key}
        return [by_id[v].demand for v in self.victims if v in by_id]
