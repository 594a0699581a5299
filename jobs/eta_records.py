"""Every ETA shown, kept to measure it against what happened (:class:`jobs.models.EtaRecord`).

:func:`record_shown` is called by :func:`jobs.transitions.record_waiting` (every path that
stores the engine's explanations: the Celery pass, the admission service's explaining
thread, the Kueue forecaster) with the waiting jobs whose stored ETA it changes. A job's
first ETA is always recorded; a later one only when its p50 or p90 moved by more than
:func:`tolerance` from the job's last record, so a queue whose ETAs barely move costs a
read of the changed jobs' last records and no insert. :func:`record_started` fills
``started_at`` of a job's open records when it is admitted (``jobs.transitions``).
Records older than ``EtaRecord.RETENTION_DAYS`` are deleted, at most once an hour.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from django.core.cache import cache
from django.db.models import Max

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

Shown = tuple[int, int, str, dt.datetime, dt.datetime]
"""(job id, pool id, tier, eta p50, eta p90) of one job whose stored ETA changes."""


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


def last_records(job_ids: Sequence[int]) -> dict[int, tuple[dt.datetime, dt.datetime]]:
    """(p50, p90) of each job's latest open record (two indexed reads per chunk)."""
    out: dict[int, tuple[dt.datetime, dt.datetime]] = {}
    for chunk in _chunks(job_ids):
        latest = list(EtaRecord.objects.filter(job_id__in=chunk, started_at__isnull=True)
                      .values("job_id").annotate(last=Max("id")).values_list("last", flat=True))
        for job_id, p50, p90 in EtaRecord.objects.filter(pk__in=latest).values_list(
                "job_id", "eta_p50", "eta_p90"):
            out[job_id] = (p50, p90)
    return out


def record_shown(rows: Sequence[Shown], now: dt.datetime) -> int:
    """Record the ETAs of ``rows`` that are a job's first or moved past the tolerance;
    returns the rows written."""
    if not rows:
        return 0
    last = last_records([r[0] for r in rows])
    new = [(job_id, pool_id, tier, now, p50, p90) for job_id, pool_id, tier, p50, p90 in rows
           if job_id not in last or moved(now, last[job_id], (p50, p90))]
    written = insert_rows(EtaRecord, FIELDS, new) if new else 0
    if cache.add("jobs:eta-records:prune", "1", timeout=PRUNE_EVERY):
        prune(now)
    return written


def record_started(starts: Mapping[int, dt.datetime]) -> None:
    """The jobs were admitted (job id: when): the start their open records predicted."""
    by_time: dict[dt.datetime, list[int]] = defaultdict(list)
    for job_id, at in starts.items():
        by_time[at].append(job_id)
    for at, job_ids in by_time.items():
        for chunk in _chunks(job_ids):
            EtaRecord.objects.filter(job_id__in=chunk, started_at__isnull=True).update(
                started_at=at)


def prune(now: dt.datetime) -> int:
    """Delete the records older than the retention."""
    cutoff = now - dt.timedelta(days=EtaRecord.RETENTION_DAYS)
    deleted, _ = EtaRecord.objects.filter(predicted_at__lt=cutoff).delete()
    return deleted
