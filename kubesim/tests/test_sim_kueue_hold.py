"""kubesim's Kueue for a node hold (a maintenance window's target job in Trainyard's Kueue
mode), through the official client over HTTP: a Workload follows its suspended job's
queue-name (``jobframework/reconciler.go`` ``QueueNameChange``), and topology-aware
scheduling leaves out nodes whose taints the podset and its flavor do not tolerate
(``scheduling_simulator_default.go``)."""

from __future__ import annotations

from .test_sim_kueue import NS, K, V, api, cond, cq, lq, submit, workload  # noqa: F401

TAINT = {"key": "trainyard.io/maintenance", "value": "7", "effect": "NoSchedule"}


def test_a_suspended_jobs_workload_follows_its_queue_name(kubesim, api):  # noqa: F811
    _, co = api
    cq(co, "cq-small", 0)
    cq(co, "cq-big", 8)
    lq(co, NS, "small", "cq-small")
    lq(co, NS, "big", "cq-big")
    submit(co, "mover", "small", gpus=4)
    kubesim.advance(3)
    wl = workload(co, "mover")
    assert wl["spec"]["queueName"] == "small"
    assert cond(wl, "QuotaReserved")["status"] == "False"
    co.patch_namespaced_custom_object("kubeflow.org", "v1", NS, "pytorchjobs", "mover", {
        "metadata": {"labels": {f"{K}/queue-name": "big"}}})
    kubesim.advance(3)
    wl = workload(co, "mover")
    assert wl["spec"]["queueName"] == "big"
    assert cond(wl, "QuotaReserved")["message"] == "Quota reserved in ClusterQueue cq-big"
    # admitted: the label no longer moves it (the CRD refuses the change while reserved)
    co.patch_namespaced_custom_object("kubeflow.org", "v1", NS, "pytorchjobs", "mover", {
        "metadata": {"labels": {f"{K}/queue-name": "small"}}})
    kubesim.advance(3)
    assert workload(co, "mover")["spec"]["queueName"] == "big"


def test_tas_leaves_out_untolerated_taints_and_a_flavor_tolerating_them_uses_them(
        kubesim, api):  # noqa: F811
    core, co = api
    co.create_cluster_custom_object(K, V, "topologies", {
        "apiVersion": f"{K}/{V}", "kind": "Topology", "metadata": {"name": "dc"},
        "spec": {"levels": [{"nodeLabel": "trainyard.io/rack"}]}})
    co.patch_cluster_custom_object(K, V, "resourceflavors", "a100",
                                   {"spec": {"topologyName": "dc"}})
    for name in ("a100-0", "a100-1"):
        core.patch_node(name, {"metadata": {"labels": {"trainyard.io/maintenance-hold": "7"}},
                               "spec": {"taints": [TAINT]}})
    co.create_cluster_custom_object(K, V, "resourceflavors", {
        "apiVersion": f"{K}/{V}", "kind": "ResourceFlavor", "metadata": {"name": "held"},
        "spec": {"nodeLabels": {"trainyard.io/maintenance-hold": "7"}, "topologyName": "dc",
                 "tolerations": [{**TAINT, "operator": "Equal"}]}})
    cq(co, "cq-a", 32)
    cq(co, "cq-held", 16, flavor="held")
    lq(co, NS, "lq", "cq-a")
    lq(co, NS, "held", "cq-held")
    rack = {f"{K}/podset-required-topology": "trainyard.io/rack"}
    submit(co, "other", "lq", gpus=8, workers=2, master=False, annotations=rack)
    submit(co, "target", "held", gpus=8, workers=2, master=False, annotations=rack)
    kubesim.advance(3)
    assert cond(workload(co, "other"), "QuotaReserved")["reason"] == "TopologyPlacementFailed"
    wl = workload(co, "target")
    assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"][
        "nvidia.com/gpu"] == "held"
    kubesim.advance(5)
    pods = core.list_namespaced_pod(NS, label_selector="training.kubeflow.org/job-name=target")
    assert sorted(p.spec.node_name for p in pods.items) == ["a100-0", "a100-1"]
    assert all(any(t.key == TAINT["key"] for t in p.spec.tolerations or [])
               for p in pods.items)
