"""Job state transitions and what the loop records on jobs: the one way a job changes state.

Every state change goes through :func:`job_transition` (one job) or :func:`job_transitions`
(a pass's decisions, in bulk): a conditional update (it happens only from the expected
states, so two workers racing cannot both apply it) that writes a JobTransition row in
the same transaction. :func:`record_waiting` stores the waiting jobs' positions, ETAs and
reasons; :func:`job_notify_owner` tells a job's submitter what the system did to it.

These are the writes the job-lifecycle core (``jobs.converge``, ``jobs.observation``, the
admission backends) makes; ``jobs.services`` re-exports them for the rest of Trainyard.
They import no task, no backend and no service, so every caller imports them one way.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

from django.db import DatabaseError, transaction
from django.db.models import Max
from django.urls import reverse
from django.utils import timezone

from core.db import insert_rows, update_rows
from core.texts import StoredText
from core.texts import message as stored_text
from jobs import eta_records
from jobs.choices import JobState
from jobs.models import JobTransition, TrainingJob
from tenants.access import AnyUser
from tenants.services.notify import notify

TRANSITION_FIELDS = ("job", "from_state", "to_state", "reason", "message", "at", "observed_at")
"""The columns :func:`job_transitions` writes of each JobTransition (one prepared INSERT)."""


def record(job: TrainingJob, from_state: str, to_state: str, reason: str, *,
            message: StoredText = "", actor: AnyUser | None = None,
            at: dt.datetime | None = None) -> JobTransition:
    now = timezone.now()
    return JobTransition.objects.create(
        job=job, from_state=from_state, to_state=to_state, reason=reason, message=message,
        actor=actor if actor is not None and getattr(actor, "is_authenticated", False) else None,
        at=at or now, observed_at=now)


def job_transition(*, job_id: int, from_states: Iterable[str], to_state: str, reason: str,
                   message: StoredText = "", actor: AnyUser | None = None,
                   at: dt.datetime | None = None, stamp: Iterable[str] = (),
                   **fields: Any) -> bool:
    """Move a job to ``to_state`` if it is in one of ``from_states``; True when it moved.

    A conditional update: when another worker moved the job first, this does nothing
    (returns False), so a decision is never applied twice. ``fields`` are set with it.
    ``at`` is when it happened (the cluster's time for what the cluster reports; now by
    default); it is kept between the job's previous transition and now, so a skewed
    clock never reorders the history nor dates a change in the future. The fields named
    in ``stamp`` (``started_at``, ``finished_at``) are set to that same time.
    """
    now = timezone.now()
    at = min(at or now, now)
    with transaction.atomic():
        job = TrainingJob.objects.select_for_update().filter(pk=job_id,
                                                             state__in=list(from_states)).first()
        if job is None:
            return False
        last = JobTransition.objects.filter(job_id=job_id).order_by("-at", "-id").values_list(
            "at", flat=True).first()
        if last is not None and at < last:
            at = last
        previous = job.state
        fields.update(dict.fromkeys(stamp, at))
        TrainingJob.objects.filter(pk=job_id).update(state=to_state, **fields)
        record(job, previous, to_state, reason, message=message, actor=actor, at=at)
        if to_state == JobState.ADMITTED:
            eta_records.record_started({job_id: at})
    return True


@dataclass(frozen=True)
class Move:
    """One job's part of :func:`job_transitions`: its own fields and message."""

    job_id: int
    fields: dict[str, Any] = dc_field(default_factory=dict)
    message: StoredText = ""
    at: dt.datetime | None = None  # when it happened, if not the call's ``at``


def job_transitions(*, moves: Iterable[Move], from_states: Iterable[str], to_state: str,
                    reason: str, at: dt.datetime | None = None, stamp: Iterable[str] = (),
                    **common: Any) -> list[int]:
    """:func:`job_transition` for many jobs at once (the admission loop's decisions of a
    pass): the ids of the jobs that moved, in the order of ``moves``.

    One transaction and a fixed number of statements whatever the number of jobs: the
    jobs still in one of ``from_states`` are locked and read, moved by one conditional
    UPDATE (``state IN from_states``; a job another pass moved first is left alone, so a
    decision is never applied twice), given their own ``fields`` by one bulk update, and
    get exactly one JobTransition each, in one bulk insert. ``common`` fields are set on
    every moved job. ``at`` (or a move's own) and ``stamp`` as in :func:`job_transition`:
    kept after each job's previous transition and never in the future."""
    moves = list(moves)
    from_states = list(from_states)
    if not moves:
        return []
    now = timezone.now()
    at = min(at or now, now)
    by_id = {m.job_id: m for m in moves}
    with transaction.atomic():
        previous = dict(TrainingJob.objects.select_for_update().filter(
            pk__in=list(by_id), state__in=from_states).values_list("pk", "state"))
        if not previous:
            return []
        moved = TrainingJob.objects.filter(pk__in=list(previous), state__in=from_states
                                           ).update(state=to_state, **common)
        if moved != len(previous):
            # Cannot happen under the row locks (Postgres) or the write lock (SQLite's
            # IMMEDIATE transactions); if a database lets it, apply nothing this time.
            raise DatabaseError(f"{len(previous) - moved} jobs changed state under a lock")
        last = dict(JobTransition.objects.filter(job_id__in=list(previous)).values(
            "job_id").annotate(last=Max("at")).values_list("job_id", "last"))
        when = {}
        for job_id in previous:
            own = min(by_id[job_id].at or at, now)
            when[job_id] = max(own, last[job_id]) if last.get(job_id) else own
        stamp = list(stamp)
        names = sorted({name for m in moves for name in m.fields} | set(stamp))
        if any(set(m.fields) != set(names) - set(stamp) for m in moves):
            raise ValueError("every move of one job_transitions call sets the same fields")
        if names:
            update_rows(TrainingJob, names, [
                (job_id, *(when[job_id] if name in stamp else by_id[job_id].fields.get(name)
                           for name in names)) for job_id in previous])
        insert_rows(JobTransition, TRANSITION_FIELDS, [
            (job_id, previous[job_id], to_state, reason, by_id[job_id].message,
             when[job_id], now) for job_id in previous])
        if to_state == JobState.ADMITTED:
            eta_records.record_started({job_id: when[job_id] for job_id in previous})
    return [m.job_id for m in moves if m.job_id in previous]


def record_waiting(waiting: dict, now: dt.datetime | None = None) -> None:
    """Store each waiting job's position, ETA and reason (from the engine); only the
    jobs whose values changed are written. The queued jobs are read by their state, not
    by an ``IN`` list of every waiting id (which SQLite refuses past 32,766 of them).
    An ETA that changes is recorded (``jobs.eta_records``: the first, and those that
    moved past its tolerance) to be measured against the start."""
    names = ["position_in_pool", "position_in_model", "eta_p50", "eta_p90", "wait_reason"]
    changed = []
    shown: list[eta_records.Shown] = []
    for pk, pool_id, tier, *stored in TrainingJob.objects.filter(
            state=JobState.QUEUED).values_list("id", "pool_id", "tier", *names):
        info = waiting.get(pk)
        if info is None:
            continue
        new = (info.position_in_pool, info.position_in_model, info.eta_p50, info.eta_p90,
               info.reason)
        if tuple(stored) != new:
            changed.append((pk, *new))
            if info.eta_p50 is not None and info.eta_p90 is not None and (
                    stored[2] != info.eta_p50 or stored[3] != info.eta_p90):
                shown.append((pk, pool_id, tier, stored[2], stored[3], info.eta_p50,
                              info.eta_p90))
    update_rows(TrainingJob, names, changed)
    eta_records.record_shown(shown, now or timezone.now())


def job_notify_owner(*, job: TrainingJob, text: StoredText, email: bool = False) -> None:
    """Tell the job's submitter what the system did to it (``text``: a stored text), in
    the portal and, when ``email``, by mail; linked to the job's page."""
    if job.submitted_by is None:
        return
    notify(users=[job.submitted_by], tenant=job.tenant, email=email,
           text=stored_text("jobs.notify.job", job=job.name, text=text),
           link=reverse("jobs:detail", kwargs={"slug": job.tenant.slug, "pk": job.pk}))
