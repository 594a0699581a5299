"""The reflector against a cluster whose watch history is bounded, as a real API server's.

kube-apiserver keeps a bounded event history per resource (the watch cache,
staging/src/k8s.io/apiserver/pkg/storage/cacher/watch_cache.go): a watch reopened from a
version older than it gets a 200 stream with one ERROR event, 410 Expired "too old resource
version" (cacher.go Watch, newErrWatcher). Pages of a list all show the first page's
snapshot (etcd3/store.go GetList reads at the continue token's revision), and a continue
token older than what is kept is 410 Expired (etcd3/errors.go). client-go's reflector
answers both by relisting (tools/cache/reflector.go); Trainyard's must too, and end with
exactly the server's objects: no row lost, none twice.

kubesim runs with ``watch_cache_size=5`` so a handful of writes expire a version. The
writes happen at chosen points of the reflector's own requests (a hook on Trainyard's
client, in the reflector's thread), so each test takes the path it names every time.
"""
from __future__ import annotations

import threading
from typing import Any

import pytest

from k8s_sync.client import get_client
from k8s_sync.models import ObservedKind, ObservedPod
from k8s_sync.observe import KINDS, Backoff, Reflector
from k8s_sync.tests.observe_helpers import NS, namespace, pod

pytestmark = [pytest.mark.django_db, pytest.mark.kubesim(simulate=False, watch_cache_size=5)]


@pytest.fixture
def client(cluster):
    client = get_client()
    namespace(client)
    return client


def reflector(client, sleeps: list[float], **kwargs: Any) -> Reflector:
    r = Reflector(client, KINDS["pods"], backoff=Backoff(base=0.01, cap=0.04, jitter=False),
                  watch_timeout=1, sleep=sleeps.append, activity_interval=0, **kwargs)
    watchdog = threading.Timer(20, r.stop)  # never hang the suite
    watchdog.daemon = True
    watchdog.start()
    return r


def server_pods(client) -> dict[str, str]:
    """name -> resourceVersion of the pods kubesim holds in NS."""
    return {p["metadata"]["name"]: p["metadata"]["resourceVersion"]
            for p in client.list_objects("v1", "Pod", NS)}


def rows() -> list[tuple[str, str]]:
    return sorted(ObservedPod.objects.filter(namespace=NS).values_list("name",
                                                                       "resource_version"))


def matches(client) -> bool:
    return rows() == sorted(server_pods(client).items())


def churn(client, tag: str, n: int) -> None:
    """n pod writes: one delete, one relabel, n - 2 creates."""
    client.ensure_absent("v1", "Pod", "p01", NS)
    client.apply({**pod("p02"), "metadata": {"name": "p02", "namespace": NS,
                                             "labels": {"moved": tag}}})
    for i in range(n - 2):
        client.apply(pod(f"{tag}{i}"))


def test_an_expired_watch_relists_and_ends_with_exactly_the_servers_pods(client):
    for i in range(4):
        client.apply(pod(f"p{i:02}"))
    opened = []
    watch = client.watch

    def watch_after_churn(*args: Any, **kwargs: Any):
        opened.append(kwargs.get("resource_version"))
        if len(opened) == 2:   # the first watch ran to its end; 8 writes before the next
            churn(client, "new", 8)
        return watch(*args, **kwargs)
    client.watch = watch_after_churn
    sleeps: list[float] = []
    r = reflector(client, sleeps)
    r.run(until=lambda: len(opened) >= 3 and matches(client))
    assert matches(client)
    names = [n for n, _ in rows()]
    assert len(names) == len(set(names)) and "p01" not in names and "new5" in names
    assert ObservedPod.objects.get(namespace=NS, name="p02").labels == {"moved": "new"}
    # the second watch got the history's 410 and the reflector relisted at once
    assert r.lists == 2 and sleeps == []
    assert "too old resource version" in ObservedKind.objects.get(kind="pods").last_error


def _hook_first_page(client, writes):
    """Run writes() once, right after the first page of the reflector's first relist (all
    namespaces; the test's own reads list one namespace)."""
    request = client._request
    done = []

    def hooked(method: str, path: str, **kwargs: Any):
        out = request(method, path, **kwargs)
        query = dict(kwargs.get("query") or ())
        if not done and method == "GET" and path == "/api/v1/pods" and query.get("limit") \
                and not query.get("continue") and not query.get("watch"):
            done.append(True)
            writes()
        return out
    client._request = hooked
    return done


def test_a_paginated_relist_is_one_snapshot_and_the_watch_brings_the_rest(client):
    for i in range(12):
        client.apply(pod(f"p{i:02}"))
    # between pages: p01 goes, p02 is relabelled, two pods are created (4 writes < 5 kept)
    hooked = _hook_first_page(client, lambda: churn(client, "p00x", 4))
    sleeps: list[float] = []
    r = reflector(client, sleeps, page_size=5)
    r.run(until=lambda: matches(client))
    # one relist (its later pages still served), then the watch from its version
    # delivered the 4 writes
    assert hooked and matches(client) and r.lists == 1 and sleeps == [] and r.events >= 4
    names = [n for n, _ in rows()]
    assert len(names) == len(set(names)) == 13 and "p01" not in names


def test_an_expired_continue_token_relists_from_scratch(client):
    for i in range(12):
        client.apply(pod(f"p{i:02}"))
    # 9 writes between the pages: the list's version leaves the 5-event history
    hooked = _hook_first_page(client, lambda: churn(client, "late", 9))
    sleeps: list[float] = []
    r = reflector(client, sleeps, page_size=5)
    r.run(until=lambda: matches(client))
    assert hooked and matches(client) and sleeps == [] and r.lists == 1
    names = [n for n, _ in rows()]
    assert len(names) == len(set(names)) == 11 + 7 and "late6" in names
    assert "continue parameter is too old" in ObservedKind.objects.get(kind="pods").last_error
