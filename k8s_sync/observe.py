"""Observe the cluster into k8s_sync's tables: the reflector loop.

* :class:`Reflector` is the watch loop for one kind (the client-go reflector design):
  list, then watch from the list's ``resourceVersion``; a watch that ends normally is
  reopened from the last version seen; on 410 Gone relist at once; on any other error
  back off exponentially (capped) and relist; relist every ``relist_interval`` anyway.
  It keeps its kind's :class:`~k8s_sync.observe_record.RowIndex` (loaded by each relist,
  kept by its own writes, dropped after a failure), so recording a batch of events
  reads nothing first.
* :func:`relist_all` relists every kind once (``k8s_watch --once`` and the periodic
  ``k8s_sync.relist`` task, the level-triggered safety net).

What is observed and how an object becomes columns is :mod:`k8s_sync.observe_kinds`;
writing the rows is :mod:`k8s_sync.observe_record`. This module re-exports their public
names (``from k8s_sync.observe import KINDS, record_event, parse_pod, ...`` keeps
working). Nothing here decides anything: rows are what the API server said.
"""

from __future__ import annotations

import gc
import logging
import queue
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError, close_old_connections

from k8s_sync.client import K8sError, KubeClient, WatchStream
from k8s_sync.observe_kinds import (
    EVENT_REASONS,
    EVENT_RETENTION,
    KINDS,
    POOL_EVENT_KINDS,
    KindSpec,
    gpu_model_of,
    parse_event,
    parse_node,
    parse_pod,
    parse_pvc,
    parse_pytorchjob,
    parse_quota,
    parse_storage_class,
    parse_trainjob,
    pod_requests,
    pod_run_times,
)
from k8s_sync.observe_record import (
    RowIndex,
    record_activity,
    record_error,
    record_event,
    record_events,
    record_relist,
)

log = logging.getLogger(__name__)

__all__ = [
    "EVENT_REASONS", "EVENT_RETENTION", "KINDS", "POOL_EVENT_KINDS", "Backoff", "KindSpec",
    "Reflector", "RowIndex", "TooManyFailures", "freeze_heap", "gpu_model_of", "parse_event",
    "parse_node", "parse_pod", "parse_pvc", "parse_pytorchjob", "parse_quota",
    "parse_storage_class", "parse_trainjob", "pod_requests", "pod_run_times",
    "record_activity", "record_error", "record_event", "record_events", "record_relist",
    "relist_all",
]

# --- the loop ---------------------------------------------------------------------------


def freeze_heap() -> None:
    """Take every object alive now (Django, the modules, the settings) out of the garbage
    collector's sight, once, before a watcher's threads start (``k8s_watch``).

    A watcher allocates a dict per JSON object of every event, fast; each full collection
    then rescans the whole heap, which cost a watcher more CPU than the decoding itself
    (a quarter of an event's CPU in bench/observe_scale.py). Objects frozen are still
    freed by reference counting; only cycles among them would stay (there are none to
    speak of in what a process holds at start)."""
    gc.collect()
    gc.freeze()


class TooManyFailures(Exception):
    """The reflector failed ``max_failures`` times in a row (a supervisor restarts us)."""


@dataclass
class Backoff:
    """Exponential backoff with jitter: ``base``, 2x ``base`` ... capped at ``cap`` seconds."""

    base: float = 1.0
    cap: float = 60.0
    jitter: bool = True
    failures: int = 0

    def next(self) -> float:
        delay = min(self.cap, self.base * 2 ** self.failures)
        self.failures += 1
        return delay * random.uniform(0.5, 1.0) if self.jitter else delay

    def reset(self) -> None:
        self.failures = 0


@dataclass
class Reflector:
    """List-then-watch loop for one kind; :meth:`run` until :meth:`stop` (any thread).

    ``sleep(seconds)`` waits between retries (default: an interruptible wait on the stop
    event; tests inject a fast one). ``manage_connections`` makes each cycle drop stale
    database connections (long-running threads; not inside a test transaction).
    """

    client: KubeClient
    spec: KindSpec
    backoff: Backoff = field(default_factory=Backoff)
    watch_timeout: int = 300
    relist_interval: float = 600.0
    max_failures: int | None = None
    sleep: Callable[[float], Any] | None = None
    manage_connections: bool = False
    activity_interval: float = 5.0
    clock: Callable[[], float] = time.monotonic
    stopped: threading.Event = field(default_factory=threading.Event)
    batch_size: int = 500  # events recorded in one transaction, at most
    page_size: int = 500  # objects per page of a relist (every page from one snapshot)
    lists: int = 0
    events: int = 0
    batches: int = 0
    failures: int = 0  # in a row
    index: RowIndex = field(default_factory=RowIndex, repr=False)  # of its kind's rows
    _stream: WatchStream | None = field(default=None, repr=False)

    def stop(self) -> None:
        self.stopped.set()
        stream = self._stream
        if stream is not None:
            stream.close()

    def relist(self) -> str:
        items, version = self.client.list_with_resource_version(
            self.spec.api_version, self.spec.kind,
            label_selector=self.spec.label_selector or None, page_size=self.page_size)
        record_relist(self.spec, items, version, index=self.index)
        self.lists += 1
        return version

    def run(self, until: Callable[[], bool] | None = None) -> None:
        """Observe until stopped (or ``until()`` is true, checked after each event)."""
        version, listed_at = "", None
        while not self.stopped.is_set() and not (until and until()):
            if self.manage_connections:
                close_old_connections()
            try:
                if not version or listed_at is None or (
                        self.clock() - listed_at >= self.relist_interval):
                    version, listed_at = self.relist(), self.clock()
                version = self._watch(version, until)
                self.failures = 0  # a watch that ran to its end: healthy again
                self.backoff.reset()
            except (K8sError, DatabaseError) as exc:
                # DatabaseError: a locked SQLite file or a restarting Postgres; like an
                # API error, wait and relist rather than kill the watcher.
                self._failed(exc)
                version = ""  # relist next
                self.index.reset()  # a write may have failed: the relist reloads it
                self.failures += 1
                if self.max_failures and self.failures >= self.max_failures:
                    raise TooManyFailures(f"{self.spec.name}: {exc}") from exc
                if getattr(exc, "status", None) == 410 and self.failures == 1:
                    continue  # the version expired: relist at once, the server is fine
                (self.sleep or self.stopped.wait)(self.backoff.next())

    def _failed(self, exc: Exception) -> None:
        log.warning("observing %s failed (%s); relisting", self.spec.name, exc)
        try:
            record_error(self.spec.name, exc)
        except DatabaseError:
            log.exception("cannot record the failure of %s", self.spec.name)

    def _watch(self, version: str, until: Callable[[], bool] | None) -> str:
        """Follow one watch stream. A reader thread queues events as they arrive, so
        whatever arrived while a batch was being written is recorded together."""
        stream = self._stream = self.client.watch(self.spec.api_version, self.spec.kind,
                                                  resource_version=version,
                                                  label_selector=self.spec.label_selector
                                                  or None,
                                                  timeout_seconds=self.watch_timeout)
        pump = _Pump(stream, maxsize=self.batch_size * 4)
        touched = float("-inf")  # the first batch is always noted, later ones throttled
        try:
            if self.stopped.is_set():
                return version
            pump.start()
            while True:
                batch, end = pump.take(self.batch_size)
                if batch:
                    version = self._record(batch, version)
                    if self.clock() - touched >= self.activity_interval:
                        record_activity(self.spec.name, version)
                        touched = self.clock()
                if isinstance(end, BaseException):
                    raise end
                if end is _END or self.stopped.is_set() or (until and until()):
                    break
        finally:
            pump.done.set()
            stream.close()
            self._stream = None
        return version

    def _record(self, batch: list[tuple[str, dict[str, Any]]], version: str) -> str:
        record_events(self.spec, batch, index=self.index)
        self.events += len(batch)
        self.batches += 1
        for _, obj in reversed(batch):
            found = (obj.get("metadata") or {}).get("resourceVersion")
            if found:
                return str(found)
        return version


_END = object()


class _Pump(threading.Thread):
    """Reads a watch stream into a bounded queue (never touches the database)."""

    def __init__(self, stream: Iterable[tuple[str, dict[str, Any]]], maxsize: int):
        super().__init__(name="k8s-watch-reader", daemon=True)
        self.stream = stream
        self.queue: queue.Queue[Any] = queue.Queue(maxsize)
        self.done = threading.Event()

    def run(self) -> None:
        try:
            for event in self.stream:
                if not self._put(event):
                    return
            self._put(_END)
        except Exception as exc:  # handed to the consumer, which raises it
            self._put(exc)

    def _put(self, item: Any) -> bool:
        while not self.done.is_set():
            try:
                self.queue.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def take(self, limit: int) -> tuple[list[tuple[str, dict[str, Any]]], Any]:
        """Block for one item, then take what is queued; returns (events, end marker or
        exception or None)."""
        batch: list[tuple[str, dict[str, Any]]] = []
        item = self.queue.get()
        while True:
            if item is _END or isinstance(item, BaseException):
                return batch, item
            batch.append(item)
            if len(batch) >= limit:
                return batch, None
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                return batch, None


def relist_all(client: KubeClient, kinds: Iterable[str] | None = None) -> dict[str, Any]:
    """Relist every kind once; returns ``{kind: row count or "error: ..."}``.

    One kind failing does not stop the others; its error is recorded.
    """
    result: dict[str, Any] = {}
    for name in kinds or KINDS:
        spec = KINDS[name]
        try:
            items, version = client.list_with_resource_version(
                spec.api_version, spec.kind, label_selector=spec.label_selector or None)
            record_relist(spec, items, version)
            result[name] = spec.rows().count()
        except (K8sError, DatabaseError) as exc:
            # DatabaseError: e.g. the watcher inserted the same new row first; the next
            # run (or the watcher) converges.
            record_error(name, exc)
            result[name] = f"error: {exc}"
    return result
