"""Watches as kube-apiserver's watch cache serves them.

Sources (kubernetes/kubernetes):
* staging/src/k8s.io/apiserver/pkg/storage/cacher/watch_cache.go: the bounded event
  history per resource (capacity 100 growing to 100*1024 while events are younger than
  75 s, resizeCacheLocked) and "too old resource version: X (Y)" for a resume from before
  it (getAllEventsSinceLocked), which cacher.go Watch sends as an ERROR event on a 200
  stream (newErrWatcher) with a 410 Expired Status.
* staging/src/k8s.io/apiserver/pkg/storage/cacher/cache_watcher.go convertToWatchEvent: an
  event is filtered on the object before and after it; leaving the selector is DELETED with
  the previous object at the event's resourceVersion. Bookmarks carry an empty object of
  the kind with only metadata.resourceVersion; the first one after sendInitialEvents is
  annotated k8s.io/initial-events-end: "true" (processInterval).
* docs: kubernetes.io/docs/reference/using-api/api-concepts/ ("Watch bookmarks",
  "Streaming lists", "Semantics for watch").
"""
from __future__ import annotations

import json

import pytest
from kubernetes import watch

from kubesim.watchcache import LOWER_BOUND, UPPER_BOUND, WatchCache

from .helpers import ROOT_CA, core, ns, request

pytestmark = pytest.mark.timeout(30)
CM = "/api/v1/namespaces/team-a/configmaps"


def _events(k, query: str) -> list[dict]:
    status, _, raw = request(k, "GET", f"{CM}?watch=true&{query}")
    assert status == 200
    return [json.loads(line) for line in raw.decode().splitlines() if line]


@pytest.mark.kubesim(simulate=False, bookmark_interval=0.2)
def test_bookmarks_carry_only_the_resource_version_and_come_periodically(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_config_map("team-a", {"metadata": {"name": "a"}})
    rv = c.list_namespaced_config_map("team-a").metadata.resource_version
    events = _events(kubesim, f"resourceVersion={rv}&allowWatchBookmarks=true"
                              "&timeoutSeconds=1")
    assert len(events) >= 2 and {e["type"] for e in events} == {"BOOKMARK"}
    for e in events:
        assert e["object"] == {"kind": "ConfigMap", "apiVersion": "v1",
                               "metadata": {"resourceVersion": rv}}
    # no bookmarks unless asked for
    assert _events(kubesim, f"resourceVersion={rv}&timeoutSeconds=1") == []


@pytest.mark.kubesim(simulate=False)
def test_send_initial_events_ends_with_the_annotated_bookmark(kubesim):
    c = core(kubesim)
    ns(kubesim)
    for name in ("a", "b"):
        c.create_namespaced_config_map("team-a", {"metadata": {"name": name}})
    rv = c.list_namespaced_config_map("team-a").metadata.resource_version
    w = watch.Watch()
    got = []
    stream = w.stream(c.list_namespaced_config_map, "team-a", send_initial_events=True,
                      resource_version_match="NotOlderThan", allow_watch_bookmarks=True,
                      timeout_seconds=5, _request_timeout=10)
    for ev in stream:
        got.append((ev["type"], ev["raw_object"]))
        if ev["type"] == "BOOKMARK":   # the state is complete: a change after it is live
            c.create_namespaced_config_map("team-a", {"metadata": {"name": "c"}})
        if len(got) == 5:
            break
    stream.close()   # releases the connection
    assert [(t, o["metadata"].get("name")) for t, o in got] == [
        ("ADDED", "a"), ("ADDED", "b"), ("ADDED", ROOT_CA), ("BOOKMARK", None), ("ADDED", "c")]
    assert got[3][1]["metadata"] == {"resourceVersion": rv,
                                     "annotations": {"k8s.io/initial-events-end": "true"}}
    # sendInitialEvents=false with a version: only what happened after it
    later_events = _events(kubesim, f"sendInitialEvents=false&resourceVersionMatch="
                                    f"NotOlderThan&resourceVersion={rv}&timeoutSeconds=1")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in later_events] == [
        ("ADDED", "c")]


@pytest.mark.kubesim(simulate=False, watch_cache_size=3)
def test_a_resume_from_before_the_history_is_an_error_event_410(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_config_map("team-a", {"metadata": {"name": "a"}})
    rv = int(c.list_namespaced_config_map("team-a").metadata.resource_version)
    versions = [int(c.patch_namespaced_config_map("a", "team-a", {"data": {"v": str(i)}})
                    .metadata.resource_version) for i in range(5)]
    oldest_kept = versions[-3]
    events = _events(kubesim, f"resourceVersion={rv}&timeoutSeconds=1")
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    assert events[0]["object"] == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f"too old resource version: {rv} ({oldest_kept - 1})",
        "reason": "Expired", "code": 410}
    # from the oldest version still held: the events after it
    events = _events(kubesim, f"resourceVersion={oldest_kept - 1}&timeoutSeconds=1")
    assert [int(e["object"]["metadata"]["resourceVersion"]) for e in events] == versions[-3:]


@pytest.mark.kubesim(simulate=False)
def test_an_object_leaving_the_selector_is_deleted_with_its_previous_state(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_config_map("team-a", {"metadata": {"name": "m", "labels": {"app": "x"}},
                                              "data": {"v": "1"}})
    rv = c.list_namespaced_config_map("team-a").metadata.resource_version
    moved = c.patch_namespaced_config_map("m", "team-a", {"metadata": {"labels": {"app": "y"}},
                                                          "data": {"v": "2"}})
    c.patch_namespaced_config_map("m", "team-a", {"metadata": {"labels": {"app": "x"}}})
    events = _events(kubesim, f"resourceVersion={rv}&labelSelector=app%3Dx&timeoutSeconds=1")
    assert [e["type"] for e in events] == ["DELETED", "ADDED"]
    gone = events[0]["object"]
    # the previous content (still matching), at the version of the change that moved it
    assert gone["metadata"]["labels"] == {"app": "x"} and gone["data"] == {"v": "1"}
    assert gone["metadata"]["resourceVersion"] == moved.metadata.resource_version


def test_the_history_grows_while_events_are_fresh_and_stays_bounded():
    now = [0.0]
    cache = WatchCache(floor=0, clock=lambda: now[0])
    assert cache.capacity == LOWER_BOUND
    for rv in range(1, 401):                     # a burst: everything is fresh
        cache.append((rv, "ADDED", None, "", {}, None))
    assert len(cache.entries) == 400 and cache.floor == 0 and cache.capacity == 400
    now[0] = 1000.0              # later, and the cache is full of stale events: it halves
    cache.append((401, "ADDED", None, "", {}, None))
    assert cache.capacity == 200 and len(cache.entries) == 200
    assert cache.entries[0][0] == 202 and cache.floor == 201
    fixed = WatchCache(floor=0, size=5)
    for rv in range(1, 9):
        fixed.append((rv, "ADDED", None, "", {}, None))
    assert [e[0] for e in fixed.entries] == [4, 5, 6, 7, 8] and fixed.floor == 3
    assert UPPER_BOUND == 100 * 1024


@pytest.mark.kubesim(simulate=False)
def test_a_watch_from_a_version_not_reached_yet_is_an_error_event_504(kubesim):
    ns(kubesim)
    rv = int(core(kubesim).list_namespaced_config_map("team-a").metadata.resource_version)
    events = _events(kubesim, f"resourceVersion={rv + 50}&timeoutSeconds=1")
    assert [e["type"] for e in events] == ["ERROR"]
    status = events[0]["object"]
    assert (status["code"], status["reason"]) == (504, "Timeout")
    assert status["message"] == f"Timeout: Too large resource version: {rv + 50}, current: {rv}"
