"""The eviction watermark in Kueue mode (issue 31): Kueue admits by quota alone, so
Trainyard keeps the 85% line on physical use itself, with the engine's rule and words.

Each pass (``KueueBackend.run_pass``) reads the engine's inputs
(``jobs.selectors.admission_inputs``: the nodes, the jobs, the pools' quotas and
guarantees, physical use as ``k8s_sync.physical`` measures it) and asks the engine's
watermark alone (:func:`jobs.admission.watermark.watermark_plan`) two things:

* **Evict**: above the line, the Kueue-admitted preemptible jobs the engine would evict,
  in its order, move to preempting with the engine's reason
  (``jobs.preempt.watermark_use``) and their tier's grace (:func:`evict`), the same
  transition as in trainyard mode. ``jobs.backends.kueue.desired_active`` then
  deactivates their Workloads (``spec.active: false``, the path of Trainyard's own
  preemptions): Kueue evicts them, the jobs are suspended, their pods get the grace;
  once the pods are gone the jobs are back in the queue (``observe_jobs``).
* **Gate**: a queued job the engine keeps out (preemptible work beyond its pool's
  guarantee that would take use above the line) has its Workload kept inactive, so Kueue
  does not admit it only for it to be evicted again, and waits with the engine's reason
  (``jobs.wait.watermark``). Once use is back below the line it is no longer gated: its
  Workload is reactivated, Kueue queues it again, and it resumes from its checkpoint.
  A Workload Kueue has already admitted is not gated (its admission is recorded; if it
  takes use above the line, the next pass evicts it, and gates it from then on).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from jobs import transitions
from jobs.admission.watermark import WatermarkPlan, watermark_plan
from jobs.choices import JobState

_INPUTS = ("nodes", "jobs", "quotas", "policy", "history", "now", "physical")


def plan(inputs: Mapping[str, Any]) -> WatermarkPlan:
    """The engine's watermark on a pass's inputs (``selectors.admission_inputs``)."""
    return watermark_plan(**{name: inputs[name] for name in _INPUTS})


def evict(found: WatermarkPlan, now: dt.datetime) -> int:
    """Move the plan's victims to preempting, with the engine's reason and their tier's
    grace as the deadline (conditional, in one transaction: a job another pass or Kueue
    moved first is left alone). How many moved."""
    if not found.evict:
        return 0
    return len(transitions.job_transitions(
        moves=[transitions.Move(p.job_id, fields={
            "preempt_reason": p.reason,
            "preempt_deadline": now + dt.timedelta(seconds=p.grace_seconds)},
            message=p.reason) for p in found.evict],
        from_states=[JobState.RUNNING, JobState.ADMITTED], to_state=JobState.PREEMPTING,
        reason="Preempted"))

