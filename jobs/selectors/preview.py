"""The job form's live preview: what a submission would be admitted against now.

:func:`preview` runs the admission engine on the current state plus the job and answers
with one verdict: ``fits`` (where it would run) or ``waits`` (the one limit that holds it,
and the ETA). ``refused`` (what Submit would refuse) is decided before, by the same check
Submit makes (``jobs.verdict.job_submit_verdict``)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from core.choices import Tier
from core.texts import render, text_code
from core.when import eta_text
from jobs.admission import JobView
from jobs.admission.eta import RunTimes
from jobs.choices import JobState
from jobs.selectors.admission import _admission_inputs, decide_with_pools_absent
from jobs.selectors.spec import worker_resources, worker_resources_text
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
    ``verdict`` is ``fits`` (``nodes``, ``placement``, ``switch``) or ``waits``
    (``reason``, ``eta_p50``/``eta_p90``, None when it cannot start as it is, and their
    ``_text`` as every page writes a time: ``core.when.eta_text``); ``summary`` says it
    in one sentence. ``worker``: one worker's CPU and memory request and limit, as its
    pods carry them (the quota counts the requests, ``dimensions`` the whole job's).
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
    # the run time the engine expects for such a job (its ETAs use the same)
    expected_run, _p90 = RunTimes(inputs["history"],
                                  inputs["policy"].default_duration_seconds).total(job)
    admitted = next((a for a in decisions.admit if a.job_id == -1), None)
    waiting = decisions.waiting.get(-1)
    # jobs of the same pool the pass admits before this one: the engine counts them in use
    # when it decides this one, so the preview says so (``ahead``)
    started = {a.job_id for a in decisions.admit if a.job_id != -1}
    dimensions = _preview_dimensions(inputs, tenant.slug, pool_kind, job, [
        j for j in inputs["jobs"] if j.id in started])
    # The GPU summary (the API's older fields) is the accelerator's row of ``dimensions``.
    key = "gpu-shared" if job.gpu_shared and job.resource_key else job.resource_key
    gpu = next((d for d in dimensions if d["key"] == key), None)
    worker = worker_resources(clean)
    eta_p50 = waiting.eta_p50 if waiting else (now if admitted else None)
    eta_p90 = waiting.eta_p90 if waiting else (now if admitted else None)
    switches = {n.name: n.switch for n in inputs["nodes"]}
    placement = list(admitted.placement) if admitted else []
    under = sorted({switches.get(name, "") for name in placement} - {""})
    verdict = {
        "verdict": "fits" if admitted else "waits",
        "placement": placement, "switch": under[0] if len(under) == 1 else "",
        "eta_p50_text": eta_text(eta_p50, now=now) if waiting else "",
        "eta_p90_text": eta_text(eta_p90, now=now) if waiting else "",
        "worker": {k: float(v) for k, v in worker.items()},
        "worker_text": worker_resources_text(worker),
    }
    verdict["summary"] = _summary(admitted, waiting, verdict, now)
    return {
        "resource": key, "gpus": job.demand,
        "quota": gpu["quota"] if gpu else None, "in_use": gpu["in_use"] if gpu else 0,
        "fits_quota": gpu["fits_quota"] if gpu else True,
        "nodes": len(set(admitted.placement)) if admitted else None,
        "starts_now": admitted is not None,
        "borrowing": bool(admitted and admitted.borrowing),
        "eta_p50": eta_p50, "eta_p90": eta_p90,
        "reason": render(waiting.reason) if waiting else "",
        "reason_code": text_code(waiting.reason) if waiting else None,
        "position_in_pool": waiting.position_in_pool if waiting else None,
        "notes": _preview_notes(clean),
        "expected_run_seconds": max(1, round(expected_run)),
        "dimensions": dimensions,
        **verdict,
    }


def _summary(admitted: Any, waiting: Any, verdict: dict, now: Any) -> str:
    """The verdict in one sentence, in the active language."""
    if admitted is not None:
        nodes = len(set(admitted.placement))
        if not nodes:
            return (_("Fits now: it would start at once, borrowing idle capacity.")
                    if admitted.borrowing else _("Fits now: it would start at once."))
        args = {"n": nodes, "nodes": ", ".join(dict.fromkeys(admitted.placement)),
                "switch": verdict["switch"]}
        if verdict["switch"]:
            sentence = (ngettext("Fits now: it would start at once on %(n)s node (%(nodes)s, "
                                 "switch %(switch)s), borrowing idle capacity.",
                                 "Fits now: it would start at once on %(n)s nodes (%(nodes)s, "
                                 "switch %(switch)s), borrowing idle capacity.", nodes)
                        if admitted.borrowing else
                        ngettext("Fits now: it would start at once on %(n)s node (%(nodes)s, "
                                 "switch %(switch)s).",
                                 "Fits now: it would start at once on %(n)s nodes (%(nodes)s, "
                                 "switch %(switch)s).", nodes))
        else:
            sentence = (ngettext("Fits now: it would start at once on %(n)s node (%(nodes)s), "
                                 "borrowing idle capacity.",
                                 "Fits now: it would start at once on %(n)s nodes (%(nodes)s), "
                                 "borrowing idle capacity.", nodes)
                        if admitted.borrowing else
                        ngettext("Fits now: it would start at once on %(n)s node (%(nodes)s).",
                                 "Fits now: it would start at once on %(n)s nodes (%(nodes)s).",
                                 nodes))
        return sentence % args
    reason = render(waiting.reason) if waiting else ""
    if waiting is None or waiting.eta_p50 is None:
        return _("Waits: %(reason)s. It cannot start as it is, so there is no estimated "
                 "start.") % {"reason": reason}
    return _("Waits: %(reason)s. Estimated start %(p50)s (90%% by %(p90)s).") % {
        "reason": reason, "p50": verdict["eta_p50_text"], "p90": verdict["eta_p90_text"]}


def _preview_dimensions(inputs: dict, tenant: str, pool_kind: str, job: Any,
                        starting: list[Any]) -> list[dict]:
    """Per dimension the job consumes: what it wants, what its pool holds now (admitted,
    running and preempting jobs, counted as admission counts them: ``in_use``, the one
    number), what queued jobs ahead of it that the same pass admits take (``ahead``), the
    quota, the ceiling and whether it fits, in catalog units (the job form shows them)."""
    ahead: dict[str, int] = defaultdict(int)
    for other in starting:
        if (other.tenant, other.pool) == (tenant, pool_kind):
            for key, amount in other.resources.items():
                ahead[key] += amount
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
                    "in_use": from_engine(key, used[key]), "ahead": from_engine(key, ahead[key]),
                    "quota": from_engine(key, nominal),
                    "ceiling": None if unlimited else from_engine(key, ceiling),
                    "fits_quota": used[key] + ahead[key] + wanted <= nominal,
                    "fits_ceiling": unlimited or used[key] + ahead[key] + wanted <= ceiling})
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
