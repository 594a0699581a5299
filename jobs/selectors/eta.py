"""How far recent ETAs were right: :func:`eta_accuracy` of a pool (and tier), from the
ETAs shown and the starts that followed (:class:`jobs.models.EtaRecord`).

Each recorded ETA whose job was admitted since (in the window) is one sample:
its p50 error is ``|eta_p50 - started_at|``, its wait ``started_at - predicted_at``, and it
is covered when the job started by its p90. ``median_relative_error`` is the median error
over the median wait (``bench/eta_accuracy.py`` measures the engine the same way). The
pool's tier alone is used when it has ``MIN_SAMPLES`` samples, else the whole pool.
"""

from __future__ import annotations

import datetime as dt
import statistics
from dataclasses import asdict, dataclass
from typing import Any

from django.utils import timezone

from jobs.choices import JobState
from jobs.models import EtaRecord, TrainingJob

WINDOW_DAYS = 7
LIMIT = 2000
"""The most recent samples read (the latest starts first)."""
MIN_SAMPLES = 20
"""Fewer samples than this: too few to say how far to believe an ETA."""


@dataclass(frozen=True)
class EtaAccuracy:
    samples: int
    jobs: int
    median_error_seconds: float | None
    median_relative_error: float | None
    p90_coverage: float | None
    window_days: int
    tier: str
    """The tier measured alone ("" for the whole pool)."""

    @property
    def enough(self) -> bool:
        return self.samples >= MIN_SAMPLES

    @property
    def median_error_minutes(self) -> int:
        return round((self.median_error_seconds or 0) / 60)

    @property
    def coverage_percent(self) -> int:
        return round((self.p90_coverage or 0) * 100)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["enough"] = self.enough
        return out


Sample = tuple[int, dt.datetime, dt.datetime, dt.datetime, dt.datetime]
"""(job id, predicted at, eta p50, eta p90, started at) of one recorded ETA."""


def _measure(rows: list[Sample], window_days: int, tier: str) -> EtaAccuracy:
    errors: list[float] = []
    waits: list[float] = []
    covered = 0
    for _job, predicted, p50, p90, started in rows:
        errors.append(abs((started - p50).total_seconds()))
        waits.append(max((started - predicted).total_seconds(), 0.0))
        covered += started <= p90
    n = len(rows)
    if not n:
        return EtaAccuracy(0, 0, None, None, None, window_days, tier)
    error = statistics.median(errors)
    wait = statistics.median(waits)
    return EtaAccuracy(n, len({r[0] for r in rows}), error, error / wait if wait > 0 else None,
                       covered / n, window_days, tier)


def eta_accuracy(pool_id: int, tier: str, *, now: dt.datetime | None = None,
                 window_days: int = WINDOW_DAYS) -> EtaAccuracy:
    """The accuracy of the ETAs shown in the pool (its ``tier`` alone when it has enough
    samples) for jobs admitted in the last ``window_days``."""
    now = now or timezone.now()
    rows: list[Sample] = []
    same: list[Sample] = []
    for job_id, predicted, p50, p90, started, of_tier in EtaRecord.objects.filter(
            pool_id=pool_id, started_at__gte=now - dt.timedelta(days=window_days),
            started_at__lte=now).order_by("-started_at").values_list(
            "job_id", "predicted_at", "eta_p50", "eta_p90", "started_at", "tier")[:LIMIT]:
        if started is None:   # not selected (started_at__gte); for the type checker
            continue
        rows.append((job_id, predicted, p50, p90, started))
        if of_tier == tier:
            same.append(rows[-1])
    if len(same) >= MIN_SAMPLES:
        return _measure(same, window_days, tier)
    return _measure(rows, window_days, "")


def job_eta_accuracy(job: TrainingJob) -> EtaAccuracy | None:
    """The accuracy to show beside a queued job's ETA (None when it shows none)."""
    if job.state != JobState.QUEUED or job.eta_p50 is None:
        return None
    return eta_accuracy(job.pool_id, job.tier)
