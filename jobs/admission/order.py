"""The admission order (step 2 of :mod:`jobs.admission.engine`): tier, then work within
its pool's quota before work that would borrow, then fair share across tenants, then
priority, submission time and id.

Within a tier, a job its pool's quota covers goes before one that would borrow idle
capacity (as Kueue's scheduler takes the workloads that do not borrow first): otherwise a
tenant with no quota, whose fair share is always smallest, would take back the cards an
owner has just reclaimed from it, again and again (:func:`borrow_predicate`).

The order is a merge of each tenant's own queue (sorted by priority, submission, id), by
tier and then by the *entry* of each tenant's head: (its tenant's share when it is taken,
-priority, submission time, id, tenant). Taking always the smallest head, it depends on a
tenant's own jobs and use only, so the order of a set of tenants is the order of all of
them restricted to that set: :mod:`jobs.admission.incremental` orders the tenants of each
group of resource keys apart and merges the groups by these entries.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from operator import attrgetter

from core.choices import Tier
from jobs.choices import JobState

from .types import ACTIVE_STATES, TIER_RANK, TIERS, History, JobView, Policy, PoolQuota

_QUEUE_KEY = attrgetter("queue_key")

Entry = tuple[int, float, int, float, int, str]
"""Where a job stands in the merge: (rank, share, -priority, submitted, id, tenant); the
rank is the tier's rank x 2, plus 1 for work that would borrow."""


def borrow_predicate(jobs: Iterable[JobView], quotas: Iterable[PoolQuota]
                     ) -> Callable[[JobView], bool]:
    """Whether a queued development job would borrow as the pass starts: its pool's
    non-batch use of its key (what preempting jobs release counted as gone) plus its
    demand above the pool's nominal quota. Production (which never borrows) and batch
    (its own tier, all of it on idle capacity) are never ordered as borrowers."""
    nominal = {(q.tenant, q.pool): q.nominal for q in quotas}
    use: dict[tuple[str, str, str], int] = defaultdict(int)
    for job in jobs:
        if (job.state in ACTIVE_STATES and job.state != JobState.PREEMPTING
                and job.tier != Tier.BATCH and job.resource_key):
            use[(job.tenant, job.pool, job.resource_key)] += job.demand

    def borrows(job: JobView) -> bool:
        key = job.resource_key
        if job.tier != Tier.DEVELOPMENT or not key or key.startswith("shared:"):
            return False
        granted = nominal.get((job.tenant, job.pool), {}).get(key, 0)
        return use[(job.tenant, job.pool, key)] + job.demand > granted
    return borrows


def fair_order(queued: list[JobView], tenant_use: Mapping[str, int],
               nominal_total: Mapping[str, int], history: History, policy: Policy,
               entries: dict[int, Entry] | None = None,
               borrows: Callable[[JobView], bool] | None = None) -> list[JobView]:
    """Tier, then within its quota before borrowing (``borrows``, from
    :func:`borrow_predicate`; None: nobody), then fair share (recomputed as each job is
    taken), priority, submission, id.

    A tenant's share = units it holds (GPUs and MIG instances alike, all pools) / its
    total nominal quota + decayed GPU-seconds / (total nominal × half-life / ln 2),
    i.e. both terms are 1.0 for a tenant that has used exactly its quota all along.
    ``entries``: filled with each job's :data:`Entry` when given.
    """
    groups: dict[int, dict[str, list[JobView]]] = defaultdict(lambda: defaultdict(list))
    for job in queued:
        rank = 2 * TIER_RANK.get(job.tier, len(TIERS)) + int(bool(borrows and borrows(job)))
        groups[rank][job.tenant].append(job)
    use = dict(tenant_use)
    half_life = max(policy.fair_share_half_life_seconds, 1.0) / math.log(2)
    past = history.usage
    # share(tenant) = use / nominal + past / (nominal x half-life): the tenant's part, fixed
    # for the pass, once; the units it takes are added to ``use`` as it goes
    scale: dict[str, tuple[float, float]] = {}

    def share(tenant: str) -> float:
        found = scale.get(tenant)
        if found is None:
            nominal = max(nominal_total.get(tenant, 0), 1)
            found = scale[tenant] = (nominal, past.get(tenant, 0.0) / (nominal * half_life))
        return use.get(tenant, 0) / found[0] + found[1]

    result: list[JobView] = []
    append = result.append
    for rank in sorted(groups):
        per_tenant = groups[rank]
        heap: list[tuple[float, int, float, int, str]] = []
        for tenant, lst in per_tenant.items():
            lst.sort(key=_QUEUE_KEY)
            heap.append((share(tenant), *lst[0].queue_key, tenant))
        heapq.heapify(heap)
        pointer = dict.fromkeys(per_tenant, 0)
        while heap:
            entry = heapq.heappop(heap)
            tenant = entry[4]
            lst = per_tenant[tenant]
            at = pointer[tenant]
            end = len(lst)
            while True:   # keep taking while this tenant stays ahead of the next one
                job = lst[at]
                at += 1
                append(job)
                if entries is not None:
                    entries[job.id] = (rank, *entry)
                use[tenant] = use.get(tenant, 0) + job.demand
                if at == end:
                    break
                entry = (share(tenant), *lst[at].queue_key, tenant)
                if heap and heap[0] < entry:
                    heapq.heappush(heap, entry)
                    break
            pointer[tenant] = at
    return result
