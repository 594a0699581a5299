"""Discovery documents, version, health, list kinds, model round-trips."""
from __future__ import annotations

import json

import kubernetes
import pytest

from .helpers import core, dyn, ns, pod, request

pytestmark = pytest.mark.timeout(30)


def test_version_is_at_most_1_31(kubesim):
    v = kubernetes.client.VersionApi(kubesim.api_client).get_code()
    assert v.major == "1"
    assert int(v.minor) <= 31


def test_health_endpoints(kubesim):
    for path in ("/healthz", "/readyz", "/livez"):
        status, _, body = request(kubesim, "GET", path)
        assert (status, body) == (200, b"ok")


def test_core_and_group_discovery(kubesim):
    _status, _, body = request(kubesim, "GET", "/api")
    assert json.loads(body)["versions"] == ["v1"]
    doc = json.loads(request(kubesim, "GET", "/api/v1")[2])
    assert doc["groupVersion"] == "v1" and doc["kind"] == "APIResourceList"
    by_name = {r["name"]: r for r in doc["resources"]}
    assert by_name["namespaces"]["namespaced"] is False
    assert by_name["pods"]["shortNames"] == ["po"]
    assert "pods/status" in by_name and "pods/log" in by_name
    assert by_name["resourcequotas"]["kind"] == "ResourceQuota"
    groups = json.loads(request(kubesim, "GET", "/apis")[2])
    names = {g["name"]: g for g in groups["groups"]}
    for g in ("rbac.authorization.k8s.io", "networking.k8s.io", "scheduling.k8s.io",
              "storage.k8s.io", "apiextensions.k8s.io", "kubeflow.org"):
        assert g in names
    assert names["kubeflow.org"]["preferredVersion"]["version"] == "v1"
    kf = json.loads(request(kubesim, "GET", "/apis/kubeflow.org/v1")[2])
    assert {r["name"] for r in kf["resources"]} >= {"pytorchjobs", "pytorchjobs/status"}
    assert json.loads(request(kubesim, "GET", "/apis/kubeflow.org")[2])["kind"] == "APIGroup"
    assert request(kubesim, "GET", "/apis/nope.example.com/v1")[0] == 404


def test_dynamic_client_finds_every_kind(kubesim):
    d = dyn(kubesim)
    for api_version, kind in [
            ("v1", "Namespace"), ("v1", "Node"), ("v1", "Pod"), ("v1", "Event"),
            ("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "ServiceAccount"), ("v1", "Service"),
            ("v1", "PersistentVolumeClaim"), ("v1", "ResourceQuota"), ("v1", "LimitRange"),
            ("rbac.authorization.k8s.io/v1", "Role"),
            ("rbac.authorization.k8s.io/v1", "RoleBinding"),
            ("rbac.authorization.k8s.io/v1", "ClusterRole"),
            ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
            ("networking.k8s.io/v1", "NetworkPolicy"),
            ("scheduling.k8s.io/v1", "PriorityClass"), ("storage.k8s.io/v1", "StorageClass"),
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition"), ("batch/v1", "Job"),
            ("events.k8s.io/v1", "Event"),
            ("kubeflow.org/v1", "PyTorchJob")]:
        res = d.resources.get(api_version=api_version, kind=kind)
        listed = res.get()
        assert listed.kind == f"{kind}List"
        assert listed.apiVersion == api_version


def test_lists_carry_kind_and_round_trip_through_models(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_pod("team-a", pod("p", limits={"cpu": "1", "memory": "1Gi"}))
    kubesim.advance(5)
    _status, _, body = request(kubesim, "GET", "/api/v1/pods")
    doc = json.loads(body)
    assert doc["kind"] == "PodList" and doc["apiVersion"] == "v1"
    api = kubesim.api_client
    for path, model in (("/api/v1/pods", "V1PodList"), ("/api/v1/nodes", "V1NodeList"),
                        ("/api/v1/namespaces", "V1NamespaceList"),
                        ("/api/v1/events", "CoreV1EventList")):
        raw = request(kubesim, "GET", path)[2].decode()
        obj = api.deserialize(raw, model, "application/json")
        assert obj.items, path
    # every object the simulation wrote is schema-complete for the strict models
    assert c.list_node().items[0].status.capacity
    p = c.read_namespaced_pod("p", "team-a")
    assert p.status.phase in ("Pending", "Running")
    for cs in p.status.container_statuses or []:
        assert isinstance(cs.image, str) and isinstance(cs.restart_count, int)


def test_unknown_paths_and_protobuf(kubesim):
    assert request(kubesim, "GET", "/api/v1/widgets")[0] == 404
    status, _, body = request(kubesim, "POST", "/api/v1/namespaces", b"\x0a\x02",
                              content_type="application/vnd.kubernetes.protobuf")
    assert status == 415
    assert json.loads(body)["reason"] == "UnsupportedMediaType"
    status, _, body = request(kubesim, "POST", "/api/v1/namespaces", b"{not json")
    assert status == 400 and json.loads(body)["reason"] == "BadRequest"


def test_method_not_allowed(kubesim):
    ns(kubesim)
    core(kubesim).create_namespaced_config_map("team-a", {"metadata": {"name": "x"}})
    for method, path in (("POST", "/api/v1/namespaces/team-a/configmaps/x"),
                         ("PUT", "/api/v1/namespaces/team-a/configmaps"),
                         ("PATCH", "/api/v1/namespaces/team-a/configmaps")):
        status, _, body = request(kubesim, method, path, {"metadata": {"name": "x"}},
                                  content_type="application/merge-patch+json"
                                  if method == "PATCH" else "application/json")
        assert status == 405 and json.loads(body)["reason"] == "MethodNotAllowed", method


def test_everything_the_simulation_writes_round_trips(kubesim):
    """Run a PyTorchJob through the simulation, then read every built-in kind back through
    the client's strict models."""
    from kubesim.resources import BUILTINS
    ns(kubesim)
    tmpl = {"spec": {"containers": [{"name": "pytorch", "image": "trainer:1",
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    kubernetes.client.CustomObjectsApi(kubesim.api_client).create_namespaced_custom_object(
        "kubeflow.org", "v1", "team-a", "pytorchjobs", {
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "j"},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": tmpl},
                                             "Worker": {"replicas": 2, "template": tmpl}}}})
    core(kubesim).create_namespaced_resource_quota("team-a", {
        "metadata": {"name": "q"}, "spec": {"hard": {"requests.nvidia.com/gpu": "8"}}})
    kubesim.advance(120, step=5)
    api = kubesim.api_client
    seen = {}
    for rt in BUILTINS:
        if rt.verbs and "list" not in rt.verbs:
            continue   # reviews are create-only
        prefix = "/api/v1" if not rt.group else f"/apis/{rt.group}/{rt.version}"
        status, _, raw = request(kubesim, "GET", f"{prefix}/{rt.plural}")
        assert status == 200, rt.key
        model = ("EventsV1EventList" if rt.group == "events.k8s.io" else
                 "CoreV1EventList" if rt.model == "CoreV1Event" else
                 "V1ResourceClaimList" if rt.model == "ResourceV1ResourceClaim" else
                 f"{rt.model}List")
        seen[rt.key] = len(api.deserialize(raw.decode(), model, "application/json").items)
    assert seen["pods"] == 3 and seen["nodes"] and seen["events"]
    assert seen["events.events.k8s.io"] == seen["events"]
    pods = core(kubesim).list_namespaced_pod("team-a").items
    assert {p.status.phase for p in pods} <= {"Running", "Succeeded"}
    assert core(kubesim).read_namespaced_resource_quota("q", "team-a").status.used[
        "requests.nvidia.com/gpu"] in ("3", "0")
