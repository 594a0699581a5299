"""The Store contract other components code against (used directly, no HTTP)."""
from __future__ import annotations

import pytest

from kubesim.clock import Clock
from kubesim.errors import ApiError
from kubesim.store import Store

from .helpers import own


@pytest.fixture(scope="module")
def base_store():
    s = Store(Clock(deterministic=True))
    s.create("namespaces", {"metadata": {"name": "a"}})
    s.snapshot()
    return s


@pytest.fixture
def store(base_store):
    base_store.reset()
    return base_store


def test_returns_deep_copies(store):
    out = store.create("configmaps", {"metadata": {"name": "c"}, "data": {"k": "v"}},
                       namespace="a")
    out["data"]["k"] = "changed"
    got = store.get("configmaps", "c", namespace="a")
    assert got["data"] == {"k": "v"}
    got["metadata"]["labels"] = {"x": "y"}
    assert "labels" not in store.list("configmaps", namespace="a")[0]["metadata"]


def test_errors_are_api_errors_with_status(store):
    with pytest.raises(ApiError) as ei:
        store.get("configmaps", "nope", namespace="a")
    assert ei.value.code == 404
    assert ei.value.status() == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                 "status": "Failure", "reason": "NotFound", "code": 404,
                                 "message": 'configmaps "nope" not found',
                                 "details": {"name": "nope", "kind": "configmaps"}}
    with pytest.raises(ApiError) as ei:
        store.get("widgets", "x")
    assert ei.value.code == 404


def test_subscribe_sees_every_committed_change(store):
    seen = []
    unsubscribe = store.subscribe(lambda et, res, obj: seen.append(
        (et, res, obj["metadata"]["name"])))
    store.create("configmaps", {"metadata": {"name": "c"}}, namespace="a")
    store.create("configmaps", {"metadata": {"name": "d"}}, namespace="a", dry_run=True)
    store.patch("configmaps", "c", {"data": {"a": "b"}}, namespace="a")
    store.patch("configmaps", "c", [{"op": "add", "path": "/data/c", "value": "d"}],
                patch_type="json", namespace="a")
    store.delete("configmaps", "c", namespace="a")
    unsubscribe()
    store.create("configmaps", {"metadata": {"name": "e"}}, namespace="a")
    assert seen == [("ADDED", "configmaps", "c"), ("MODIFIED", "configmaps", "c"),
                    ("MODIFIED", "configmaps", "c"), ("DELETED", "configmaps", "c")]


def test_bad_input_changes_nothing(store):
    rv = store.resource_version
    for call in (lambda: store.create("configmaps", {"metadata": {"name": "Bad"}}, namespace="a"),
                 lambda: store.create("configmaps", ["not", "a", "dict"], namespace="a"),
                 lambda: store.create("pods", {"metadata": {"name": "p"}, "spec": {}},
                                      namespace="a"),
                 lambda: store.patch("namespaces", "a", {"spec": 5}, patch_type="bogus")):
        with pytest.raises(ApiError):
            call()
    assert store.resource_version == rv


def test_kubelet_style_pod_deletion_and_terminal_pods(store):
    store.create("pods", {"metadata": {"name": "p"}, "spec": {
        "terminationGracePeriodSeconds": 45,
        "containers": [{"name": "c", "image": "i"}]}}, namespace="a")
    store.patch("pods", "p", {"spec": {"nodeName": "n1"}}, namespace="a")
    out = store.delete("pods", "p", namespace="a")
    assert out["metadata"]["deletionGracePeriodSeconds"] == 45
    assert store.get("pods", "p", namespace="a")["metadata"]["deletionTimestamp"]
    store.delete("pods", "p", namespace="a", grace_period_seconds=0)
    assert store.list("pods", namespace="a") == []


def test_status_replace_and_resource_version_conflict(store):
    store.create("pods", {"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "i"}]}}, namespace="a")
    p = store.get("pods", "p", namespace="a")
    p["status"] = {"phase": "Running", "containerStatuses": [{"name": "c", "ready": True}]}
    out = store.replace("pods", p, namespace="a", subresource="status")
    cs = out["status"]["containerStatuses"][0]
    assert cs == {"name": "c", "ready": True, "image": "", "imageID": "", "restartCount": 0}
    with pytest.raises(ApiError) as ei:
        store.replace("pods", p, namespace="a", subresource="status")  # stale rv
    assert ei.value.code == 409


def test_only_one_default_priority_class(store):
    store.create("priorityclasses.scheduling.k8s.io",
                 {"metadata": {"name": "a"}, "value": 1, "globalDefault": True})
    with pytest.raises(ApiError) as ei:
        store.create("priorityclasses.scheduling.k8s.io",
                     {"metadata": {"name": "b"}, "value": 2, "globalDefault": True})
    assert ei.value.code == 422 and "Only one default" in ei.value.message
    store.create("pods", {"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "i"}]}}, namespace="a")
    p = store.get("pods", "p", namespace="a")
    assert (p["spec"]["priorityClassName"], p["spec"]["priority"]) == ("a", 1)


def test_quota_scopes_terminating_and_best_effort(store):
    store.create("resourcequotas", {"metadata": {"name": "be"}, "spec": {
        "hard": {"pods": "1"}, "scopes": ["BestEffort"]}}, namespace="a")
    store.create("resourcequotas", {"metadata": {"name": "term"}, "spec": {
        "hard": {"pods": "1"}, "scopes": ["Terminating"]}}, namespace="a")

    def pod(name, res=None, deadline=None):
        spec = {"containers": [{"name": "c", "image": "i", "resources": res or {}}]}
        if deadline:
            spec["activeDeadlineSeconds"] = deadline
        return {"metadata": {"name": name}, "spec": spec}
    store.create("pods", pod("be1"), namespace="a")
    with pytest.raises(ApiError) as ei:
        store.create("pods", pod("be2"), namespace="a")
    assert "exceeded quota: be" in ei.value.message
    store.create("pods", pod("burst", {"requests": {"cpu": "1"}}), namespace="a")
    store.create("pods", pod("t1", {"requests": {"cpu": "1"}}, 60), namespace="a")
    with pytest.raises(ApiError):
        store.create("pods", pod("t2", {"requests": {"cpu": "1"}}, 60), namespace="a")
    with pytest.raises(ApiError) as ei:
        store.create("resourcequotas", {"metadata": {"name": "x"}, "spec": {
            "hard": {"pods": "1"}, "scopes": ["BestEffort", "NotBestEffort"]}}, namespace="a")
    assert "conflicting scopes" in ei.value.message


def test_limits_prefix_for_gpus_is_accepted_but_not_enforced(store):
    store.create("resourcequotas", {"metadata": {"name": "lim"}, "spec": {
        "hard": {"limits.nvidia.com/gpu": "1"}}}, namespace="a")
    store.create("pods", {"metadata": {"name": "g"}, "spec": {"containers": [
        {"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}},
        namespace="a")
    q = store.get("resourcequotas", "lim", namespace="a")
    assert q["status"]["used"] == {"limits.nvidia.com/gpu": "0"}


def test_snapshot_reset_restores_objects_and_expires_old_watch_positions(store):
    store.create("configmaps", {"metadata": {"name": "gone"}}, namespace="a")
    rv = store.resource_version
    store.reset()
    assert own(store.list("configmaps", namespace="a")) == []
    assert store.resource_version > rv
    with pytest.raises(ApiError) as ei:
        store.events_since(store.rt("configmaps"), rv - 1)
    assert ei.value.code == 410


@pytest.mark.parametrize("policy", ["Orphan", "Foreground"])
def test_propagation_policies(store, policy):
    owner = store.create("configmaps", {"metadata": {"name": "owner"}}, namespace="a")
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
           "uid": owner["metadata"]["uid"]}
    store.create("configmaps", {"metadata": {"name": "dep", "ownerReferences": [ref]}},
                 namespace="a")
    store.create("configmaps", {"metadata": {"name": "other"}}, namespace="a")
    store.delete("configmaps", "owner", namespace="a", propagation_policy=policy)
    names = sorted(o["metadata"]["name"] for o in own(store.list("configmaps", namespace="a")))
    if policy == "Orphan":
        assert names == ["dep", "other"]
        assert "ownerReferences" not in store.get("configmaps", "dep", namespace="a")["metadata"]
    else:
        assert names == ["other"]
    with pytest.raises(ApiError):
        store.delete("configmaps", "other", namespace="a", propagation_policy="Sideways")


def test_continue_token_expires_with_the_history_window():
    s = Store(Clock(deterministic=True), watch_cache_size=5, default_crds=False)
    s.create("namespaces", {"metadata": {"name": "a"}})
    for i in range(3):
        s.create("configmaps", {"metadata": {"name": f"c{i}"}}, namespace="a")
    rt = s.rt("configmaps")
    items, _, token, remaining = s.list_page(rt, "a", limit=1)
    # remaining: c1, c2 and the cluster's own kube-root-ca.crt
    assert [i["metadata"]["name"] for i in items] == ["c0"] and remaining == 3
    items, _, token2, _ = s.list_page(rt, "a", limit=1, continue_token=token)
    assert [i["metadata"]["name"] for i in items] == ["c1"] and token2
    for i in range(6):   # push the token's resourceVersion out of the 5-event window
        s.create("configmaps", {"metadata": {"name": f"x{i}"}}, namespace="a")
    with pytest.raises(ApiError) as ei:
        s.list_page(rt, "a", limit=1, continue_token=token2)
    assert (ei.value.code, ei.value.reason) == (410, "Expired")
