"""The cluster health check: live (version, training operator CRD), bounded, cached."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from k8s_sync.client import get_client
from k8s_sync.health import TRAINING_CRD, cluster_health
from k8s_sync.observe import relist_all

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_cache():
    cache.clear()
    yield
    cache.clear()


def test_a_reachable_cluster_reports_version_operator_and_observations(cluster):
    relist_all(get_client())
    health = cluster_health()
    expected = get_client().server_version()["gitVersion"]
    assert health.reachable and health.error == "" and health.ok
    assert health.version == expected and health.version.startswith("v1.")
    assert health.training_operator is True
    assert health.counts["nodes"] == 6 and health.counts["storageclasses"] == 2
    kinds = {k.kind: k for k in health.kinds}
    assert set(kinds) == {"nodes", "pods", "quotas", "pvcs", "storageclasses", "events",
                          "pytorchjobs", "trainjobs", "kueueworkloads"}
    assert kinds["nodes"].last_list_at is not None and not kinds["nodes"].failing


def test_a_missing_training_operator_is_reported(cluster):
    get_client().ensure_absent("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                               TRAINING_CRD)
    health = cluster_health()
    assert health.reachable and health.training_operator is False and not health.ok


def test_an_unreachable_api_says_why(cluster):
    cluster.faults.add(method="GET", path_regex=r"^/version", status=503)
    health = cluster_health()
    assert not health.reachable and "503" in health.error
    assert health.training_operator is None and health.version == ""
    kinds = {k.kind: k for k in health.kinds}
    assert kinds["nodes"].last_list_at is None  # never observed: shown as such


def test_a_bad_configuration_is_an_error_not_a_crash(settings):
    settings.TRAINYARD_CLUSTER = {"mode": "url", "url": "not a url"}
    health = cluster_health()
    assert not health.reachable and "needs an http(s) url" in health.error


def test_the_live_check_is_cached_so_a_reload_storm_costs_one_call(cluster):
    probe = cluster.faults.add(method="GET", path_regex=r"^/version", delay=0.001)
    for _ in range(5):
        assert cluster_health().reachable
    assert probe.hits == 1
    cluster_health(refresh=True)
    assert probe.hits == 2


def test_a_hanging_api_costs_at_most_the_live_timeout(cluster, settings):
    import time

    settings.TRAINYARD_CLUSTER = {**settings.TRAINYARD_CLUSTER, "request_timeout": 0.5}
    cluster.faults.add(method="GET", path_regex=r"^/version", timeout=True)
    started = time.monotonic()
    health = cluster_health()
    assert not health.reachable and time.monotonic() - started < 3


def test_observer_rows_count_what_is_recorded_now(cluster):
    from k8s_sync.models import ObservedStorageClass

    relist_all(get_client())
    ObservedStorageClass.objects.filter(name="shared-nfs").delete()
    kinds = {k.kind: k for k in cluster_health().kinds}
    assert kinds["storageclasses"].objects == 1 and kinds["nodes"].objects == 6
