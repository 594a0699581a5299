"""The run history admission's ETA reads: recent finished jobs, weighted by age, kept per
process for ``TRAINYARD_HISTORY_SECONDS``."""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from typing import Any

from django.conf import settings

from jobs.admission import History
from jobs.choices import JobState
from jobs.models import TrainingJob

_HISTORY: dict[str, tuple[dt.datetime, Any]] = {}


def recent_history(now):  # type: ignore[no-untyped-def]
    """:func:`job_history` as admission reads it: computed again once it is
    ``TRAINYARD_HISTORY_SECONDS`` old (or the clock went back), else the same
    ``History`` as the last pass of this process. It reads every job started in 30
    days, which on a busy cluster is most of a pass; what it holds (usage decayed with a
    7-day half-life, run times over 30 days) moves little in a minute, and what runs now
    is counted live by every pass (Kueue samples usage for fair sharing every 5 minutes)."""
    every = settings.TRAINYARD_HISTORY_SECONDS
    if every > 0:
        last = _HISTORY.get("last")
        if last is not None and 0 <= (now - last[0]).total_seconds() < every:
            return last[1]
    history = job_history(now)
    if every > 0:
        _HISTORY["last"] = (now, history)
    return history


def job_history(now, *, days: int = 30, half_life_days: float = 7.0):  # type: ignore[no-untyped-def]
    """Decayed GPU-seconds per tenant and recent run durations of succeeded jobs, from jobs
    that ran in the last ``days`` days, keyed (tenant, tier, template, GPU model),
    (tenant, tier, GPU model) and (tenant, tier) (``jobs.admission.History``)."""
    since = now - dt.timedelta(days=days)
    usage: dict[str, float] = defaultdict(float)
    durations: dict[tuple[str, ...], list[float]] = defaultdict(list)
    rows = (TrainingJob.objects.filter(started_at__isnull=False, started_at__gte=since)
            .values_list("tenant__slug", "tier", "workers", "gpus_per_worker", "started_at",
                         "finished_at", "state", "template", "gpu_model"))
    for tenant, tier, workers, gpus, started, finished, state, template, model in rows:
        if started is None:
            continue
        end = finished or now
        seconds = max(0.0, (end - started).total_seconds())
        age_days = (now - end).total_seconds() / 86400
        usage[tenant] += workers * gpus * seconds * math.pow(0.5, age_days / half_life_days)
        if finished is not None and state == JobState.SUCCEEDED:
            durations[(tenant, tier)].append(seconds)
            durations[(tenant, tier, model)].append(seconds)
            if template:
                durations[(tenant, tier, template, model)].append(seconds)
    return History(usage=dict(usage),
                   durations={k: tuple(sorted(v)[-200:]) for k, v in durations.items()})
