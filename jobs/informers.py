"""The cluster as the admission service keeps it: informers of nodes, pods and the jobs'
workloads (``k8s_sync.informer``), and the views a pass reads from them.

A pass of the admission service reads what holds quota and the nodes' use from these
rather than from the watcher's tables: what the cluster reports reaches the next pass
directly (an event wakes the service), and a pass reads no row of them. The watcher goes
on recording the same objects for the pages. With ``threads=False`` (the tests) nothing
watches: :meth:`ClusterCache.refresh` lists every kind, so a pass sees the cluster as it
is at that moment.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from jobs.observation import ClusterView
from k8s_sync.client import KubeClient
from k8s_sync.informer import Informer
from k8s_sync.observe import KINDS
from k8s_sync.selectors import WorkloadStatus, status_of
from k8s_sync.specs import WORKLOAD_KINDS

log = logging.getLogger(__name__)

WORKLOADS = {job_kind: next(name for name, spec in KINDS.items()
                            if (spec.api_version, spec.kind) == types)
             for job_kind, types in WORKLOAD_KINDS.items()}
"""A job's kind -> the observed kind (``KINDS``) of its workloads."""


class _Statuses(Mapping[tuple[str, str], WorkloadStatus]):
    """One kind's workloads' statuses by (namespace, name), built for the keys asked
    (an informer holds every workload that was ever created and not deleted)."""

    def __init__(self, rows: Mapping[tuple[str, str], Any]) -> None:
        self._rows = rows

    def __getitem__(self, key: tuple[str, str]) -> WorkloadStatus:
        return status_of(self._rows[key])

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)


class ClusterCache:
    """Informers of the kinds a pass reads (see the module docstring)."""

    KINDS = ("nodes", "pods", *WORKLOADS.values())
    """The observed kinds (``k8s_sync.observe.KINDS``) it keeps."""

    def __init__(self, client: KubeClient, *, on_change: Callable[[], None] | None = None
                 ) -> None:
        self.informers = {name: Informer(client, KINDS[name], on_change=on_change)
                          for name in self.KINDS}
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for informer in self.informers.values():
            thread = threading.Thread(target=informer.run, name=f"informer-{informer.spec.name}",
                                      daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        for informer in self.informers.values():
            informer.stop()
        for thread in self._threads:
            thread.join(5)

    def refresh(self) -> None:
        """List every kind now (no watch: the tests); a kind the cluster does not serve
        (TrainJobs without their CRD) is empty."""
        for informer in self.informers.values():
            informer.list_once()

    @property
    def synced(self) -> bool:
        return all(i.synced.is_set() or i.stopped.is_set() for i in self.informers.values()
                   if i.spec.name in ("nodes", "pods", "pytorchjobs"))

    def nodes(self) -> list[Any]:
        return self.informers["nodes"].snapshot()

    def pods(self) -> list[Any]:
        return self.informers["pods"].snapshot()

    def view(self) -> ClusterView:
        """What ``jobs.observation.observe_jobs`` reads of the cluster."""
        workloads = {}
        for kind, name in WORKLOADS.items():
            workloads[kind] = _Statuses(self.informers[name].by_key())
        return ClusterView(workloads=workloads, pods=self.pods())

