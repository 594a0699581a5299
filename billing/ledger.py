"""Pure ledger arithmetic: running intervals split into days, PVC sizes over time,
network counter deltas. Plain data in, plain data out.

Time is exact to the second: every timestamp is truncated to a whole second first, so
an interval's length is an integral number of seconds and its parts (split at local
midnight in the installation's time zone, hence also at month boundaries) add up to
exactly the whole.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Sequence
from zoneinfo import ZoneInfo

from jobs.timeline import running_intervals


def whole_second(at: dt.datetime) -> dt.datetime:
    return at.replace(microsecond=0)


def month_start(day: dt.date) -> dt.date:
    return day.replace(day=1)


def next_month(day: dt.date) -> dt.date:
    return (day.replace(day=28) + dt.timedelta(days=4)).replace(day=1)


def local_midnight(day: dt.date, tz: dt.tzinfo) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(0), tzinfo=tz)


def month_bounds(period: dt.date, tz: dt.tzinfo) -> tuple[dt.datetime, dt.datetime]:
    """[start, end) of the month holding ``period``, as aware datetimes in ``tz``."""
    first = month_start(period)
    return local_midnight(first, tz), local_midnight(next_month(first), tz)


def split_by_day(start: dt.datetime, end: dt.datetime, tz: dt.tzinfo
                 ) -> list[tuple[dt.date, int]]:
    """(local date, whole seconds) of the interval [start, end), split at local midnight."""
    start, end = whole_second(start), whole_second(end)
    parts: list[tuple[dt.date, int]] = []
    cursor = start
    while cursor < end:
        day = cursor.astimezone(tz).date()
        boundary = min(end, local_midnight(day + dt.timedelta(days=1), tz))
        seconds = int((boundary - cursor).total_seconds())
        if seconds:
            parts.append((day, seconds))
        cursor = boundary
    return parts


def running_day_seconds(transitions: Iterable[tuple[str, dt.datetime]], now: dt.datetime,
                        tz: dt.tzinfo) -> dict[dt.date, int]:
    """Seconds in state "running" per local day, from a job's (to_state, at) in order.

    An open stretch ends ``now``; a preempted and resumed job counts only its running
    stretches (preempting, queued and admitted cost nothing).
    """
    days: dict[dt.date, int] = defaultdict(int)
    for start, end in running_intervals(transitions, now):
        for day, seconds in split_by_day(start, end, tz):
            days[day] += seconds
    return dict(days)


def size_byte_seconds(snapshots: Sequence[tuple[dt.datetime, int]], start: dt.datetime,
                      end: dt.datetime) -> int:
    """Byte-seconds of one volume over [start, end) from its size snapshots in time order.

    Each (at, bytes) holds from ``at`` until the next snapshot; a size of 0 marks the
    volume gone. Before its first snapshot the volume did not exist.
    """
    total = 0
    start, end = whole_second(start), whole_second(end)
    for index, (at, size) in enumerate(snapshots):
        at = whole_second(at)
        until = whole_second(snapshots[index + 1][0]) if index + 1 < len(snapshots) else end
        lo, hi = max(at, start), min(until, end)
        if hi > lo and size:
            total += size * int((hi - lo).total_seconds())
    return total


def counter_delta(previous: int | None, current: int) -> int:
    """Bytes since the previous reading of a monotonically increasing counter.

    A first reading counts in full (the counter starts at 0 with the pod); a reading
    below the previous one means the counter was reset (pod restarted), so only the new
    value counts.
    """
    if previous is None or current < previous:
        return current
    return current - previous


def utc() -> dt.tzinfo:
    return ZoneInfo("UTC")
