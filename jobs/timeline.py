"""Pure arithmetic over a job's transitions: how long it ran (the billing source)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import TypeVar

from jobs.choices import JobState

When = TypeVar("When", dt.datetime, int)  # a datetime, or whole epoch seconds


def running_intervals(transitions: Iterable[tuple[str, When]], now: When
                      ) -> list[tuple[When, When]]:
    """(start, end) of every stretch in state "running", from (to_state, at) pairs in time
    order; an open stretch ends ``now``. A preempted job pays only while it ran. Times are
    datetimes or epoch seconds, as long as they are all the same."""
    intervals: list[tuple[When, When]] = []
    start: When | None = None
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

