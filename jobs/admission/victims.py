"""The order of preemption victims, and an index of a key's candidates so that a job
looking for victims reads only those that may be eligible (step 3 of
:mod:`jobs.admission.engine`).

:func:`victim_order` is the one order of victims: the preferred first (the caller says
which those are: for reclaim, batch work and borrowers; for watermark eviction, batch,
then pools above nominal), lowest tier first, most recently admitted first, then the
highest id.

:class:`VictimIndex` holds one key's candidates (running and admitted jobs, production and
preempting ones excepted) sorted by that order once per pass, and the same candidates
split by what can make them eligible: batch work, each pool's own work, each tier's
non-batch work, the work marked borrowing or on an ended loan, and the work of pools
given an explicit guarantee. :meth:`VictimIndex.stream` merges only the parts a job may
take from, in the candidates' order, so a job that takes one victim or finds none reads a
few candidates, not every running job of the key; the caller still checks each one
(``Reclaim.eligible_victim``), so the index only narrows what is read.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from operator import itemgetter

from core.choices import Tier

from .explain import _ts
from .types import TIER_RANK, TIERS, JobView

_Ranked = tuple[int, JobView]
"""(position in the key's candidates, job): positions are unique, jobs never compared."""
_POS = itemgetter(0)


def victim_order(job: JobView, preferred: int, now_ts: float) -> tuple[int, int, float, int]:
    """Where ``job`` stands among victims: ``preferred`` (smaller first), then lowest tier
    first, most recently admitted (or started) first, highest id first."""
    return (preferred, -TIER_RANK.get(job.tier, len(TIERS)),
            -_ts(job.admitted_at or job.started_at, now_ts), -job.id)


class VictimIndex:
    """One key's victim candidates, sorted (:func:`victim_order`) and split by rule."""

    __slots__ = ("batch", "by_pool", "by_tier", "flagged", "guaranteed")

    def __init__(self, ordered: list[JobView], guaranteed_pools: set[tuple[str, str]]) -> None:
        self.batch: list[_Ranked] = []
        self.by_pool: dict[tuple[str, str], list[_Ranked]] = {}
        self.by_tier: dict[str, list[_Ranked]] = {}
        self.flagged: list[_Ranked] = []
        self.guaranteed: list[_Ranked] = []
        for pos, job in enumerate(ordered):
            item = (pos, job)
            self.by_pool.setdefault((job.tenant, job.pool), []).append(item)
            if job.tier == Tier.BATCH:
                self.batch.append(item)
                continue
            self.by_tier.setdefault(job.tier, []).append(item)
            if job.borrowing or job.loan_ended:
                self.flagged.append(item)
            if (job.tenant, job.pool) in guaranteed_pools:
                self.guaranteed.append(item)

    def stream(self, job: JobView, *, lower_priority: bool, protected: bool,
               within_g: bool) -> Iterator[JobView]:
        """The candidates ``job`` may take from, each once, in order (a superset of the
        eligible ones): batch work for a non-batch job; its own pool's work when a lower
        priority may be preempted (``lower_priority``); unless the job borrows or is batch
        work (``protected`` false): lower tiers, borrowed work, and with ``within_g`` the
        work of pools given a guarantee."""
        parts: list[Iterable[_Ranked]] = []
        if job.tier != Tier.BATCH and self.batch:
            parts.append(self.batch)
        if lower_priority:
            own = self.by_pool.get((job.tenant, job.pool))
            if own:
                parts.append(own)
        if not protected:
            rank = TIER_RANK.get(job.tier, 99)
            parts.extend(lst for tier, lst in self.by_tier.items()
                         if TIER_RANK.get(tier, 99) > rank)
            if self.flagged:
                parts.append(self.flagged)
            if within_g and self.guaranteed:
                parts.append(self.guaranteed)
        if len(parts) == 1:
            return (victim for _pos, victim in parts[0])
        return _unique(heapq.merge(*parts, key=_POS))

    def own(self, job: JobView) -> list[_Ranked]:
        """The candidates of the job's own pool, in order."""
        return self.by_pool.get((job.tenant, job.pool), [])


def _unique(merged: Iterator[_Ranked]) -> Iterator[JobView]:
    last = -1
    for pos, victim in merged:
        if pos != last:
            last = pos
            yield victim
