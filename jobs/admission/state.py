"""The working state of one ``decide()`` pass: capacity, quota use and what is being
released, accounted from the inputs (step 1 of :mod:`jobs.admission.engine`), and the
helpers every step reads (run times, limits, guarantees).

:class:`PassState` is the base of the pass (:class:`jobs.admission.engine._Pass`); the
rules (:mod:`.rules`), reclaim (:mod:`.reclaim`) and the explanations (:mod:`.explain`)
are layered on it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime

from core.choices import Tier
from jobs.choices import JobState

from .capacity import Capacity, Slot
from .eta import TPK, Reservation, RunTimes, spread_loose
from .explain import Explainer, _ts
from .types import (
    ACTIVE_STATES,
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
from .victims import VictimIndex, victim_order

_UNBOUNDED = 1 << 62
"""The quota of a key that does not bind (the placement key of shares, whose quota is the
``gpu-shared`` dimension; ``gpu-memory`` where it was never granted)."""

_Outcome = tuple[tuple[int, ...], Text, bool, bool, bool, bool]
"""A turned-away job's outcome: (state it saw, reason, never, capacity-bound, nominal,
above its quota: reconsidered as a batch job, ``suggest_batch``)."""


class PassState(Explainer):
    """The working state of one ``decide()`` call."""

    def __init__(self, nodes: Sequence[NodeView], jobs: Sequence[JobView],
                 quotas: Sequence[PoolQuota], policy: Policy, history: History,
                 now: datetime, physical: Mapping[str, float] | None = None, *,
                 explaining: bool = True,
                 durations: dict[int, tuple[float, float]] | None = None,
                 verdicts: dict[str, dict[tuple[object, ...], Text | None]] | None = None
                 ) -> None:
        self.explaining = explaining   # step 5 runs (``decide(explain=...)``): reasons worded
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
        self.victims_of: dict[str, int] = defaultdict(int)   # victims taken per key
        self.reasons: dict[int, Text] = {}
        self.capacity_bound: set[int] = set()   # reasons that get a queue-position suffix
        self.never: set[int] = set()            # cannot start without a change: no ETA
        self.nominal_waiting: dict[str, int] = defaultdict(int)
        self.new_alloc: dict[str, int] = defaultdict(int)
        self.place_fail: dict[tuple[str, str, int], int] = {}
        self.reclaim_fail: set[tuple[object, ...]] = set()
        # (p50, p90) run time by job id; the incremental engine passes what it kept of
        # its last passes (it forgets a job that changed, and all when the history did)
        self._durations: dict[int, tuple[float, float]] = {} if durations is None else durations
        # per key, (tenant, pool, tier, shape) -> why such a job can never start, or None
        # (``_Pass.never_reason``; the incremental engine keeps them while nodes and quotas stay)
        self.verdicts: dict[str, dict[tuple[object, ...], Text | None]] = (
            {} if verdicts is None else verdicts)
        self.runtimes = RunTimes(history, policy.default_duration_seconds)
        self.over_quota: list[JobView] = []   # non-batch jobs above quota (suggest_batch)
        self.reservations: dict[str, Reservation] = {}   # key -> its head's reservation
        self._why: dict[tuple[object, ...], Text] = {}
        self._outcomes: dict[tuple[object, ...], _Outcome] = {}
        self._holders: dict[tuple[str, int], Text] = {}
        self._holder_cache: dict[str, tuple[list[float], list[int], list[str]]] = {}
        self._limits: dict[tuple[str, str, str, str], tuple[int, int]] = {}

        ordered = sorted(jobs, key=lambda j: j.id)
        self.active = [j for j in ordered if j.state in ACTIVE_STATES]
        self.queued = [j for j in ordered if j.state == JobState.QUEUED]
        self.queued_by_id = {j.id: j for j in self.queued}
        self.active_by_key: dict[str, list[JobView]] = defaultdict(list)
        for j in self.active:
            self.active_by_key[j.resource_key].append(j)
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
        self._dim_limits: dict[tuple[str, str, str, str], tuple[int, int]] = {}
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
        guaranteed_pools = {pair for pair, q in self.quota.items() if q.guaranteed}
        self.victim_index: dict[str, VictimIndex] = {
            key: VictimIndex(cands, guaranteed_pools) for key, cands in self.candidates.items()}
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
        then :func:`jobs.admission.victims.victim_order`."""
        preferred = 0 if (job.tier == Tier.BATCH or job.borrowing or job.loan_ended
                          or self.above_explicit_guarantee(job)) else 1
        return victim_order(job, preferred, self.now_ts)

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
            return self.runtimes.remaining(job, elapsed, self.now_ts)
        return self.durations(job)

    def limits(self, job: JobView, key: str) -> tuple[int, int]:
        """(nominal, ceiling) of the job's pool for ``key`` (``PoolQuota.limits``: production
        never borrows); (0, 0) without a quota."""
        return self.tier_limits(job.tenant, job.pool, key, job.tier)

    def tier_limits(self, tenant: str, pool: str, key: str, tier: str) -> tuple[int, int]:
        memo = (tenant, pool, key, tier)
        cached = self._limits.get(memo)
        if cached is None:
            quota = self.quota.get((tenant, pool))
            if key.startswith("shared:"):   # counted as "gpu-shared"
                cached = (_UNBOUNDED, _UNBOUNDED)
            else:
                cached = quota.limits(key, tier) if quota is not None else (0, 0)
            self._limits[memo] = cached
        return cached

    def pool_ceiling(self, job: JobView, key: str) -> int:
        """What all the pool's jobs together may hold of ``key`` (the unscoped ResourceQuota
        backstop): the larger ceiling of its borrowing work (development, batch), whatever
        the job's tier. Production is held to its grant by :meth:`limits` (and a quota
        scoped to it) apart."""
        return max(self.tier_limits(job.tenant, job.pool, key, tier)[1]
                   for tier in (Tier.DEVELOPMENT, Tier.BATCH))

    def grace(self, tier: str) -> int:
        return int(self.policy.grace_seconds.get(tier, 0))

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

    def block(self, job: JobView, reason: Text, *, never: bool = False,
              capacity: bool = False) -> None:
        self.reasons[job.id] = reason
        if never:
            self.never.add(job.id)
        if capacity:
            self.capacity_bound.add(job.id)

    def account(self, job: JobView, key: str, units: int) -> None:
        """Count a job that is admitted or promised room: its key and every dimension."""
        tpk = (job.tenant, job.pool, key)
        self.use_all[tpk] += units
        if job.tier != Tier.BATCH:
            self.use_nb[tpk] += units
        if job.dims:
            self.account_dims(job, job.dims)

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

    # -- guarantees (step 3 of the module docstring) ------------------------------------

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
