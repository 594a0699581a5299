"""Is the cluster there? A cheap, time-bounded, cached live check plus the observers' state.

:func:`cluster_health` calls the API server at most once per ``CACHE_SECONDS`` (a reload
storm of the health page costs nothing): ``GET /version`` and one read of the Kubeflow
training operator's CRD, each bounded by ``LIVE_TIMEOUT`` seconds (or the configured
request timeout when shorter). What the watcher observed comes from the database.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.cache import cache
from django.utils import timezone

from k8s_sync.client import K8sError, from_django_settings, get_client
from k8s_sync.selectors import KindStatus, observed_counts, observer_status

__all__ = ["CACHE_KEY", "CACHE_SECONDS", "TRAINING_CRD", "ClusterHealth", "cluster_health"]

CACHE_KEY = "k8s_sync:cluster-health"
CACHE_SECONDS = 15
LIVE_TIMEOUT = 3.0
TRAINING_CRD = "pytorchjobs.kubeflow.org"


@dataclass(frozen=True)
class ClusterHealth:
    """The live check (cached) and the observers' bookkeeping (fresh)."""

    reachable: bool
    error: str  # why not reachable (empty when reachable)
    version: str  # gitVersion
    training_operator: bool | None  # the CRD is installed; None when unknown
    checked_at: datetime
    kinds: list[KindStatus]
    counts: dict[str, int]

    @property
    def ok(self) -> bool:
        return self.reachable and bool(self.training_operator)


def _live_check() -> dict[str, Any]:
    now = timezone.now()
    try:
        config = from_django_settings()
        config = dataclasses.replace(config,
                                     request_timeout=min(config.request_timeout, LIVE_TIMEOUT))
        client = get_client(config)
        version = client.server_version()
    except (K8sError, ValueError) as exc:
        return {"reachable": False, "error": str(exc), "version": "",
                "training_operator": None, "checked_at": now}
    try:
        crd = client.read("apiextensions.k8s.io/v1", "CustomResourceDefinition", TRAINING_CRD)
        operator: bool | None = crd is not None
        error = ""
    except K8sError as exc:
        operator, error = None, f"{TRAINING_CRD}: {exc}"
    return {"reachable": True, "error": error, "version": str(version.get("gitVersion", "")),
            "training_operator": operator, "checked_at": now}


def cluster_health(*, refresh: bool = False) -> ClusterHealth:
    """Reachability, version and the training operator's CRD (cached ``CACHE_SECONDS``),
    with when each kind was last observed and how many objects are recorded."""
    live = None if refresh else cache.get(CACHE_KEY)
    if live is None:
        live = _live_check()
        cache.set(CACHE_KEY, live, CACHE_SECONDS)
    counts = observed_counts()
    return ClusterHealth(**live, kinds=observer_status(counts), counts=counts)
