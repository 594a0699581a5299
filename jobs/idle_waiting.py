"""GPU-seconds idle while a job that fits them waits: recorded by the admission loop, read
by the cluster page, ``/metrics`` and finance's month.

The figure itself is pure (:func:`jobs.admission.waste.idle_while_waiting`); this module
holds its one write (:func:`idle_waiting_record`, called on every admission pass that
explains: the trainyard engine's through :func:`record_pass`, Kueue mode's through
:func:`record_observed`) and its reads (the selectors below), all on
:class:`jobs.models.IdleWhileWaiting`: one row per (minute, resource key, cause) in
unit-seconds (GPU-seconds for ``gpu:`` keys, MIG instance-seconds, share-seconds), and a
row of cause "" per (minute, key) with the key's idle and capacity unit-seconds.

A pass's figure is multiplied by the seconds since the previous explaining pass, at most
:data:`MAX_INTERVAL_SECONDS`, so a loop that stopped does not invent waste for the time it
was not running. The shares are of the capacity recorded in the same passes: time the
loop did not run counts neither way.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import connection
from django.db.models import Sum
from django.utils.translation import gettext_lazy as _

from jobs.admission import Decisions, JobView, NodeView
from jobs.admission.types import WaitInfo
from jobs.admission.waste import CAUSES, KeyIdle, idle_while_waiting, reason_code
from jobs.models import IdleWhileWaiting

MAX_INTERVAL_SECONDS = 60.0
"""The longest interval one pass's figure stands for."""

CAUSE_LABELS = {
    "soft_limit": _("Soft limits (development and batch quota)"),
    "own_quota": _("Production above its own quota"),
    "reservation": _("Reserved for a larger job"),
    "cap": _("Caps set by an admin"),
    "watermark": _("Eviction watermark"),
    "other": _("Other"),
}
"""Each cause's name on the pages (``jobs.admission.waste.CAUSES``)."""

_UPSERT = (
    "INSERT INTO {table} (minute, key, cause, waiting_seconds, idle_seconds, "
    "capacity_seconds) VALUES (%s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (minute, key, cause) DO UPDATE SET "
    "waiting_seconds = {table}.waiting_seconds + excluded.waiting_seconds, "
    "idle_seconds = {table}.idle_seconds + excluded.idle_seconds, "
    "capacity_seconds = {table}.capacity_seconds + excluded.capacity_seconds")


def interval_seconds(now: dt.datetime, previous: dt.datetime | None, default: float) -> float:
    """The seconds one pass's figure stands for: since ``previous`` (the last explaining
    pass; ``default`` when there was none), between 0 and :data:`MAX_INTERVAL_SECONDS`."""
    seconds = default if previous is None else (now - previous).total_seconds()
    return min(max(seconds, 0.0), MAX_INTERVAL_SECONDS)


def idle_waiting_record(*, figures: Mapping[str, KeyIdle], seconds: float,
                        now: dt.datetime) -> int:
    """Add one pass's figures × ``seconds`` to the minute of ``now``: one prepared upsert
    (``INSERT ... ON CONFLICT DO UPDATE`` adding to the stored values, on SQLite and
    Postgres), run for every row by ``executemany``. Returns the rows written."""
    if seconds <= 0 or not figures:
        return 0
    minute = connection.ops.adapt_datetimefield_value(now.replace(second=0, microsecond=0))
    rows: list[tuple[Any, ...]] = []
    for key, figure in figures.items():
        rows.append((minute, key, "", 0.0, figure.free * seconds, figure.capacity * seconds))
        for cause, units in figure.waiting.items():
            if units > 0:
                rows.append((minute, key, cause, units * seconds, 0.0, 0.0))
    with connection.cursor() as cursor:
        cursor.executemany(_UPSERT.format(table=IdleWhileWaiting._meta.db_table), rows)
    return len(rows)


def record_pass(*, nodes: Sequence[NodeView], jobs: Sequence[JobView], decisions: Decisions,
                skip: Mapping[int, Any], now: dt.datetime, previous: dt.datetime | None,
                default_seconds: float) -> int:
    """The admission loop's call on a pass that explains: the figure of the pass (the
    jobs in ``skip``, waiting for their pool to appear in the cluster, left out: they
    cannot run whatever is free) recorded for the interval since ``previous``."""
    figures = idle_while_waiting(nodes=nodes, jobs=[j for j in jobs if j.id not in skip],
                                 decisions=decisions)
    return idle_waiting_record(figures=figures,
                               seconds=interval_seconds(now, previous, default_seconds),
                               now=now)


def record_observed(*, nodes: Sequence[NodeView], jobs: Sequence[JobView],
                    waiting: Mapping[int, WaitInfo], now: dt.datetime,
                    previous: dt.datetime | None, default_seconds: float) -> int:
    """Kueue mode's call on a pass that explains: Kueue decided, so there are no decisions
    of Trainyard's to apply; the figure is taken on the jobs still waiting after the pass
    (``waiting``: each with the reason and the position it shows), against the nodes'
    free units the pass read. A Workload Kueue admitted whose pods are not bound yet is
    not subtracted (Kueue leaves node choice to the scheduler): for those seconds its
    cards count as free, and count as idle-while-waiting only if another waiting job fits
    them."""
    reasons = {job_id: _cause_reason(info.reason) for job_id, info in waiting.items()}
    figures = idle_while_waiting(nodes=nodes, jobs=[j for j in jobs if j.id in reasons],
                                 decisions=Decisions(waiting=dict(waiting)), reasons=reasons)
    return idle_waiting_record(figures=figures,
                               seconds=interval_seconds(now, previous, default_seconds),
                               now=now)


def _cause_reason(reason: Any) -> Any:
    """The reason a Kueue-mode wait is counted under: Trainyard's own explanation (the
    second of ``[Kueue's reason, Trainyard's]``) when Kueue only says "insufficient unused
    quota", since it names the limit (a borrowing cap, a soft limit, production's own
    quota); else the reason as shown."""
    if (isinstance(reason, list) and len(reason) > 1
            and reason_code(reason[0]) == "jobs.wait.kueue.quota"):
        return reason[1]
    return reason


# -- reads ----------------------------------------------------------------------------------


def window_totals(start: dt.datetime, end: dt.datetime) -> dict[str, Any]:
    """Between ``start`` and ``end`` (minutes): idle-while-waiting unit-hours by cause
    (every cause, 0 included), their total, the capacity and idle unit-hours recorded,
    the shares of capacity (0..1; ``percent`` the same x 100, 2 decimals; None without
    capacity), and the same per key."""
    rows = (IdleWhileWaiting.objects.filter(minute__gte=start, minute__lt=end)
            .values("key", "cause")
            .annotate(w=Sum("waiting_seconds"), i=Sum("idle_seconds"),
                      c=Sum("capacity_seconds")))
    by_cause: dict[str, float] = dict.fromkeys(CAUSES, 0.0)
    keys: dict[str, dict[str, Any]] = {}
    capacity = idle = 0.0
    for row in rows:
        entry = keys.setdefault(row["key"], {"key": row["key"], "waiting": 0.0,
                                             "idle": 0.0, "capacity": 0.0})
        if row["cause"]:
            hours = (row["w"] or 0.0) / 3600
            by_cause[row["cause"]] = by_cause.get(row["cause"], 0.0) + hours
            entry["waiting"] += hours
        else:
            entry["idle"] += (row["i"] or 0.0) / 3600
            entry["capacity"] += (row["c"] or 0.0) / 3600
            idle += (row["i"] or 0.0) / 3600
            capacity += (row["c"] or 0.0) / 3600
    total = sum(by_cause.values())

    def share(value: float, of: float) -> float | None:
        return value / of if of > 0 else None

    def percent(value: float, of: float) -> float | None:
        return round(100 * value / of, 2) if of > 0 else None

    for entry in keys.values():
        entry["share"] = share(entry["waiting"], entry["capacity"])
        entry["percent"] = percent(entry["waiting"], entry["capacity"])
    return {
        "causes": [{"cause": c, "label": CAUSE_LABELS.get(c, c), "hours": h,
                    "share": share(h, capacity), "percent": percent(h, capacity)}
                   for c, h in by_cause.items()],
        "hours": total, "share": share(total, capacity), "percent": percent(total, capacity),
        "capacity_hours": capacity, "idle_hours": idle, "idle_share": share(idle, capacity),
        "keys": sorted(keys.values(), key=lambda e: (-e["waiting"], e["key"])),
    }


def hourly(start: dt.datetime, hours: int = 24) -> dict[str, Any]:
    """Per hour from ``start`` (its hour), ``hours`` of them: unit-hours idle while work
    waited, by cause (the x values: each hour's start, UTC)."""
    first = start.replace(minute=0, second=0, microsecond=0)
    x = [first + dt.timedelta(hours=h) for h in range(hours)]
    series: dict[str, list[float]] = {c: [0.0] * hours for c in CAUSES}
    rows = (IdleWhileWaiting.objects.filter(minute__gte=first,
                                            minute__lt=first + dt.timedelta(hours=hours))
            .exclude(cause="").values_list("minute", "cause", "waiting_seconds"))
    for minute, cause, seconds in rows:
        index = int((minute - first).total_seconds() // 3600)
        if 0 <= index < hours and cause in series:
            series[cause][index] += seconds / 3600
    return {"x": x, "series": series}


def counter_totals() -> dict[tuple[str, str], float]:
    """Every (key, cause)'s unit-seconds ever recorded: the ``/metrics`` counter
    ``trainyard_gpu_idle_while_waiting_seconds_total``."""
    out: dict[tuple[str, str], float] = defaultdict(float)
    for key, cause, seconds in (IdleWhileWaiting.objects.exclude(cause="")
                                .values("key", "cause").annotate(s=Sum("waiting_seconds"))
                                .values_list("key", "cause", "s")):
        out[(key, cause)] += seconds or 0.0
    return dict(out)
