"""Kueue mode: a queued job's estimated start from Kueue's own order.

The trainyard engine's ETA simulation (``jobs.admission.eta``) orders the queue its own
way; Kueue orders each ClusterQueue by priority and by when each Workload entered it, and
says so through its visibility API (``pendingworkloads``: ``positionInClusterQueue``,
read by ``jobs.backends.kueue.queue_positions``). Here the estimate follows Kueue:

* **Kueue's order fed to the forecaster** (:func:`in_kueue_order`): the queued jobs Kueue
  lists get, per ClusterQueue, the queue's own submission times and priority in Kueue's
  position order, so the engine's simulation (``jobs.admission.decide``, its decisions
  not applied) starts them in the order Kueue will, not in its own.
* **The ClusterQueue's admission rate** (:func:`admission_rates`): admissions observed in
  the last :data:`RATE_WINDOW` (the jobs' ``admitted_at``, which the pass writes from the
  Workload's ``Admitted`` time); with at least :data:`RATE_MIN` of them, a job at position
  ``k`` is not expected before ``k`` more admissions: ``now + k / rate``
  (:func:`rate_eta`).
* **Combined** (:func:`combine`): the p50 is the forecaster's (on Kueue's order), else the
  rate's; the p90 the later of the two, so a queue that admits slower than the
  forecaster thinks widens the range rather than hiding it.

The figures are recorded like every ETA shown (``transitions.record_waiting`` ->
``jobs.eta_records.record_shown``), and a record's ``started_at`` is filled when Kueue's
admission is recorded (``transitions.job_transitions`` -> ``record_started``), so the
accuracy (``jobs.selectors.eta.eta_accuracy``) is measured in Kueue mode as in the
trainyard mode.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from jobs.admission.types import JobView
from jobs.choices import JobState
from jobs.models import TrainingJob

RATE_WINDOW = dt.timedelta(hours=1)
"""How far back admissions count towards a ClusterQueue's rate."""
RATE_MIN = 2
"""Fewer admissions than this in the window say nothing about a rate."""


def in_kueue_order(jobs: Sequence[JobView], positions: Mapping[int, tuple[str, int]]
                   ) -> list[JobView]:
    """``jobs`` with the queued ones Kueue lists (``positions``: job id -> (ClusterQueue,
    1-based position)) reordered per ClusterQueue: their submission times are the queue's
    own, handed out in Kueue's position order, and their priority the queue's highest, so
    the engine's order (priority, then submission) is Kueue's. Everything else as it is."""
    by_queue: dict[str, list[JobView]] = defaultdict(list)
    for view in jobs:
        if view.state == JobState.QUEUED and view.id in positions:
            by_queue[positions[view.id][0]].append(view)
    changed: dict[int, JobView] = {}
    for views in by_queue.values():
        times = sorted(v.submitted_at for v in views)
        top = max(v.priority for v in views)
        ordered = sorted(views, key=lambda v: (positions[v.id][1], v.id))
        for view, at in zip(ordered, times, strict=True):
            if (view.submitted_at, view.priority) != (at, top):
                changed[view.id] = replace(view, submitted_at=at, priority=top)
    return [changed.get(view.id, view) for view in jobs]


def admission_rates(now: dt.datetime, queue_of: Callable[[Any], str]) -> dict[str, float]:
    """Admissions per second of each ClusterQueue over the last :data:`RATE_WINDOW`
    (``queue_of``: a job's ClusterQueue), for queues with at least :data:`RATE_MIN`."""
    counts: dict[str, int] = defaultdict(int)
    for job in TrainingJob.objects.filter(admitted_at__gte=now - RATE_WINDOW).select_related(
            "pool__tenant").only("tier", "pool__kind", "pool__tenant__slug"):
        counts[queue_of(job)] += 1
    seconds = RATE_WINDOW.total_seconds()
    return {queue: n / seconds for queue, n in counts.items() if n >= RATE_MIN}


def rate_eta(now: dt.datetime, position: int | None, rate: float | None) -> dt.datetime | None:
    """When the job at ``position`` of a queue admitting ``rate`` per second may start."""
    if position is None or not rate:
        return None
    return now + dt.timedelta(seconds=position / rate)


def combine(forecast: tuple[dt.datetime | None, dt.datetime | None],
            by_rate: dt.datetime | None) -> tuple[dt.datetime | None, dt.datetime | None]:
    """(p50, p90): the forecaster's p50, else the rate's; the later p90 of the two."""
    p50, p90 = forecast
    if p50 is None or p90 is None:
        return by_rate, by_rate
    if by_rate is None:
        return p50, p90
    return p50, max(p90, by_rate)


def positions_by_job(queued: Iterable[Any], views: Mapping[tuple[str, str], Any],
                     positions: Mapping[tuple[str, str], tuple[int, int]],
                     queue_of: Callable[[Any], str]) -> dict[int, tuple[str, int]]:
    """Job id -> (its ClusterQueue, its position there) for the queued jobs Kueue lists."""
    out: dict[int, tuple[str, int]] = {}
    for job in queued:
        view = views.get((job.pool.namespace, job.k8s_name))
        found = positions.get((job.pool.namespace, view.name)) if view is not None else None
        if found is not None:
            out[job.pk] = (queue_of(job), found[0])
    return out
