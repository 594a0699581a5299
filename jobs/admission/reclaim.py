"""Making room (step 3 of :mod:`jobs.admission.engine`): capacity that preempting jobs
are about to release, then victims; and watermark eviction (step 4). :class:`Reclaim`,
a layer of the pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

from core.choices import Tier
from jobs.choices import JobState

from . import text
from .capacity import Plan, Slot
from .eta import TPK
from .explain import _BATCH, _BORROW, _NOMINAL, _OVER
from .rules import QuotaRules
from .types import TIER_RANK, JobView, Preemption, Text
from .victims import victim_order

_MAX_VICTIMS = 256
"""Victims considered for one reclaim attempt (the most preferred ones)."""


class Reclaim(QuotaRules):
    """Reclaim and watermark eviction."""

    stop_early = True
    """A reclaim gives up once even every remaining candidate would not make room
    (``could_fit``); False reads them one by one to the end (the tests compare both)."""

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

    def eligible_victims(self, job: JobView, key: str, mode: str, within_g: bool, *,
                         own_first: bool = False) -> Iterator[JobView]:
        """The victims ``job`` may take on ``key``, the most preferred first
        (:func:`jobs.admission.victims.victim_order`; with ``own_first``, those of its own
        pool before the others), at most ``_MAX_VICTIMS``; read lazily from the key's
        :class:`VictimIndex`, so a reclaim that needs a few reads a few."""
        index = self.victim_index.get(key)
        if index is None:
            return
        lower = self.policy.preempt_lower_priority_within_tenant
        stream = index.stream(job, lower_priority=lower,
                              protected=mode in (_BORROW, _BATCH), within_g=within_g)
        taken = 0
        if own_first:
            pair = (job.tenant, job.pool)
            for _pos, victim in index.own(job):
                if self.eligible_victim(victim, job, mode, within_g):
                    yield victim
                    taken += 1
                    if taken == _MAX_VICTIMS:
                        return
            stream = (v for v in stream if (v.tenant, v.pool) != pair)
        for victim in stream:
            if self.eligible_victim(victim, job, mode, within_g):
                yield victim
                taken += 1
                if taken == _MAX_VICTIMS:
                    return

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
        scope = job.place_as   # whose dedicated nodes it may use
        usable = {id(s) for s in self.cap.eligible(key, scope)}
        free = self.cap.free_total(key, scope)

        def fits(extra: dict[Slot, int], loose_units: int) -> Plan | None:
            """A placement on free + ``extra``; or, when units of unknown placement are being
            freed, an empty plan if the room exists in aggregate (the best that can be
            proven without knowing their nodes); None when it does not fit."""
            found = self.cap.place(key, scope, replicas, per, extra)
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
        memo = (key, tenant, scope, job.pool, job.tier, mode, job.priority, replicas, per,
                job.dims, within_g)
        if memo in self.reclaim_fail:
            return False

        def own(victim: JobView) -> bool:
            """The victim's units count against the same pool's quota as the job's."""
            return victim.tenant == tenant and victim.pool == job.pool

        cands = self.eligible_victims(job, key, mode, within_g,
                                      own_first=mode == _OVER or not within_ceiling)
        # victims eligible only as pools above their guarantee: taken while still above it
        by_guarantee: set[int] = set()
        over_g: dict[TPK, int] = {}
        base = free + sum(v for s, v in pend.items() if id(s) in usable) + loose

        def freed_by(victim: JobView) -> list[Slot]:
            slots = []
            for name in victim.placement:
                slot = self.cap.index.get((key, name))
                if slot is not None and id(slot) in usable:
                    slots.append(slot)
            return slots

        def own_units(victim: JobView) -> tuple[int, int]:
            """(non-batch, all) units a victim frees of the job's own pool."""
            if not own(victim):
                return 0, 0
            return (0 if victim.tier == Tier.BATCH else victim.demand), victim.demand

        def quota_ok(victims: list[JobView], own_nb: int, own_all: int) -> bool:
            """``own_nb``, ``own_all``: the sums of ``own_units`` over ``victims``."""
            if mode == _OVER and eff_nb - own_nb + units > nominal:
                return False
            if job.dims and self.dims_mode(job, releasing=True, victims=victims)[0] == _OVER:
                return False   # a victim of its pool frees its whole demand, every dimension
            if job.tier != Tier.BATCH:   # the pool's batch work does not count (it yields),
                # except against what the pool's pods together may hold (the backstop)
                return (eff_nb - own_nb + units <= ceiling
                        and eff_all - own_all + units <= self.pool_ceiling(job, key))
            return eff_all - own_all + units <= ceiling

        extra: dict[Slot, int] = dict(pend)
        chosen: list[JobView] = []
        freed = 0
        unplaced = loose   # units freed on nodes the engine does not know
        plan: Plan | None = None
        own_nb = own_all = taken = 0   # own_units and demand summed over the chosen

        def guarantee_skips(victim: JobView, over: dict[TPK, int]) -> bool:
            """A victim eligible only as its pool is above its guarantee, when the victims
            chosen before it have brought that pool down to it (``over``: what each such
            pool still holds above it, updated)."""
            vtpk = (victim.tenant, victim.pool, key)
            left = over.get(vtpk)
            if left is None:
                left = (self.use_nb[vtpk] - self.releasing_nb[vtpk]
                        - self.guaranteed(victim.tenant, victim.pool, key))
            if left <= 0:
                return True
            over[vtpk] = left - victim.demand
            return False

        def could_fit(remaining: list[JobView]) -> bool:
            """Whether taking every remaining candidate as well would make room. Each
            condition only gets easier with more victims (more units freed, of its own pool
            too, more room per node), so when all of them are not enough, no fewer are."""
            m_extra, m_over, m_chosen = dict(extra), dict(over_g), list(chosen)
            m_nb, m_all, m_taken, m_freed, m_unplaced = own_nb, own_all, taken, freed, unplaced
            for victim in remaining:
                if within_g and self.only_by_guarantee(victim, job) and guarantee_skips(
                        victim, m_over):
                    continue
                m_chosen.append(victim)
                v_nb, v_all = own_units(victim)
                m_nb, m_all, m_taken = m_nb + v_nb, m_all + v_all, m_taken + victim.demand
                if victim.placement:
                    for slot in freed_by(victim):
                        m_extra[slot] = m_extra.get(slot, 0) + victim.gpus_per_replica
                        m_freed += victim.gpus_per_replica
                else:
                    m_unplaced += victim.demand
                    m_freed += victim.demand
            return (base + m_freed >= units and quota_ok(m_chosen, m_nb, m_all)
                    and not self.gated(job, key, m_taken)
                    and fits(m_extra, m_unplaced) is not None)

        pending_victims: Iterator[JobView] = iter(cands)
        checked = False   # could_fit asked once: after the first placement that failed
        while (victim := next(pending_victims, None)) is not None:
            if within_g and self.only_by_guarantee(victim, job):
                by_guarantee.add(victim.id)
                if guarantee_skips(victim, over_g):
                    continue
            chosen.append(victim)
            v_nb, v_all = own_units(victim)
            own_nb += v_nb
            own_all += v_all
            taken += victim.demand
            if victim.placement:
                for slot in freed_by(victim):
                    extra[slot] = extra.get(slot, 0) + victim.gpus_per_replica
                    freed += victim.gpus_per_replica
            else:
                unplaced += victim.demand
                freed += victim.demand
            if base + freed < units or not quota_ok(chosen, own_nb, own_all) or self.gated(
                    job, key, taken):
                continue
            plan = fits(extra, unplaced)
            if plan is not None:
                break
            if not checked and self.stop_early:
                checked = True
                remaining = list(pending_victims)
                if not could_fit(remaining):
                    break
                pending_victims = iter(remaining)
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
            v_nb, v_all = own_units(victim)
            if not quota_ok(rest, own_nb - v_nb, own_all - v_all) or self.gated(
                    job, key, taken - victim.demand):
                continue
            trial_plan = fits(trial, trial_unplaced)
            if trial_plan is not None:
                chosen, extra, unplaced, plan = rest, trial, trial_unplaced, trial_plan
                own_nb, own_all, taken = own_nb - v_nb, own_all - v_all, taken - victim.demand
        if not chosen:   # what preempting jobs release is enough after all
            self.await_preempting(job, key, plan, pend)
            return True
        if loose:
            self.pending_loose[key] = 0   # counted in this job's room
        for victim in chosen:
            self.victims[victim.id] = Preemption(
                victim.id, self.victim_reason(victim, job, key, victim.id in by_guarantee),
                self.grace(victim.tier), job.id)
            self.victims_of[key] += 1
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
            pool.sort(key=lambda j: victim_order(j, rank(j), self.now_ts))
            for victim in pool:
                if self.wm_use(key) <= limit + 1e-9:
                    break
                if victim.tier != Tier.BATCH and not self.above_guarantee(victim):
                    continue   # its pool is back within its guarantee with the evictions so far
                self.victims[victim.id] = Preemption(victim.id, reason,
                                                     self.grace(victim.tier), None)
                self.victims_of[key] += 1
                self.release(victim)

    def victims_units(self, key: str) -> list[int]:
        by_id = {j.id: j for j in self.active if j.resource_key == key}
        return [by_id[v].demand for v in self.victims if v in by_id]
