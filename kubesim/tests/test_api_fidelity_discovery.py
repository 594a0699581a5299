"""Discovery and negotiation as kube-apiserver answers them: OpenAPI v3/v2 documents,
aggregated discovery, verbose health checks, Table columns and a 406 for protobuf-only
requests. Each test names the Kubernetes source it follows (kubernetes/kubernetes)."""
from __future__ import annotations

import json

import pytest

from .helpers import core, ns, pod, request

pytestmark = pytest.mark.kubesim(simulate=False)

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def _get(k, path, accept="application/json"):
    status, headers, body = request(k, "GET", path, headers={"Accept": accept})
    return status, headers, body


def test_openapi_v3_root_and_crd_document(kubesim):
    """k8s.io/kube-openapi/pkg/handler3: /openapi/v3 lists one serverRelativeURL per
    group-version; a CRD's document carries its structural schema with apiVersion, kind and
    metadata added, named by the reversed group (apiextensions-apiserver
    pkg/controller/openapi/builder), and the PATCH operation lists fieldValidation, which
    is how kubectl decides to validate on the server (cli-runtime query_param_verifier_v3)."""
    status, _, body = _get(kubesim, "/openapi/v3")
    assert status == 200
    paths = json.loads(body)["paths"]
    assert {"api/v1", "apis/apps/v1", "apis/policy/v1", "apis/kubeflow.org/v1"} <= set(paths)
    url = paths["apis/kubeflow.org/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/apis/kubeflow.org/v1?hash=")
    status, headers, body = _get(kubesim, url)
    assert status == 200 and "immutable" in headers.get("Cache-Control", "")
    doc = json.loads(body)
    schema = doc["components"]["schemas"]["org.kubeflow.v1.PyTorchJob"]
    assert schema["x-kubernetes-group-version-kind"] == [
        {"group": "kubeflow.org", "version": "v1", "kind": "PyTorchJob"}]
    assert "pytorchReplicaSpecs" in schema["properties"]["spec"]["properties"]
    assert schema["properties"]["metadata"]["allOf"][0]["$ref"] == \
        "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    item = doc["paths"]["/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/{name}"]
    assert item["patch"]["x-kubernetes-group-version-kind"]["kind"] == "PyTorchJob"
    assert "fieldValidation" in [p["name"] for p in item["patch"]["parameters"]]


def test_openapi_v3_builtin_schemas_keep_patch_metadata(kubesim):
    """Built-in kinds carry the real definitions, including the strategic-merge extensions
    client-side apply reads (x-kubernetes-patch-merge-key on PodSpec.containers)."""
    status, _, body = _get(kubesim, "/openapi/v3/api/v1")
    assert status == 200
    schemas = json.loads(body)["components"]["schemas"]
    containers = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["items"]["$ref"] == "#/components/schemas/io.k8s.api.core.v1.Container"
    assert _get(kubesim, "/openapi/v3/apis/nothing.example/v1")[0] == 404
    status, _, body = _get(kubesim, "/openapi/v2")
    assert status == 200
    v2 = json.loads(body)
    assert v2["swagger"] == "2.0" and "io.k8s.api.apps.v1.Deployment" in v2["definitions"]


def test_crd_created_later_appears_in_openapi(kubesim):
    """The document of a group-version follows its CRDs (the root's hash changes)."""
    import kubernetes

    from .test_api_fidelity_subresources import CRD
    before = json.loads(_get(kubesim, "/openapi/v3")[2])["paths"]
    assert "apis/example.com/v1" not in before
    kubernetes.client.ApiextensionsV1Api(kubesim.api_client).create_custom_resource_definition(
        CRD)
    after = json.loads(_get(kubesim, "/openapi/v3")[2])["paths"]
    doc = json.loads(_get(kubesim, after["apis/example.com/v1"]["serverRelativeURL"])[2])
    assert "com.example.v1.Widget" in doc["components"]["schemas"]


def test_aggregated_discovery(kubesim):
    """apiserver/pkg/endpoints/discovery/aggregated: an Accept asking for
    apidiscovery.k8s.io/v2 APIGroupDiscoveryList gets one, with that Content-Type; pods/eviction
    answers policy/v1 Eviction."""
    accept = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
              "application/json")
    status, headers, body = _get(kubesim, "/apis", accept)
    assert status == 200
    assert headers["Content-Type"] == \
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    doc = json.loads(body)
    assert doc["kind"] == "APIGroupDiscoveryList"
    apps = next(g for g in doc["items"] if g["metadata"].get("name") == "apps")
    deploy = next(r for r in apps["versions"][0]["resources"] if r["resource"] == "deployments")
    assert deploy["scope"] == "Namespaced" and deploy["shortNames"] == ["deploy"]
    assert {"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1",
                                                      "kind": "Scale"},
            "verbs": ["get", "patch", "update"]} in deploy["subresources"]
    status, _, body = _get(kubesim, "/api", accept)
    core_v1 = json.loads(body)["items"][0]
    pods = next(r for r in core_v1["versions"][0]["resources"] if r["resource"] == "pods")
    eviction = next(s for s in pods["subresources"] if s["subresource"] == "eviction")
    assert eviction["responseKind"] == {"group": "policy", "version": "v1", "kind": "Eviction"}
    status, headers, body = _get(kubesim, "/apis")   # the legacy document otherwise
    assert json.loads(body)["kind"] == "APIGroupList"


def test_health_verbose(kubesim):
    """apiserver/pkg/server/healthz: ?verbose lists each check and ends with
    "<endpoint> check passed"; ?exclude marks a check excluded; /readyz/<check> alone."""
    status, _, body = _get(kubesim, "/readyz?verbose")
    text = body.decode()
    assert status == 200 and text.endswith("readyz check passed\n")
    assert "[+]ping ok" in text and "[+]etcd ok" in text and "[+]informer-sync ok" in text
    text = _get(kubesim, "/livez?verbose&exclude=etcd")[2].decode()
    assert "[+]etcd excluded: ok" in text and text.endswith("livez check passed\n")
    assert _get(kubesim, "/readyz")[2] == b"ok"
    assert _get(kubesim, "/readyz/ping")[2] == b"ok"
    assert _get(kubesim, "/readyz/nothing")[0] == 404


def test_protobuf_only_is_not_acceptable(kubesim):
    """negotiation/negotiate.go: no producible media type in Accept is 406 NotAcceptable
    with a Status; client-go's "protobuf,json" gets JSON."""
    status, _, body = _get(kubesim, "/api/v1/namespaces",
                           "application/vnd.kubernetes.protobuf")
    err = json.loads(body)
    assert status == 406 and err["reason"] == "NotAcceptable" and err["kind"] == "Status"
    assert err["message"].startswith("only the following media types are accepted: "
                                     "application/json")
    status, _, body = _get(kubesim, "/api/v1/namespaces",
                           "application/vnd.kubernetes.protobuf,application/json")
    assert status == 200 and json.loads(body)["kind"] == "NamespaceList"


def test_table_columns_follow_the_printers(kubesim):
    """pkg/printers/internalversion/printers.go: pods NAME READY STATUS RESTARTS AGE and, at
    priority 1 (-o wide), IP NODE NOMINATED NODE READINESS GATES; deployments NAME READY
    UP-TO-DATE AVAILABLE AGE (+CONTAINERS IMAGES SELECTOR); PDBs MIN AVAILABLE MAX
    UNAVAILABLE ALLOWED DISRUPTIONS AGE."""
    import kubernetes
    n = ns(kubesim)
    body = pod("p")
    body["spec"]["nodeName"] = "node-a"
    core(kubesim).create_namespaced_pod(n, body)
    doc = json.loads(_get(kubesim, f"/api/v1/namespaces/{n}/pods", TABLE)[2])
    cols = [(c["name"], c["priority"]) for c in doc["columnDefinitions"]]
    assert cols == [("Name", 0), ("Ready", 0), ("Status", 0), ("Restarts", 0), ("Age", 0),
                    ("IP", 1), ("Node", 1), ("Nominated Node", 1), ("Readiness Gates", 1)]
    assert doc["rows"][0]["cells"][:4] == ["p", "0/1", "Pending", "0"]
    assert doc["rows"][0]["cells"][6:] == ["node-a", "<none>", "<none>"]
    kubernetes.client.AppsV1Api(kubesim.api_client).create_namespaced_deployment(n, {
        "metadata": {"name": "web"}, "spec": {
            "replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "c", "image": "web:1"}]}}}})
    doc = json.loads(_get(kubesim, f"/apis/apps/v1/namespaces/{n}/deployments", TABLE)[2])
    assert [c["name"] for c in doc["columnDefinitions"]] == [
        "Name", "Ready", "Up-to-date", "Available", "Age", "Containers", "Images", "Selector"]
    cells = doc["rows"][0]["cells"]
    assert cells[:4] == ["web", "0/2", 0, 0] and cells[5:] == ["c", "web:1", "app=web"]
    kubernetes.client.PolicyV1Api(kubesim.api_client).create_namespaced_pod_disruption_budget(
        n, {"metadata": {"name": "web"}, "spec": {"maxUnavailable": "25%", "selector": {
            "matchLabels": {"app": "web"}}}})
    doc = json.loads(_get(kubesim, f"/apis/policy/v1/namespaces/{n}/poddisruptionbudgets",
                          TABLE)[2])
    assert [c["name"] for c in doc["columnDefinitions"]] == [
        "Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"]
    assert doc["rows"][0]["cells"][:4] == ["web", "N/A", "25%", 0]


def test_job_defaults_and_table(kubesim):
    """pkg/apis/batch/v1/defaults.go (completions and parallelism 1 when both are unset,
    backoffLimit 6, completionMode NonIndexed) and printers.go printJob (STATUS, COMPLETIONS
    "0/1 of 3" without completions, DURATION)."""
    import kubernetes
    n = ns(kubesim)
    batch = kubernetes.client.BatchV1Api(kubesim.api_client)
    tpl = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "m:1"}]}}
    j = batch.create_namespaced_job(n, {"metadata": {"name": "one"}, "spec": {"template": tpl}})
    assert (j.spec.completions, j.spec.parallelism, j.spec.backoff_limit,
            j.spec.completion_mode) == (1, 1, 6, "NonIndexed")
    batch.create_namespaced_job(n, {"metadata": {"name": "par"}, "spec": {
        "parallelism": 3, "template": tpl}})
    doc = json.loads(_get(kubesim, f"/apis/batch/v1/namespaces/{n}/jobs", TABLE)[2])
    assert [c["name"] for c in doc["columnDefinitions"]][:5] == [
        "Name", "Status", "Completions", "Duration", "Age"]
    rows = {r["cells"][0]: r["cells"] for r in doc["rows"]}
    assert rows["one"][1:3] == ["Running", "0/1"] and rows["par"][2] == "0/1 of 3"
