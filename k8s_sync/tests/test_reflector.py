"""The watch loop: list, watch, record; 410 relists at once; errors back off, then relist.

Against kubesim over HTTP with injected faults; backoff sleeps are injected (recorded,
not slept) so the tests are fast. The loop runs in the test thread (it owns the test's
database connection); a helper thread only talks to kubesim.
"""

from __future__ import annotations

import threading
import time

import pytest

from k8s_sync.client import K8sTransientError, get_client
from k8s_sync.models import ObservedKind, ObservedPod
from k8s_sync.observe import KINDS, Backoff, Reflector, TooManyFailures
from k8s_sync.tests.observe_helpers import NS, namespace, pod
from kubesim.testing import reset

pytestmark = pytest.mark.django_db
WATCH = r"/api/v1/pods\?.*watch=true"
LIST = r"/api/v1/pods\?(?!.*watch=true)"


@pytest.fixture
def client(cluster):
    client = get_client()
    namespace(client)
    return client


def reflector(client, sleeps: list[float], **kwargs) -> Reflector:
    r = Reflector(client, KINDS["pods"], backoff=Backoff(base=0.01, cap=0.04, jitter=False),
                  watch_timeout=1, sleep=sleeps.append, activity_interval=0, **kwargs)
    watchdog = threading.Timer(15, r.stop)  # never hang the suite
    watchdog.daemon = True
    watchdog.start()
    return r


def create_later(client, name: str, delay: float = 0.3) -> None:
    threading.Timer(delay, lambda: client.apply(pod(name))).start()


def recorded(name: str):
    return lambda: ObservedPod.objects.filter(namespace=NS, name=name).exists()


def test_the_watch_records_a_new_pod_without_relisting(client):
    sleeps: list[float] = []
    r = reflector(client, sleeps)
    create_later(client, "w1")
    r.run(until=recorded("w1"))
    assert recorded("w1")() and r.lists == 1 and sleeps == []
    kind = ObservedKind.objects.get(kind="pods")
    assert kind.last_event_at and kind.last_list_at and kind.last_error == ""
    assert kind.resource_version


def test_410_gone_relists_at_once_and_watching_resumes(client, cluster):
    cluster.faults.add(method="GET", path_regex=WATCH, status=410, times=1,
                       message="too old resource version")
    sleeps: list[float] = []
    r = reflector(client, sleeps)
    create_later(client, "after-410")
    r.run(until=recorded("after-410"))
    assert recorded("after-410")()
    assert r.lists == 2 and sleeps == []  # relisted without waiting
    assert "410" in ObservedKind.objects.get(kind="pods").last_error


def test_server_errors_back_off_exponentially_then_relist(client, cluster):
    cluster.faults.add(method="GET", path_regex=WATCH, status=500, times=2)
    cluster.faults.add(method="GET", path_regex=LIST, status=503, times=1)
    sleeps: list[float] = []
    r = reflector(client, sleeps)
    create_later(client, "after-500", delay=0.5)
    r.run(until=recorded("after-500"))
    assert recorded("after-500")()
    # list 503 -> wait; list ok, watch 500 -> wait; list ok, watch 500 -> wait (capped)
    assert sleeps == [0.01, 0.02, 0.04]
    assert r.lists == 3


def test_it_gives_up_after_max_failures_for_a_supervisor_to_restart_it(client, cluster):
    cluster.faults.add(method="GET", path_regex=LIST, status=500)
    sleeps: list[float] = []
    r = reflector(client, sleeps, max_failures=3)
    with pytest.raises(TooManyFailures):
        r.run()
    assert len(sleeps) == 2
    assert "500" in ObservedKind.objects.get(kind="pods").last_error


def test_stop_ends_a_long_watch_promptly(client):
    sleeps: list[float] = []
    r = reflector(client, sleeps)
    r.watch_timeout = 60
    threading.Timer(0.5, r.stop).start()
    started = time.monotonic()
    r.run()
    assert time.monotonic() - started < 5


def test_a_too_old_resource_version_in_the_stream_is_a_transient_410(kubesim, client):
    reset(kubesim.cluster)  # clears kubesim's watch history
    with pytest.raises(K8sTransientError) as info:
        list(client.watch("v1", "Pod", resource_version="1", timeout_seconds=2))
    assert info.value.status == 410


def test_a_watch_streams_events_and_bookmarks_from_a_list_version(client):
    _, version = client.list_with_resource_version("v1", "Pod")
    create_later(client, "streamed", delay=0.1)
    stream = client.watch("v1", "Pod", NS, resource_version=version, timeout_seconds=1)
    events = [(t, o["metadata"].get("name"), o["kind"]) for t, o in stream]
    assert ("ADDED", "streamed", "Pod") in events


def test_close_from_another_thread_ends_the_iteration_quietly(client):
    stream = client.watch("v1", "Pod", timeout_seconds=30)
    threading.Timer(0.3, stream.close).start()
    started = time.monotonic()
    assert list(stream) == []
    assert time.monotonic() - started < 5


def test_it_relists_every_relist_interval_even_without_errors(client):
    sleeps: list[float] = []
    r = reflector(client, sleeps, relist_interval=0.5)
    r.run(until=lambda: r.lists >= 2)
    assert r.lists == 2 and sleeps == []


def test_an_expired_version_in_the_stream_relists_at_once(kubesim, client):
    sleeps: list[float] = []
    r = reflector(client, sleeps)
    # kubesim forgets its watch history: the next watch from the old version gets 410
    threading.Timer(0.3, lambda: reset(kubesim.cluster)).start()
    threading.Timer(1.8, lambda: client.apply(pod("fresh", namespace="default"))).start()
    r.run(until=lambda: ObservedPod.objects.filter(namespace="default", name="fresh").exists())
    assert r.lists >= 2 and sleeps == []
    assert "410" in ObservedKind.objects.get(kind="pods").last_error
    assert not ObservedPod.objects.filter(namespace=NS).exists()  # the relist pruned them


def test_a_batch_of_events_ends_as_applying_them_one_by_one(client):
    from k8s_sync.observe import record_events

    namespace(client)
    a = client.apply(pod("a"))
    b = client.apply(pod("b"))
    b2 = client.patch("v1", "Pod", "b", {"metadata": {"labels": {"v": "2"}}}, NS)
    spec = KINDS["pods"]
    changed = record_events(spec, [("ADDED", a), ("ADDED", b), ("MODIFIED", b2),
                                   ("DELETED", a), ("BOOKMARK", {"metadata": {}})])
    assert changed == [f"{NS}/b"]  # a came and went within the batch
    assert ObservedPod.objects.get(name="b").labels == {"v": "2"}
    # a late DELETED of an older object never removes the newer row of the same name
    old = {**b, "metadata": {**b["metadata"], "uid": "some-older-uid"}}
    assert record_events(spec, [("DELETED", old)]) == []
    assert ObservedPod.objects.filter(name="b").exists()


def test_the_watch_follows_a_pod_to_running_on_a_node(client, cluster):
    client.apply(pod("runner", gpus=1))
    sleeps: list[float] = []
    r = reflector(client, sleeps)
    threading.Timer(0.3, lambda: cluster.advance(10)).start()
    r.run(until=lambda: ObservedPod.objects.filter(name="runner", phase="Running").exists())
    row = ObservedPod.objects.get(name="runner")
    assert row.phase == "Running" and row.node_name and r.lists == 1
