"""Create/read/update/delete semantics through the official client."""
from __future__ import annotations

import json

import kubernetes
import pytest

from .helpers import api_error, core, ns, own, pod, request

pytestmark = pytest.mark.timeout(30)


def test_metadata_is_filled_and_resource_version_is_global(kubesim):
    c = core(kubesim)
    a = c.create_namespace({"metadata": {"name": "a"}})
    cm = c.create_namespaced_config_map("a", {"metadata": {"name": "cm"}, "data": {"k": "v"}})
    assert a.metadata.uid and cm.metadata.uid and a.metadata.uid != cm.metadata.uid
    assert int(cm.metadata.resource_version) > int(a.metadata.resource_version)
    assert cm.metadata.creation_timestamp is not None
    assert a.status.phase == "Active"
    assert a.metadata.labels["kubernetes.io/metadata.name"] == "a"
    got = c.read_namespaced_config_map("cm", "a")
    assert got.data == {"k": "v"} and got.metadata.resource_version == cm.metadata.resource_version


def test_generate_name(kubesim):
    c = core(kubesim)
    ns(kubesim)
    names = {c.create_namespaced_config_map("team-a", {"metadata": {"generateName": "job-"}})
             .metadata.name for _ in range(5)}
    assert len(names) == 5
    assert all(n.startswith("job-") and len(n) == 9 for n in names)


@pytest.mark.parametrize("resource,name,field", [
    ("namespace", "Bad_Name", "metadata.name"),
    ("namespace", "a" * 64, "metadata.name"),
    ("config_map", "UPPER", "metadata.name"),
])
def test_invalid_names_give_422_with_causes(kubesim, resource, name, field):
    c = core(kubesim)
    if resource == "namespace":
        status, body = api_error(c.create_namespace, {"metadata": {"name": name}})
    else:
        ns(kubesim)
        status, body = api_error(c.create_namespaced_config_map, "team-a",
                                 {"metadata": {"name": name}})
    assert status == 422 and body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == field
    assert "is invalid" in body["message"]
    assert c.list_namespace(label_selector="kubernetes.io/metadata.name=" + name[:60]).items \
        == [] or resource != "namespace"


def test_subdomain_names_allowed_for_configmaps_not_namespaces(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_config_map("team-a", {"metadata": {"name": "a.b.c"}})
    assert api_error(c.create_namespace, {"metadata": {"name": "a.b"}})[0] == 422


def test_namespace_must_exist_and_body_namespace_must_match(kubesim):
    c = core(kubesim)
    status, body = api_error(c.create_namespaced_config_map, "nope", {"metadata": {"name": "x"}})
    assert status == 404 and body["message"] == 'namespaces "nope" not found'
    ns(kubesim)
    status, body = api_error(c.create_namespaced_config_map, "team-a",
                             {"metadata": {"name": "x", "namespace": "other"}})
    assert status == 400 and "does not match the namespace" in body["message"]
    status, body = api_error(c.replace_namespaced_config_map, "y", "team-a",
                             {"metadata": {"name": "x"}})
    assert status == 400 and "does not match the name" in body["message"]


def test_already_exists_and_not_found(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_config_map("team-a", {"metadata": {"name": "x"}})
    status, body = api_error(c.create_namespaced_config_map, "team-a", {"metadata": {"name": "x"}})
    assert (status, body["reason"]) == (409, "AlreadyExists")
    assert body["message"] == 'configmaps "x" already exists'
    status, body = api_error(c.read_namespaced_config_map, "zzz", "team-a")
    assert (status, body["reason"]) == (404, "NotFound")
    assert body["details"] == {"name": "zzz", "kind": "configmaps"}


def test_put_with_stale_resource_version_conflicts(kubesim):
    c = core(kubesim)
    ns(kubesim)
    cm = c.create_namespaced_config_map("team-a", {"metadata": {"name": "x"}, "data": {"a": "1"}})
    cm.data = {"a": "2"}
    updated = c.replace_namespaced_config_map("x", "team-a", cm)
    assert updated.data == {"a": "2"}
    assert int(updated.metadata.resource_version) > int(cm.metadata.resource_version)
    cm.data = {"a": "3"}   # still carries the old resourceVersion
    status, body = api_error(c.replace_namespaced_config_map, "x", "team-a", cm)
    assert (status, body["reason"]) == (409, "Conflict")
    assert "the object has been modified" in body["message"]
    assert c.read_namespaced_config_map("x", "team-a").data == {"a": "2"}
    status, _ = api_error(c.patch_namespaced_config_map, "x", "team-a",
                          {"metadata": {"resourceVersion": cm.metadata.resource_version},
                           "data": {"a": "4"}})
    assert status == 409


def test_noop_update_keeps_resource_version(kubesim):
    c = core(kubesim)
    ns(kubesim)
    cm = c.create_namespaced_config_map("team-a", {"metadata": {"name": "x"}, "data": {"a": "1"}})
    same = c.patch_namespaced_config_map("x", "team-a", {"data": {"a": "1"}})
    assert same.metadata.resource_version == cm.metadata.resource_version


def test_generation_bumps_on_spec_not_on_metadata_or_status(kubesim):
    c = core(kubesim)
    ns(kubesim)
    q = c.create_namespaced_resource_quota("team-a", {"metadata": {"name": "q"},
                                                      "spec": {"hard": {"pods": "2"}}})
    assert q.metadata.generation == 1
    q = c.patch_namespaced_resource_quota("q", "team-a", {"metadata": {"labels": {"x": "y"}}})
    assert q.metadata.generation == 1
    q = c.patch_namespaced_resource_quota("q", "team-a", {"spec": {"hard": {"pods": "3"}}})
    assert q.metadata.generation == 2


def test_status_subresource_semantics(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_persistent_volume_claim("team-a", {
        "metadata": {"name": "v"}, "status": {"phase": "Bound"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    pvc = c.read_namespaced_persistent_volume_claim("v", "team-a")
    assert pvc.status.phase == "Pending"           # create ignores status
    c.patch_namespaced_persistent_volume_claim("v", "team-a", {"status": {"phase": "Lost"}})
    assert c.read_namespaced_persistent_volume_claim("v", "team-a").status.phase == "Pending"
    out = c.patch_namespaced_persistent_volume_claim_status(
        "v", "team-a", {"status": {"phase": "Bound"}, "metadata": {"labels": {"x": "1"}}})
    assert out.status.phase == "Bound"
    assert not (out.metadata.labels or {}).get("x")  # /status ignores metadata changes


def test_pod_defaults_and_quantity_normalisation(kubesim):
    c = core(kubesim)
    ns(kubesim)
    p = c.create_namespaced_pod("team-a", pod("p", limits={"cpu": "1000m", "memory": "1024Mi"},
                                              requests={"cpu": "0.5"}))
    ctr = p.spec.containers[0]
    assert ctr.resources.limits == {"cpu": "1", "memory": "1Gi"}
    assert ctr.resources.requests == {"cpu": "500m", "memory": "1Gi"}  # memory from limits
    assert p.status.phase == "Pending" and p.status.qos_class == "Burstable"
    assert p.spec.restart_policy == "Always" and p.spec.termination_grace_period_seconds == 30
    # untyped bodies (kubectl, DynamicClient) may send numbers: stored as strings
    status, _, _body = request(kubesim, "POST", "/api/v1/namespaces/team-a/pods",
                              pod("q", limits={"cpu": 2, "nvidia.com/gpu": 1},
                                  requests={"cpu": 0.5}))
    assert status == 201
    q = c.read_namespaced_pod("q", "team-a")
    assert q.spec.containers[0].resources.limits == {"cpu": "2", "nvidia.com/gpu": "1"}
    assert q.spec.containers[0].resources.requests["cpu"] == "500m"


def test_pod_validation(kubesim):
    c = core(kubesim)
    ns(kubesim)
    status, body = api_error(c.create_namespaced_pod, "team-a", pod("p", image=""))
    assert status == 422
    assert body["details"]["causes"][0]["field"] == "spec.containers[0].image"
    status, body = api_error(c.create_namespaced_pod, "team-a",
                             pod("p", limits={"nvidia.com/gpu": "1"},
                                 requests={"nvidia.com/gpu": "2"}))
    assert status == 422 and "nvidia.com/gpu" in body["message"]
    status, body = api_error(c.create_namespaced_pod, "team-a",
                             pod("p", limits={"cpu": "1"}, requests={"cpu": "2"}))
    assert status == 422
    assert c.list_namespaced_pod("team-a").items == []
    p = c.create_namespaced_pod("team-a", pod("ok"))
    status, body = api_error(c.patch_namespaced_pod, "ok", "team-a",
                             {"spec": {"restartPolicy": "Never"}})
    assert status == 422 and "pod updates may not change" in body["message"]
    c.patch_namespaced_pod("ok", "team-a", {"spec": {"containers": [
        {"name": "main", "image": "busybox:2"}]}})
    assert c.read_namespaced_pod("ok", "team-a").spec.containers[0].image == "busybox:2"
    assert p.metadata.name == "ok"
    # a PUT that omits defaulted fields is defaulted again, not taken as a spec change
    p = c.read_namespaced_pod("ok", "team-a")
    p.spec.tolerations = None
    p.spec.dns_policy = None
    p.spec.containers[0].image = "busybox:3"
    out = c.replace_namespaced_pod("ok", "team-a", p)
    assert out.spec.containers[0].image == "busybox:3" and len(out.spec.tolerations) == 2


def test_immutable_fields(kubesim):
    c = core(kubesim)
    rbac = __import__("kubernetes").client.RbacAuthorizationV1Api(kubesim.api_client)
    sched = __import__("kubernetes").client.SchedulingV1Api(kubesim.api_client)
    ns(kubesim)
    rbac.create_namespaced_role_binding("team-a", {
        "metadata": {"name": "rb"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "a"},
        "subjects": [{"kind": "Group", "name": "g", "apiGroup": "rbac.authorization.k8s.io"}]})
    status, body = api_error(rbac.patch_namespaced_role_binding, "rb", "team-a",
                             {"roleRef": {"name": "b"}})
    assert status == 422 and "cannot change roleRef" in body["message"]
    sched.create_priority_class({"metadata": {"name": "tier-x"}, "value": 1000})
    status, body = api_error(sched.patch_priority_class, "tier-x", {"value": 5})
    assert status == 422 and body["details"]["causes"][0]["field"] == "value"
    assert sched.read_priority_class("tier-x").value == 1000
    c.delete_namespace("team-a")


def test_finalizers_hold_deletion(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_config_map("team-a", {"metadata": {"name": "f",
                                                           "finalizers": ["example.com/x"]}})
    c.delete_namespaced_config_map("f", "team-a")
    held = c.read_namespaced_config_map("f", "team-a")
    assert held.metadata.deletion_timestamp is not None
    c.patch_namespaced_config_map("f", "team-a", {"metadata": {"finalizers": None}})
    assert api_error(c.read_namespaced_config_map, "f", "team-a")[0] == 404


def test_bound_pod_waits_for_kubelet_unbound_pod_goes_at_once(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_pod("team-a", pod("unbound"))
    c.delete_namespaced_pod("unbound", "team-a")
    assert api_error(c.read_namespaced_pod, "unbound", "team-a")[0] == 404
    c.create_namespaced_pod("team-a", pod("bound"))
    kubesim.call(kubesim.store.patch, "pods", "bound", {"spec": {"nodeName": "a100-0"}},
                 namespace="team-a")
    c.delete_namespaced_pod("bound", "team-a", grace_period_seconds=20)
    p = c.read_namespaced_pod("bound", "team-a")
    assert p.metadata.deletion_timestamp is not None
    assert p.metadata.deletion_grace_period_seconds == 20
    kubesim.call(kubesim.store.delete, "pods", "bound", namespace="team-a",
                 grace_period_seconds=0)
    assert api_error(c.read_namespaced_pod, "bound", "team-a")[0] == 404


@pytest.mark.kubesim(simulate=False)
def test_namespace_deletion_terminating_then_gone(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_config_map("team-a", {"metadata": {"name": "plain"}})
    c.create_namespaced_config_map("team-a", {"metadata": {"name": "held",
                                                           "finalizers": ["example.com/x"]}})
    c.delete_namespace("team-a")
    n = c.read_namespace("team-a")
    assert n.status.phase == "Terminating" and n.metadata.deletion_timestamp
    assert api_error(c.read_namespaced_config_map, "plain", "team-a")[0] == 404
    status, body = api_error(c.create_namespaced_config_map, "team-a",
                             {"metadata": {"name": "new"}})
    assert status == 403 and "being terminated" in body["message"]
    c.patch_namespaced_config_map("held", "team-a", {"metadata": {"finalizers": None}})
    assert api_error(c.read_namespace, "team-a")[0] == 404


def test_delete_collection_with_selector(kubesim):
    c = core(kubesim)
    ns(kubesim)
    for i in range(4):
        c.create_namespaced_config_map("team-a", {"metadata": {
            "name": f"c{i}", "labels": {"grp": "x" if i % 2 else "y"}}})
    c.delete_collection_namespaced_config_map("team-a", label_selector="grp=x")
    assert sorted(x.metadata.name for x in own(c.list_namespaced_config_map("team-a").items)) \
        == ["c0", "c2"]


def test_dry_run_changes_nothing(kubesim):
    c = core(kubesim)
    ns(kubesim)
    out = c.create_namespaced_config_map("team-a", {"metadata": {"name": "d"}}, dry_run="All")
    assert out.metadata.name == "d"
    assert own(c.list_namespaced_config_map("team-a").items) == []


def test_pod_log_subresource(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_pod("team-a", pod("p"))
    # not scheduled yet: the API server has no kubelet to ask (a 400, as kube-apiserver)
    assert api_error(c.read_namespaced_pod_log, "p", "team-a")[0] == 400
    assert api_error(c.read_namespaced_pod_log, "nope", "team-a")[0] == 404


def test_binding_subresource(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_pod("team-a", pod("p"))
    status, _, _ = request(kubesim, "POST", "/api/v1/namespaces/team-a/pods/p/binding",
                           {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
                            "target": {"kind": "Node", "name": "a100-0"}})
    assert status == 201
    assert c.read_namespaced_pod("p", "team-a").spec.node_name == "a100-0"
    status, _, _ = request(kubesim, "POST", "/api/v1/namespaces/team-a/pods/p/binding",
                           {"target": {"kind": "Node", "name": "a100-1"}})
    assert status == 409


def test_field_validation_strict_warn_ignore(kubesim):
    c = core(kubesim)
    ns(kubesim)
    body = {"metadata": {"name": "s"}, "data": {"a": "1"}}
    status, _, raw = request(kubesim, "POST",
                             "/api/v1/namespaces/team-a/configmaps?fieldValidation=Strict",
                             {**body, "dta": {"typo": "1"}, "metadata": {"name": "s",
                                                                        "lables": {}}})
    assert status == 400
    msg = json.loads(raw)["message"]
    assert msg == ('strict decoding error: unknown field "dta", '
                   'unknown field "metadata.lables"')
    assert own(c.list_namespaced_config_map("team-a").items) == []
    status, headers, _ = request(kubesim, "POST",
                                 "/api/v1/namespaces/team-a/configmaps?fieldValidation=Warn",
                                 {**body, "dta": 1})
    assert status == 201 and headers["Warning"] == '299 - "unknown field \\"dta\\""'
    status, headers, _ = request(kubesim, "PATCH",
                                 "/api/v1/namespaces/team-a/configmaps/s",
                                 {"data": {"b": "2"}}, "application/merge-patch+json")
    assert status == 200 and "Warning" not in headers
    status, headers, _ = request(kubesim, "PATCH",   # Warn is the default
                                 "/api/v1/namespaces/team-a/configmaps/s",
                                 {"dataa": {"b": "2"}}, "application/merge-patch+json")
    assert status == 200 and "dataa" in headers["Warning"]
    status, headers, _ = request(kubesim, "PATCH",
                                 "/api/v1/namespaces/team-a/configmaps/s?fieldValidation=Ignore",
                                 {"dataa": {"b": "3"}}, "application/merge-patch+json")
    assert status == 200 and "Warning" not in headers
    # custom resources: unknown fields of the structural schema
    from kubernetes.client.exceptions import ApiException
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "j"},
           "spec": {"runPolicy": {"suspnd": True}, "pytorchReplicaSpecs": {}}}
    with pytest.raises(ApiException) as ei:
        kubernetes.client.CustomObjectsApi(kubesim.api_client).create_namespaced_custom_object(
            "kubeflow.org", "v1", "team-a", "pytorchjobs", job, field_validation="Strict")
    assert ei.value.status == 400
    assert json.loads(ei.value.body)["message"] == (
        'strict decoding error: unknown field "spec.runPolicy.suspnd"')
