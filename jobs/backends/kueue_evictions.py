"""Kueue mode keeps the engine's pod-start promise and records every eviction.

Kueue's ``waitForPodsReady`` (Kueue v0.19, configured by ``deploy/kueue/``: the timeout is
``Policy.pod_start_deadline_seconds``, ``backoffLimitCount`` is ``pod_start_attempts - 1``)
evicts an admitted Workload whose pods are not ready in time (``Evicted`` reason
``PodsReadyTimeout``), requeues it after a backoff (``status.requeueState``) and, past the
limit, deactivates it (``RequeuingLimitExceeded``). Trainyard reads those decisions from the
observed Workload and moves the job as the engine does (``jobs.observation.
enforce_pod_start``), in the same words (``jobs.transition.start_requeued`` /
``start_failed`` with the cluster's cause, ``jobs.podstart.cause``), with the same
notification, restart count and problem:

* :func:`start_deadline`: an admitted job Kueue evicted with ``PodsReadyTimeout`` goes back
  to the queue (``NotStarted``); a job Kueue gave up on fails (``NotStarted``): it no
  longer sits "queued" behind an inactive Workload.
* :func:`record_new`: every eviction Kueue counted (``status.schedulingStats.evictions``, per
  reason) since the job last looked is recorded as one of its transitions, also one
  undone between two passes (evicted and admitted again: the job's state is unchanged, the
  transition records it in place), so no preemption is lost. The job keeps what it saw
  in ``TrainingJob.kueue_evictions``.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from core.models import Policy
from core.texts import StoredText
from core.texts import message as stored_text
from jobs import enqueue, observation, transitions
from jobs.admission.text import when
from jobs.choices import JobState
from jobs.models import JobTransition, TrainingJob
from k8s_sync import kueue, kueue_status

log = logging.getLogger(__name__)

__all__ = ["backoff_reason", "record_new", "start_deadline"]

KUEUE_PREEMPT = "jobs.preempt.kueue"


def _cause(job: TrainingJob) -> StoredText:
    return observation.start_cause(
        TrainingJob.objects.select_related("pool__tenant").get(pk=job.pk))


def start_deadline(job: TrainingJob, view: kueue.WorkloadView, now: dt.datetime,
                   policy: Policy) -> str:
    """"requeued" or "failed" when Kueue's pod-start timeout moved the job, else ""."""
    minutes, attempts = observation.start_words(policy)
    if view.requeue_limit_exceeded and job.state in (JobState.QUEUED, JobState.ADMITTED,
                                                     JobState.RUNNING):
        why = _cause(job)
        text = observation.start_fail(job, why=why, minutes=minutes, attempts=attempts,
                                      at=now, from_states=[job.state])
        decision = "failed"
    elif job.state == JobState.ADMITTED and not view.admitted and (
            ev := view.evicted) is not None and ev.reason == kueue_status.PODS_READY_TIMEOUT:
        why = _cause(job)
        # Kueue stops the pods and queues the Workload again after its backoff
        text = observation.start_requeue(job, why=why, minutes=minutes,
                                         n=max(1, view.requeue_count), attempts=attempts,
                                         at=min(ev.at or now, now))
        decision = "requeued"
    else:
        return ""
    if text is None:
        return ""
    log.warning("job %s: Kueue's pod-start timeout (%s): %s", job.pk, decision, why)
    if decision == "failed":
        enqueue.schedule_sync(job.pk)  # its PyTorchJob goes, as in the engine
    transitions.job_notify_owner(job=job, text=text, email=decision == "failed")
    return decision


def _text_of(key: str, view: kueue.WorkloadView, policy: Policy, job: TrainingJob
             ) -> tuple[str, StoredText]:
    reason = key.partition("/")[0]
    if reason == kueue_status.PODS_READY_TIMEOUT:
        minutes, attempts = observation.start_words(policy)
        return "NotStarted", stored_text(
            "jobs.transition.start_requeued", minutes=minutes, cause=_cause(job),
            n=max(1, view.requeue_count), max=attempts)
    cond = view.conditions.get("Preempted") if reason == "Preempted" else None
    cond = cond or view.conditions.get("Evicted")
    detail = (cond.message if cond is not None else "").removeprefix("Previously: ")
    why = (kueue_status.preemption_reason(detail) or reason) if reason == "Preempted" \
        else reason
    return ("Preempted" if reason == "Preempted" else "Evicted"), stored_text(
        KUEUE_PREEMPT, reason=why or reason, message=detail or "-")


def record_new(job: TrainingJob, view: kueue.WorkloadView, now: dt.datetime, policy: Policy,
               *, consumed: str = "") -> int:
    """Each eviction counted since the job last looked, not already recorded by the
    pass's own move (``consumed``: the reason of the eviction that move recorded), as a
    transition in the job's current state; what the job saw is kept. The number
    recorded."""
    current = kueue_status.counts(view.evictions)
    seen = dict(job.kueue_evictions or {})
    if current == seen:
        return 0
    # "Deactivated": Trainyard's own holds and preemptions (recorded as it makes them), or
    # Kueue's limit (the job fails of it: start_deadline)
    new = [k for k in kueue_status.new_evictions(seen, current)
           if not k.startswith("Deactivated/")]
    if consumed:
        for key in new:
            if key.partition("/")[0] == consumed or consumed.startswith(key.partition("/")[0]):
                new.remove(key)
                break
    state = TrainingJob.objects.filter(pk=job.pk).values_list("state", flat=True).first()
    requeued = view.conditions.get("Requeued")
    at = min(requeued.at, now) if requeued is not None and requeued.at else now
    for key in new:
        if state is None:
            break
        reason, text = _text_of(key, view, policy, job)
        at = max(at, JobTransition.objects.filter(job_id=job.pk).order_by("-at").values_list(
            "at", flat=True).first() or at)
        transitions.record(job, state, state, reason, message=text, at=at)
        if reason == "NotStarted":
            transitions.job_notify_owner(job=job, text=text)
    TrainingJob.objects.filter(pk=job.pk).update(kueue_evictions=current)
    return len(new)


def backoff_reason(view: kueue.WorkloadView) -> dict[str, Any] | None:
    """Why a job back in the queue after a pod-start timeout waits: Kueue holds it out of
    its queue until ``requeueState.requeueAt`` (``requeuingStrategy``'s backoff); None
    when it is not in a backoff."""
    requeued = view.conditions.get("Requeued")
    if view.requeue_at is None or requeued is None or requeued.status or \
            requeued.reason != kueue_status.PODS_READY_TIMEOUT:
        return None
    return stored_text("jobs.wait.kueue.backoff", n=view.requeue_count,
                       at=when(view.requeue_at, dt.datetime.now(dt.UTC)))
