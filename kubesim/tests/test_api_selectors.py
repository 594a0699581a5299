"""Label and field selectors, limit and continue."""
from __future__ import annotations

import pytest

from .helpers import ROOT_CA, api_error, core, ns, own, pod

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def labelled(kubesim):
    c = core(kubesim)
    ns(kubesim)
    ns(kubesim, "team-b")
    for name, labels in [("a", {"app": "x", "tier": "prod"}), ("b", {"app": "y", "tier": "dev"}),
                         ("c", {"app": "z"}), ("d", {})]:
        c.create_namespaced_config_map("team-a", {"metadata": {"name": name, "labels": labels}})
    c.create_namespaced_config_map("team-b", {"metadata": {"name": "e", "labels": {"app": "x"}}})
    return c


@pytest.mark.parametrize("selector,expected", [
    ("app=x", ["a"]), ("app==x", ["a"]), ("app!=x", ["b", "c", "d"]),
    ("app in (x,y)", ["a", "b"]), ("app notin (x, y)", ["c", "d"]), ("tier", ["a", "b"]),
    ("!tier", ["c", "d"]), ("app,tier=dev", ["b"]), ("app in (x),tier in (prod,dev)", ["a"]),
])
def test_label_selectors(labelled, selector, expected):
    items = labelled.list_namespaced_config_map("team-a", label_selector=selector).items
    assert [i.metadata.name for i in own(items)] == expected


def test_across_namespaces_and_bad_selector(labelled):
    items = labelled.list_config_map_for_all_namespaces(label_selector="app=x").items
    assert [(i.metadata.namespace, i.metadata.name) for i in items] == [("team-a", "a"),
                                                                        ("team-b", "e")]
    status, body = api_error(labelled.list_namespaced_config_map, "team-a",
                             label_selector="app in (x")
    assert status == 400 and body["reason"] == "BadRequest"


def test_field_selectors(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_pod("team-a", pod("p1"))
    c.create_namespaced_pod("team-a", pod("p2"))
    kubesim.call(kubesim.store.patch, "pods", "p1", {"spec": {"nodeName": "a100-0"}},
                 namespace="team-a")
    names = [p.metadata.name for p in
             c.list_pod_for_all_namespaces(field_selector="spec.nodeName=a100-0").items]
    assert names == ["p1"]
    names = [p.metadata.name for p in
             c.list_namespaced_pod("team-a", field_selector="metadata.name!=p1").items]
    assert names == ["p2"]
    names = [p.metadata.name for p in c.list_namespaced_pod(
        "team-a", field_selector="status.phase=Pending,metadata.name=p2").items]
    assert names == ["p2"]
    assert api_error(c.list_namespaced_pod, "team-a", field_selector="spec.bogus=1")[0] == 400
    nss = [n.metadata.name for n in c.list_namespace(field_selector="metadata.name=team-a").items]
    assert nss == ["team-a"]


def test_event_involved_object_field_selector(kubesim):
    c = core(kubesim)
    ns(kubesim)
    for i, kind in enumerate(["Pod", "PyTorchJob"]):
        c.create_namespaced_event("team-a", {
            "metadata": {"name": f"ev{i}"}, "reason": "Test", "message": "m", "type": "Normal",
            "source": {"component": "kubelet" if i else "scheduler"},
            "involvedObject": {"kind": kind, "name": "j", "namespace": "team-a"}})
    evs = c.list_namespaced_event("team-a",
                                  field_selector="involvedObject.kind=PyTorchJob").items
    assert [e.metadata.name for e in evs] == ["ev1"]
    evs = c.list_namespaced_event("team-a", field_selector="source=scheduler,type=Normal").items
    assert [e.metadata.name for e in evs] == ["ev0"]


def test_limit_and_continue(kubesim):
    c = core(kubesim)
    ns(kubesim)
    for i in range(7):
        c.create_namespaced_config_map("team-a", {"metadata": {"name": f"c{i}"}})
    seen, token, pages = [], None, 0
    while True:
        page = c.list_namespaced_config_map("team-a", limit=3, _continue=token)
        pages += 1
        seen += [i.metadata.name for i in page.items]
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count == 8 - len(seen)
    # the namespace also holds the cluster's own kube-root-ca.crt (last by name)
    assert seen == [f"c{i}" for i in range(7)] + [ROOT_CA] and pages == 3
    assert api_error(c.list_namespaced_config_map, "team-a", limit=2,
                     _continue="garbage!")[0] == 400


def test_events_k8s_io_is_a_view_of_core_events(kubesim):
    import kubernetes
    from kubernetes import watch
    c = core(kubesim)
    ev1 = kubernetes.client.EventsV1Api(kubesim.api_client)
    ns(kubesim)
    c.create_namespaced_event("team-a", {
        "metadata": {"name": "core-made"}, "reason": "Scheduled", "message": "assigned",
        "type": "Normal", "firstTimestamp": "2026-01-01T10:00:00Z",
        "source": {"component": "default-scheduler"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "team-a"}})
    got = ev1.read_namespaced_event("core-made", "team-a")
    assert (got.note, got.regarding.kind, got.reporting_controller) == (
        "assigned", "Pod", "default-scheduler")
    assert got.event_time is not None
    ev1.create_namespaced_event("team-a", {
        "metadata": {"name": "v1-made"}, "eventTime": "2026-01-01T10:00:01.000000Z",
        "reason": "FailedCreatePod", "note": "exceeded quota", "type": "Warning",
        "action": "Create", "reportingController": "pytorchjob-controller",
        "reportingInstance": "op-0",
        "regarding": {"kind": "PyTorchJob", "name": "j", "namespace": "team-a"}})
    back = c.read_namespaced_event("v1-made", "team-a")
    assert (back.message, back.involved_object.kind, back.reporting_component) == (
        "exceeded quota", "PyTorchJob", "pytorchjob-controller")
    listed = ev1.list_namespaced_event("team-a", field_selector="regarding.kind=PyTorchJob")
    assert [e.metadata.name for e in listed.items] == ["v1-made"]
    out = ev1.patch_namespaced_event("v1-made", "team-a", {"note": "still exceeded"})
    assert out.note == "still exceeded"
    assert c.read_namespaced_event("v1-made", "team-a").message == "still exceeded"
    w = watch.Watch()
    seen = [(e["type"], e["object"].note) for e in w.stream(
        ev1.list_namespaced_event, "team-a", timeout_seconds=1, _request_timeout=10)]
    assert ("ADDED", "assigned") in seen and ("ADDED", "still exceeded") in seen
    ev1.delete_namespaced_event("core-made", "team-a")
    assert [e.metadata.name for e in c.list_namespaced_event("team-a").items] == ["v1-made"]
