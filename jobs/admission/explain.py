"""Why a job waits, its positions and its ETA: the explaining half of a ``decide()`` pass.

:class:`Explainer` is a mixin of the pass in :mod:`jobs.admission.engine`; it reads the
pass's state (capacity, quota use, reasons recorded while deciding) and fills
``Decisions.waiting``.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from core.choices import Tier

from . import text
from .eta import TPK, KeySim, Queued, simulate
from .types import Admission, Decisions, JobView, Preemption, Text, WaitInfo

if TYPE_CHECKING:
    from .capacity import Capacity

_NOMINAL, _BORROW, _BATCH, _OVER = "nominal", "borrow", "batch", "over"
"""How a job is (or would be) admitted: within nominal quota, borrowing, batch, or not."""

_CAPACITY: Text = {"code": "jobs.wait.capacity", "args": {}}


def _ts(when: datetime | None, default: float) -> float:
    return when.timestamp() if when is not None else default


class Overtaking:
    """Within a pool's queue and tier, ETAs do not go back as the position grows, unless
    the row says why: a job whose ETA p50 is earlier than that of a job ahead of it gets
    :func:`sooner`'s reason. Fed the waiting jobs in queue order (:meth:`note`); it keeps,
    per pool and tier, the jobs whose ETA was the latest so far: their ETAs ascend, so the
    first job ahead with a later ETA is found by bisection."""

    def __init__(self) -> None:
        self.latest: dict[tuple[str, str],
                          tuple[list[datetime], list[tuple[int, JobView, Text]]]] = {}

    def note(self, job: JobView, position: int, p50: datetime | None, base: Text,
             reason: Text) -> Text:
        """``reason`` (the row's), with why it starts before a job ahead when it does;
        ``base``: the job's own reason (without its queue place)."""
        if p50 is None:
            return reason
        found = self.latest.get((job.pool, job.tier))
        if found is None:
            found = self.latest[(job.pool, job.tier)] = ([], [])
        times, rows = found
        if times and p50 < times[-1]:
            note = sooner(job, *rows[bisect.bisect_right(times, p50)])
            return [*reason, note] if isinstance(reason, list) else [reason, note]
        if not times or p50 > times[-1]:
            times.append(p50)
            rows.append((position, job, base))
        return reason


_OWN_QUOTA = frozenset({"jobs.wait.over_quota", "jobs.wait.borrow_cap"})


_NOTES: dict[tuple[str, int], Text] = {}
_NOTES_MAX = 200_000


def sooner(job: JobView, position: int, ahead: JobView, held: Text) -> Text:
    """Why ``job`` may start before ``ahead``, at ``position`` in their pool's queue
    (``held``: the reason ``ahead`` waits): it waits for other cards, or for its own
    tenant's quota, or ``job`` fits in the room free until ``ahead`` can start. The texts
    recur in every pass: built once and shared, as :func:`text.queue_place`'s."""
    if ahead.resource_key != job.resource_key:
        code = "jobs.wait.sooner_other_cards"
    elif (ahead.tenant != job.tenant and isinstance(held, dict)
            and held.get("code") in _OWN_QUOTA):
        code = "jobs.wait.sooner_quota"
    elif job.demand < ahead.demand:
        code = "jobs.wait.backfill_smaller"
    else:
        code = "jobs.wait.backfill"
    note = _NOTES.get((code, position))
    if note is None:
        note = {"code": code, "args": {"n": text.position(position)}}
        if len(_NOTES) < _NOTES_MAX:
            _NOTES[(code, position)] = note
    return note


class Explainer:
    """Reasons, positions and ETAs; mixed into the pass, whose state it reads."""

    now: datetime
    cap: Capacity
    decisions: Decisions
    active: list[JobView]
    active_by_key: dict[str, list[JobView]]
    queued: list[JobView]
    queued_by_id: dict[int, JobView]
    admitted: Mapping[int, Admission]
    victims: dict[int, Preemption]
    reasons: dict[int, Text]
    capacity_bound: set[int]
    never: set[int]
    use_nb: dict[TPK, int]
    use_all: dict[TPK, int]
    alloc_start: dict[str, int]
    free_start: dict[str, dict[str, int]]
    new_alloc: dict[str, int]
    _why: dict[tuple[object, ...], Text]
    _holders: dict[tuple[str, int], Text]
    _holder_cache: dict[str, tuple[list[float], list[int], list[str]]]

    def durations(self, job: JobView) -> tuple[float, float]:
        raise NotImplementedError

    def end_offsets(self, job: JobView) -> tuple[float, float]:
        raise NotImplementedError

    def release_nodes(self, job: JobView, key: str,
                      taken: dict[str, int]) -> tuple[tuple[str, int], ...]:
        raise NotImplementedError

    def limits(self, job: JobView, key: str) -> tuple[int, int]:
        raise NotImplementedError

    # -- explanations --------------------------------------------------------------------

    def why(self, job: JobView, key: str, mode: str, nominal: int, ceiling: int) -> Text:
        """The reason a job that could start some day did not start now (memoised)."""
        tpk = (job.tenant, job.pool, key)
        signature = (tpk, mode, job.demand, job.replicas, job.gpus_per_replica, job.tier,
                     self.use_nb[tpk], self.use_all[tpk], self.cap.free_total(key, job.tenant))
        reason = self._why.get(signature)
        if reason is None:
            reason = self._why[signature] = self._why_uncached(job, key, mode, nominal, ceiling)
        return reason

    def _why_uncached(self, job: JobView, key: str, mode: str, nominal: int,
                      ceiling: int) -> Text:
        tpk = (job.tenant, job.pool, key)
        units = job.demand
        pool = text.pool(job.pool)
        if mode == _OVER:
            if job.tier != Tier.PRODUCTION:   # it borrows: held by the cap an admin set
                return {"code": "jobs.wait.borrow_cap",
                        "args": {"pool": pool, "ceiling": text.amount(ceiling, key),
                                 "quota": text.amount(nominal, key),
                                 "used": self.use_all[tpk]}}
            # "in use" is the pool's one number (jobs.selectors.holding_use: every
            # admitted, running and preempting job, batch included), as its pages show
            return {"code": "jobs.wait.over_quota",
                    "args": {"pool": pool, "quota": text.amount(nominal, key),
                             "used": self.use_all[tpk]}}
        free = self.cap.free_total(key, job.tenant)
        detail: Text
        if free >= units:
            if job.replicas == 1:
                detail = {"code": "jobs.wait.no_node_has_room",
                          "args": {"amount": text.amount(units, key), "free": free,
                                   "units": units}}
            else:
                detail = {"code": "jobs.wait.scattered",
                          "args": {"replicas": job.replicas,
                                   "per": text.amount(job.gpus_per_replica, key),
                                   "free": free}}
        else:
            detail = {"code": "jobs.wait.needs",
                      "args": {"amount": text.amount(units, key), "free": free,
                               "holders": self.holders(key, units - free)}}
        if mode == _BORROW:
            return {"code": "jobs.wait.borrowing",
                    "args": {"pool": pool, "quota": text.amount(nominal, key),
                             "used": self.use_all[tpk], "resource": text.resource_name(key),
                             "detail": detail}}
        if mode == _BATCH:
            return {"code": "jobs.wait.batch_idle", "args": {"detail": detail}}
        return detail

    def holders(self, key: str, short: int) -> Text:
        """"2 held by production jobs expected to finish around 14:20 UTC"."""
        phrase = self._holders.get((key, short))
        if phrase is None:
            phrase = self._holders[(key, short)] = self._holders_uncached(key, short)
        return phrase

    def _holders_uncached(self, key: str, short: int) -> Text:
        table = self._holders_table(key)
        ends, cumulative, tiers = table
        idx = bisect.bisect_left(cumulative, short)
        if idx >= len(ends):
            if not ends:
                return {"code": "jobs.holders.other", "args": {"n": short}}
            return {"code": "jobs.holders.running_and_other",
                    "args": {"n": short, "at": text.when(
                        self.now + timedelta(seconds=ends[-1]), self.now)}}
        when = self.now + timedelta(seconds=ends[idx])
        return {"code": "jobs.holders.tiers",
                "args": {"n": short, "tiers": text.tiers(set(tiers[: idx + 1])),
                         "at": text.when(when, self.now)}}

    def _holders_table(self, key: str) -> tuple[list[float], list[int], list[str]]:
        """Holders of ``key`` by expected end: (end offsets, cumulative units, tiers)."""
        table = self._holder_cache.get(key)
        if table is None:
            rows = sorted((self.end_offsets(j)[0], j.id, j.demand, j.tier)
                          for j in self.active_by_key.get(key, ()) if j.id not in self.victims)
            cumulative: list[int] = []
            total = 0
            for row in rows:
                total += row[2]
                cumulative.append(total)
            table = ([r[0] for r in rows], cumulative, [r[3] for r in rows])
            self._holder_cache[key] = table
        return table

    def explain(self, waiting: list[JobView]) -> None:
        """Positions, ETA and the final reason of every waiting job (an ETA earlier than
        one ahead in the pool's queue and tier says why: :class:`Overtaking`)."""
        etas = self.etas(waiting)
        pool_pos: dict[str, int] = defaultdict(int)
        model_pos: dict[str, int] = defaultdict(int)
        pool_tenants: dict[str, set[str]] = defaultdict(set)
        overtaking = Overtaking()
        for job in waiting:
            key = job.resource_key
            pool_pos[job.pool] += 1
            model_pos[key] += 1
            ahead = pool_tenants[job.pool]
            reason = base = self.reasons.get(job.id, _CAPACITY)
            position = pool_pos[job.pool]
            if position > 1 and job.id in self.capacity_bound:
                reason = [reason, text.queue_place(position, job.pool,
                                                   behind_own=ahead == {job.tenant})]
            if len(ahead) < 2:
                ahead.add(job.tenant)
            p50, p90 = etas.get(job.id, (None, None))
            reason = overtaking.note(job, position, p50, base, reason)
            self.decisions.waiting[job.id] = WaitInfo(position, model_pos[key], p50, p90, reason)

    def etas(self, waiting: list[JobView]) -> dict[int, tuple[datetime | None, datetime | None]]:
        """ETA p50/p90 of every waiting job (:func:`jobs.admission.eta.simulate`)."""
        sims: dict[str, KeySim] = {}
        by_id = self.queued_by_id

        def sim_for(key: str) -> KeySim:
            sim = sims.get(key)
            if sim is None:
                free = dict(self.free_start.get(key, {}))
                for admission in self.admitted.values():
                    job = by_id[admission.job_id]
                    if job.resource_key == key:
                        for name in admission.placement:
                            if name in free:
                                free[name] -= job.gpus_per_replica
                sim = sims[key] = KeySim(self.cap.copy_key(key, free), key)
            return sim

        ids_by_key: dict[str, list[JobView]] = defaultdict(list)
        for job in waiting:
            if job.id in self.never or not job.resource_key:
                continue
            ids_by_key[job.resource_key].append(job)
        for key in ids_by_key:
            if key not in self.cap.slots:
                continue
            sim = sim_for(key)
            taken: dict[str, int] = {}
            for job in self.active_by_key.get(key, ()):
                tpk = (job.tenant, job.pool, key)
                nodes = self.release_nodes(job, key, taken)
                batch = job.tier == Tier.BATCH
                if job.id in self.victims:
                    end = float(self.victims[job.id].grace_seconds)
                    sim.releases.append((end, end, job.demand, tpk, nodes, batch))
                else:
                    end50, end90 = self.end_offsets(job)
                    sim.releases.append((end50, end90, job.demand, tpk, nodes, batch))
        for admission in self.admitted.values():
            job = by_id[admission.job_id]
            key = job.resource_key
            if key not in ids_by_key:
                continue
            d50, d90 = self.durations(job)
            per_node: dict[str, int] = defaultdict(int)
            for name in admission.placement:
                per_node[name] += job.gpus_per_replica
            sim_for(key).releases.append((d50, d90, job.demand, (job.tenant, job.pool, key),
                                          tuple(per_node.items()), job.tier == Tier.BATCH))
        result: dict[int, tuple[datetime | None, datetime | None]] = {}
        instants: dict[float, datetime] = {}

        def instant(offset: float) -> datetime:
            when = instants.get(offset)
            if when is None:
                when = instants[offset] = self.now + timedelta(seconds=offset)
            return when

        for key, queue in ids_by_key.items():
            if key not in self.cap.slots:
                continue
            sim = sim_for(key)
            tpks: dict[tuple[str, str], TPK] = {}
            append = sim.queue.append
            for job in queue:
                found = tpks.get((job.tenant, job.pool))
                if found is None:
                    found = tpks[(job.tenant, job.pool)] = (job.tenant, job.pool, key)
                d50, d90 = self.durations(job)
                append(Queued(job.id, job.tenant, found, job.replicas, job.gpus_per_replica,
                              d50, d90, self.limits(job, key)[1], job.tier == Tier.BATCH))
            first = simulate(sim, 0)
            same = (all(r[0] == r[1] for r in sim.releases)
                    and all(q.d50 == q.d90 for q in sim.queue))
            second = first if same else simulate(sim, 1)
            for job in queue:
                s50 = first.get(job.id)
                if s50 is None:
                    result[job.id] = (None, None)
                    continue
                s90 = second.get(job.id)
                result[job.id] = (instant(s50),
                                  instant(s50 if s90 is None or s90 < s50 else s90))
        return result
