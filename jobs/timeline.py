"""Pure arithmetic over a job's transitions: how long it ran (the billing source)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping

from jobs.choices import JobState


def running_intervals(transitions: Iterable[tuple[str, dt.datetime]], now: dt.datetime
                      ) -> list[tuple[dt.datetime, dt.datetime]]:
    """(start, end) of every stretch in state "running", from (to_state, at) pairs in time
    order; an open stretch ends ``now``. A preempted job pays only while it ran."""
    intervals, start = [], None
    for state, at in transitions:
        if state == JobState.RUNNING and start is None:
            start = at
        elif state != JobState.RUNNING and start is not None:
            intervals.append((start, at))
            start = None
    if start is not None:
        intervals.append((start, now))
    return intervals


def running_seconds(transitions: Iterable[tuple[str, dt.datetime]], now: dt.datetime) -> float:
    return sum((end - start).total_seconds() for start, end in running_intervals(transitions,
                                                                                   now))


def _cluster_time(raw: object) -> dt.datetime | None:
    if not isinstance(raw, str) or not raw:
        return None
    try:
        return dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None


def missed_run_start(conditions: Mapping[str, Mapping[str, object]], *, finished: str,
                     admitted_at: dt.datetime | None, now: dt.datetime) -> dt.datetime | None:
    """When a job Trainyard last saw admitted, and now sees finished (``finished``: the
    Succeeded or Failed condition), started running; ``None`` when it never ran.

    Between two observations a short job can start and finish: its running stretch was
    never recorded, so it would bill nothing and show no start. The cluster's Running
    condition (kept, status False, once it finished) says it ran, and for how long by the
    cluster's clock (its lastTransitionTime to the finish condition's): the stretch is
    that long and ended now, as an observed one does, never starting before the job was
    admitted (a simulated cluster's clock may run faster than the wall clock).
    ``conditions``: the PyTorchJob's conditions by type."""
    running = conditions.get("Running")
    if running is None:
        return None
    began = _cluster_time(running.get("lastTransitionTime"))
    ended = _cluster_time((conditions.get(finished) or {}).get("lastTransitionTime"))
    seconds = (ended - began).total_seconds() if began and ended and ended > began else 0.0
    start = now - dt.timedelta(seconds=seconds)
    if admitted_at is not None:
        start = max(start, admitted_at)
    return min(start, now)

