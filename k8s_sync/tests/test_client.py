"""The adapter against a real HTTP API server (kubesim) and real sockets.

Cluster tests use the ``kubesim`` fixture from ``kubesim/testing.py`` (registered by the
root conftest); they skip with a clear reason only while that fixture does not exist.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import socket
import threading
import time

import pytest

from k8s_sync import manifests, naming
from k8s_sync.client import (
    ClusterConfig,
    K8sError,
    K8sNotFoundError,
    K8sPermanentError,
    K8sTransientError,
    KubeClient,
    ObjectRef,
    _error_from_response,
    from_django_settings,
    get_client,
    is_transient,
    reset_clients,
)
from k8s_sync.reconcile import converge
from k8s_sync.specs import PoolSpec, QuotaSpec, TierSpec

# --- helpers ------------------------------------------------------------------------------


def _url_of(sim) -> str:
    for attr in ("url", "base_url", "server_url"):
        value = getattr(sim, attr, None)
        if isinstance(value, str) and value:
            return value
    raise AssertionError(f"cannot find the URL of the kubesim fixture {sim!r}")


@pytest.fixture
def sim(request):
    try:
        return request.getfixturevalue("kubesim")
    except pytest.FixtureLookupError:
        pytest.skip("kubesim fixture not available yet (kubesim/testing.py missing)")


@pytest.fixture
def kube(sim):
    client = KubeClient(ClusterConfig(mode="url", url=_url_of(sim), request_timeout=5))
    yield client
    client.close()


def _faults(sim):
    cluster = getattr(sim, "cluster", sim)
    return cluster.faults


def _pool(slug: str = "team-a", **kwargs) -> PoolSpec:
    quota = kwargs.pop("quota", QuotaSpec(cpu_cores=32, memory_gib=256, gpus=8,
                                          storage_gib=1024, pvc_count=10))
    return PoolSpec(slug, "prod", f"oidc:{slug}", quota=quota, **kwargs)


def _configmap(name: str = "cm", namespace: str = "default", **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}, "data": dict(data)}


def _namespace(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _pytorchjob(name: str, namespace: str) -> dict:
    container = {"name": "pytorch", "image": "registry.example/train:1",
                 "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    template = {"spec": {"containers": [container]}}
    return {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": naming.job_labels("acme", "prod", 7)},
        "spec": {"runPolicy": {"suspend": True},
                 "pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template}}},
    }


# --- no server needed ----------------------------------------------------------------------


@pytest.mark.parametrize(("status", "reason", "transient"), [
    (500, "InternalError", True), (502, "", True), (503, "ServiceUnavailable", True),
    (504, "Timeout", True), (429, "TooManyRequests", True), (409, "Conflict", True),
    (410, "Expired", True), (400, "BadRequest", False), (401, "Unauthorized", False),
    (403, "Forbidden", False), (404, "NotFound", False), (422, "Invalid", False),
    (409, "AlreadyExists", False), (405, "MethodNotAllowed", False),
])
def test_status_codes_are_classified(status, reason, transient):
    body = json.dumps({"kind": "Status", "status": "Failure", "reason": reason,
                       "message": f"msg {status}", "code": status}).encode()
    err = _error_from_response(status, "HTTP reason", {}, body)
    assert isinstance(err, K8sError)
    assert is_transient(err) is transient
    assert isinstance(err, K8sTransientError if transient else K8sPermanentError)
    assert (err.status, err.message) == (status, f"msg {status}")
    assert err.reason == (reason or "HTTP reason")


def test_404_is_a_not_found_error_and_429_carries_retry_after():
    assert isinstance(_error_from_response(404, "Not Found", {}, b""), K8sNotFoundError)
    err = _error_from_response(429, "Too Many Requests", {"Retry-After": "7"}, b"slow down")
    assert err.retry_after == 7.0 and err.message == "slow down"
    assert _error_from_response(429, "", {}, b"").retry_after is None
    assert not is_transient(ValueError("not ours"))


def test_errors_survive_pickling():
    err = _error_from_response(429, "", {"Retry-After": "3"}, b'{"reason":"TooMany","message":"m"}')
    clone = pickle.loads(pickle.dumps(err))
    assert type(clone) is K8sTransientError
    assert (clone.status, clone.reason, clone.message, clone.retry_after) == (429, "TooMany",
                                                                             "m", 3.0)


@pytest.mark.parametrize("url", ["http://[::1", "localhost:8080", "ftp://x", "http://x:99999",
                                 ""])
def test_a_malformed_url_is_rejected_at_configuration(url):
    with pytest.raises(ValueError):
        ClusterConfig(mode="url", url=url)


def test_cluster_config_validates_and_reads_mappings():
    assert ClusterConfig().mode == "kubeconfig" and ClusterConfig().request_timeout == 10
    with pytest.raises(ValueError):
        ClusterConfig(mode="url")
    with pytest.raises(ValueError):
        ClusterConfig(mode="magic")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ClusterConfig(request_timeout=0)
    cfg = ClusterConfig.from_mapping({"mode": "url", "url": "http://x:1", "request_timeout": "3"})
    assert cfg == ClusterConfig(mode="url", url="http://x:1", request_timeout=3.0)
    with pytest.raises(ValueError, match="unknown TRAINYARD_CLUSTER keys"):
        ClusterConfig.from_mapping({"mode": "url", "url": "http://x", "timeout": 3})


def test_from_django_settings_reads_trainyard_cluster(settings):
    settings.TRAINYARD_CLUSTER = {"mode": "url", "url": "http://127.0.0.1:1", "context": None}
    assert from_django_settings() == ClusterConfig(mode="url", url="http://127.0.0.1:1")
    # the shape portal/settings.py writes: empty strings are "unset", "embedded" is not ours
    settings.TRAINYARD_CLUSTER = {"mode": "kubeconfig", "embedded": True,
                                  "kubeconfig": "/var/kubeconfig", "context": "",
                                  "request_timeout": 2.5}
    assert from_django_settings() == ClusterConfig(kubeconfig="/var/kubeconfig",
                                                   request_timeout=2.5)


def test_get_client_caches_per_config():
    reset_clients()
    cfg = ClusterConfig(mode="url", url="http://127.0.0.1:1")
    assert get_client(cfg) is get_client(cfg)
    assert get_client(cfg) is not get_client(dataclasses.replace(cfg, request_timeout=2))
    reset_clients()


def test_in_cluster_mode_outside_a_pod_is_a_permanent_config_error(monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(K8sPermanentError, match="cannot load cluster config"):
        KubeClient(ClusterConfig(mode="in-cluster"))


def test_missing_kubeconfig_is_a_permanent_config_error(tmp_path):
    with pytest.raises(K8sPermanentError, match="cannot load cluster config"):
        KubeClient(ClusterConfig(kubeconfig=str(tmp_path / "nope")))


def test_connection_refused_is_transient():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kube = KubeClient(ClusterConfig(mode="url", url=f"http://127.0.0.1:{port}",
                                    request_timeout=2))
    with pytest.raises(K8sTransientError) as info:
        kube.read("v1", "Namespace", "default")
    assert info.value.status is None


def test_a_server_that_never_answers_times_out_as_transient():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    accepted = []
    threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True).start()
    kube = KubeClient(ClusterConfig(mode="url", url=f"http://127.0.0.1:{server.getsockname()[1]}",
                                    request_timeout=0.3))
    started = time.monotonic()
    try:
        with pytest.raises(K8sTransientError):
            kube.apply(_namespace("never"))
        # one timeout, not one per urllib3 retry
        assert time.monotonic() - started < 1.5
    finally:
        server.close()


def test_object_ref_requires_identity():
    assert str(ObjectRef.of(_configmap())) == "ConfigMap.v1 default/cm"
    with pytest.raises(ValueError):
        ObjectRef.of({"kind": "ConfigMap"})


# --- against kubesim ---------------------------------------------------------------------------


def test_apply_creates_then_a_second_apply_is_a_no_op(kube):
    first = kube.apply(_namespace("ty-apply-prod"))
    rv = first["metadata"]["resourceVersion"]
    second = kube.apply(_namespace("ty-apply-prod"))
    assert second["metadata"]["resourceVersion"] == rv
    stored = kube.read("v1", "Namespace", "ty-apply-prod")
    assert stored is not None and stored["metadata"]["resourceVersion"] == rv


def test_apply_updates_and_removes_fields_it_no_longer_sends(kube):
    kube.apply(_configmap(a="1", b="2"))
    updated = kube.apply(_configmap(a="1"))
    assert updated["data"] == {"a": "1"}
    assert kube.read("v1", "ConfigMap", "cm", "default")["data"] == {"a": "1"}


def test_dry_run_apply_persists_nothing(kube):
    result = kube.apply(_namespace("ty-dry-prod"), dry_run=True)
    assert result["metadata"]["name"] == "ty-dry-prod"
    assert kube.read("v1", "Namespace", "ty-dry-prod") is None


def test_changing_a_role_binding_roleref_is_a_permanent_422(kube):
    spec = _pool("rbac")
    converge(kube, manifests.desired_pool_objects(spec))
    binding = manifests.build_role_binding(spec)
    binding["roleRef"]["name"] = "another-role"
    with pytest.raises(K8sPermanentError) as info:
        kube.apply(binding)
    assert info.value.status == 422


def test_pytorchjobs_are_created_once(kube):
    kube.apply(_namespace("ty-acme-prod"))
    job = _pytorchjob(naming.job_name(7, "bert"), "ty-acme-prod")
    stored, created = kube.create_if_absent(job)
    assert created and stored["spec"]["runPolicy"]["suspend"] is True
    unsuspended = kube.patch("kubeflow.org/v1", "PyTorchJob", job["metadata"]["name"],
                             {"spec": {"runPolicy": {"suspend": False}}}, "ty-acme-prod")
    assert unsuspended["spec"]["runPolicy"]["suspend"] is False
    again, created_again = kube.create_if_absent(job)
    assert not created_again and again["spec"]["runPolicy"]["suspend"] is False
    jobs = kube.list_objects("kubeflow.org/v1", "PyTorchJob", "ty-acme-prod",
                             label_selector=f"{naming.LABEL_JOB}=7")
    assert [j["metadata"]["name"] for j in jobs] == ["tj-7-bert"]


def _pod(name: str, namespace: str, gpus: int = 0) -> dict:
    container: dict = {"name": "main", "image": "registry.example/train:1"}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [container], "serviceAccountName": naming.SERVICE_ACCOUNT_NAME}}


def test_pool_objects_admit_pods_and_a_suspended_pool_refuses_new_ones(kube):
    spec = _pool("quota")
    converge(kube, manifests.desired_pool_objects(spec))
    # no requests stated: the LimitRange defaults let the pod pass the cpu/memory quota,
    # and its GPU default of 0 gives it no GPU
    pod, created = kube.create_if_absent(_pod("plain", spec.namespace))
    assert created
    limits = pod["spec"]["containers"][0]["resources"]
    assert limits["requests"]["cpu"] == "500m" and limits["requests"]["memory"] == "1Gi"
    assert limits["limits"].get("nvidia.com/gpu", "0") == "0"
    with pytest.raises(K8sPermanentError) as too_big:
        kube.create_if_absent(_pod("greedy", spec.namespace, gpus=9))  # quota: 8 GPUs
    assert too_big.value.quota_exceeded and too_big.value.status == 403

    converge(kube, manifests.desired_pool_objects(dataclasses.replace(spec, suspended=True)))
    with pytest.raises(K8sPermanentError) as refused:
        kube.create_if_absent(_pod("late", spec.namespace))
    assert refused.value.quota_exceeded
    # nothing was deleted: the running pod and the namespace are still there
    assert kube.read("v1", "Pod", "plain", spec.namespace) is not None


def test_read_returns_none_when_missing(kube):
    assert kube.read("v1", "ConfigMap", "missing", "default") is None
    assert kube.read("v1", "Namespace", "ty-missing-prod") is None
    assert kube.read("scheduling.k8s.io/v1", "PriorityClass", "trainyard-nope") is None


def test_ensure_absent_twice(kube):
    kube.apply(_configmap("gone"))
    assert kube.ensure_absent("v1", "ConfigMap", "gone", "default") is True
    assert kube.ensure_absent("v1", "ConfigMap", "gone", "default") is False
    assert kube.read("v1", "ConfigMap", "gone", "default") is None
    assert kube.ensure_absent("v1", "ConfigMap", "x", "no-such-namespace") is False


def test_ensure_absent_of_a_namespace_already_terminating_is_success(kube, sim):
    """pkg/registry/core/namespace/storage/storage.go Delete: the first DELETE marks the
    namespace Terminating; another one while spec.finalizers still holds `kubernetes` (its
    content is being removed) is a 409 "The system is ensuring all content is removed from
    this namespace". That is deletion under way, not a conflict to retry."""
    kube.apply(_namespace("ty-going-prod"))
    held = _configmap("held", "ty-going-prod")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    kube.apply(held)                              # keeps the namespace terminating
    assert kube.ensure_absent("v1", "Namespace", "ty-going-prod") is True
    ns = kube.read("v1", "Namespace", "ty-going-prod")
    assert ns["status"]["phase"] == "Terminating"
    with pytest.raises(K8sTransientError) as second:     # what the server answers
        kube._request("DELETE", "/api/v1/namespaces/ty-going-prod")
    assert second.value.status == 409 and second.value.namespace_terminating
    assert kube.ensure_absent("v1", "Namespace", "ty-going-prod") is True
    kube.patch("v1", "ConfigMap", "held", {"metadata": {"finalizers": None}}, "ty-going-prod")
    assert kube.read("v1", "Namespace", "ty-going-prod") is None
    assert kube.ensure_absent("v1", "Namespace", "ty-going-prod") is False


def test_other_conflicts_on_delete_still_raise(kube, sim):
    kube.apply(_configmap("busy"))
    _faults(sim).add(method="DELETE", path_regex="/configmaps/busy", status=409, times=1,
                     message="Operation cannot be fulfilled: the object has been modified")
    with pytest.raises(K8sTransientError) as raised:
        kube.ensure_absent("v1", "ConfigMap", "busy", "default")
    assert not raised.value.namespace_terminating
    assert kube.ensure_absent("v1", "ConfigMap", "busy", "default") is True


def test_list_objects_filters_by_label_and_fills_kind(kube):
    for slug in ("lista", "listb"):
        converge(kube, manifests.desired_pool_objects(_pool(slug)))
    selector = naming.label_selector(naming.pool_labels("lista", "prod"))
    quotas = kube.list_objects("v1", "ResourceQuota", label_selector=selector)
    assert [(q["kind"], q["metadata"]["namespace"]) for q in quotas] == [
        ("ResourceQuota", "ty-lista-prod")]
    managed = kube.list_objects("v1", "Namespace",
                                label_selector=naming.label_selector(naming.managed_labels()))
    assert {"ty-lista-prod", "ty-listb-prod"} <= {n["metadata"]["name"] for n in managed}


def test_list_objects_follows_continue_tokens(kube):
    for i in range(7):
        kube.apply(_configmap(f"page-{i}", tag="p"))
    names = {o["metadata"]["name"] for o in kube.list_objects("v1", "ConfigMap", "default",
                                                              page_size=2)}
    assert {f"page-{i}" for i in range(7)} <= names


def test_patch_merges_and_404s_on_missing(kube):
    kube.apply(_configmap("p", a="1"))
    patched = kube.patch("v1", "ConfigMap", "p", {"data": {"b": "2"}}, "default")
    assert patched["data"] == {"a": "1", "b": "2"}
    jp = kube.patch("v1", "ConfigMap", "p", [{"op": "remove", "path": "/data/a"}], "default",
                    patch_type="json")
    assert jp["data"] == {"b": "2"}
    with pytest.raises(K8sNotFoundError):
        kube.patch("v1", "ConfigMap", "nope", {"data": {}}, "default")


def test_create_if_absent_is_idempotent(kube):
    obj, created = kube.create_if_absent(_configmap("once", v="1"))
    assert created and obj["data"] == {"v": "1"}
    again, created_again = kube.create_if_absent(_configmap("once", v="2"))
    assert not created_again and again["data"] == {"v": "1"}


def test_unknown_kinds_are_found_by_discovery(kube):
    # not in the static table: resolved through /apis discovery
    kube.apply(_namespace("ty-disc-prod"))
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "l", "namespace": "ty-disc-prod"}, "spec": {}}
    kube.apply(lease)
    leases = kube.list_objects("coordination.k8s.io/v1", "Lease", "ty-disc-prod")
    assert [(x["kind"], x["metadata"]["name"]) for x in leases] == [("Lease", "l")]
    with pytest.raises(K8sPermanentError):
        kube.read("v1", "NoSuchKind", "x")
    # an unserved group/version is a permanent error, never a silent "object absent"
    with pytest.raises(K8sPermanentError, match="does not serve"):
        kube.read("nosuch.example.com/v1", "Thing", "x")
    with pytest.raises(K8sPermanentError):
        kube.ensure_absent("nosuch.example.com/v1", "Thing", "x")


def test_invalid_object_is_permanent_with_the_server_message(kube):
    with pytest.raises(K8sPermanentError) as info:
        kube.apply(_namespace("Not_A_Valid_Name"))
    assert info.value.status == 422
    assert "Not_A_Valid_Name" in info.value.message
    assert not is_transient(info.value)


def test_immutable_priority_class_value_is_a_permanent_422(kube):
    tier = TierSpec(naming.Tier.BATCH, 1000, "Never", "x")
    kube.apply(manifests.build_priority_class(tier))
    changed = manifests.build_priority_class(dataclasses.replace(tier, value=2000))
    with pytest.raises(K8sPermanentError) as info:
        kube.apply(changed)
    assert info.value.status == 422


@pytest.mark.parametrize("status", [500, 503])
def test_server_errors_are_transient(sim, kube, status):
    _faults(sim).add(method="PATCH", path_regex=r"/configmaps/flaky", status=status, times=1)
    with pytest.raises(K8sTransientError) as info:
        kube.apply(_configmap("flaky"))
    assert info.value.status == status
    assert kube.apply(_configmap("flaky"))["metadata"]["name"] == "flaky"  # fault used up


def test_429_is_transient_and_honours_retry_after(sim, kube):
    _faults(sim).add(method="GET", path_regex=r"/namespaces/default$", status=429, times=1,
                     retry_after=3)
    with pytest.raises(K8sTransientError) as info:
        kube.read("v1", "Namespace", "default")
    assert info.value.status == 429
    assert info.value.retry_after == 3.0


def test_409_conflict_is_transient(sim, kube):
    _faults(sim).add(method="PATCH", path_regex=r"/configmaps/contended", status=409, times=1)
    with pytest.raises(K8sTransientError) as info:
        kube.patch("v1", "ConfigMap", "contended", {"data": {}}, "default")
    assert info.value.status == 409


def test_a_slow_server_times_out_as_transient(sim):
    kube = KubeClient(ClusterConfig(mode="url", url=_url_of(sim), request_timeout=0.3))
    _faults(sim).add(method="GET", path_regex=r"/namespaces/default$", delay=2.0, times=1)
    started = time.monotonic()
    with pytest.raises(K8sTransientError):
        kube.read("v1", "Namespace", "default")
    assert time.monotonic() - started < 1.5
    kube.close()


def test_kubeconfig_mode_reaches_the_same_server(sim, tmp_path):
    url = _url_of(sim)
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "other",
        "clusters": [{"name": "sim", "cluster": {"server": url}},
                     {"name": "dead", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "u"}},
                     {"name": "other", "context": {"cluster": "dead", "user": "u"}}],
    }))
    kube = KubeClient(ClusterConfig(kubeconfig=str(kubeconfig), context="sim"))
    assert kube.read("v1", "Namespace", "default") is not None
    kube.close()


def test_the_project_settings_give_a_valid_cluster_config():
    from django.conf import settings

    cfg = from_django_settings()
    assert cfg.mode == settings.TRAINYARD_CLUSTER["mode"]
    assert cfg.request_timeout > 0
