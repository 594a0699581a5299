"""The admission service's jobs, kept in memory and updated from what changed.

A pass of the admission loop used to read every active job (the whole queue) from the
database; on a long queue that read was most of the pass. The admission service
(:mod:`jobs.service`) keeps the rows instead (the columns a decision reads,
``jobs.selectors.admission.VIEW_FIELDS``) and reads again only the jobs that changed, which
it learns from two append-only tables, read by their ids:

* **JobTransition**: every change of a job's state is one (submission, admission,
  preemption, running, finished, cancelled, requeued, a pod-start return, a rejection),
  written in the same transaction as the change itself, so a transition that is visible
  shows a row that is already changed;
* **AuditEvent** of the edits that change no state: a hold, a release, a new priority
  (``job.hold``, ``job.release``, ``job.priority``), with the job's id in its data.

A row id that is skipped (a concurrent transaction that commits later, out of id order
on Postgres) is remembered as a gap and asked for again on every read for
:data:`GAP_SECONDS`, so a late commit is never missed (an id rolled back stays a gap
until then). A change the journals do not carry (a loan that ends, a change by hand in
the database) is healed by :meth:`LiveJobs.verify`: a full read compared with memory,
on start and on a slow period; each difference is logged and counted (``drift``), and
memory takes the database's rows.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Max, Model, Q

from jobs.models import JobTransition
from tenants.models import AuditEvent

log = logging.getLogger(__name__)

GAP_SECONDS = 30.0
"""How long an id skipped by a read is asked for again (a transaction open that long is
a stuck one; the slow full read heals what it wrote)."""
MAX_GAPS = 10_000
"""Gaps remembered at most; beyond, the oldest are forgotten and a full read is due."""
JOB_ACTIONS = ("job.hold", "job.release", "job.priority")
"""The audit actions that change a queued job's admission without a transition."""


@dataclass
class Journal:
    """New rows of an append-only table, by id, without missing a late commit.

    ``read()`` returns the (id, *fields) of rows with an id above the mark, or one of the
    gaps (ids below the newest read that were not there yet)."""

    model: type[Model]
    fields: tuple[str, ...]
    mark: int = 0
    gaps: dict[int, float] = field(default_factory=dict)
    overflowed: bool = False

    def start(self) -> None:
        """Read from now on: the mark at the newest id (what is older is in a full read
        made after this call)."""
        self.mark = int(self.model.objects.aggregate(top=Max("id"))["top"] or 0)  # type: ignore[attr-defined]
        self.gaps.clear()

    def read(self, *, clock: Callable[[], float] = time.monotonic) -> list[tuple[Any, ...]]:
        now = clock()
        wanted = Q(id__gt=self.mark)
        if self.gaps:
            wanted |= Q(id__in=list(self.gaps))
        rows = list(self.model.objects.filter(wanted).order_by("id")  # type: ignore[attr-defined]
                    .values_list("id", *self.fields))
        seen = {row[0] for row in rows}
        for row_id in seen:
            self.gaps.pop(row_id, None)
        top = max(seen, default=self.mark)
        if top > self.mark:
            # An empty table's ids need not start at 1 (a Postgres sequence is not reset
            # when rows go): below the first id ever read there is nothing to wait for.
            base = self.mark if self.mark else min(seen) - 1
            for missing in set(range(base + 1, top)) - seen:
                self.gaps[missing] = now
            self.mark = top
        for row_id, since in list(self.gaps.items()):
            if now - since > GAP_SECONDS:
                del self.gaps[row_id]
        if len(self.gaps) > MAX_GAPS:
            oldest = sorted(self.gaps, key=self.gaps.__getitem__)
            for row_id in oldest[:len(self.gaps) - MAX_GAPS]:
                del self.gaps[row_id]
            self.overflowed = True
        return rows


RowReader = Callable[[Iterable[int] | None], Iterable[Any]]
"""Reads the active jobs' rows: all of them (None) or only these ids (done or gone ones
are simply absent). ``jobs.selectors.admission.active_rows``."""


@dataclass
class LiveJobs:
    """The active jobs' rows in memory (see the module docstring)."""

    read_rows: RowReader
    rows: dict[int, Any] = field(default_factory=dict)
    loaded: bool = False
    drift: int = 0          # differences found by verify() since the process started
    reads: int = 0          # rows read again after a change
    transitions: Journal = field(default_factory=lambda: Journal(JobTransition, ("job_id",)))
    audits: Journal = field(default_factory=lambda: Journal(AuditEvent, ("action", "data")))

    def load(self) -> None:
        """Every active job from the database (marks first: a change from then on is read
        again, which is harmless)."""
        self.transitions.start()
        self.audits.start()
        self.rows = {row.id: row for row in self.read_rows(None)}
        self.loaded = True

    def refresh(self) -> set[int]:
        """Read again the jobs that changed since the last call; returns their ids (all of
        them on the first call)."""
        if not self.loaded:
            self.load()
            return set(self.rows)
        changed = {job_id for _id, job_id in self.transitions.read()}
        for _id, action, data in self.audits.read():
            job_id = data.get("job") if action in JOB_ACTIONS and isinstance(data, dict) else None
            if isinstance(job_id, int):
                changed.add(job_id)
        if changed:
            fresh = {row.id: row for row in self.read_rows(changed)}
            self.reads += len(fresh)
            for job_id in changed:
                row = fresh.get(job_id)
                if row is None:
                    self.rows.pop(job_id, None)
                else:
                    self.rows[job_id] = row
        return changed

    def pending(self) -> bool:
        """Whether a journal has a row this object has not read (two indexed queries):
        something changed that a pass should see."""
        if not self.loaded:
            return True
        return (JobTransition.objects.filter(id__gt=self.transitions.mark).exists()
                or AuditEvent.objects.filter(id__gt=self.audits.mark,
                                             action__in=JOB_ACTIONS).exists())

    @property
    def needs_verify(self) -> bool:
        """A journal forgot gaps (a burst beyond :data:`MAX_GAPS`): read everything."""
        return self.transitions.overflowed or self.audits.overflowed

    def verify(self) -> int:
        """Compare memory with a full read; log and count each difference, and take the
        database's row for it. Returns the number of differences (0 when memory was right).

        Jobs go on changing while the full read runs: memory is brought up to date from the
        journals before it, and again after it; a job the second time names changed after
        the read (memory holds the newer row), so only the others are compared."""
        self.transitions.overflowed = self.audits.overflowed = False
        self.refresh()
        truth = {row.id: row for row in self.read_rows(None)}
        moved = self.refresh()
        differences = [job_id for job_id in set(truth) | set(self.rows)
                       if job_id not in moved and truth.get(job_id) != self.rows.get(job_id)]
        if differences:
            self.drift += len(differences)
            log.warning("admission service: %d jobs differed from the database (%s); healed",
                        len(differences), ", ".join(map(str, sorted(differences)[:20])))
            for job_id in differences:
                if job_id in truth:
                    self.rows[job_id] = truth[job_id]
                else:
                    self.rows.pop(job_id, None)
        return len(differences)

    def active(self) -> list[Any]:
        return list(self.rows.values())
