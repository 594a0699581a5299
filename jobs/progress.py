"""A running job's progress, as the job itself reports it.

Two sources, one stored shape (``TrainingJob.progress``, see :meth:`Report.stored`):

* a **TrainJob** (Kubeflow Trainer v2.2+, the ``TrainJobStatus`` feature gate) carries
  ``status.trainerStatus``: ``progressPercentage``, ``estimatedRemainingSeconds``,
  ``metrics`` (name and value, both strings) and ``lastUpdatedTime``, which the training
  loop posts to Trainer's status server. The watcher records the TrainJob
  (``k8s_sync.observe_kinds``, ``ObservedWorkload.raw``), so reading it costs no API call
  (:func:`from_trainer_status`);
* any job (a PyTorchJob; a TrainJob whose Trainer does not report) may print a **progress
  line** on rank 0 (docs/guides/checkpoints.md, ``examples/train_resumable.py``)::

      TRAINYARD_PROGRESS {"percent": 42.0, "remaining_seconds": 900, "step": 420,
                          "total_steps": 1000, "metrics": {"loss": 1.23}}

  (one line). :func:`parse_line` reads one line, :func:`last_report` the newest valid
  line of a log; a line that is not a valid report is skipped, never an error.

:func:`read_progress` is the beat's pass (``jobs.read_progress``, every minute, see
``portal/schedules.py``): for the running jobs only, the TrainJobs' recorded status, then,
for the jobs without one, the last :data:`TAIL_LINES` lines (at most
:data:`LIMIT_BYTES`, of the last :data:`SINCE_SECONDS`) of the rank-0 pod's log through
the logs API (``k8s_sync.client``), least recently read first, at most
:data:`MAX_LOG_READS` logs and :data:`BUDGET_SECONDS` a pass. One request per running job
a minute; what it costs is in bench/README.md. A report that did not change is not written.

:func:`fresh_remaining` is what the admission engine may use of a report: the seconds the
job said it had left, minus the time since, while the report is younger than
:data:`FRESH_SECONDS` and from the job's current run.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache
from django.db import transaction
from django.db.models import Q
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _

from jobs.choices import JobKind, JobState
from jobs.models import TrainingJob
from k8s_sync.client import K8sError, get_client
from k8s_sync.models import TRAINJOB, ObservedPod, ObservedWorkload
from k8s_sync.naming import namespace_name

log = logging.getLogger(__name__)

MARKER = "TRAINYARD_PROGRESS"
"""What starts a progress line's report (anything before it on the line is ignored: a
timestamp, torchrun's ``[rank0]:`` prefix)."""
MAX_LINE_CHARS = 4096
MAX_METRICS = 8
MAX_NAME_CHARS = MAX_VALUE_CHARS = 64  # as Trainer's Metric (trainjob_types.go)
MAX_REMAINING_SECONDS = 366 * 86400

TAIL_LINES = 50
LIMIT_BYTES = 32 * 1024
SINCE_SECONDS = 900
"""A log is read back this far at most: a job that printed no progress line for that long
reports nothing new (its last report stays, and grows stale)."""
MAX_LOG_READS = 500
BUDGET_SECONDS = 30.0
FRESH_SECONDS = 900.0
"""How long a report counts for the ETAs of the jobs waiting behind it."""

SOURCE_TRAINER = "trainer_status"
SOURCE_LOG = "log"


@dataclass(frozen=True)
class Report:
    """One progress report: what the job said, and when (its clock, when it said it)."""

    percent: float | None = None
    remaining_seconds: int | None = None
    step: int | None = None
    total_steps: int | None = None
    metrics: tuple[tuple[str, str], ...] = ()
    reported_at: dt.datetime | None = None

    def stored(self, *, source: str, observed_at: dt.datetime) -> dict[str, Any]:
        """The shape of ``TrainingJob.progress``."""
        return {
            "percent": self.percent, "remaining_seconds": self.remaining_seconds,
            "step": self.step, "total_steps": self.total_steps,
            "metrics": [{"name": n, "value": v} for n, v in self.metrics],
            "reported_at": _iso(self.reported_at or observed_at),
            "observed_at": _iso(observed_at), "source": source,
        }


def _iso(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def _reject_constant(name: str) -> Any:
    raise ValueError(name)  # NaN, Infinity: not a number a report may carry


def _number(value: Any, low: float, high: float) -> float | None:
    """``value`` as a finite number in [low, high]; ``None`` for None; ValueError else."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(value)
    number = float(value)
    if not math.isfinite(number) or not low <= number <= high:
        raise ValueError(value)
    return number


def _whole(value: Any, high: float) -> int | None:
    number = _number(value, 0, high)
    return None if number is None else int(number)


def _metric(name: Any, value: Any) -> tuple[str, str] | None:
    """One metric as (name, text), or None when it is not one (skipped alone)."""
    if not isinstance(name, str) or not 0 < len(name.strip()) <= MAX_NAME_CHARS:
        return None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        if not math.isfinite(float(value)):
            return None
        text = f"{value:.6g}" if isinstance(value, float) else str(value)
    elif isinstance(value, str):
        text = value.strip()
    else:
        return None
    if not 0 < len(text) <= MAX_VALUE_CHARS:
        return None
    return name.strip(), text


def _metrics(pairs: Iterable[tuple[Any, Any]]) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    for name, value in pairs:
        found = _metric(name, value)
        if found is not None and found[0] not in {n for n, _ in out}:
            out.append(found)
        if len(out) >= MAX_METRICS:
            break
    return tuple(out)


def parse_line(line: str) -> Report | None:
    """The report of one progress line, or None when the line is not a valid one.

    Valid: the marker, then one JSON object with ``percent`` (0 to 100) or
    ``remaining_seconds`` (0 or more) or both; ``step`` and ``total_steps`` (whole, 0 or
    more) and ``metrics`` (an object of names to numbers or strings; at most
    :data:`MAX_METRICS`, a bad one skipped alone) are optional. A field of the wrong type or
    out of range makes the whole line invalid (a script that prints nonsense reports
    nothing, rather than a wrong figure). A leading log timestamp (``timestamps=true``)
    becomes ``reported_at``."""
    if not isinstance(line, str) or len(line) > MAX_LINE_CHARS:
        return None
    at = line.find(MARKER)
    if at < 0:
        return None
    body = line[at + len(MARKER):]
    if not body[:1].isspace():
        return None
    try:
        data = json.loads(body, parse_constant=_reject_constant)
        if not isinstance(data, dict):
            return None
        percent = _number(data.get("percent"), 0, 100)
        remaining = _whole(data.get("remaining_seconds"), MAX_REMAINING_SECONDS)
        step = _whole(data.get("step"), 2**53)
        total = _whole(data.get("total_steps"), 2**53)
    except (ValueError, RecursionError):
        return None
    if percent is None and remaining is None:
        return None
    metrics = data.get("metrics")
    return Report(percent=percent, remaining_seconds=remaining, step=step, total_steps=total,
                  metrics=_metrics(metrics.items()) if isinstance(metrics, dict) else (),
                  reported_at=_stamp(line[:at]))


def _stamp(prefix: str) -> dt.datetime | None:
    """The log timestamp a line starts with (the logs API's ``timestamps=true``)."""
    first = prefix.split(" ", 1)[0]
    return _parsed(first) if first[:4].isdigit() else None


def last_report(text: str) -> Report | None:
    """The newest valid progress line of a log's text (the last one), or None."""
    for line in reversed(text.splitlines()):
        found = parse_line(line)
        if found is not None:
            return found
    return None


def from_trainer_status(obj: Mapping[str, Any]) -> Report | None:
    """A TrainJob's ``status.trainerStatus`` (Trainer v2.2+) as a report, or None when it
    has none or it is not valid."""
    status = (obj.get("status") or {}) if isinstance(obj, Mapping) else {}
    trainer = status.get("trainerStatus") if isinstance(status, Mapping) else None
    if not isinstance(trainer, Mapping):
        return None
    try:
        percent = _number(trainer.get("progressPercentage"), 0, 100)
        remaining = _whole(trainer.get("estimatedRemainingSeconds"), MAX_REMAINING_SECONDS)
    except ValueError:
        return None
    if percent is None and remaining is None:
        return None
    metrics = trainer.get("metrics")
    pairs = [(m.get("name"), m.get("value")) for m in metrics if isinstance(m, Mapping)] if (
        isinstance(metrics, list)) else []
    return Report(percent=percent, remaining_seconds=remaining, metrics=_metrics(pairs),
                  reported_at=_parsed(trainer.get("lastUpdatedTime")), step=_step_of(pairs))


def _step_of(pairs: list[tuple[Any, Any]]) -> int | None:
    """A ``step`` metric, when the loop reports one (Trainer has no step field)."""
    for name, value in pairs:
        if name == "step" and isinstance(value, str) and value.isdigit():
            return int(value)
    return None


# --- what the engine may use ----------------------------------------------------------------


def fresh_remaining(progress: Mapping[str, Any] | None, *, now: dt.datetime,
                    started_at: dt.datetime | None) -> tuple[float, dt.datetime] | None:
    """(seconds the job said it had left, when it said it) of a stored report that counts
    for the ETAs: it names a remaining time and it is :func:`fresh`."""
    if not isinstance(progress, Mapping) or progress.get("remaining_seconds") is None:
        return None
    when = fresh(progress, now=now, started_at=started_at)
    if when is None:
        return None
    try:
        return max(float(progress["remaining_seconds"]), 0.0), when
    except (TypeError, ValueError):
        return None


def fresh(progress: Mapping[str, Any], *, now: dt.datetime,
          started_at: dt.datetime | None) -> dt.datetime | None:
    """When a stored report was made, if it is from the job's current run (not before
    ``started_at``) and younger than :data:`FRESH_SECONDS`; else None. The time of the
    report is the earlier of the job's clock and Trainyard's (:func:`reported_time`: a
    cluster clock ahead of Trainyard's never makes a report look newer than it is)."""
    when = reported_time(progress)
    if when is None or (started_at is not None and when < started_at):
        return None
    if (now - when).total_seconds() > FRESH_SECONDS:
        return None
    return when


def reported_time(progress: Mapping[str, Any]) -> dt.datetime | None:
    """When a stored report was made: the earlier of its own time and when Trainyard
    first read it."""
    times = [t for t in (_parsed(progress.get("reported_at")), _parsed(progress.get(
        "observed_at"))) if t is not None]
    return min(times) if times else None


STAMP_KEY = "jobs:progress-stamp"
"""A value in the shared cache that changes whenever a report is stored (:func:`record`):
an admission pass reads the reports again only then (:func:`reported_remaining`)."""
_MEMO: dict[str, tuple[Any, dict[int, tuple[float, dt.datetime]]]] = {}


def reported_remaining(running: Mapping[int, dt.datetime | None], *, now: dt.datetime
                       ) -> dict[int, tuple[float, dt.datetime]]:
    """The fresh reports (:func:`fresh_remaining`) of the running jobs ``running`` (job id
    -> its ``started_at``): job id -> (seconds it said it had left, when). What the
    admission pass gives the engine (``JobView.reported_remaining_seconds``).

    The stored reports are read with one query only when one was stored since the last
    read in this process (:data:`STAMP_KEY`, set by :func:`record`); otherwise they are
    kept in memory, so a pass costs one cache read. Freshness is judged at every pass."""
    if not running:
        return {}
    try:
        stamp = cache.get(STAMP_KEY)
    except Exception:  # a cache outage: read the database
        stamp = None
    kept = _MEMO.get("last")
    if stamp is not None and kept is not None and kept[0] == stamp:
        known = kept[1]
    else:
        known = {}
        for pk, stored in TrainingJob.objects.filter(state=JobState.RUNNING).exclude(
                progress=None).values_list("id", "progress"):
            if not isinstance(stored, dict) or stored.get("remaining_seconds") is None:
                continue
            when = reported_time(stored)
            try:
                left = max(float(stored["remaining_seconds"]), 0.0)
            except (TypeError, ValueError):
                continue
            if when is not None and math.isfinite(left):
                known[pk] = (left, when)
        if stamp is not None:
            _MEMO["last"] = (stamp, known)
    out: dict[int, tuple[float, dt.datetime]] = {}
    for pk, started_at in running.items():
        found = known.get(pk)
        if found is None or (started_at is not None and found[1] < started_at):
            continue
        if (now - found[1]).total_seconds() <= FRESH_SECONDS:
            out[pk] = found
    return out


def record(job_id: int, stored: Mapping[str, Any], *, stamp: bool = True) -> int:
    """Store a running job's report (``TrainingJob.progress``); 1 when written (0: the job
    no longer runs). Moves :data:`STAMP_KEY` after the commit (``stamp``: the caller does
    it once for many)."""
    written = TrainingJob.objects.filter(pk=job_id, state=JobState.RUNNING).update(
        progress=dict(stored))
    if written and stamp:
        transaction.on_commit(_stamp_changed)
    return written


def _stamp_changed() -> None:
    try:
        cache.set(STAMP_KEY, time.time_ns(), timeout=None)
    except Exception:  # a cache outage: passes read the database until it is back
        log.warning("cannot mark the progress reports changed", exc_info=True)


def _parsed(value: Any) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        when = parse_datetime(value)
    except ValueError:
        return None
    return when if when is not None and when.tzinfo is not None else None


# --- what the job page and the API show ------------------------------------------------------


@dataclass(frozen=True)
class Shown:
    """A job's last report as its page and the API show it (the same figures)."""

    percent: float | None
    remaining_seconds: int | None
    step: int | None
    total_steps: int | None
    metrics: list[dict[str, str]]
    reported_at: dt.datetime | None
    source: str
    current: bool
    """From the job's current run, while it runs, and fresh: the ETAs of the jobs behind it
    use it (:func:`fresh_remaining`)."""

    @property
    def expected_end(self) -> dt.datetime | None:
        """When the job expects to finish: the report's time plus what it said was left."""
        if self.reported_at is None or self.remaining_seconds is None:
            return None
        return self.reported_at + dt.timedelta(seconds=self.remaining_seconds)

    @property
    def fresh_minutes(self) -> int:
        """How long a report counts for the ETAs, in minutes (:data:`FRESH_SECONDS`)."""
        return int(FRESH_SECONDS // 60)

    @property
    def remaining_text(self) -> str:
        return duration_text(self.remaining_seconds)

    @property
    def source_label(self) -> str:
        return (_("Kubeflow Trainer's trainerStatus") if self.source == SOURCE_TRAINER
                else _("the progress line of its rank-0 log"))

    def as_dict(self) -> dict[str, Any]:
        return {"percent": self.percent, "remaining_seconds": self.remaining_seconds,
                "expected_end": self.expected_end, "step": self.step,
                "total_steps": self.total_steps, "metrics": self.metrics,
                "reported_at": self.reported_at, "source": self.source,
                "current": self.current}


def shown(job: TrainingJob, *, now: dt.datetime) -> Shown | None:
    """The job's stored report for people (None when it never reported one)."""
    stored = job.progress
    if not isinstance(stored, dict):
        return None
    current = job.state == JobState.RUNNING and fresh(
        stored, now=now, started_at=job.started_at) is not None

    def whole(key: str) -> int | None:
        try:
            return _whole(stored.get(key), 2**53)
        except ValueError:
            return None

    try:
        percent = _number(stored.get("percent"), 0, 100)
    except ValueError:
        percent = None
    listed = stored.get("metrics")
    metrics = [{"name": str(m.get("name")), "value": str(m.get("value"))}
               for m in (listed if isinstance(listed, list) else []) if isinstance(m, dict)]
    return Shown(percent=percent,
                 remaining_seconds=whole("remaining_seconds"), step=whole("step"),
                 total_steps=whole("total_steps"), metrics=metrics,
                 reported_at=reported_time(stored), source=str(stored.get("source") or ""),
                 current=current)


def duration_text(seconds: float | None) -> str:
    """A remaining time for people: "under a minute", "25 min", "3 h 05 min", "2 d 4 h"."""
    if seconds is None:
        return ""
    minutes = int(max(seconds, 0) // 60)
    if minutes < 1:
        return _("under a minute")
    if minutes < 60:
        return _("%(m)s min") % {"m": minutes}
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return _("%(h)s h %(m)02d min") % {"h": hours, "m": minutes}
    return _("%(d)s d %(h)s h") % {"d": hours // 24, "h": hours % 24}


# --- reading --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Running:
    pk: int
    kind: str
    k8s_name: str
    namespace: str
    progress: Any


def read_progress(now: dt.datetime, *, client: Any = None,
                  clock: Any = time.monotonic) -> dict[str, int]:
    """Read the running jobs' progress (see the module docstring) and store what changed;
    returns counts: ``jobs`` running, ``trainer`` reports from TrainJobs' status, ``logs``
    read, ``found`` reports in them, ``written``, ``errors`` (logs the cluster refused or
    could not serve), ``skipped`` (past the pass's reads or time)."""
    counts = dict.fromkeys(("jobs", "trainer", "logs", "found", "written", "errors",
                            "skipped"), 0)
    running = [_Running(r[0], r[1], r[2], namespace_name(r[3], r[4]), r[5])
               for r in TrainingJob.objects.filter(state=JobState.RUNNING).exclude(
                   k8s_name="").values_list("id", "kind", "k8s_name", "tenant__slug",
                                            "pool__kind", "progress")]
    counts["jobs"] = len(running)
    if not running:
        return counts
    found: dict[int, dict[str, Any]] = {}
    trainjobs = [j for j in running if j.kind == JobKind.TRAINJOB]
    if trainjobs:
        rows = ObservedWorkload.objects.filter(
            api_version=TRAINJOB[0], kind=TRAINJOB[1],
            namespace__in={j.namespace for j in trainjobs},
            name__in={j.k8s_name for j in trainjobs}).values_list("namespace", "name", "raw")
        raw = {(ns, name): obj for ns, name, obj in rows}
        for job in trainjobs:
            report = from_trainer_status(raw.get((job.namespace, job.k8s_name)) or {})
            if report is not None:
                counts["trainer"] += 1
                found[job.pk] = report.stored(source=SOURCE_TRAINER, observed_at=now)
    by_log = [j for j in running if j.pk not in found]
    pods = _rank0_pods(by_log)
    # least recently read first, so a pass cut short reaches the others next time
    by_log.sort(key=lambda j: str((j.progress or {}).get("observed_at") or "")
                if isinstance(j.progress, dict) else "")
    client = client if client is not None else (get_client() if pods else None)
    started = clock()
    for job in by_log:
        pod = pods.get(job.pk)
        if pod is None:
            continue
        if counts["logs"] >= MAX_LOG_READS or clock() - started > BUDGET_SECONDS:
            counts["skipped"] += 1
            continue
        counts["logs"] += 1
        try:
            text = client.pod_log(job.namespace, pod, tail_lines=TAIL_LINES,
                                  since_seconds=SINCE_SECONDS, limit_bytes=LIMIT_BYTES,
                                  timestamps=True)
        except K8sError as exc:
            counts["errors"] += 1
            log.debug("progress of job %s: log of %s/%s: %s", job.pk, job.namespace, pod, exc)
            continue
        report = last_report(text if isinstance(text, str) else "")
        if report is not None:
            counts["found"] += 1
            found[job.pk] = report.stored(source=SOURCE_LOG, observed_at=now)
    kept = {j.pk: j.progress for j in running}
    with transaction.atomic():  # one commit a pass, not one a job
        for pk, stored in found.items():
            if not _same(kept.get(pk), stored):
                counts["written"] += record(pk, stored, stamp=False)
        if counts["written"]:
            transaction.on_commit(_stamp_changed)
    return counts


def _same(old: Any, new: Mapping[str, Any]) -> bool:
    """The same report as the stored one (its time of reading aside)."""
    if not isinstance(old, dict):
        return False
    return {k: v for k, v in old.items() if k != "observed_at"} == {
        k: v for k, v in new.items() if k != "observed_at"}


def _rank0_pods(jobs: list[_Running]) -> dict[int, str]:
    """The running rank-0 pod of each job, as observed: a PyTorchJob's Master
    (``<job>-master-0``), a TrainJob's first node (``<job>-node-0-0-<suffix>``: the JobSet
    Job's completion index 0). One query, by name."""
    if not jobs:
        return {}
    by_id = {str(j.pk): j for j in jobs}
    wanted = Q(name__in=[f"{j.k8s_name}-master-0" for j in jobs if j.kind != JobKind.TRAINJOB])
    for j in jobs:
        if j.kind == JobKind.TRAINJOB:
            wanted |= Q(name__startswith=f"{j.k8s_name}-node-0-0-")
    rows = ObservedPod.objects.filter(wanted, job__in=list(by_id), phase="Running").values_list(
        "namespace", "name", "job", "raw__metadata__deletionTimestamp")
    out: dict[int, str] = {}
    for namespace, name, job_id, deleting in rows:
        job = by_id.get(job_id)
        if job is not None and namespace == job.namespace and not deleting:
            out[job.pk] = name
    return out
