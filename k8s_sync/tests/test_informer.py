"""Informers (k8s_sync.informer) against kubesim over HTTP: a list, then a watch that
keeps the rows as the cluster changes them; a kind the cluster does not serve is empty."""

from __future__ import annotations

import threading
import time

import pytest

from k8s_sync.client import get_client
from k8s_sync.informer import Informer, row_of
from k8s_sync.models import ObservedPod
from k8s_sync.observe import KINDS, relist_all
from k8s_sync.tests.observe_helpers import NS, namespace, pod

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(60)]


def _until(check, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return False


def test_an_informer_follows_the_cluster_and_wakes_its_reader(cluster):
    client = get_client()
    namespace(client)
    client.create_if_absent(pod("before", gpus=1))
    woken = threading.Event()
    informer = Informer(client, KINDS["pods"], watch_timeout=5, on_change=woken.set)
    runner = threading.Thread(target=informer.run, daemon=True)
    runner.start()
    try:
        assert informer.synced.wait(10)
        assert (NS, "before") in informer.rows
        woken.clear()
        client.create_if_absent(pod("after", gpus=2))
        assert _until(lambda: (NS, "after") in informer.rows) and woken.is_set()
        # the same row the watcher records, but for its raw object
        relist_all(client, ["pods"])
        recorded = ObservedPod.objects.get(namespace=NS, name="after")
        kept = informer.rows[(NS, "after")]
        for name in ("uid", "requests", "phase", "node_name", "job", "labels"):
            assert getattr(kept, name) == getattr(recorded, name), name
        client.ensure_absent("v1", "Pod", "before", NS)
        assert _until(lambda: (NS, "before") not in informer.rows)
        assert {row.name for row in informer.snapshot()} >= {"after"}
    finally:
        informer.stop()
        runner.join(10)
    assert not runner.is_alive()


def test_a_kind_the_cluster_does_not_serve_is_empty_and_synced(cluster):
    from k8s_sync.observe import KindSpec

    spec = KindSpec("widgets", "example.org/v1", "Widget", ObservedPod, KINDS["pods"].parse)
    informer = Informer(get_client(), spec, watch_timeout=5)
    runner = threading.Thread(target=informer.run, daemon=True)
    runner.start()
    try:
        assert informer.synced.wait(10) and informer.rows == {}
    finally:
        informer.stop()
        runner.join(10)


def test_a_deleted_event_of_an_older_object_leaves_the_newer_one(cluster):
    client = get_client()
    namespace(client)
    informer = Informer(client, KINDS["pods"])
    created = client.create_if_absent(pod("same", gpus=1))[0]
    informer.relist()
    stale = {**created, "metadata": {**created["metadata"], "uid": "an-older-uid"}}
    assert not informer.take("DELETED", stale)
    assert (NS, "same") in informer.rows
    assert informer.take("DELETED", created) and (NS, "same") not in informer.rows
    assert row_of(KINDS["pods"], created).name == "same"
