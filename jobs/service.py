"""The admission service: one long-running process per cluster that decides admissions.

``manage.py admission_service`` (``make run`` starts it; ``deploy/k8s/admission.yaml``
runs it with two replicas, one deciding). What it does that the Celery pass
(``jobs.admission_cycle``) does not:

* **its inputs in memory, updated from deltas.** The queue's rows live in
  :class:`jobs.live.LiveJobs`, read again only for the jobs a new JobTransition or a
  hold/priority audit row names (submissions, cancels, holds, its own transitions, what
  the watcher's observations moved); what changes rarely (pools, grants, policy, nodes'
  facts) is the submission snapshot's (``jobs.submitcache``, one marker query); the
  30-day history is read once a minute. The cluster (nodes, pods, the jobs' PyTorchJobs
  and TrainJobs) is its informers' (``jobs.informers``: a list, then a watch; an event
  wakes the loop), not the watcher's tables;
* **safety:** a full read on start and every ``verify_seconds`` is compared with memory;
  a difference is logged, counted (``AdmissionState.drift``, ``/metrics``
  ``trainyard_admission_drift_total``) and healed. The pass token and conditional
  transitions are the Celery pass's own (``jobs.backends.base``): nothing is applied
  twice, even if a Celery pass and the service ran at once;
* **one leader:** a lease on ``AdmissionState`` (``leader``, ``lease_until``), renewed
  every pass and at least every ``lease_seconds / 3``; while it holds, the Celery pass
  leaves the deciding to it (``jobs.backends.base.service_decides``); a standby replica
  takes over when it lapses;
* **decisions at once, explanations beside them:** it passes at once on an informer's
  event, within ``poll_seconds`` of a nudge (``jobs.enqueue.kick_admission``, the
  watcher's receiver) or of a new journal row,
  at most every ``min_pass_seconds`` and at least every ``idle_seconds``; its passes only
  decide (``decide(explain=False)``). Positions, ETAs and
  reasons are computed in a thread of their own on the last pass's inputs, at the
  cadence that limits itself (``jobs.admission.cadence``), never inside a deciding pass;
* **cluster writes in the process:** a pass's admissions and preemptions are converged by
  a writer thread (``jobs.converge.sync_many``) once the pass commits, not through the
  broker.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import close_old_connections, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from jobs import converge, enqueue, idle_waiting, observation, selectors, submitcache, transitions
from jobs.admission.cadence import explain_due
from jobs.backends import backend_name
from jobs.backends.base import BaseBackend
from jobs.backends.trainyard import apply_decisions
from jobs.informers import ClusterCache
from jobs.live import LiveJobs
from jobs.models import AdmissionState
from k8s_sync.client import get_client
from k8s_sync.observe import freeze_heap

log = logging.getLogger(__name__)


def default_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class Timing:
    """How often the service looks, passes, checks itself and explains (seconds)."""

    poll_seconds: float = 0.05
    min_pass_seconds: float = 0.1
    idle_seconds: float = 1.0
    verify_seconds: float = 60.0
    lease_seconds: float = 15.0

    @classmethod
    def from_settings(cls) -> Timing:
        return cls(**{name: float(value) for name, value in
                      getattr(settings, "TRAINYARD_ADMISSION_SERVICE", {}).items()})


KEPT_FIGURES = 100_000
"""Pass and explanation times kept (the latest; a service runs for months)."""


def _kept() -> deque[float]:
    return deque(maxlen=KEPT_FIGURES)


@dataclass
class Figures:
    """What the service did since it started (its log line and the bench read them)."""

    passes: int = 0
    skipped: int = 0
    explained: int = 0
    pass_ms: deque[float] = field(default_factory=_kept)
    pass_cpu_ms: deque[float] = field(default_factory=_kept)
    explain_ms: deque[float] = field(default_factory=_kept)
    writes: int = 0


class AdmissionService:
    """See the module docstring. :meth:`run` is the process's loop; :meth:`step` is one
    turn of it and :meth:`run_pass` one pass (the tests drive these directly)."""

    def __init__(self, *, identity: str | None = None, timing: Timing | None = None,
                 threads: bool = True, informers: bool = True) -> None:
        self.identity = identity or default_identity()
        self.timing = timing or Timing.from_settings()
        self.threads = threads  # False: explain, write and list inline (the tests)
        self.use_informers = informers  # False: the watcher's rows, as the Celery pass
        self.cluster: ClusterCache | None = None
        self._wake = threading.Event()
        self.live = LiveJobs(read_rows=selectors.active_rows)
        self.figures = Figures()
        self.leading = False
        self._lease_renewed = float("-inf")
        self._last_pass = float("-inf")
        self._verified = float("-inf")
        self._nudge: Any = None
        self._latest: dict[str, Any] | None = None
        self._explaining: threading.Thread | None = None
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="admission-writes")

    # -- the lease -------------------------------------------------------------------------

    def hold_lease(self, now: dt.datetime) -> bool:
        """Take or renew the lease (one conditional UPDATE); False when another live
        service holds it."""
        AdmissionState.objects.get_or_create(pk=1)
        held = AdmissionState.objects.filter(pk=1).filter(
            Q(leader=self.identity) | Q(lease_until__isnull=True) | Q(lease_until__lt=now)
        ).update(leader=self.identity,
                 lease_until=now + dt.timedelta(seconds=self.timing.lease_seconds))
        if held and not self.leading:
            log.info("admission service %s decides", self.identity)
            self.live.loaded = False  # a new leader reads everything first
            if self.use_informers and self.cluster is None:
                self.cluster = ClusterCache(get_client(), on_change=self._wake.set)
                if self.threads:
                    self.cluster.start()
        elif not held and self.leading:
            log.warning("admission service %s lost its lease", self.identity)
        self.leading = bool(held)
        self._lease_renewed = time.monotonic()
        return self.leading

    def release_lease(self) -> None:
        AdmissionState.objects.filter(pk=1, leader=self.identity).update(lease_until=None)
        self.leading = False

    # -- the loop --------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Until ``stop`` is set: hold the lease and pass on changes; a standby waits."""
        try:
            while not stop.is_set():
                try:
                    self.step(timezone.now())
                except Exception:  # a database or cluster outage: retry after a while
                    log.exception("admission service: a pass failed")
                    close_old_connections()
                    stop.wait(min(5.0, self.timing.idle_seconds * 2))
                    continue
                if not self.leading:
                    stop.wait(self.timing.lease_seconds / 3)
                    continue
                allowed_in = self.timing.min_pass_seconds - (time.monotonic() - self._last_pass)
                if allowed_in > 0:
                    stop.wait(min(allowed_in, self.timing.idle_seconds))
                else:  # an informer's event wakes it at once
                    self._wake.wait(self.timing.poll_seconds)
        finally:
            if self.cluster is not None:
                self.cluster.stop()
            self._writer.shutdown(wait=True)
            if self._explaining is not None:
                self._explaining.join(30)
            self.release_lease()

    def step(self, now: dt.datetime) -> dict[str, Any] | None:
        """One turn: renew the lease when due; pass when something changed (a nudge, a
        new journal row) or when the idle period is over, never sooner than the minimum
        period after the last pass. Returns the pass's counts, or None. With another
        backend than the engine (``TRAINYARD_ADMISSION_BACKEND=kueue``) it never takes
        the lease nor decides: it idles, so one deployment serves both modes."""
        if backend_name() != "trainyard":
            # Kueue mode: Kueue admits and the Celery pass reads its decisions; an engine
            # deciding beside it would admit and preempt the same jobs (issue 31)
            return None
        mono = time.monotonic()
        renew = not self.leading or mono - self._lease_renewed >= self.timing.lease_seconds / 3
        if renew and not self.hold_lease(now):
            return None
        since = mono - self._last_pass
        if since < self.timing.min_pass_seconds:
            return None
        if self.cluster is not None and self.threads and not self.cluster.synced:
            return None  # the informers' first lists are not in yet
        if since < self.timing.idle_seconds and not self._changed():
            return None
        return self.run_pass(now)

    def _changed(self) -> bool:
        if self._wake.is_set():  # an informer saw the cluster change
            self._wake.clear()
            return True
        nudge = cache.get(enqueue.NUDGE_KEY)
        if nudge != self._nudge:
            self._nudge = nudge
            return True
        return self.live.pending()

    def run_pass(self, now: dt.datetime) -> dict[str, Any]:
        """One deciding pass (see the module docstring); the caller holds the lease."""
        started, cpu = time.monotonic(), time.thread_time()
        self._last_pass = started
        view = nodes = pods = None
        if self.cluster is not None:
            if not self.threads:
                self.cluster.refresh()
            view = self.cluster.view()
            nodes, pods = self.cluster.nodes(), view.pods
        self.live.refresh()
        rows = self.live.active()
        observed = observation.observe_jobs(now, cluster=view,
                                            held=observation.held_of(rows))
        policy = submitcache.snapshot().policy
        observed.update(observation.record_problems(now, policy=policy, rows=rows,
                                                    pods=pods))
        observed.update(observation.enforce_pod_start(now, policy=policy, rows=rows))
        self.live.refresh()  # what observing moved
        if self.live.needs_verify or started - self._verified >= self.timing.verify_seconds:
            self._verify()
        state = BaseBackend.pass_state()
        seen = state.last_cycle_at
        inputs = selectors.admission_inputs(now, rows=self.live.active(), nodes=nodes,
                                            pods=pods)
        decisions, waiting_for_pool = selectors.decide_with_pools_absent(
            inputs, incremental=settings.TRAINYARD_INCREMENTAL_ADMISSION, explain=False)
        written: list[int] = []
        with transaction.atomic():
            if not BaseBackend.take_pass(seen, now):
                self.figures.skipped += 1
                return {"skipped": "another cycle applied first", **observed}
            result = apply_decisions(decisions, waiting_for_pool, now, explained=False,
                                     sync=written.extend)
            BaseBackend.record_pass(started, {**result, **observed, "service": self.identity})
            AdmissionState.objects.filter(pk=1, leader=self.identity).update(
                lease_until=now + dt.timedelta(seconds=self.timing.lease_seconds))
        self._lease_renewed = time.monotonic()
        if written:
            self._write(written)
        self._latest = {"inputs": inputs, "skip": waiting_for_pool, "now": now}
        self._maybe_explain(now, state)
        self.figures.passes += 1
        self.figures.pass_ms.append((time.monotonic() - started) * 1000)
        self.figures.pass_cpu_ms.append((time.thread_time() - cpu) * 1000)
        return {**result, **observed}

    def _verify(self) -> None:
        self._verified = time.monotonic()
        differences = self.live.verify()
        if self.threads:
            # What the process holds now (the queue, the informers' rows) out of the
            # collector's sight: a full collection would otherwise rescan it all, often
            # (k8s_sync.observe.freeze_heap; reference counting still frees it).
            freeze_heap()
        if differences:
            AdmissionState.objects.filter(pk=1).update(drift=F("drift") + differences)

    # -- cluster writes --------------------------------------------------------------------

    def _write(self, job_ids: list[int]) -> None:
        """Converge the pass's jobs in the writer thread (inline without threads)."""
        self.figures.writes += len(job_ids)
        if not self.threads or connection.in_atomic_block:
            converge.sync_many(job_ids, ordered=True)
            return
        self._writer.submit(self._write_batch, list(job_ids))

    @staticmethod
    def _write_batch(job_ids: list[int]) -> None:
        try:
            converge.sync_many(job_ids, ordered=True)  # one writer: batches in order
        except Exception:  # the watchdog and the next pass's syncs converge them later
            log.exception("admission service: cluster writes of %d jobs failed", len(job_ids))
        finally:
            connection.close()

    # -- explanations ----------------------------------------------------------------------

    def _maybe_explain(self, now: dt.datetime, state: AdmissionState) -> None:
        if self._explaining is not None and self._explaining.is_alive():
            return  # the last one is still at work: it limits its own cadence
        if not explain_due(now, state.explained_at, state.explain_ms,
                           settings.TRAINYARD_EXPLAIN_SECONDS):
            return
        latest = self._latest
        if latest is None:
            return
        if not self.threads:
            self.explain(latest)
            return
        self._explaining = threading.Thread(target=self._explain_thread, args=(latest,),
                                            name="admission-explain", daemon=True)
        self._explaining.start()

    def _explain_thread(self, latest: dict[str, Any]) -> None:
        try:
            self.explain(latest)
        except Exception:
            log.exception("admission service: explaining the queue failed")
        finally:
            connection.close()

    def explain(self, latest: dict[str, Any]) -> None:
        """Positions, ETAs and reasons of every waiting job, and the waste figure, from a
        pass's inputs (the full engine, not the loop's incremental one: it keeps state)."""
        started = time.monotonic()
        inputs, now = latest["inputs"], latest["now"]
        decisions, skip = selectors.decide_with_pools_absent(inputs, incremental=False,
                                                             explain=True)
        with transaction.atomic():
            transitions.record_waiting(decisions.waiting, now)
            previous = AdmissionState.objects.values_list("explained_at", flat=True).first()
            idle_waiting.record_pass(
                nodes=inputs["nodes"], jobs=inputs["jobs"], decisions=decisions, skip=skip,
                now=now, previous=previous,
                default_seconds=settings.TRAINYARD_EXPLAIN_SECONDS)
            elapsed = (time.monotonic() - started) * 1000
            AdmissionState.objects.filter(pk=1).update(explained_at=now, explain_ms=elapsed)
        self.figures.explained += 1
        self.figures.explain_ms.append(elapsed)
