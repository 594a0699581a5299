"""Pure arithmetic over a job's transitions: how long it ran (the billing source)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

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

