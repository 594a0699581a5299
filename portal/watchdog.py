"""The progress watchdog: whatever should move and has not within its deadline is
retried, then flagged on the cluster health page and in ``/metrics`` with the reason.

Three kinds of subjects (:class:`Kind`), each an :class:`Item` with a ``state`` (what
must change for it to count as progress), a ``reason`` and a deadline:

* a job that does not progress as expected (``jobs.health.classify``, the one rule, via
  ``jobs.selectors.stuck_jobs``): overdue as soon as it is classified (the classifier
  applies its own deadlines); retried by syncing it with the cluster again and running
  the admission loop;
* a pool sync: its last write failed, a change is not applied (pending) or the cluster
  does not show it (missing), for :data:`POOL_SYNC_DEADLINE`; retried by reconciling
  the pool;
* a month close: a month with charges that ended more than :data:`MONTH_CLOSE_DEADLINE`
  ago is not closed; retried by bringing the ledger up to date (closing is finance's
  decision, so it is flagged for them).

:func:`review` is the rule, pure: given the items now and what the watchdog remembered
from its last pass, it says which to retry and which are flagged. An item is *flagged*
when it is still overdue :data:`RETRY_WINDOW` (per kind) after its first retry: the retry
had its chance. Any change of an item's ``state`` starts it afresh. The periodic task
``portal.watchdog`` (``portal/schedules.py``) runs a pass and keeps its report in the
cache (:data:`CACHE_KEY`); the pages read it. Losing the cache (a Redis restart) only
restarts the clocks of items whose state gives no start time of its own.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from billing import ledger
from billing.models import GpuUsage, MonthClose
from billing.selectors import tz
from billing.tasks import ingest_ledger
from jobs.enqueue import kick_admission, schedule_sync
from jobs.selectors import stuck_jobs
from tenants.choices import SyncState
from tenants.selectors import live_pools, mark_in_cluster
from tenants.tasks import reconcile_pool

log = logging.getLogger(__name__)

CACHE_KEY = "portal:watchdog"
#: a pool's change is in the cluster within this (the reconcile runs on commit; the
#: resync every 5 minutes picks up a lost task)
POOL_SYNC_DEADLINE = dt.timedelta(minutes=10)
#: finance closes a month within this after it ended
MONTH_CLOSE_DEADLINE = dt.timedelta(days=5)
#: how long a retry has before the item is flagged (and between two retries)
RETRY_WINDOW = {"job": dt.timedelta(minutes=5), "pool_sync": dt.timedelta(minutes=5),
                "month_close": dt.timedelta(days=1)}
#: the watchdog's period (``portal/schedules.py``)
EVERY_SECONDS = 60


class Kind(StrEnum):
    JOB = "job"
    POOL_SYNC = "pool_sync"
    MONTH_CLOSE = "month_close"


class Status(StrEnum):
    RETRYING = "retrying"
    FLAGGED = "flagged"


@dataclass(frozen=True)
class Item:
    """Something that should move: ``state`` changes when it does."""

    kind: Kind
    key: str            # stable id: "job:12", "pool:3", "month:2026-11"
    label: str          # shown as is: "vision/prod", "12 (resnet-a1)", "2026-11"
    state: str          # what it is stuck on; progress is any change of it
    reason: str         # a short code: a job's trouble, "error", "pending", "not_closed"
    detail: str = ""    # the words behind it (a Kubernetes error, ...), shown as written
    since: dt.datetime | None = None   # when it got into this state, when known
    deadline: dt.timedelta = dt.timedelta(0)
    link: str = ""


@dataclass(frozen=True)
class Finding:
    item: Item
    status: Status
    since: dt.datetime          # in this state since (or first seen so)
    overdue_since: dt.datetime
    retries: int
    retry_now: bool


@dataclass
class Memory:
    """What the watchdog keeps of one item between passes."""

    state: str
    since: dt.datetime
    retries: int = 0
    first_retry: dt.datetime | None = None
    last_retry: dt.datetime | None = None


def review(items: Iterable[Item], memory: Mapping[str, Memory], *, now: dt.datetime,
           windows: Mapping[str, dt.timedelta] | None = None
           ) -> tuple[list[Finding], dict[str, Memory]]:
    """The overdue items (retried now when their last retry is a window old; flagged when
    still overdue a window after their first retry) and the memory for the next pass.
    Items that are gone or moved are forgotten."""
    windows = windows or RETRY_WINDOW
    findings: list[Finding] = []
    kept: dict[str, Memory] = {}
    for item in items:
        seen = memory.get(item.key)
        if seen is None or seen.state != item.state:
            seen = Memory(state=item.state, since=item.since or now)
        elif item.since is not None and item.since < seen.since:
            seen = Memory(**{**asdict(seen), "since": item.since})
        else:
            seen = Memory(**asdict(seen))
        kept[item.key] = seen
        overdue_at = seen.since + item.deadline
        if now < overdue_at:
            continue
        window = windows.get(str(item.kind), dt.timedelta(minutes=5))
        retry = seen.last_retry is None or now - seen.last_retry >= window
        if retry:
            seen.retries += 1
            seen.last_retry = now
            seen.first_retry = seen.first_retry or now
        flagged = seen.first_retry is not None and now - seen.first_retry >= window
        findings.append(Finding(item=item, status=Status.FLAGGED if flagged else Status.RETRYING,
                                since=seen.since, overdue_since=overdue_at,
                                retries=seen.retries, retry_now=retry))
    findings.sort(key=lambda f: (f.status != Status.FLAGGED, f.since, f.item.key))
    return findings, kept


# --- the items now (reads) -------------------------------------------------------------------

def job_items(now: dt.datetime) -> list[Item]:
    return [Item(kind=Kind.JOB, key=f"job:{job.pk}", label=f"{job.tenant.slug}: {job.name}",
                 state=f"{job.state}:{verdict.trouble}", reason=str(verdict.trouble),
                 detail=verdict.reason, since=verdict.since,
                 link=reverse("jobs:detail", kwargs={"slug": job.tenant.slug, "pk": job.pk}))
            for job, verdict in stuck_jobs(now=now, limit=100)]


def pool_items(now: dt.datetime) -> list[Item]:
    pools = mark_in_cluster(live_pools())
    items = []
    for pool in pools:
        state = pool.sync_state
        if state == SyncState.IN_SYNC:
            continue
        items.append(Item(
            kind=Kind.POOL_SYNC, key=f"pool:{pool.pk}", label=str(pool),
            state=f"{state}:{pool.desired_version}", reason=str(state),
            detail=pool.sync_error[:500],
            since=pool.last_attempt_at if state == SyncState.ERROR else None,
            deadline=POOL_SYNC_DEADLINE,
            link=reverse("tenants:detail", kwargs={"slug": pool.tenant.slug})))
    return items


def month_items(now: dt.datetime) -> list[Item]:
    """The last ended month, when it has charges and is not closed."""
    zone = tz()
    this_month = ledger.month_start(timezone.localtime(now, zone).date())
    period = ledger.month_start(this_month - dt.timedelta(days=1))
    if MonthClose.objects.filter(period=period).exists():
        return []
    _start, end = ledger.month_bounds(period, zone)
    if not GpuUsage.objects.filter(day__gte=period, day__lt=this_month).exists():
        return []
    return [Item(kind=Kind.MONTH_CLOSE, key=f"month:{period:%Y-%m}", label=f"{period:%Y-%m}",
                 state="open", reason="not_closed", since=end, deadline=MONTH_CLOSE_DEADLINE,
                 link=reverse("billing:close"))]


# --- one pass (the task) and its report (the pages) -----------------------------------------

@dataclass
class Report:
    at: dt.datetime | None = None
    findings: list[dict[str, Any]] = field(default_factory=list)

    @property
    def flagged(self) -> list[dict[str, Any]]:
        return [f for f in self.findings if f["status"] == Status.FLAGGED]

    @property
    def retrying(self) -> list[dict[str, Any]]:
        return [f for f in self.findings if f["status"] == Status.RETRYING]


def _retry(item: Item) -> None:
    """The item's own way forward, once more (each idempotent)."""
    if item.kind == Kind.JOB:
        schedule_sync(int(item.key.split(":")[1]))
        kick_admission()
    elif item.kind == Kind.POOL_SYNC:
        reconcile_pool.delay(int(item.key.split(":")[1]))
    elif item.kind == Kind.MONTH_CLOSE:
        ingest_ledger.delay()


def _memory_from(raw: Mapping[str, Any]) -> dict[str, Memory]:
    def when(value: Any) -> dt.datetime | None:
        return dt.datetime.fromisoformat(value) if value else None

    out = {}
    for key, value in raw.items():
        try:
            since = when(value["since"])
            if since is None:
                continue
            out[key] = Memory(state=str(value["state"]), since=since,
                              retries=int(value.get("retries", 0)),
                              first_retry=when(value.get("first_retry")),
                              last_retry=when(value.get("last_retry")))
        except (KeyError, TypeError, ValueError):
            continue
    return out


def run(*, now: dt.datetime | None = None) -> Report:
    """One pass: review every item, retry the due ones, keep the report in the cache."""
    now = now or timezone.now()
    stored = cache.get(CACHE_KEY) or {}
    items = [*job_items(now), *pool_items(now), *month_items(now)]
    findings, memory = review(items, _memory_from(stored.get("memory", {})), now=now)
    for finding in findings:
        if finding.retry_now:
            try:
                _retry(finding.item)
            except Exception:  # the broker down, say: the next pass retries again
                log.warning("watchdog: retry of %s failed", finding.item.key, exc_info=True)
    report = Report(at=now, findings=[{
        "kind": str(f.item.kind), "key": f.item.key, "label": f.item.label,
        "reason": f.item.reason, "detail": f.item.detail, "link": f.item.link,
        "status": str(f.status), "since": f.since, "overdue_since": f.overdue_since,
        "retries": f.retries} for f in findings])
    cache.set(CACHE_KEY, {
        "at": now, "findings": report.findings,
        "memory": {k: {**asdict(m), **{t: getattr(m, t).isoformat() for t in
                                       ("since", "first_retry", "last_retry")
                                       if getattr(m, t)}} for k, m in memory.items()}},
        timeout=None)
    return report


def report() -> Report:
    """The last pass's findings (empty before the first pass)."""
    stored = cache.get(CACHE_KEY) or {}
    return Report(at=stored.get("at"), findings=list(stored.get("findings", [])))
