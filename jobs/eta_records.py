"""Every ETA shown, kept to measure it against what happened (:class:`jobs.models.EtaRecord`).

:func:`record_shown` is called by :func:`jobs.transitions.record_waiting` (every path that
stores the engine's explanations: the Celery pass, the admission service's explaining
thread, the Kueue forecaster) with the waiting jobs whose stored ETA it changes. A job's
first ETA is always recorded; a later one only when its p50 or p90 moved by more than
:func:`tolerance` from the job's stored ETA or its last record (``_LAST``: a slow drift
adds up), so a queue whose ETAs barely move costs no read and no insert.
:func:`record_started` fills ``started_at`` of a job's open records when it is admitted
(``jobs.transitions``). Records older than ``EtaRecord.RETENTION_DAYS`` are deleted, at
most once an hour.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from django.core.cache import cache

from core.db import insert_rows
from jobs.models import EtaRecord

TOLERANCE_SECONDS = 60.0
"""A later ETA is recorded when it moved by more than this ..."""

TOLERANCE_SHARE = 0.05
"""... or by more than this share of the wait it predicted, whichever is larger."""

CHUNK = 5000
"""Ids per ``IN`` list (SQLite refuses more than 32,766 parameters)."""

PRUNE_EVERY = 3600
FIELDS = ("job", "pool", "tier", "predicted_at", "eta_p50", "eta_p90")

Shown = tuple[int, int, str, dt.datetime | None, dt.datetime | None, dt.datetime, dt.datetime]
"""(job id, pool id, tier, stored p50, stored p90, new p50, new p90) of one job whose
stored ETA changes."""


def tolerance(now: dt.datetime, eta: dt.datetime) -> float:
    """Seconds an ETA may move before it is recorded again."""
    return max(TOLERANCE_SECONDS, TOLERANCE_SHARE * (eta - now).total_seconds())


def moved(now: dt.datetime, last: tuple[dt.datetime, dt.datetime],
          new: tuple[dt.datetime, dt.datetime]) -> bool:
    """Whether ``new`` (p50, p90) differs from ``last`` by more than the tolerance."""
    return any(abs((b - a).total_seconds()) > tolerance(now, b)
               for a, b in zip(last, new, strict=True))


def _chunks(ids: Sequence[int]) -> Iterable[Sequence[int]]:
    for i in range(0, len(ids), CHUNK):
        yield ids[i:i + CHUNK]


_LAST: dict[int, tuple[dt.datetime, dt.datetime]] = {}
"""The ETA each job was last recorded with (or first seen with) in this process: a drift
by small steps adds up against it. Another process's records are not read: after a
restart, drift is counted from the first ETA seen (at worst one record more or less)."""
_LAST_MAX = 500_000


def record_shown(rows: Sequence[Shown], now: dt.datetime) -> int:
    """Record the ETAs of ``rows`` that are a job's first or moved past the tolerance
    (from the stored ETA, or from the one last recorded: a slow drift); no read, one
    bulk insert. Returns the rows written."""
    if not rows:
        return 0
    if len(_LAST) > _LAST_MAX:
        _LAST.clear()
    new = []
    for job_id, pool_id, tier, old50, old90, p50, p90 in rows:
        eta = (p50, p90)
        last = _LAST.get(job_id)
        if old50 is None or old90 is None or moved(now, (old50, old90), eta) or (
                last is not None and moved(now, last, eta)):
            new.append((job_id, pool_id, tier, now, p50, p90))
            _LAST[job_id] = eta
        elif last is None:
            _LAST[job_id] = (old50, old90)
    written = insert_rows(EtaRecord, FIELDS, new) if new else 0
    if cache.add("jobs:eta-records:prune", "1", timeout=PRUNE_EVERY):
        prune(now)
    return written


def record_started(starts: Mapping[int, dt.datetime]) -> None:
    """The jobs were admitted (job id: when): the start their open records predicted."""
    by_time: dict[dt.datetime, list[int]] = defaultdict(list)
    for job_id, at in starts.items():
        by_time[at].append(job_id)
        _LAST.pop(job_id, None)
    for at, job_ids in by_time.items():
        for chunk in _chunks(job_ids):
            EtaRecord.objects.filter(job_id__in=chunk, started_at__isnull=True).update(
                started_at=at)


def prune(now: dt.datetime) -> int:
    """Delete the records older than the retention."""
    cutoff = now - dt.timedelta(days=EtaRecord.RETENTION_DAYS)
    deleted, _ = EtaRecord.objects.filter(predicted_at__lt=cutoff).delete()
    return deleted
