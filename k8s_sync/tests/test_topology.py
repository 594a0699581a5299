"""Topology levels and pinning (pure), and kubesim holding pods to what the manifests say:
node affinity validated as kube-apiserver does, and the scheduler honouring matchFields."""

import dataclasses

import pytest
from kubernetes import client as k8s

from k8s_sync import manifests, placement
from k8s_sync.specs import JobSpec

BASE = {"job_id": 7, "tenant_slug": "acme", "pool": "dev", "tier": "development",
        "image": "registry.example.org/ml/trainer:1", "max_run_seconds": 3600,
        "grace_seconds": 300, "checkpoint_interval_seconds": 300, "worker_replicas": 1,
        "gpus_per_replica": 8, "gpu_product": "NVIDIA-A100-SXM4-80GB"}


def _terms(spec):
    pods = manifests.build_pytorchjob(spec)["spec"]["pytorchReplicaSpecs"]
    return [p["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        for p in pods.values()]


@pytest.mark.parametrize(("levels", "error"), [
    ([], "at least one"), ("trainyard.io/switch", "list"), (["a b"], "not a label key"),
    (["x/y", "x/y"], "twice"), (["kubernetes.io/hostname", "x/y"], "last level"),
    ([f"l{i}" for i in range(17)], "at most 16")])
def test_bad_topology_levels_are_refused_naming_the_problem(levels, error):
    with pytest.raises(ValueError, match=error):
        placement.validate_topology_levels(levels)


def test_the_switch_is_the_value_of_the_last_level_default_rack_then_switch():
    labels = {"trainyard.io/rack": "r1", "trainyard.io/switch": "s1", "example.com/blk": "b"}
    assert placement.topology_levels(None) == ("trainyard.io/rack", "trainyard.io/switch")
    assert placement.switch_of(labels, []) == "s1"
    assert placement.switch_of(labels, ["example.com/blk"]) == "b"
    assert placement.node_topology(labels, ["topology.kubernetes.io/zone",
                                            "example.com/blk"]) == ("", "b")


def test_switch_and_nodes_are_anded_into_every_term_one_node_per_term():
    spec = JobSpec(**BASE, switch="blk-x", switch_label="example.com/blk",
                   nodes=("a100-5", "a100-0", "a100-0"),
                   placement={**placement.dedicated_placement("acme"), "affinity": {
                       **placement.dedicated_placement("acme")["affinity"],
                       "nodeAffinity": {
                           **placement.dedicated_placement("acme")["affinity"]["nodeAffinity"],
                           "requiredDuringSchedulingIgnoredDuringExecution": {
                               "nodeSelectorTerms": [
                                   {"matchExpressions": [{"key": "z", "operator": "In",
                                                          "values": ["a"]}]},
                                   {"matchExpressions": [{"key": "z", "operator": "In",
                                                          "values": ["b"]}]}]}}}})
    assert spec.nodes == ("a100-0", "a100-5")
    switch = {"key": "example.com/blk", "operator": "In", "values": ["blk-x"]}
    for terms in _terms(spec):
        assert len(terms) == 4  # (z=a or z=b) and (a100-0 or a100-5)
        assert {(t["matchExpressions"][0]["values"][0], t["matchFields"][0]["values"][0])
                for t in terms} == {("a", "a100-0"), ("a", "a100-5"), ("b", "a100-0"),
                                    ("b", "a100-5")}
        assert all(switch in t["matchExpressions"] for t in terms)
        assert all(t["matchFields"][0]["key"] == "metadata.name" for t in terms)
    template = manifests.build_pytorchjob(spec)["spec"]["pytorchReplicaSpecs"]["Master"][
        "template"]["spec"]
    assert template["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    assert template["affinity"]["nodeAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"]  # the dedicated preference stays
    assert {"key": "trainyard.io/dedicated", "operator": "Equal", "value": "acme",
            "effect": "NoSchedule"} in template["tolerations"]


@pytest.mark.parametrize(("field", "value"), [
    ("switch_label", "not a key!"), ("nodes", "a100-0"), ("nodes", ("Bad_Node",))])
def test_jobspec_refuses_bad_switch_label_and_nodes(field, value):
    with pytest.raises(ValueError, match=f"^{field}:"):
        JobSpec(**BASE, **{field: value})


def test_a_resume_without_placement_clears_the_last_admissions_affinity():
    spec = JobSpec(**BASE, switch="s1", nodes=("a100-0", "a100-1"))
    assert _terms(spec)
    patch = manifests.pytorchjob_resume_patch(dataclasses.replace(spec, switch="", nodes=()))
    for replica in patch["spec"]["pytorchReplicaSpecs"].values():
        assert replica["template"]["spec"]["affinity"] is None


def _pod(name, affinity):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": affinity}}},
        "containers": [{"name": "c", "image": "busybox:1", "resources": {
            "limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}}]}}


def test_kubesim_refuses_node_affinity_kube_apiserver_refuses(kubesim):
    core = k8s.CoreV1Api(kubesim.api_client)
    core.create_namespace({"metadata": {"name": "t"}})
    for terms, field in [
        ([{"matchFields": [{"key": "metadata.name", "operator": "In",
                            "values": ["a100-0", "a100-1"]}]}], "matchFields[0].values"),
        ([{"matchFields": [{"key": "metadata.labels", "operator": "In",
                            "values": ["x"]}]}], "matchFields[0].key"),
        ([{"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}],
         "matchExpressions[0].values"),
        ([{"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}],
         "matchExpressions[0].values")]:
        with pytest.raises(k8s.ApiException) as err:
            core.create_namespaced_pod("t", _pod("bad", terms))
        assert err.value.status == 422 and field in err.value.body


def test_kubesim_schedules_by_node_name_and_arbitrary_labels(kubesim):
    core = k8s.CoreV1Api(kubesim.api_client)
    core.create_namespace({"metadata": {"name": "t"}})
    core.patch_node("a100-1", {"metadata": {"labels": {"example.com/blk": "b1"}}})
    # small profile: a100-0 (switch-a1) would win by name; the pod asks for a100-1 only
    core.create_namespaced_pod("t", _pod("by-name", [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["a100-1"]}]}]))
    core.create_namespaced_pod("t", _pod("by-label", [{"matchExpressions": [
        {"key": "example.com/blk", "operator": "In", "values": ["b1"]}]}]))
    core.create_namespaced_pod("t", _pod("by-switch", [
        {"matchExpressions": [{"key": "trainyard.io/switch", "operator": "In",
                               "values": ["switch-a2"]}]}]))
    kubesim.advance(2)
    assert {p.metadata.name: p.spec.node_name for p in core.list_namespaced_pod("t").items} == {
        "by-name": "a100-1", "by-label": "a100-1", "by-switch": "a100-1"}
