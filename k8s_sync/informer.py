"""Informers: one kind's objects in memory, kept by a list and a watch, as client-go's
informers keep them for a controller.

The watcher (``manage.py k8s_watch``, :mod:`k8s_sync.observe`) records what the cluster
reports in the database for every page; a process that decides on every change (the
admission service, ``jobs.service``) keeps its own copy instead of reading those tables on
every pass: an :class:`Informer` per kind lists once, then follows a watch from the list's
``resourceVersion``, and relists on a 410 or an error (with backoff). Each object is kept
as an unsaved row of the kind's table (the columns of ``KindSpec.parse``, without ``raw``),
so the code that reads rows (``k8s_sync.selectors.node_capacity``,
``WorkloadStatus``...) reads these the same way.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from k8s_sync.client import K8sError, KubeClient
from k8s_sync.observe import Backoff
from k8s_sync.observe_kinds import KindSpec, _time
from k8s_sync.observe_record import _key

log = logging.getLogger(__name__)

ABSENT_RETRY_SECONDS = 60.0
"""How often an informer of a kind the cluster does not serve lists again."""


def row_of(spec: KindSpec, obj: Mapping[str, Any]) -> Any:
    """The unsaved row of ``spec``'s table an object would be recorded as (no ``raw``)."""
    meta = obj.get("metadata") or {}
    return spec.model(
        namespace=meta.get("namespace") or "", name=meta.get("name", ""),
        uid=meta.get("uid", ""), resource_version=str(meta.get("resourceVersion", "")),
        labels=dict(meta.get("labels") or {}), created_at=_time(meta.get("creationTimestamp")),
        **spec.scope(), **spec.parse(obj))


class Informer:
    """One kind in memory (see the module docstring). ``rows``: (namespace, name) -> row.
    :meth:`relist` lists now (the tests drive it directly); :meth:`run` lists and
    watches until :meth:`stop`."""

    def __init__(self, client: KubeClient, spec: KindSpec, *, watch_timeout: int = 300,
                 on_change: Callable[[], None] | None = None) -> None:
        self.client = client
        self.spec = spec
        self.watch_timeout = watch_timeout
        self.on_change = on_change
        self.rows: dict[tuple[str, str], Any] = {}
        self.synced = threading.Event()
        self.stopped = threading.Event()
        self.backoff = Backoff(base=0.5, cap=30.0)
        self._lock = threading.Lock()
        self._stream: Any = None

    def snapshot(self) -> list[Any]:
        """The rows now (a copy: the watch goes on changing the mapping)."""
        with self._lock:
            return list(self.rows.values())

    def by_key(self) -> dict[tuple[str, str], Any]:
        """The rows now by (namespace, name) (a copy)."""
        with self._lock:
            return dict(self.rows)

    def relist(self) -> str:
        items, version = self.client.list_with_resource_version(
            self.spec.api_version, self.spec.kind,
            label_selector=self.spec.label_selector or None)
        rows = {_key(obj): row_of(self.spec, obj) for obj in items if self.spec.keep(obj)}
        with self._lock:
            self.rows = rows
        self.synced.set()
        self._changed()
        return version

    def absent(self) -> None:
        """The cluster does not serve the kind (its CRD is not installed): no objects."""
        with self._lock:
            self.rows = {}
        self.synced.set()

    def list_once(self) -> str:
        """:meth:`relist`, a kind the cluster does not serve (404) being empty: the list's
        version ("" for such a kind)."""
        try:
            return self.relist()
        except K8sError as exc:
            if exc.status != 404:
                raise
            self.absent()
            return ""

    def take(self, event_type: str, obj: Mapping[str, Any]) -> bool:
        """One watch event; True when it changed the rows."""
        if event_type not in ("ADDED", "MODIFIED", "DELETED") or not self.spec.keep(obj):
            return False
        key = _key(obj)
        with self._lock:
            if event_type == "DELETED":
                row = self.rows.get(key)
                if row is None or row.uid != (obj.get("metadata") or {}).get("uid", row.uid):
                    return False
                del self.rows[key]
            else:
                self.rows[key] = row_of(self.spec, obj)
        return True

    def run(self) -> None:
        """List, then watch from the list's version; relist after an error, at once only
        for the first 410 in a row (the version expired), as the watcher's Reflector."""
        version, failures = "", 0
        while not self.stopped.is_set():
            try:
                if not version:
                    version = self.list_once()
                    if not version:  # a kind the cluster does not serve: look again later
                        self.stopped.wait(ABSENT_RETRY_SECONDS)
                        continue
                version = self._watch(version)
                failures = 0
                self.backoff.reset()
            except Exception as exc:  # never die: the decisions would go stale silently
                version, failures = "", failures + 1
                log.warning("informer %s: %s; relisting", self.spec.name, exc)
                if not (isinstance(exc, K8sError) and exc.status == 410 and failures == 1):
                    self.stopped.wait(self.backoff.next())

    def _watch(self, version: str) -> str:
        stream = self._stream = self.client.watch(
            self.spec.api_version, self.spec.kind, resource_version=version,
            label_selector=self.spec.label_selector or None,
            timeout_seconds=self.watch_timeout)
        try:
            for event_type, obj in stream:
                found = (obj.get("metadata") or {}).get("resourceVersion")
                if found:
                    version = str(found)
                if self.take(event_type, obj):
                    self._changed()
                if self.stopped.is_set():
                    break
        finally:
            stream.close()
            self._stream = None
        return version

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def stop(self) -> None:
        self.stopped.set()
        stream = self._stream
        if stream is not None:
            stream.close()
