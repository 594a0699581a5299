"""CustomResourceDefinitions: the bundled PyTorchJob, registration by creating a CRD,
schema validation."""
from __future__ import annotations

from pathlib import Path

import kubernetes
import pytest

from kubesim.resources import default_crds, load_crd_file

from .helpers import api_error, custom, dyn, ns, request

pytestmark = pytest.mark.timeout(30)
# Upstream CRDs, byte-for-byte (crds/SOURCES.md): the PyTorchJob that kubesim serves and
# Trainer v2's TrainJob and Kueue's kinds, kept with the tests.
KUBESIM = Path(__file__).resolve().parents[1]
CRD_FILES = sorted([*(KUBESIM / "crds").glob("*.yaml"),
                    *(KUBESIM / "tests" / "crds").glob("*.yaml")])


def _job(name, master_replicas=1):
    tmpl = {"spec": {"containers": [{"name": "pytorch", "image": "trainer:1"}]}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "labels": {"trainyard.io/job": name}},
            "spec": {"runPolicy": {"suspend": True}, "pytorchReplicaSpecs": {
                "Master": {"replicas": master_replicas, "restartPolicy": "OnFailure",
                           "template": tmpl}}}}


@pytest.mark.kubesim(simulate=False)
def test_pytorchjob_crud_and_status_subresource(kubesim):
    co = custom(kubesim)
    ns(kubesim)
    created = co.create_namespaced_custom_object("kubeflow.org", "v1", "team-a", "pytorchjobs",
                                                 {**_job("j"), "status": {"conditions": []}})
    assert created["metadata"]["generation"] == 1 and "status" not in created
    listed = co.list_namespaced_custom_object("kubeflow.org", "v1", "team-a", "pytorchjobs",
                                              label_selector="trainyard.io/job=j")
    assert listed["kind"] == "PyTorchJobList" and [i["metadata"]["name"]
                                                   for i in listed["items"]] == ["j"]
    st = co.patch_namespaced_custom_object_status(
        "kubeflow.org", "v1", "team-a", "pytorchjobs", "j",
        {"status": {"conditions": [{"type": "Created", "status": "True"}]}})
    assert st["status"]["conditions"][0]["type"] == "Created"
    assert st["metadata"]["generation"] == 1
    out = co.patch_namespaced_custom_object("kubeflow.org", "v1", "team-a", "pytorchjobs", "j",
                                            {"spec": {"runPolicy": {"suspend": False}},
                                             "status": {"conditions": []}})
    assert out["metadata"]["generation"] == 2
    assert out["status"]["conditions"][0]["type"] == "Created"   # main resource keeps status
    co.delete_namespaced_custom_object("kubeflow.org", "v1", "team-a", "pytorchjobs", "j")
    assert api_error(co.get_namespaced_custom_object, "kubeflow.org", "v1", "team-a",
                     "pytorchjobs", "j")[0] == 404


def test_pytorchjob_schema_validation(kubesim):
    co = custom(kubesim)
    ns(kubesim)
    bad = _job("bad", master_replicas="one")
    bad["spec"]["runPolicy"]["suspend"] = "yes"
    status, body = api_error(co.create_namespaced_custom_object, "kubeflow.org", "v1", "team-a",
                             "pytorchjobs", bad)
    assert (status, body["reason"]) == (422, "Invalid")
    fields = {c["field"] for c in body["details"]["causes"]}
    assert fields == {"spec.pytorchReplicaSpecs.Master.replicas", "spec.runPolicy.suspend"}
    assert body["message"].startswith('PyTorchJob.kubeflow.org "bad" is invalid: ')
    missing = _job("m")
    del missing["spec"]["pytorchReplicaSpecs"]
    status, body = api_error(co.create_namespaced_custom_object, "kubeflow.org", "v1", "team-a",
                             "pytorchjobs", missing)
    assert status == 422
    assert body["details"]["causes"][0]["field"] == "spec.pytorchReplicaSpecs"
    assert co.list_namespaced_custom_object("kubeflow.org", "v1", "team-a",
                                            "pytorchjobs")["items"] == []


def _widget_crd(scope="Namespaced"):
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": scope,
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                               "shortNames": ["wg"]},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object", "properties": {"spec": {
                                           "type": "object", "required": ["size"],
                                           "properties": {"size": {"type": "integer",
                                                                   "maximum": 10}}}}}}}]}}


def test_creating_a_crd_serves_its_kind_and_deleting_removes_it(kubesim):
    ext = kubernetes.client.ApiextensionsV1Api(kubesim.api_client)
    crd = ext.create_custom_resource_definition(_widget_crd())
    assert {c.type for c in crd.status.conditions} >= {"Established", "NamesAccepted"}
    ns(kubesim)
    co = custom(kubesim)
    w = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
         "spec": {"size": 3}}
    co.create_namespaced_custom_object("example.com", "v1", "team-a", "widgets", w)
    w2 = {**w, "metadata": {"name": "w2"}, "spec": {"size": 11}}
    status, body = api_error(co.create_namespaced_custom_object, "example.com", "v1", "team-a",
                             "widgets", w2)
    assert status == 422 and body["details"]["causes"][0]["field"] == "spec.size"
    d = dyn(kubesim)
    assert d.resources.get(api_version="example.com/v1", kind="Widget").get(
        namespace="team-a").items[0].spec.size == 3
    ext.delete_custom_resource_definition("widgets.example.com")
    assert request(kubesim, "GET", "/apis/example.com/v1/namespaces/team-a/widgets")[0] == 404


def test_crd_validation(kubesim):
    ext = kubernetes.client.ApiextensionsV1Api(kubesim.api_client)
    bad = _widget_crd()
    bad["metadata"]["name"] = "wrong.example.com"
    status, body = api_error(ext.create_custom_resource_definition, bad)
    assert status == 422 and "spec.names.plural" in body["message"]


@pytest.mark.kubesim(simulate=False)
def test_every_upstream_crd_loads_and_is_served(kubesim):
    ext = kubernetes.client.ApiextensionsV1Api(kubesim.api_client)
    d = dyn(kubesim)
    assert len(CRD_FILES) >= 7
    # built in: PyTorchJob and Kueue's kinds (Kueue's served as v1beta2 only, see crds/SOURCE.md)
    builtin = {c["metadata"]["name"]: {v["name"] for v in c["spec"]["versions"]}
               for c in default_crds()}
    assert "workloads.kueue.x-k8s.io" in builtin
    for f in CRD_FILES:
        for crd in load_crd_file(f):
            name = crd["metadata"]["name"]
            try:
                ext.create_custom_resource_definition(crd)
            except kubernetes.client.exceptions.ApiException as e:
                assert e.status == 409 and name in builtin
            spec = crd["spec"]
            for v in spec["versions"]:
                if name in builtin and v["name"] not in builtin[name]:
                    continue
                res = d.resources.get(api_version=f"{spec['group']}/{v['name']}",
                                      kind=spec["names"]["kind"])
                assert res.namespaced == (spec["scope"] == "Namespaced")
                listed = res.get()
                assert listed.kind == spec["names"]["kind"] + "List"
    # a kueue ClusterQueue (cluster-scoped, v1beta2) validates against its schema
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
          "metadata": {"name": "cq"},
          "spec": {"namespaceSelector": {}, "resourceGroups": [{
              "coveredResources": ["nvidia.com/gpu"],
              "flavors": [{"name": "a100", "resources": [
                  {"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]}}
    co = custom(kubesim)
    out = co.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", cq)
    assert out["metadata"]["uid"]
    cq["metadata"]["name"] = "cq2"
    cq["spec"]["resourceGroups"] = "nope"
    assert api_error(co.create_cluster_custom_object, "kueue.x-k8s.io", "v1beta2",
                     "clusterqueues", cq)[0] == 422


def test_custom_resources_are_pruned_and_defaulted(kubesim):
    ext = kubernetes.client.ApiextensionsV1Api(kubesim.api_client)
    crd = _widget_crd()
    props = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    props["properties"]["color"] = {"type": "string", "default": "blue"}
    props["properties"]["extra"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    props["properties"]["labels"] = {"type": "object",
                                     "additionalProperties": {"type": "string"}}
    ext.create_custom_resource_definition(crd)
    ns(kubesim)
    co = custom(kubesim)
    out = co.create_namespaced_custom_object("example.com", "v1", "team-a", "widgets", {
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"size": 1, "typo": 5, "extra": {"anything": [1]}, "labels": {"a": "b"}},
        "unknownTop": True})
    assert out["spec"] == {"size": 1, "color": "blue", "extra": {"anything": [1]},
                           "labels": {"a": "b"}}
    assert "unknownTop" not in out
    out = co.patch_namespaced_custom_object("example.com", "v1", "team-a", "widgets", "w",
                                            {"spec": {"color": None, "typo2": 1}})
    assert out["spec"]["color"] == "blue" and "typo2" not in out["spec"]


def test_pytorchjob_webhook_like_the_training_operator(kubesim):
    co = custom(kubesim)
    ns(kubesim)
    bad = _job("j")
    bad["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    bad["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0][
        "name"] = "trainer"
    status, body = api_error(co.create_namespaced_custom_object, "kubeflow.org", "v1", "team-a",
                             "pytorchjobs", bad)
    assert (status, body["reason"]) == (403, "Forbidden")
    assert body["message"] == (
        'admission webhook "validator.pytorchjob.training-operator.kubeflow.org" denied the '
        "request: [spec.pytorchReplicaSpecs[Master].template.spec.containers: Required value: "
        "must have at least one container with name pytorch, "
        "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1]")
    status, body = api_error(co.create_namespaced_custom_object, "kubeflow.org", "v1", "team-a",
                             "pytorchjobs", _job("1-starts-with-digit"))
    assert status == 403 and "DNS-1035" in body["message"]
    co.create_namespaced_custom_object("kubeflow.org", "v1", "team-a", "pytorchjobs", _job("j"))
    status, _ = api_error(co.patch_namespaced_custom_object, "kubeflow.org", "v1", "team-a",
                          "pytorchjobs", "j",
                          {"spec": {"pytorchReplicaSpecs": {"Worker": {
                              "replicas": 1, "template": {"spec": {"containers": [
                                  {"name": "other", "image": "x"}]}}}}}})
    assert status == 403


def test_crd_immutability_rule_on_scheduling_queue(kubesim):
    co = custom(kubesim)
    ns(kubesim)
    job = _job("q")
    job["spec"]["runPolicy"]["schedulingPolicy"] = {"queue": "team-a"}
    co.create_namespaced_custom_object("kubeflow.org", "v1", "team-a", "pytorchjobs", job)
    status, body = api_error(co.patch_namespaced_custom_object, "kubeflow.org", "v1", "team-a",
                             "pytorchjobs", "q",
                             {"spec": {"runPolicy": {"schedulingPolicy": {"queue": "other"}}}})
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["details"]["causes"][0] == {
        "reason": "FieldValueInvalid", "field": "spec.runPolicy.schedulingPolicy.queue",
        "message": 'Invalid value: "other": spec.runPolicy.schedulingPolicy.queue is immutable'}
    out = co.patch_namespaced_custom_object("kubeflow.org", "v1", "team-a", "pytorchjobs", "q",
                                            {"spec": {"runPolicy": {"suspend": False}}})
    assert out["spec"]["runPolicy"]["schedulingPolicy"]["queue"] == "team-a"
