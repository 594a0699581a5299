"""What active jobs hold: each job's demand, and the "in use" of pools (the one number)."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import Any

from django.db.models import Q

from core.choices import Tier
from core.resources import extended
from jobs.admission import ACTIVE_STATES as HOLDING_STATES
from jobs.choices import JobState
from jobs.models import TrainingJob
from jobs.selectors.inventory import observed_card_facts
from jobs.volume_iops import unobserved_iops
from tenants.demand import (
    engine_demand,
    from_engine,
    job_demand,
)


def job_demand_of(job: Any, facts: Any) -> dict[str, Decimal]:
    """The whole job's demand per catalog key (``tenants.demand``, the one definition)
    from a TrainingJob, or from a cleaned submission (a dict)."""
    get = job.get if isinstance(job, dict) else lambda name, default=None: getattr(
        job, name, default)
    return job_demand(workers=get("workers") or 0, cpu_per_worker=get("cpu_per_worker") or 0,
                      memory_gib_per_worker=get("memory_gib_per_worker") or 0,
                      gpus_per_worker=get("gpus_per_worker") or 0,
                      gpu_model=get("gpu_model") or "", mig_profile=get("mig_profile") or "",
                      gpu_shared=bool(get("gpu_shared", False)),
                      gpu_memory_gib_per_card=get("gpu_memory_gib_per_card", None),
                      facts=facts, extended=extended_per_worker(get))


def extended_per_worker(get: Any) -> dict[str, int]:
    """The job's per-worker amount of each extended-resource dimension, by kind, read
    from its registry field (``core.resources``: ``rdma`` from ``rdma_per_worker``)."""
    return {dim.kind: int(get(dim.job_field) or 0) for dim in extended()}


def job_resources(job: Any, facts: Any) -> dict[str, int]:
    """``JobView.resources``: :func:`job_demand_of` in the engine's units."""
    return engine_demand(job_demand_of(job, facts))


def holding_use(jobs: Any) -> dict[tuple[str, str], dict[str, int]]:
    """(tenant slug, pool kind) -> resource key -> **in use**, in the engine's units: the
    summed ``resources`` of the JobViews in a state that holds quota (admitted, running,
    preempting: ``jobs.admission.ACTIVE_STATES``), as admission counts them. Pure; the
    preview and :func:`in_use_by_pool` both count with it."""
    out: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for job in jobs:
        if job.state in HOLDING_STATES:
            for key, amount in job.resources.items():
                out[(job.tenant, job.pool)][key] += amount
    return out


def in_use_by_pool(pools: Any, *, facts: Any = None, within_quota: bool = False
                   ) -> dict[int, dict[str, Decimal]]:
    """Pool pk -> resource key -> **in use**, in catalog units: the demand
    (``tenants.demand``, through :func:`job_resources`) of the pool's admitted, running
    and preempting jobs, what admission counts against its quota. The one definition
    behind the quota page, the gauges (``tenants.usage.in_use_by_pool``), the preview
    and the wait reasons. Two queries (the jobs, the card facts). ``within_quota``: only
    the work that holds the pool's own quota, not batch jobs nor work admitted borrowing
    idle capacity (both run beyond the quota and are reclaimed when it is needed: what a
    loan may not take from its lender, ``tenants.loans``). Also the provisioned IOPS of
    the new checkpoint volumes of the pools' jobs (queued ones too) that the cluster does
    not show yet (``jobs.volume_iops.unobserved_iops``; observed volumes are
    ``tenants.usage``'s): a third query only when there are such jobs."""
    by_id = [p.pk for p in pools]
    facts = facts if facts is not None else observed_card_facts()
    use: dict[int, dict[str, int]] = {pk: defaultdict(int) for pk in by_id}
    jobs = TrainingJob.objects.filter(
        Q(state__in=list(HOLDING_STATES)) | Q(state=JobState.QUEUED, checkpoint_iops__gt=0),
        pool_id__in=by_id)
    with_iops = []
    for job in jobs:
        if job.checkpoint_iops:
            with_iops.append(job)
        if job.state not in HOLDING_STATES or (within_quota and (
                job.tier == Tier.BATCH or job.borrowing)):
            continue
        for key, amount in job_resources(job, facts).items():
            use[job.pool_id][key] += amount
    out = {pk: {key: Decimal(str(from_engine(key, amount)))
                for key, amount in sorted(amounts.items()) if amount}
           for pk, amounts in use.items()}
    for pk, pending in unobserved_iops(pools, with_iops).items():
        for key, iops in pending.items():
            out[pk][key] = out[pk].get(key, Decimal(0)) + iops
    return out
