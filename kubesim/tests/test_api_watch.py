"""Watch streams with the official client's Watch()."""
from __future__ import annotations

import threading
import time

import pytest
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from .helpers import ROOT_CA, core, ns, request

pytestmark = pytest.mark.timeout(30)


def _collect(fn, *args, stop_after=None, **kwargs):
    w = watch.Watch()
    events = []
    for ev in w.stream(fn, *args, _request_timeout=10, **kwargs):
        events.append((ev["type"], ev["raw_object"]))
        if stop_after and len(events) >= stop_after:
            w.stop()
            break
    return events


def test_initial_state_as_added_then_timeout_closes(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_config_map("team-a", {"metadata": {"name": "a"}})
    t = time.monotonic()
    events = _collect(c.list_namespaced_config_map, "team-a", timeout_seconds=1)
    assert time.monotonic() - t < 5
    assert [(e, o["metadata"]["name"]) for e, o in events] == [("ADDED", "a"),
                                                                ("ADDED", ROOT_CA)]


def test_live_events_with_selectors_and_namespace_filter(kubesim):
    c = core(kubesim)
    ns(kubesim)
    ns(kubesim, "team-b")

    def writer():
        time.sleep(0.3)
        c.create_namespaced_config_map("team-b", {"metadata": {"name": "other",
                                                               "labels": {"app": "x"}}})
        c.create_namespaced_config_map("team-a", {"metadata": {"name": "nomatch"}})
        c.create_namespaced_config_map("team-a", {"metadata": {"name": "m",
                                                               "labels": {"app": "x"}}})
        c.patch_namespaced_config_map("m", "team-a", {"data": {"k": "v"}})
        c.patch_namespaced_config_map("m", "team-a", {"metadata": {"labels": {"app": "y"}}})
        c.delete_namespaced_config_map("nomatch", "team-a")
    th = threading.Thread(target=writer)
    th.start()
    events = _collect(c.list_namespaced_config_map, "team-a", label_selector="app=x",
                      timeout_seconds=5, stop_after=3)
    th.join()
    got = [(e, o["metadata"]["name"]) for e, o in events]
    # the label change takes the object out of the selector: DELETED, as the real server does
    assert got == [("ADDED", "m"), ("MODIFIED", "m"), ("DELETED", "m")]


def test_resume_from_resource_version(kubesim):
    c = core(kubesim)
    ns(kubesim)
    first = c.create_namespaced_config_map("team-a", {"metadata": {"name": "a"}})
    c.create_namespaced_config_map("team-a", {"metadata": {"name": "b"}})
    c.delete_namespaced_config_map("a", "team-a")
    events = _collect(c.list_namespaced_config_map, "team-a",
                      resource_version=first.metadata.resource_version, timeout_seconds=5,
                      stop_after=2)
    assert [(e, o["metadata"]["name"]) for e, o in events] == [("ADDED", "b"), ("DELETED", "a")]
    assert int(events[-1][1]["metadata"]["resourceVersion"]) > int(
        first.metadata.resource_version)


def test_too_old_resource_version_gives_410(kubesim):
    c = core(kubesim)
    ns(kubesim)
    status, _, body = request(kubesim, "GET", "/api/v1/namespaces/team-a/configmaps"
                              "?watch=true&resourceVersion=1&timeoutSeconds=1")
    assert status == 200
    line = body.decode().splitlines()[0]
    assert '"type":"ERROR"' in line and '"code":410' in line and '"reason":"Expired"' in line
    with pytest.raises(ApiException) as ei:
        _collect(c.list_namespaced_config_map, "team-a", resource_version="1", timeout_seconds=1)
    assert ei.value.status == 410


@pytest.mark.kubesim(simulate=False, bookmark_interval=0.2)
def test_bookmarks(kubesim):
    c = core(kubesim)
    ns(kubesim)
    events = _collect(c.list_namespaced_config_map, "team-a", allow_watch_bookmarks=True,
                      timeout_seconds=1)
    events = [(e, o) for e, o in events if o["metadata"].get("name") != ROOT_CA]
    kinds = {e for e, _ in events}
    assert kinds == {"BOOKMARK"}
    assert all(o["metadata"]["resourceVersion"] for _, o in events)


def test_watch_single_object_by_field_selector(kubesim):
    c = core(kubesim)
    ns(kubesim)

    def writer():
        time.sleep(0.2)
        c.create_namespaced_config_map("team-a", {"metadata": {"name": "x"}})
        c.create_namespaced_config_map("team-a", {"metadata": {"name": "y"}})
    th = threading.Thread(target=writer)
    th.start()
    events = _collect(c.list_namespaced_config_map, "team-a", field_selector="metadata.name=y",
                      timeout_seconds=5, stop_after=1)
    th.join()
    assert [(e, o["metadata"]["name"]) for e, o in events] == [("ADDED", "y")]


def test_watch_sees_simulation_writes(kubesim):
    from .helpers import pod
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_pod("team-a", pod("p"))

    def ticker():
        time.sleep(0.2)
        kubesim.advance(5)
    th = threading.Thread(target=ticker)
    th.start()
    w = watch.Watch()
    phases = []
    for ev in w.stream(c.list_namespaced_pod, "team-a", timeout_seconds=5, _request_timeout=10):
        phases.append(ev["object"].status.phase)
        if phases[-1] == "Running":
            w.stop()
            break
    th.join()
    assert phases[0] == "Pending" and "Running" in phases


def test_legacy_watch_path_and_eviction(kubesim):
    from .helpers import pod
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_pod("team-a", pod("p"))
    status, _, body = request(kubesim, "GET", "/api/v1/watch/namespaces/team-a/pods/p"
                              "?timeoutSeconds=1")
    assert status == 200 and body.decode().count('"type":"ADDED"') == 1
    status, _, _ = request(kubesim, "POST", "/api/v1/namespaces/team-a/pods/p/eviction",
                           {"apiVersion": "policy/v1", "kind": "Eviction",
                            "metadata": {"name": "p", "namespace": "team-a"}})
    assert status == 201
    assert c.list_namespaced_pod("team-a").items == []
