"""Trainyard's own admission engine as a backend (``jobs.admission``): its pass and its sync.

A pass (:meth:`TrainyardBackend.run_pass`, run by ``jobs.admission_cycle`` under the
cycle lock of :class:`~jobs.backends.base.BaseBackend`): move jobs by what the cluster
says of their PyTorchJobs, as the ``k8s_watch`` reflector recorded them
(``jobs.observation``: running, succeeded, failed, preempted and gone; the pod-start
deadline), then ask the pure engine what to admit and preempt (:func:`_decide`), apply
its decisions (:func:`_apply`) and record every waiting job's position, ETA and reason.
It decides without a transaction, then applies everything in one transaction in a fixed
number of statements, only if no other pass applied since it read (the pass token,
:meth:`~jobs.backends.base.BaseBackend.take_pass`): passes apply one at a time
cluster-wide, and every decision is a conditional state change, so it is never applied
twice. A pass runs on every submit, cancel and finish, when the watcher records a change
of a PyTorchJob or of a pod in a tenant namespace (``jobs/receivers.py``), and every few
seconds from beat.

A job's sync (``jobs.sync_job``, ``jobs.sync_jobs``) is ``jobs.converge``'s, retried
with backoff after a transient API error.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from core.choices import Tier
from core.models import Policy
from core.texts import message as stored_text
from jobs import converge, enqueue, idle_waiting, observation, selectors, transitions
from jobs.backends.base import MAX_RETRIES, BaseBackend
from jobs.choices import JobState
from jobs.models import AdmissionState, TrainingJob
from k8s_sync.models import ObservedNode
from k8s_sync.placement import switch_of
from tenants.models import Pool
from tenants.selectors import topology_levels
from tenants.services import pool_sync_request
from tenants.tasks import backoff_seconds
from tenants.tiers import tier_rules


class TrainyardBackend(BaseBackend):
    name = "trainyard"

    def run_pass(self, now: dt.datetime, started: float) -> dict[str, Any]:
        observed = observation.observe_jobs(now)  # the recorded PyTorchJobs: no API call
        observed.update(observation.record_problems(now))  # what stops pods, at once
        observed.update(observation.enforce_pod_start(now))
        # Decide on what the database holds, outside any transaction (on SQLite a write
        # transaction would stop submissions and the watcher for the whole pass); then
        # apply in one short transaction, only if no other pass applied meanwhile (the
        # pass token: the last pass's time). Only passes admit, so the quota a pass saw
        # free is still free unless another pass used it; then this one applies nothing.
        state = self.pass_state()
        seen = state.last_cycle_at
        # Explain the queue (positions, ETAs, reasons) only every few seconds: the
        # decisions are the same either way (jobs.admission.cadence).
        explain = self.explain_due(now, state)
        inputs = selectors.admission_inputs(now)
        decisions, waiting_for_pool = _decide(now, explain=explain, inputs=inputs)
        with transaction.atomic():
            if not self.take_pass(seen, now):
                return {"skipped": "another cycle applied first", **observed}
            result = apply_decisions(decisions, waiting_for_pool, now, explained=explain)
            if explain:   # GPU-seconds idle while work that fits waits (jobs.idle_waiting)
                idle_waiting.record_pass(
                    nodes=inputs["nodes"], jobs=inputs["jobs"], decisions=decisions,
                    skip=waiting_for_pool, now=now, previous=state.explained_at,
                    default_seconds=settings.TRAINYARD_EXPLAIN_SECONDS)
            self.record_pass(started, {**result, **observed},
                             explained_at=now if explain else None)
        return {**result, **observed}

    def service_decides(self, now: dt.datetime) -> bool:
        """Whether the admission service (``jobs.service``) holds its lease: then it
        decides, and the Celery pass does nothing (its beat entry and kicks stay as the
        fallback for when no service runs)."""
        return AdmissionState.objects.filter(pk=1, lease_until__gt=now).exists()

    def sync_job(self, task: Any, job_id: int) -> str:
        """Converge one job (``jobs.converge.sync_one``); a transient API error retries
        with backoff, :data:`~jobs.backends.base.MAX_RETRIES` times."""
        result, exc = converge.sync_one(job_id)
        if exc is not None:
            if task.request.retries < MAX_RETRIES:
                raise task.retry(exc=exc, countdown=backoff_seconds(task.request.retries)
                                 ) from exc
            return "error"
        return result

    def sync_many(self, job_ids: list[int]) -> dict[str, int]:
        return converge.sync_many(job_ids)

    def preempt(self, *, job_id: int, reason: Any, actor: Any = None) -> bool:
        job = TrainingJob.objects.filter(pk=job_id).only("tier").first()
        if job is None:
            return False
        grace = tier_rules(Policy.current())[Tier(job.tier)].termination_grace_seconds
        moved = transitions.job_transition(
            job_id=job_id, from_states=[JobState.RUNNING, JobState.ADMITTED],
            to_state=JobState.PREEMPTING, reason="Preempted", message=reason, actor=actor,
            preempt_reason=reason,
            preempt_deadline=timezone.now() + dt.timedelta(seconds=grace))
        if moved:
            enqueue.schedule_sync(job_id)  # suspended: its pods get the grace
        return moved


def _decide_and_apply(now: dt.datetime) -> dict[str, Any]:
    """Decide and apply at once (the caller holds the pass: see
    :meth:`TrainyardBackend.run_pass`)."""
    return apply_decisions(*_decide(now), now)


def _decide(now: dt.datetime, *, explain: bool = True, inputs: dict | None = None,
            ) -> tuple[Any, dict[int, Pool]]:
    """The engine's decisions on the jobs as stored now (reads only); with ``explain``,
    every waiting job's position, ETA and reason too. ``inputs``: the engine's inputs
    already read (``selectors.admission_inputs(now)``)."""
    # A job whose pool the cluster does not show waits, held out of this pass, with that
    # reason; its pool is asked to sync again.
    return selectors.decide_with_pools_absent(
        inputs if inputs is not None else selectors.admission_inputs(now),
        incremental=settings.TRAINYARD_INCREMENTAL_ADMISSION, explain=explain)


def apply_decisions(decisions: Any, waiting_for_pool: dict[int, Pool], now: dt.datetime, *,
                    explained: bool = True,
                    sync: Callable[[list[int]], Any] | None = None) -> dict[str, Any]:
    """Carry out a pass's decisions (inside the pass's transaction); ``explained``: the
    decisions carry the waiting jobs' positions, ETAs and reasons, which are stored.
    ``sync``: given the ids of the jobs moved, to converge them (the admission service
    does it in its own process); by default ``jobs.sync_jobs`` tasks after the commit."""
    for pool in {p.pk: p for p in waiting_for_pool.values()}.values():
        _request_pool_sync(pool)
    levels = topology_levels() if decisions.admit else ()
    switches = _switches_of([a.placement for a in decisions.admit], levels)
    borrowing = stored_text("jobs.transition.borrowing")
    # Every decision of the pass in one transaction (the caller's), by a fixed number of
    # statements; each is still conditional (transitions.job_transitions), so a job another
    # pass moved first is left alone, and a decision is never applied twice.
    admitted = transitions.job_transitions(
        moves=[transitions.Move(a.job_id, fields={
            "borrowing": a.borrowing, "loan_id": a.loan, "placement": list(a.placement),
            "switch": switches[i]}, message=borrowing if a.borrowing else "")
            for i, a in enumerate(decisions.admit)],
        from_states=[JobState.QUEUED], to_state=JobState.ADMITTED, reason="Admitted",
        admitted_at=now, wait_reason="", position_in_pool=None, position_in_model=None,
        eta_p50=None, eta_p90=None)
    deadlines = {p.job_id: now + dt.timedelta(seconds=p.grace_seconds)
                 for p in decisions.preempt}
    preempted = transitions.job_transitions(
        moves=[transitions.Move(p.job_id, fields={
            "preempt_reason": p.reason, "preempt_deadline": deadlines[p.job_id]},
            message=p.reason) for p in decisions.preempt],
        from_states=[JobState.RUNNING, JobState.ADMITTED], to_state=JobState.PREEMPTING,
        reason="Preempted")
    if sync is None:
        enqueue.schedule_syncs([*admitted, *preempted])
    else:
        sync([*admitted, *preempted])
    if explained:
        transitions.record_waiting(decisions.waiting, now)
    return {"admitted": len(admitted), "preempted": len(preempted),
            "waiting": len(decisions.waiting) if explained else None}


POOL_SYNC_EVERY = 30  # seconds between two reconciles a waiting job asks of one pool


def _request_pool_sync(pool: Pool) -> None:
    """Ask for a reconcile of a pool jobs wait for, at most every ``POOL_SYNC_EVERY``
    seconds (its reconcile retries transient errors with backoff by itself)."""
    if cache.add(f"jobs:pool-sync:{pool.pk}", "1", timeout=POOL_SYNC_EVERY):
        pool_sync_request(pool=pool)


def _switches_of(placements: list[tuple[str, ...]], levels: tuple[str, ...]) -> list[str]:
    """The one switch (value of the last topology level) of each multi-node placement
    ("" for one node or several switches); the nodes' labels in one query."""
    wanted = {n for placement in placements if len(set(placement)) > 1 for n in placement}
    labels = dict(ObservedNode.objects.filter(name__in=wanted).values_list(
        "name", "labels")) if wanted else {}
    found = []
    for placement in placements:
        switches = ({switch_of(labels[n], levels) for n in set(placement) if n in labels}
                    if len(set(placement)) > 1 else set())
        found.append(switches.pop() if len(switches) == 1 else "")
    return found
