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
cheap. The admission loop calls it through :class:`jobs.admission.incremental.Engine`,
which decides again only the groups of resource keys whose inputs changed since its last
pass (the same decisions; this function is its checker in the tests).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from core.choices import Tier
from jobs.choices import JobState

from . import text
from .capacity import Plan, plan_nodes
from .eta import Release, reserve
from .explain import _BORROW, _CAPACITY, _NOMINAL, _OVER, _ts
from .order import borrow_predicate, fair_order
from .reclaim import Reclaim
from .rules import _mode, _worst
from .types import (
    TIER_RANK,
    TIERS,
    Admission,
    Decisions,
    History,
    JobView,
    NodeView,
    Policy,
    PoolQuota,
    Text,
)

_HELD: Text = {"code": "jobs.wait.held", "args": {}}
_NO_CPU_NODE: Text = {"code": "jobs.never.no_cpu_node", "args": {}}


def decide(*, nodes: Sequence[NodeView], jobs: Sequence[JobView], quotas: Sequence[PoolQuota],
           policy: Policy, history: History, now: datetime,
           physical: Mapping[str, float] | None = None, explain: bool = True) -> Decisions:
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

    ``explain=False`` skips step 5 (no WaitInfo: ``waiting`` is empty): the same
    admissions and preemptions, without the ETA simulation that costs most of a pass on a
    long queue. The admission loop explains every few seconds, not on every pass
    (``jobs.tasks.admission_cycle``).
    """
    pass_ = _Pass(nodes, jobs, quotas, policy, history, now, physical, explaining=explain)
    return pass_.run()


class _Pass(Reclaim):
    """One ``decide()`` call: the steps, in order (the state, rules and reclaim are the
    layers below it: :mod:`.state`, :mod:`.rules`, :mod:`.reclaim`)."""

    # -- ordering ------------------------------------------------------------------------

    def order(self, queued: list[JobView]) -> list[JobView]:
        """Tier, then fair share (:func:`jobs.admission.order.fair_order`)."""
        return fair_order(queued, self.tenant_use, self.nominal_total, self.history,
                          self.policy, borrows=borrow_predicate(self.active,
                                                                self.quota.values()))

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
        if self.explaining:
            self.explain([j for j in order if j.id not in self.admitted] + held)
        self.decisions.admit = sorted(self.admitted.values(), key=lambda a: a.job_id)
        self.decisions.preempt = sorted(self.victims.values(), key=lambda p: p.job_id)
        return self.decisions

    def consider(self, job: JobView) -> None:
        """Admit, promise room to, or explain one job; identical jobs that found nothing
        changed since the last one of their kind was turned away reuse its outcome.

        What they saw is their key's and their pool's state only (capacity, use, what is
        being released, the victims taken on that key): the outcome of a job never depends
        on other keys, so a group of keys decides the same apart as in the whole pass
        (:mod:`jobs.admission.incremental`)."""
        key = job.resource_key
        if not key:
            self.admit_cpu(job)
            return
        verdict = self.never_reason(job, key)
        if verdict is not None:   # parked: nothing of this pass can change that
            self.block(job, verdict, never=True)
            return
        tpk = (job.tenant, job.pool, key)
        kind = (tpk, job.tier, job.priority, job.replicas, job.gpus_per_replica, job.dims,
                self.durations(job)[1])
        state = (self.cap.version(key), self.use_nb[tpk], self.use_all[tpk],
                 self.releasing_nb[tpk], self.releasing_all[tpk], self.victims_of[key],
                 self.dim_version[(job.tenant, job.pool)])
        cached = self._outcomes.get(kind)
        if cached is not None and cached[0] == state:
            _, reason, never, capacity, nominal, over = cached
            self.block(job, reason, never=never, capacity=capacity)
            if nominal:
                self.nominal_waiting[key] += 1
            if over:
                self.over_quota.append(job)
            return
        waiting_before = self.nominal_waiting[key]
        over_before = len(self.over_quota)
        self.decide_one(job, key)
        after = (self.cap.version(key), self.use_nb[tpk], self.use_all[tpk],
                 self.releasing_nb[tpk], self.releasing_all[tpk], self.victims_of[key],
                 self.dim_version[(job.tenant, job.pool)])
        if job.id not in self.admitted and after == state:
            self._outcomes[kind] = (state, self.reasons[job.id], job.id in self.never,
                                    job.id in self.capacity_bound,
                                    self.nominal_waiting[key] != waiting_before,
                                    len(self.over_quota) != over_before)

    def never_reason(self, job: JobView, key: str) -> Text | None:
        """Why the job can never start as the cluster and its pool's quota are (no node of
        its kind, a gang no node or switch holds, above what its pool may ever hold); None
        when it could some day. It reads no use, so it holds for every job of the same
        pool, tier and shape until the nodes of ``key`` or the quotas change: memoised in
        :attr:`verdicts` (the incremental engine keeps them between passes)."""
        kind = (job.place_as, job.pool, job.tier, job.replicas, job.gpus_per_replica, job.dims)
        memo = self.verdicts.get(key)
        if memo is None:
            memo = self.verdicts[key] = {}
        if kind in memo:
            return memo[kind]
        found = memo[kind] = self._never_reason(job, key)
        return found

    def _never_reason(self, job: JobView, key: str) -> Text | None:
        units = job.demand
        tenant, replicas, per = job.place_as, job.replicas, job.gpus_per_replica
        if not self.cap.eligible(key, tenant):
            return {"code": "jobs.never.no_node_has",
                    "args": {"resource": text.resource_name(key)}}
        if not self.cap.fits_empty(key, tenant, replicas, per):
            node_max, switch_max = self.cap.largest(key, tenant)
            if per > node_max:
                return {"code": "jobs.never.replica_too_large",
                        "args": {"per": text.amount(per, key), "largest": node_max}}
            return {"code": "jobs.never.gang_too_large",
                    "args": {"replicas": replicas, "per": text.amount(per, key),
                             "largest": switch_max}}
        _nominal, ceiling = self.limits(job, key)
        if units > ceiling:   # production: its quota; development, batch: the cap
            return self.never_text(job, key, units, ceiling)
        return self.dims_never(job) if job.dims else None

    def decide_one(self, job: JobView, key: str) -> None:
        units = job.demand
        tenant, replicas, per = job.tenant, job.replicas, job.gpus_per_replica
        never = self.never_reason(job, key)
        if never is not None:
            self.block(job, never, never=True)
            return
        nominal, ceiling = self.limits(job, key)
        tpk = (tenant, job.pool, key)
        batch = job.tier == Tier.BATCH
        nb, al = self.use_nb[tpk], self.use_all[tpk]
        key_mode = _mode(batch, units, nb, al, nominal, ceiling)
        mode = _worst(key_mode, self.dims_mode(job)[0]) if job.dims else key_mode
        gated = mode != _OVER and self.gated(job, key)   # above the watermark (step 4)
        # everything the pool's pods hold, its batch jobs' included, within what the pool's
        # unscoped ResourceQuota allows (production: its own is its grant, checked above)
        if not gated and mode != _OVER and al + units <= self.pool_ceiling(job, key):
            plan = self.place(key, job.place_as, replicas, per)
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
        if gated and mode != _OVER and self.place(key, job.place_as, replicas, per) is not None:
            # it would fit now: the watermark alone keeps it out (else: the usual reason)
            self.block(job, self.watermark_wait(job, key), capacity=True)
            return
        if mode == _NOMINAL:
            self.nominal_waiting[key] += 1
        if key_mode != _OVER and short is not None:   # over the quota of another dimension
            self.block(job, self.why_dim(job, self.dims_mode(job)[1] or short))
            return
        # the wording only when it is shown (a pass that does not explain returns none)
        self.block(job, self.why(job, key, key_mode, nominal, ceiling) if self.explaining
                   else _CAPACITY, capacity=mode != _OVER)
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
        for job in self.active_by_key.get(key, ()):
            if job.id in self.victims or job.state == JobState.PREEMPTING:
                continue
            nodes = self.release_nodes(job, key, taken)
            out.append((self.end_offsets(job)[0], nodes))
        by_id = self.queued_by_id
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
        plan = self.cap.place(key, job.place_as, job.replicas, job.gpus_per_replica)
        if plan is None:
            return False
        res = self.reservations.get(key)
        return res is None or res.allows(self.cap, key, plan, job.gpus_per_replica,
                                         self.durations(job)[1])

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
