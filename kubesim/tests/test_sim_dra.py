"""Dynamic Resource Allocation in kubesim (resource.k8s.io/v1), through the official client
over HTTP on the `dra` profile: the four kinds (CRUD, defaults, validation, strict
Kubernetes 1.34 OpenAPI), the simulated NVIDIA DRA driver's slices and classes, claim
allocation by the scheduler (CEL selectors, count, one claim per device, release), the
ResourceQuota keys, and Kueue's deviceClassMappings."""

from __future__ import annotations

import json

import kubernetes
import kubernetes_validate
import pytest
from kubernetes.client import ApiException

from kubesim.dra import CelError, claim_usage, compile_selector
from kubesim.sim.harness import make_job

from .helpers import request
from .test_sim_kueue import K, V, cond, lq, workload
from .test_sim_kueue_podsready import configure

pytestmark = pytest.mark.kubesim(profile="dra")
NS = "dra"
G = "resource.k8s.io"
L40S = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA L40S'"
H100 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"


@pytest.fixture
def apis(kubesim):
    core = kubernetes.client.CoreV1Api(kubesim.api_client)
    res = kubernetes.client.ResourceV1Api(kubesim.api_client)
    core.create_namespace({"metadata": {"name": NS}})
    return core, res


def strict(obj) -> None:
    """The project's strict validator: the Kubernetes 1.34 OpenAPI, unknown fields refused."""
    if not isinstance(obj, dict):
        obj = kubernetes.client.ApiClient().sanitize_for_serialization(obj)
    assert kubernetes_validate.validate(obj, "1.34", strict=True) == "1.34"


def request_spec(name="gpu", cls="gpu.nvidia.com", count=None, selectors=(), mode=None):
    exact: dict = {"deviceClassName": cls}
    if count is not None:
        exact["count"] = count
    if mode:
        exact["allocationMode"] = mode
    if selectors:
        exact["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"devices": {"requests": [{"name": name, "exactly": exact}]}}


def template(res, name, **kw):
    return res.create_namespaced_resource_claim_template(NS, {
        "apiVersion": f"{G}/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
        "spec": {"spec": request_spec(**kw)}})


def pod(core, name, *, tmpl=None, claim=None, run_seconds=None):
    pc = {"name": "gpu"}
    pc["resourceClaimTemplateName" if tmpl else "resourceClaimName"] = tmpl or claim
    ann = {"kubesim.trainyard.io/run-seconds": str(run_seconds)} if run_seconds else {}
    return core.create_namespaced_pod(NS, {
        "metadata": {"name": name, "annotations": ann},
        "spec": {"resourceClaims": [pc], "restartPolicy": "Never", "containers": [
            {"name": "c", "image": "registry.example/train:1.0",
             "resources": {"claims": [{"name": "gpu"}]}}]}})


def claims_of(res):
    return {c.metadata.name: c for c in res.list_namespaced_resource_claim(NS).items}


def devices(claim) -> list[tuple[str, str]]:
    alloc = claim.status.allocation if claim.status else None
    return [(r.pool, r.device) for r in alloc.devices.results] if alloc else []


# ---- the API ----------------------------------------------------------------------------------
def test_discovery_lists_the_four_kinds_and_the_claim_status(kubesim):
    status, _, raw = request(kubesim, "GET", f"/apis/{G}/v1")
    assert status == 200
    doc = json.loads(raw)
    names = {r["name"]: r for r in doc["resources"]}
    assert {"deviceclasses", "resourceslices", "resourceclaims", "resourceclaims/status",
            "resourceclaimtemplates"} <= set(names)
    assert names["resourceclaims"]["namespaced"] and not names["deviceclasses"]["namespaced"]
    assert not names["resourceslices"]["namespaced"]
    assert names["resourceclaims/status"]["verbs"] == ["get", "patch", "update"]


def test_crud_defaults_and_every_object_validates_strictly(kubesim, apis):
    core, res = apis
    res.create_device_class({"apiVersion": f"{G}/v1", "kind": "DeviceClass",
                             "metadata": {"name": "big-gpu.example.com"},
                             "spec": {"selectors": [{"cel": {"expression": (
                                 "device.capacity['gpu.nvidia.com'].memory"
                                 ".compareTo(quantity('40Gi')) >= 0")}}]}})
    tmpl = template(res, "one", selectors=[L40S])
    exact = tmpl.spec.spec.devices.requests[0].exactly
    # v1 defaults.go: ExactCount, count 1
    assert (exact.allocation_mode, exact.count) == ("ExactCount", 1)
    claim = res.create_namespaced_resource_claim(NS, {
        "apiVersion": f"{G}/v1", "kind": "ResourceClaim", "metadata": {"name": "all-l40s"},
        "spec": request_spec(mode="All", selectors=[L40S]),
        "status": {"reservedFor": [{"resource": "pods", "name": "x", "uid": "1"}]}})
    assert claim.status is None or not claim.status.reserved_for   # a create drops status
    pod(core, "p", tmpl="one")
    kubesim.advance(5)
    everything = [*res.list_device_class().items, *res.list_resource_slice().items,
                  *res.list_namespaced_resource_claim(NS).items,
                  *res.list_namespaced_resource_claim_template(NS).items]
    assert len(everything) == 3 + 4 + 2 + 1
    for obj in everything:
        strict(obj)
    allocated = [c for c in res.list_namespaced_resource_claim(NS).items
                 if c.status and c.status.allocation]
    assert allocated, "the template's claim is allocated, so its status was validated too"
    res.delete_namespaced_resource_claim("all-l40s", NS)
    with pytest.raises(ApiException) as exc:
        res.read_namespaced_resource_claim("all-l40s", NS)
    assert exc.value.status == 404


@pytest.mark.parametrize(("spec", "field", "words"), [
    (request_spec(cls=""), "spec.devices.requests[0].exactly.deviceClassName", "Required"),
    (request_spec(count=-1, mode="ExactCount"), "spec.devices.requests[0].exactly.count",
     "must be greater than zero"),
    (request_spec(count=2, mode="All"), "spec.devices.requests[0].exactly.count",
     "must not be specified when allocationMode is 'All'"),
    (request_spec(mode="Some"), "spec.devices.requests[0].exactly.allocationMode",
     "Unsupported value"),
    (request_spec(selectors=["device.driver = 'x'"]),
     "spec.devices.requests[0].exactly.selectors[0].cel.expression", "compilation failed"),
    ({"devices": {"requests": [{"name": "gpu"}]}}, "spec.devices.requests[0]",
     "exactly one of `exactly` or `firstAvailable` is required"),
    ({"devices": {"requests": [{"name": "Bad_Name", "exactly": {
        "deviceClassName": "gpu.nvidia.com"}}]}}, "spec.devices.requests[0].name",
     "RFC 1123 label"),
])
def test_claim_validation(apis, spec, field, words):
    _, res = apis
    with pytest.raises(ApiException) as exc:
        res.create_namespaced_resource_claim(NS, {
            "apiVersion": f"{G}/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
            "spec": spec})
    assert exc.value.status == 422
    causes = json.loads(exc.value.body)["details"]["causes"]
    assert any(c["field"] == field and words in c["message"] for c in causes), causes


def test_claim_and_template_specs_are_immutable_and_strict_fields(kubesim, apis):
    _, res = apis
    res.create_namespaced_resource_claim(NS, {
        "apiVersion": f"{G}/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
        "spec": request_spec()})
    template(res, "t")
    for patch in (lambda: res.patch_namespaced_resource_claim(
            "c", NS, {"spec": request_spec(count=2)}),
            lambda: res.patch_namespaced_resource_claim_template(
                "t", NS, {"spec": {"spec": request_spec(count=2)}})):
        with pytest.raises(ApiException) as exc:
            patch()
        assert exc.value.status == 422 and "field is immutable" in exc.value.body
    status, _, raw = request(kubesim, "POST", f"/apis/{G}/v1/deviceclasses?fieldValidation=Strict",
                             {"apiVersion": f"{G}/v1", "kind": "DeviceClass",
                              "metadata": {"name": "x"}, "spec": {"selectorz": []}})
    assert status == 400 and json.loads(raw)["message"] == (
        'strict decoding error: unknown field "spec.selectorz"')


def test_slice_validation(apis):
    _, res = apis
    with pytest.raises(ApiException) as exc:
        res.create_resource_slice({"apiVersion": f"{G}/v1", "kind": "ResourceSlice",
                                   "metadata": {"name": "s"},
                                   "spec": {"driver": "x.example.com",
                                            "pool": {"name": "p", "generation": 0,
                                                     "resourceSliceCount": 1}}})
    assert exc.value.status == 422 and "exactly one of `nodeName`" in exc.value.body


# ---- the driver -------------------------------------------------------------------------------
def test_the_driver_publishes_one_slice_per_dra_node_with_gpus_and_mig_devices(kubesim, apis):
    core, res = apis
    slices = {s.spec.node_name: s for s in res.list_resource_slice().items}
    assert set(slices) == {"a100-dra-0", "a100-dra-1", "h100-dra-mig-0", "l40s-dra-0"}
    a100 = slices["a100-dra-0"]
    assert (a100.spec.driver, a100.spec.pool.name, a100.spec.pool.resource_slice_count) == (
        "gpu.nvidia.com", "a100-dra-0", 1)
    d0 = a100.spec.devices[0]
    assert d0.name == "gpu-0" and d0.attributes["type"].string == "gpu"
    assert d0.attributes["productName"].string == "NVIDIA A100-SXM4-80GB"
    assert d0.capacity["memory"].value == "81920Mi"
    h100 = slices["h100-dra-mig-0"].spec.devices
    kinds = [d.attributes["type"].string for d in h100]
    assert kinds.count("gpu") == 6 and kinds.count("mig") == 8
    profiles = sorted(d.attributes["profile"].string for d in h100 if d.attributes.get("profile"))
    assert profiles == ["1g.10gb"] * 6 + ["3g.40gb"] * 2
    classes = {c.metadata.name: c.spec.selectors[0].cel.expression
               for c in res.list_device_class().items}
    assert classes == {
        "gpu.nvidia.com": "device.driver == 'gpu.nvidia.com' && "
                          "device.attributes['gpu.nvidia.com'].type == 'gpu'",
        "mig.nvidia.com": "device.driver == 'gpu.nvidia.com' && "
                          "device.attributes['gpu.nvidia.com'].type == 'mig'"}
    # DRA nodes advertise no device-plugin resource; the device-plugin node still does
    alloc = {n.metadata.name: n.status.allocatable for n in core.list_node().items}
    assert "nvidia.com/gpu" not in alloc["a100-dra-0"] and alloc["a100-0"]["nvidia.com/gpu"] == "8"


# ---- allocation -------------------------------------------------------------------------------
def test_a_pod_with_a_claim_template_gets_a_device_runs_and_frees_it(kubesim, apis):
    core, res = apis
    template(res, "one-l40s", selectors=[L40S])
    pod(core, "train", tmpl="one-l40s")
    kubesim.advance(5)
    p = core.read_namespaced_pod("train", NS)
    assert p.spec.node_name == "l40s-dra-0" and p.status.phase == "Running"
    [st] = p.status.resource_claim_statuses
    claim = res.read_namespaced_resource_claim(st.resource_claim_name, NS)
    # pkg/controller/resourceclaim: <pod>-<claim>-<5 chars>, owned by the pod
    assert claim.metadata.name.startswith("train-gpu-") and len(claim.metadata.name) == 15
    [owner] = claim.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid, owner.controller) == ("Pod", "train",
                                                                   p.metadata.uid, True)
    assert claim.metadata.annotations["resource.kubernetes.io/pod-claim-name"] == "gpu"
    [r] = claim.status.allocation.devices.results
    assert (r.request, r.driver, r.pool, r.device) == ("gpu", "gpu.nvidia.com", "l40s-dra-0",
                                                       "gpu-0")
    term = claim.status.allocation.node_selector.node_selector_terms[0]
    assert term.match_fields[0].values == ["l40s-dra-0"]
    assert [(x.resource, x.name, x.uid) for x in claim.status.reserved_for] == [
        ("pods", "train", p.metadata.uid)]
    slice_ = next(s for s in res.list_resource_slice().items if s.spec.node_name == "l40s-dra-0")
    uuid = slice_.spec.devices[0].attributes["uuid"].string
    # the kubelet's DCGM metrics see the card the claim holds
    assert [a["uuid"] for a in kubesim.sim.gpu_assignment(NS, "train")] == [uuid]
    metrics = kubesim.sim.metrics_text()
    assert any(f'UUID="{uuid}"' in line and 'pod="train"' in line
               for line in metrics.splitlines() if line.startswith("DCGM_FI_DEV_GPU_UTIL"))
    core.delete_namespaced_pod("train", NS, grace_period_seconds=0)
    kubesim.advance(2)
    assert claims_of(res) == {}     # the claim went with its pod
    assert kubesim.sim.gpu_assignment(NS, "train") == []


def test_two_pods_never_share_a_device_and_a_release_lets_the_next_one_in(kubesim, apis):
    core, res = apis
    template(res, "one-l40s", selectors=[L40S])
    for i in range(5):
        pod(core, f"p{i}", tmpl="one-l40s", run_seconds=30 if i == 0 else None)
        kubesim.advance(1)
    kubesim.advance(3)
    pods = {p.metadata.name: p for p in core.list_namespaced_pod(NS).items}
    used = [d for c in claims_of(res).values() for d in devices(c)]
    assert len(used) == 4 and len(set(used)) == 4      # four cards, each to one claim
    assert pods["p4"].spec.node_name is None
    sched = next(c for c in pods["p4"].status.conditions if c.type == "PodScheduled")
    assert "cannot allocate all claims" in sched.message and sched.reason == "Unschedulable"
    assert sched.message.startswith("0/6 nodes are available:")
    kubesim.advance(40)    # p0 succeeds: its generated claim is deleted, the card is free
    assert core.read_namespaced_pod("p0", NS).status.phase == "Succeeded"
    kubesim.advance(3)
    p4 = core.read_namespaced_pod("p4", NS)
    assert p4.spec.node_name == "l40s-dra-0"
    used = [d for c in claims_of(res).values() for d in devices(c)]
    assert len(used) == 4 and len(set(used)) == 4


def test_a_shared_claim_is_released_when_its_pods_are_gone(kubesim, apis):
    core, res = apis
    res.create_namespaced_resource_claim(NS, {
        "apiVersion": f"{G}/v1", "kind": "ResourceClaim", "metadata": {"name": "shared"},
        "spec": request_spec(count=2, selectors=[H100])})
    pod(core, "a", claim="shared")
    pod(core, "b", claim="shared")
    kubesim.advance(5)
    claim = res.read_namespaced_resource_claim("shared", NS)
    assert sorted(x.name for x in claim.status.reserved_for) == ["a", "b"]
    assert devices(claim) == [("h100-dra-mig-0", "gpu-0"), ("h100-dra-mig-0", "gpu-1")]
    assert {core.read_namespaced_pod(n, NS).spec.node_name for n in "ab"} == {"h100-dra-mig-0"}
    core.delete_namespaced_pod("a", NS, grace_period_seconds=0)
    kubesim.advance(2)
    claim = res.read_namespaced_resource_claim("shared", NS)
    assert [x.name for x in claim.status.reserved_for] == ["b"] and claim.status.allocation
    core.delete_namespaced_pod("b", NS, grace_period_seconds=0)
    kubesim.advance(2)
    claim = res.read_namespaced_resource_claim("shared", NS)   # kept, deallocated
    assert not claim.status.reserved_for and claim.status.allocation is None


def test_cel_selectors_pick_the_model_the_mig_profile_and_the_memory(kubesim, apis):
    core, res = apis
    template(res, "h100", selectors=[H100])
    template(res, "mig-3g", cls="mig.nvidia.com", selectors=[
        "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"])
    template(res, "big", selectors=[
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('50Gi')) >= 0",
        "device.attributes['gpu.nvidia.com'].architecture == 'Ampere'"])
    for name in ("h100", "mig-3g", "big"):
        pod(core, name, tmpl=name)
    kubesim.advance(5)
    got = {}
    for c in claims_of(res).values():
        [r] = c.status.allocation.devices.results
        got[c.metadata.owner_references[0].name] = (r.pool, r.device)
    assert got["h100"] == ("h100-dra-mig-0", "gpu-0")
    assert got["mig-3g"][0] == "h100-dra-mig-0" and "mig-3g40gb" in got["mig-3g"][1]
    assert got["big"] == ("a100-dra-0", "gpu-0")   # not the 46 GiB L40S, not the H100
    # compiled with cel-python: a syntax error is caught, not evaluated by hand
    with pytest.raises(CelError):
        compile_selector("device.driver ==")


# ---- quota ------------------------------------------------------------------------------------
def test_quota_counts_devices_per_class_and_refuses_with_the_apiserver_message(kubesim, apis):
    core, res = apis
    core.create_namespaced_resource_quota(NS, {"metadata": {"name": "dra"}, "spec": {"hard": {
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "3",
        "count/resourceclaims.resource.k8s.io": "5"}}})
    kubesim.advance(1)
    res.create_namespaced_resource_claim(NS, {
        "apiVersion": f"{G}/v1", "kind": "ResourceClaim", "metadata": {"name": "two"},
        "spec": request_spec(count=2)})
    kubesim.advance(1)
    used = core.read_namespaced_resource_quota("dra", NS).status.used
    assert used == {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "2",
                    "count/resourceclaims.resource.k8s.io": "1"}
    with pytest.raises(ApiException) as exc:
        res.create_namespaced_resource_claim(NS, {
            "apiVersion": f"{G}/v1", "kind": "ResourceClaim", "metadata": {"name": "more"},
            "spec": request_spec(count=2)})
    assert exc.value.status == 403
    assert json.loads(exc.value.body)["message"] == (
        'resourceclaims.resource.k8s.io "more" is forbidden: exceeded quota: dra, requested: '
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices=2, used: "
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices=2, limited: "
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices=3")
    # a template's claim counts as well: created by the claim controller, refused the same
    template(res, "two", count=2)
    pod(core, "p", tmpl="two")
    kubesim.advance(3)
    assert core.read_namespaced_pod("p", NS).spec.node_name is None
    res.delete_namespaced_resource_claim("two", NS)
    kubesim.advance(3)
    assert core.read_namespaced_pod("p", NS).spec.node_name is not None


def test_quota_usage_of_all_and_first_available():
    # resource_claims.go: All counts AllocationResultsMaxSize, firstAvailable its worst case
    claim = {"spec": {"devices": {"requests": [
        {"name": "a", "exactly": {"deviceClassName": "x", "allocationMode": "All"}},
        {"name": "b", "firstAvailable": [
            {"name": "one", "deviceClassName": "y", "allocationMode": "ExactCount", "count": 1},
            {"name": "two", "deviceClassName": "y", "allocationMode": "ExactCount",
             "count": 3}]}]}}}
    assert claim_usage(claim) == {"count/resourceclaims.resource.k8s.io": 1,
                                  "x.deviceclass.resource.k8s.io/devices": 32,
                                  "y.deviceclass.resource.k8s.io/devices": 3}


# ---- Kueue ------------------------------------------------------------------------------------
def _dra_job(res, name, queue, workers=1):
    body = make_job(name, workers=workers, suspend=True, run_seconds=3600)
    for spec in body["spec"]["pytorchReplicaSpecs"].values():
        pspec = spec["template"]["spec"]
        pspec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "two-a100"}]
        c = pspec["containers"][0]
        c["resources"] = {"limits": {"cpu": "4", "memory": "32Gi"}, "claims": [{"name": "gpu"}]}
    body["metadata"].update(namespace=NS, labels={f"{K}/queue-name": queue})
    return body


def test_kueue_counts_claim_template_devices_through_device_class_mappings(kubesim, apis):
    core, res = apis
    co = kubernetes.client.CustomObjectsApi(kubesim.api_client)
    configure(kubesim, {"resources": {"deviceClassMappings": [
        {"name": "example.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]}]}})
    co.create_cluster_custom_object(K, V, "resourceflavors", {
        "apiVersion": f"{K}/{V}", "kind": "ResourceFlavor", "metadata": {"name": "dra"},
        "spec": {}})
    co.create_cluster_custom_object(K, V, "clusterqueues", {
        "apiVersion": f"{K}/{V}", "kind": "ClusterQueue", "metadata": {"name": "cq"},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": ["example.com/gpu", "cpu", "memory"],
            "flavors": [{"name": "dra", "resources": [
                {"name": "example.com/gpu", "nominalQuota": 6},
                {"name": "cpu", "nominalQuota": 100},
                {"name": "memory", "nominalQuota": "1Ti"}]}]}]}})
    lq(co, NS, "lq", "cq")
    template(res, "two-a100", count=2, selectors=[
        "device.attributes['gpu.nvidia.com'].architecture == 'Ampere'"])
    co.create_namespaced_custom_object("kubeflow.org", "v1", NS, "pytorchjobs",
                                       _dra_job(res, "first", "lq", workers=1))
    kubesim.advance(3)
    co.create_namespaced_custom_object("kubeflow.org", "v1", NS, "pytorchjobs",
                                       _dra_job(res, "second", "lq", workers=1))
    kubesim.advance(10)
    usage = [a["resourceUsage"] for a in
             workload(co, "first", NS)["status"]["admission"]["podSetAssignments"]]
    assert sorted(u["example.com/gpu"] for u in usage) == ["2", "2"]   # 2 devices x 1 pod
    qr = cond(workload(co, "second", NS), "QuotaReserved")   # 4 + 4 > 6
    assert qr["status"] == "False" and "example.com/gpu" in qr["message"]
    pods = core.list_namespaced_pod(NS).items
    assert len(pods) == 2 and all(p.spec.node_name and p.spec.node_name.startswith("a100-dra")
                                  for p in pods)
    used = [d for c in claims_of(res).values() for d in devices(c)]
    assert len(used) == 4 and len(set(used)) == 4


def test_kueue_reports_an_unmapped_device_class(kubesim, apis):
    _, res = apis
    co = kubernetes.client.CustomObjectsApi(kubesim.api_client)
    co.create_cluster_custom_object(K, V, "resourceflavors", {
        "apiVersion": f"{K}/{V}", "kind": "ResourceFlavor", "metadata": {"name": "dra"},
        "spec": {}})
    co.create_cluster_custom_object(K, V, "clusterqueues", {
        "apiVersion": f"{K}/{V}", "kind": "ClusterQueue", "metadata": {"name": "cq"},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": ["cpu", "memory"], "flavors": [{"name": "dra", "resources": [
                {"name": "cpu", "nominalQuota": 100},
                {"name": "memory", "nominalQuota": "1Ti"}]}]}]}})
    lq(co, NS, "lq", "cq")
    template(res, "two-a100", count=2)
    co.create_namespaced_custom_object("kubeflow.org", "v1", NS, "pytorchjobs",
                                       _dra_job(res, "job", "lq", workers=0))
    kubesim.advance(3)
    qr = cond(workload(co, "job", NS), "QuotaReserved")
    # workload_controller.go markDRAInadmissible, claims.go's field error
    assert (qr["status"], qr["reason"], qr["message"]) == (
        "False", "Misconfigured",
        "spec.podSets[0].template.spec.resourceClaims[0].resourceClaimTemplateName: Not "
        'found: "DeviceClass gpu.nvidia.com is not mapped in DRA configuration for podset '
        'master"')


# ---- kubectl ----------------------------------------------------------------------------------
@pytest.mark.kubectl
def test_kubectl_gets_and_explains_the_dra_kinds(kubesim, apis):
    from .test_api_kubectl import KUBECTL, kubectl
    if KUBECTL is None:
        pytest.skip("no kubectl (scripts/ensure-kubectl.sh)")
    core, res = apis
    template(res, "one-l40s", selectors=[L40S])
    pod(core, "train", tmpl="one-l40s")
    kubesim.advance(5)
    rows = [r.split() for r in kubectl(kubesim, "get", "resourceslices").stdout.splitlines()]
    assert rows[0] == ["NAME", "NODE", "DRIVER", "POOL", "AGE"]
    assert ["l40s-dra-0-gpu.nvidia.com", "l40s-dra-0", "gpu.nvidia.com", "l40s-dra-0"] in [
        r[:4] for r in rows]
    out = kubectl(kubesim, "get", "resourceclaims", "-n", NS).stdout.splitlines()
    assert out[0].split() == ["NAME", "STATE", "AGE"]
    assert out[1].split()[1] == "allocated,reserved"
    out = kubectl(kubesim, "explain", "resourceclaims.spec.devices.requests.exactly").stdout
    assert "deviceClassName" in out and "allocationMode" in out


def test_cpu_pods_keep_off_the_dra_gpu_nodes(kubesim, apis):
    core, _ = apis
    for i in range(3):
        core.create_namespaced_pod(NS, {"metadata": {"name": f"cpu{i}"}, "spec": {
            "containers": [{"name": "c", "image": "busybox:1",
                            "resources": {"requests": {"cpu": "1"}}}]}})
    kubesim.advance(3)
    assert {p.spec.node_name for p in core.list_namespaced_pod(NS).items} == {"cpu-0"}


def test_pod_claim_references_are_validated(apis):
    core, _ = apis
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(NS, {"metadata": {"name": "p"}, "spec": {
            "resourceClaims": [{"name": "gpu"}],
            "containers": [{"name": "c", "image": "busybox:1",
                            "resources": {"claims": [{"name": "gpu"}, {"name": "nic"}]}}]}})
    assert exc.value.status == 422
    msgs = {c["field"]: c["message"] for c in json.loads(exc.value.body)["details"]["causes"]}
    assert msgs["spec.resourceClaims[0]"] == (
        'Invalid value: core.PodResourceClaim{Name:"gpu", ResourceClaimName:(*string)(nil), '
        "ResourceClaimTemplateName:(*string)(nil)}: must specify one of: `resourceClaimName`, "
        "`resourceClaimTemplateName`")
    assert msgs["spec.containers[0].resources.claims[1]"] == (
        'Not found: "nic": must be one of the names in pod.spec.resourceClaims: gpu')


def test_a_per_model_device_class_binds_quota_and_placement_per_model(kubesim, apis):
    """The shape a portal uses for per-model quotas: its own DeviceClass per model (CEL on
    the driver's attributes) and the class's quota key in the namespace's ResourceQuota."""
    core, res = apis
    res.create_device_class({"apiVersion": f"{G}/v1", "kind": "DeviceClass",
                             "metadata": {"name": "a100-sxm4-80gb.gpu.example.com"},
                             "spec": {"selectors": [{"cel": {"expression": (
                                 "device.driver == 'gpu.nvidia.com' && "
                                 "device.attributes['gpu.nvidia.com'].type == 'gpu' && "
                                 "device.attributes['gpu.nvidia.com'].productName == "
                                 "'NVIDIA A100-SXM4-80GB'")}}]}})
    core.create_namespaced_resource_quota(NS, {"metadata": {"name": "q"}, "spec": {"hard": {
        "a100-sxm4-80gb.gpu.example.com.deviceclass.resource.k8s.io/devices": "8"}}})
    kubesim.advance(1)
    template(res, "eight", cls="a100-sxm4-80gb.gpu.example.com", count=8)
    pod(core, "big", tmpl="eight")
    kubesim.advance(3)
    p = core.read_namespaced_pod("big", NS)
    assert p.spec.node_name == "a100-dra-0" and p.status.phase == "Running"
    [claim] = claims_of(res).values()
    assert [d for _, d in devices(claim)] == [f"gpu-{i}" for i in range(8)]
    assert core.read_namespaced_resource_quota("q", NS).status.used == {
        "a100-sxm4-80gb.gpu.example.com.deviceclass.resource.k8s.io/devices": "8"}
    pod(core, "more", tmpl="eight")      # its claim is refused by quota: the pod waits
    kubesim.advance(3)
    assert core.read_namespaced_pod("more", NS).spec.node_name is None
    events = [e.message for e in core.list_namespaced_event(NS).items
              if e.reason == "FailedResourceClaimCreation"]
    assert events and "exceeded quota: q" in events[0]


def test_version_attributes_compare_as_semver(kubesim, apis):
    core, res = apis
    template(res, "hopper-or-later", selectors=[
        "device.attributes['gpu.nvidia.com'].cudaComputeCapability"
        ".isGreaterThan(semver('8.9.0'))",
        "device.attributes['gpu.nvidia.com'].cudaComputeCapability.major() >= 9"])
    pod(core, "p", tmpl="hopper-or-later")
    kubesim.advance(3)
    assert core.read_namespaced_pod("p", NS).spec.node_name == "h100-dra-mig-0"


def test_generated_claim_names_cut_pod_and_claim_names_in_proportion():
    from kubesim.sim.dra import claim_generate_name
    assert claim_generate_name("train", "gpu") == "train-gpu-"
    pod = "tenant-a-finetune-llama-3-70b-run-0001-master-0"   # 47 characters
    got = claim_generate_name(pod, "gpus-for-training")         # 66 > 57
    assert got == pod[:47 * 57 // 66] + "-" + "gpus-for-training"[:17 * 57 // 66]
    assert len(got) <= 57


@pytest.mark.kubectl
def test_kubectl_applies_a_claim_template_twice(kubesim, apis):
    from .test_api_kubectl import KUBECTL, kubectl
    if KUBECTL is None:
        pytest.skip("no kubectl (scripts/ensure-kubectl.sh)")
    _, res = apis
    manifest = f"""\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {{name: two-gpus, namespace: {NS}}}
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly:
          deviceClassName: gpu.nvidia.com
          count: 2
          selectors:
          - cel: {{expression: "{L40S}"}}
"""
    out = kubectl(kubesim, "apply", "-f", "-", input=manifest).stdout
    assert "resourceclaimtemplate.resource.k8s.io/two-gpus created" in out
    # `requests` is an atomic list and the server defaulted allocationMode, so kubectl's
    # three-way patch resends the list: "configured", and the spec stays what it was
    kubectl(kubesim, "apply", "-f", "-", input=manifest)
    tmpl = res.read_namespaced_resource_claim_template("two-gpus", NS)
    assert tmpl.metadata.generation == 1 and tmpl.spec.spec.devices.requests[0].exactly.count == 2
    p = kubectl(kubesim, "apply", "-f", "-", input=manifest.replace("count: 2", "count: 3"),
                check=False)
    assert p.returncode != 0 and "field is immutable" in p.stderr
