"""The job form's live preview: what a submission would be admitted against now."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.utils.translation import gettext as _

from core.choices import Tier
from core.texts import render, text_code
from jobs.admission import JobView
from jobs.choices import JobState
from jobs.selectors.admission import _admission_inputs, decide_with_pools_absent
from jobs.selectors.use import holding_use, job_resources
from tenants import demand
from tenants.catalog import Resource
from tenants.demand import (
    dimension_only_when_granted,
    from_engine,
)


def preview(tenant, pool_kind: str, clean: dict, now):  # type: ignore[no-untyped-def]
    """What would happen if this job were submitted now: quota fit, placement, start.

    Runs the admission engine on the current state plus this hypothetical job (id -1);
    nothing is written. ``reason`` is in the active language, ``reason_code`` its code.
    """
    inputs, facts = _admission_inputs(now)
    job = JobView(id=-1, tenant=tenant.slug, pool=pool_kind, tier=clean["tier"],
                  gpu_model=clean["gpu_model"], mig_profile=clean["mig_profile"],
                  replicas=clean["workers"], gpus_per_replica=clean["gpus_per_worker"],
                  state=JobState.QUEUED, submitted_at=now,
                  expected_seconds=(float(clean["expected_seconds"])
                                    if clean.get("expected_seconds") else None),
                  max_run_seconds=float(clean["max_run_seconds"]),
                  template=str(clean.get("template") or ""),
                  gpu_shared=bool(clean.get("gpu_shared")),
                  resources=job_resources(clean, facts))
    # as the admission loop decides: a pool the cluster does not show yet admits nothing
    decisions, _absent = decide_with_pools_absent({**inputs, "jobs": [*inputs["jobs"], job]})
    admitted = next((a for a in decisions.admit if a.job_id == -1), None)
    waiting = decisions.waiting.get(-1)
    dimensions = _preview_dimensions(inputs, tenant.slug, pool_kind, job)
    # The GPU summary (the API's older fields) is the accelerator's row of ``dimensions``.
    key = "gpu-shared" if job.gpu_shared and job.resource_key else job.resource_key
    gpu = next((d for d in dimensions if d["key"] == key), None)
    return {
        "resource": key, "gpus": job.demand,
        "quota": gpu["quota"] if gpu else None, "in_use": gpu["in_use"] if gpu else 0,
        "fits_quota": gpu["fits_quota"] if gpu else True,
        "nodes": len(set(admitted.placement)) if admitted else None,
        "starts_now": admitted is not None,
        "borrowing": bool(admitted and admitted.borrowing),
        "eta_p50": waiting.eta_p50 if waiting else (now if admitted else None),
        "eta_p90": waiting.eta_p90 if waiting else (now if admitted else None),
        "reason": render(waiting.reason) if waiting else "",
        "reason_code": text_code(waiting.reason) if waiting else None,
        "position_in_pool": waiting.position_in_pool if waiting else None,
        "notes": _preview_notes(clean),
        "dimensions": dimensions,
    }


def _preview_dimensions(inputs: dict, tenant: str, pool_kind: str, job: Any) -> list[dict]:
    """Per dimension the job consumes: what it wants, what its pool holds now (admitted,
    running and preempting jobs, counted as admission counts them), the quota, the
    ceiling and whether it fits, in catalog units (the job form shows them)."""
    quota = next((q for q in inputs["quotas"] if (q.tenant, q.pool) == (tenant, pool_kind)),
                 None)
    used: dict[str, int] = defaultdict(int, holding_use(inputs["jobs"]).get(
        (tenant, pool_kind), {}))
    out = []
    for key, wanted in sorted(job.resources.items()):
        granted = quota is not None and key in quota.nominal
        if not granted and dimension_only_when_granted(key):
            continue
        nominal, ceiling = quota.limits(key, job.tier) if quota is not None else (0, 0)
        unlimited = ceiling >= demand.UNLIMITED
        resource = Resource.parse(key)
        out.append({"key": key, "label": resource.label(),
                    "unit": resource.unit_for(from_engine(key, max(nominal, wanted)
                                                          if unlimited else ceiling)),
                    "wanted": from_engine(key, wanted),
                    "in_use": from_engine(key, used[key]), "quota": from_engine(key, nominal),
                    "ceiling": None if unlimited else from_engine(key, ceiling),
                    "fits_quota": used[key] + wanted <= nominal,
                    "fits_ceiling": unlimited or used[key] + wanted <= ceiling})
    return out


def _preview_notes(clean: dict) -> list[str]:
    """Warnings about the submission itself, in the active language."""
    notes = []
    if (clean["tier"] != Tier.PRODUCTION and not clean.get("checkpoint_claim")
            and not clean.get("checkpoint_storage_class")):
        notes.append(_("This job can be preempted, and without a checkpoint volume it starts "
                       "again from the beginning after a preemption: give a volume, or a "
                       "class for a new one."))
    if clean.get("checkpoint_storage_class") and clean["workers"] > 1:
        notes.append(_("Several workers share the new checkpoint volume: its class must "
                       "mount on many nodes at once (ReadWriteMany), e.g. NFS or CephFS."))
    return notes
