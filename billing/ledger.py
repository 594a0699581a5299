"""Pure ledger arithmetic: running intervals split into days, PVC sizes over time,
network counter deltas. Plain data in, plain data out.

Time is exact to the second: every timestamp is truncated to a whole second first, so
an interval's length is an integral number of seconds and its parts (split at local
midnight in the installation's time zone, hence also at month boundaries) add up to
exactly the whole.
"""

from __future__ import annotations

import datetime as dt
from bisect import bisect_right
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


class DayGrid:
    """The local days of ``tz`` as epoch seconds of their midnights, to split intervals
    given as whole epoch seconds at local midnight without a datetime per interval (a
    month close splits one interval per running stretch of every job). The grid grows to
    cover whatever it is asked about."""

    def __init__(self, tz: dt.tzinfo) -> None:
        self.tz = tz
        self._days: list[dt.date] = []
        self._starts: list[int] = []  # epoch seconds of each day's local midnight

    def _cover(self, low: int, high: int) -> None:
        if self._starts and self._starts[0] <= low and high < self._starts[-1]:
            return
        first = dt.datetime.fromtimestamp(low, self.tz).date() - dt.timedelta(days=1)
        last = dt.datetime.fromtimestamp(high, self.tz).date() + dt.timedelta(days=2)
        if self._days:
            first, last = min(first, self._days[0]), max(last, self._days[-1])
        count = (last - first).days + 1
        self._days = [first + dt.timedelta(days=n) for n in range(count)]
        self._starts = [int(local_midnight(day, self.tz).timestamp()) for day in self._days]

    def split(self, start: int, end: int) -> list[tuple[dt.date, int]]:
        """(local date, seconds) of [start, end) in epoch seconds, split at local midnight."""
        if end <= start:
            return []
        self._cover(start, end)
        index = bisect_right(self._starts, start) - 1
        parts: list[tuple[dt.date, int]] = []
        while start < end:
            boundary = min(end, self._starts[index + 1])
            if boundary > start:
                parts.append((self._days[index], boundary - start))
            start, index = boundary, index + 1
        return parts


def epoch_second(at: dt.datetime) -> int:
    """``at`` as whole seconds since 1970 (truncated, as :func:`whole_second`)."""
    return int(whole_second(at).timestamp())


def split_by_day(start: dt.datetime, end: dt.datetime, tz: dt.tzinfo
                 ) -> list[tuple[dt.date, int]]:
    """(local date, whole seconds) of the interval [start, end), split at local midnight."""
    return DayGrid(tz).split(epoch_second(start), epoch_second(end))


def running_day_seconds(transitions: Iterable[tuple[str, dt.datetime]], now: dt.datetime,
                        tz: dt.tzinfo) -> dict[dt.date, int]:
    """Seconds in state "running" per local day, from a job's (to_state, at) in order.

    An open stretch ends ``now``; a preempted and resumed job counts only its running
    stretches (preempting, queued and admitted cost nothing).
    """
    end = epoch_second(now)
    stretches = running_intervals([(state, epoch_second(at)) for state, at in transitions], end)
    return stretch_day_seconds(stretches, end, DayGrid(tz))


def stretch_day_seconds(stretches: Iterable[tuple[int, int | None]], now: int, grid: DayGrid
                        ) -> dict[dt.date, int]:
    """Seconds per local day of running stretches (start, end) in whole epoch seconds, an
    open stretch (end None) ending ``now``; one grid serves many jobs."""
    days: dict[dt.date, int] = defaultdict(int)
    for start, end in stretches:
        for day, seconds in grid.split(start, now if end is None else end):
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
