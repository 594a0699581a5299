"""kubesim's Kueue controller through the official client over HTTP (kubesim fixture, small
profile): quota per flavor, cohort borrowing with borrowingLimit and lendingLimit, the
preemption policies, requeue, the pending reasons, the visibility API and TAS."""

from __future__ import annotations

import json

import kubernetes
import pytest
from kubernetes.dynamic import DynamicClient

from kubesim.sim.harness import make_job

from .helpers import request

K, V = "kueue.x-k8s.io", "v1beta2"
NS = "team-k"
NS2 = "team-l"
A100 = "NVIDIA-A100-SXM4-80GB"
H800 = "NVIDIA-H800"
VIS = "/apis/visibility.kueue.x-k8s.io/v1beta2"


@pytest.fixture
def api(kubesim):
    core = kubernetes.client.CoreV1Api(kubesim.api_client)
    co = kubernetes.client.CustomObjectsApi(kubesim.api_client)
    for ns in (NS, NS2):
        core.create_namespace(kubernetes.client.V1Namespace(
            metadata=kubernetes.client.V1ObjectMeta(name=ns)))
    for name, product in (("a100", A100), ("h800", H800)):
        co.create_cluster_custom_object(K, V, "resourceflavors", {
            "apiVersion": f"{K}/{V}", "kind": "ResourceFlavor", "metadata": {"name": name},
            "spec": {"nodeLabels": {"nvidia.com/gpu.product": product}}})
    for name, value in (("high", 1000), ("low", 100)):
        co.create_cluster_custom_object(K, V, "workloadpriorityclasses", {
            "apiVersion": f"{K}/{V}", "kind": "WorkloadPriorityClass",
            "metadata": {"name": name}, "value": value})
    return core, co


def cq(co, name, gpus, *, flavor="a100", cohort=None, borrowing=None, lending=None,
       preemption=None, strategy=None, extra_flavors=()):
    def fl(fname, n, b=None, lend=None):
        gpu = {"name": "nvidia.com/gpu", "nominalQuota": n}
        if b is not None:
            gpu["borrowingLimit"] = b
        if lend is not None:
            gpu["lendingLimit"] = lend
        return {"name": fname, "resources": [gpu, {"name": "cpu", "nominalQuota": 1000},
                                             {"name": "memory", "nominalQuota": "10Ti"}]}
    spec: dict = {"namespaceSelector": {}, "resourceGroups": [{
        "coveredResources": ["nvidia.com/gpu", "cpu", "memory"],
        "flavors": [fl(flavor, gpus, borrowing, lending)] + [fl(f, n) for f, n in extra_flavors]}]}
    if cohort:
        spec["cohortName"] = cohort
    if preemption:
        spec["preemption"] = preemption
    if strategy:
        spec["queueingStrategy"] = strategy
    co.create_cluster_custom_object(K, V, "clusterqueues", {
        "apiVersion": f"{K}/{V}", "kind": "ClusterQueue", "metadata": {"name": name},
        "spec": spec})


def lq(co, ns, name, cq_name):
    co.create_namespaced_custom_object(K, V, ns, "localqueues", {
        "apiVersion": f"{K}/{V}", "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": ns}, "spec": {"clusterQueue": cq_name}})


def submit(co, name, queue, *, ns=NS, gpus=1, workers=0, product=A100, priority=None,
           run_seconds=3600, annotations=None, master=True):
    body = make_job(name, workers=workers, gpus=gpus, product=product, suspend=True,
                    run_seconds=run_seconds, annotations=annotations, master=master)
    labels = {f"{K}/queue-name": queue}
    if priority:
        labels[f"{K}/priority-class"] = priority
    body["metadata"].update(namespace=ns, labels=labels)
    return co.create_namespaced_custom_object("kubeflow.org", "v1", ns, "pytorchjobs", body)


def workload(co, job, ns=NS):
    items = co.list_namespaced_custom_object(K, V, ns, "workloads")["items"]
    found = [w for w in items if any(r["name"] == job for r in w["metadata"]["ownerReferences"])]
    assert len(found) == 1, [w["metadata"]["name"] for w in items]
    return found[0]


def cond(wl, ctype):
    return next((c for c in wl["status"].get("conditions") or [] if c["type"] == ctype), None)


def status_of(co, job, ns=NS):
    wl = workload(co, job, ns)
    return {c["type"]: (c["status"], c["reason"])
            for c in (wl.get("status") or {}).get("conditions") or []}


def job_obj(co, name, ns=NS):
    return co.get_namespaced_custom_object("kubeflow.org", "v1", ns, "pytorchjobs", name)


def suspended(co, name, ns=NS):
    return job_obj(co, name, ns)["spec"]["runPolicy"].get("suspend")


def get(kubesim, path, expect=200):
    """A GET through the official client's REST layer (the visibility API has no typed
    client in the kubernetes package)."""
    status, _, body = request(kubesim, "GET", path)
    assert status == expect, body
    return json.loads(body)


def test_workload_from_job_quota_per_flavor_and_nodeselector_on_unsuspend(kubesim, api):
    core, co = api
    cq(co, "cq-a", 8, extra_flavors=[("h800", 8)])
    lq(co, NS, "lq", "cq-a")
    submit(co, "on-a100", "lq", gpus=4, workers=1, product=None, priority="high")
    submit(co, "on-h800", "lq", gpus=8, product=H800)
    kubesim.advance(3)
    wl = workload(co, "on-a100")
    assert wl["metadata"]["name"].startswith("pytorchjob-on-a100-")
    assert wl["spec"]["queueName"] == "lq" and wl["spec"]["priority"] == 1000
    assert wl["spec"]["priorityClassRef"] == {"group": K, "kind": "WorkloadPriorityClass",
                                              "name": "high"}
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("master", 1),
                                                                        ("worker", 1)]
    psa = wl["status"]["admission"]["podSetAssignments"]
    assert [p["flavors"]["nvidia.com/gpu"] for p in psa] == ["a100", "a100"]
    assert psa[0]["resourceUsage"]["nvidia.com/gpu"] == "4"
    assert cond(wl, "QuotaReserved")["message"] == "Quota reserved in ClusterQueue cq-a"
    assert cond(wl, "Admitted")["reason"] == "Admitted"
    # the job was un-suspended with the flavor's node labels in its pods
    assert not suspended(co, "on-a100")
    pods = core.list_namespaced_pod(NS, label_selector="training.kubeflow.org/job-name=on-a100")
    assert len(pods.items) == 2
    assert all(p.spec.node_selector == {"nvidia.com/gpu.product": A100} for p in pods.items)
    assert all(p.metadata.labels[f"{K}/podset"] in ("master", "worker") for p in pods.items)
    # an H800 job skips the a100 flavor (its nodeSelector does not match) and gets h800
    wl2 = workload(co, "on-h800")
    assert wl2["status"]["admission"]["podSetAssignments"][0]["flavors"] == {
        "nvidia.com/gpu": "h800", "cpu": "h800", "memory": "h800"}
    kubesim.advance(10)
    assert status_of(co, "on-a100")["PodsReady"] == ("True", "Started")
    usage = co.get_cluster_custom_object(K, V, "clusterqueues", "cq-a")["status"]
    gpu = {f["name"]: next(r for r in f["resources"] if r["name"] == "nvidia.com/gpu")
           for f in usage["flavorsUsage"]}
    assert gpu["a100"]["total"] == "8" and gpu["h800"]["total"] == "8"
    assert usage["admittedWorkloads"] == 2 and usage["pendingWorkloads"] == 0
    # quota full: the next job waits with Kueue's message
    submit(co, "third", "lq", gpus=2, product=A100)
    kubesim.advance(2)
    wl3 = workload(co, "third")
    qr = cond(wl3, "QuotaReserved")
    assert (qr["status"], qr["reason"]) == ("False", "WaitingForQuota")
    assert qr["message"] == ("couldn't assign flavors to pod set master: flavor h800 doesn't "
                             "match node affinity, insufficient unused quota for nvidia.com/gpu "
                             "in flavor a100, 2 more needed")
    assert suspended(co, "third")
    lqs = co.get_namespaced_custom_object(K, V, NS, "localqueues", "lq")["status"]
    assert (lqs["pendingWorkloads"], lqs["admittedWorkloads"]) == (1, 2)


def test_finished_job_releases_quota_and_the_next_is_admitted(kubesim, api):
    _, co = api
    cq(co, "cq-a", 4)
    lq(co, NS, "lq", "cq-a")
    submit(co, "first", "lq", gpus=4, run_seconds=30)
    submit(co, "second", "lq", gpus=4)
    kubesim.advance(3)
    assert status_of(co, "second")["QuotaReserved"] == ("False", "WaitingForQuota")
    kubesim.advance(45)
    assert status_of(co, "first")["Finished"][0] == "True"
    assert status_of(co, "second")["Admitted"] == ("True", "Admitted")
    assert not suspended(co, "second")


def test_exceeds_max_quota_and_borrowing_limit(kubesim, api):
    _, co = api
    cq(co, "cq-a", 4, cohort="all", borrowing=2)
    cq(co, "cq-b", 8, cohort="all")
    lq(co, NS, "lq", "cq-a")
    submit(co, "big", "lq", gpus=8)
    submit(co, "borrower", "lq", gpus=6)
    kubesim.advance(3)
    qr = cond(workload(co, "big"), "QuotaReserved")
    assert qr["reason"] == "ExceedsMaxQuota"
    assert qr["message"] == ("couldn't assign flavors to pod set master: insufficient quota for "
                             "nvidia.com/gpu in flavor a100, previously considered podsets "
                             "requests (0) + current podset request (8) > maximum capacity (6)")
    assert status_of(co, "borrower")["Admitted"][0] == "True"
    gpu = co.get_cluster_custom_object(K, V, "clusterqueues", "cq-a")["status"][
        "flavorsUsage"][0]["resources"][0]
    assert gpu == {"name": "nvidia.com/gpu", "total": "6", "borrowed": "2"}


def test_lending_limit_caps_what_others_borrow(kubesim, api):
    _, co = api
    cq(co, "cq-a", 2, cohort="all")
    cq(co, "cq-b", 6, cohort="all", lending=1)
    lq(co, NS, "lq", "cq-a")
    submit(co, "three", "lq", gpus=3)
    submit(co, "four", "lq", gpus=4)
    kubesim.advance(3)
    assert status_of(co, "three")["Admitted"][0] == "True"
    qr = cond(workload(co, "four"), "QuotaReserved")
    assert qr["reason"] == "ExceedsMaxQuota" and "maximum capacity (3)" in qr["message"]


def test_reclaim_within_cohort_preempts_the_borrower_which_is_requeued(kubesim, api):
    core, co = api
    cq(co, "prod", 8, cohort="all", borrowing=0,
       preemption={"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"})
    cq(co, "dev", 4, cohort="all")
    lq(co, NS, "prod-q", "prod")
    lq(co, NS2, "dev-q", "dev")
    submit(co, "dev-big", "dev-q", ns=NS2, gpus=4, workers=1)  # 8 GPUs: borrows 4 of prod's
    kubesim.advance(5)
    assert status_of(co, "dev-big", NS2)["Admitted"][0] == "True"
    assert co.get_cluster_custom_object(K, V, "clusterqueues", "dev")["status"][
        "flavorsUsage"][0]["resources"][0]["borrowed"] == "4"
    submit(co, "prod-job", "prod-q", gpus=8)
    kubesim.advance(1)
    dev = workload(co, "dev-big", NS2)
    prod = workload(co, "prod-job")
    assert cond(dev, "Evicted")["reason"] == "Preempted"
    assert cond(dev, "Preempted")["reason"] == "InCohortReclamation"
    assert cond(dev, "Preempted")["message"].startswith(
        f"Preempted to accommodate a workload (UID: {prod['metadata']['uid']}, JobUID: ")
    assert "due to reclamation within the cohort; preemptor path: /all/prod; " \
           "preemptee path: /all/dev" in cond(dev, "Preempted")["message"]
    assert cond(prod, "QuotaReserved")["reason"] == "WaitingForPreemptedWorkloads"
    assert cond(prod, "QuotaReserved")["message"].endswith("Pending the preemption of 1 "
                                                           "workload(s)")
    kubesim.advance(40)  # the grace period of the dev pods (30 s)
    dev = workload(co, "dev-big", NS2)
    assert suspended(co, "dev-big", NS2)
    assert (cond(dev, "Requeued")["status"], cond(dev, "Requeued")["reason"]) == ("True",
                                                                                  "Preempted")
    assert cond(dev, "QuotaReserved")["status"] == "False"
    assert dev["status"].get("admission") is None
    assert dev["status"]["schedulingStats"]["evictions"] == [
        {"reason": "Preempted", "underlyingCause": "", "count": 1}]
    assert status_of(co, "prod-job")["Admitted"][0] == "True"
    assert core.list_namespaced_pod(NS2).items == []
    # the requeued dev job is admitted again within its own nominal quota of 4? it needs 8
    # GPUs: 4 nominal + borrowing, and prod uses all of its own: it waits
    assert cond(dev, "QuotaReserved")["reason"] in ("WaitingForQuota", "PendingEvaluation")


def test_within_cluster_queue_lower_priority_preemption(kubesim, api):
    _, co = api
    cq(co, "cq-a", 8, preemption={"withinClusterQueue": "LowerPriority"})
    lq(co, NS, "lq", "cq-a")
    submit(co, "low-job", "lq", gpus=8, priority="low")
    kubesim.advance(3)
    submit(co, "low-two", "lq", gpus=8, priority="low")
    kubesim.advance(2)
    assert status_of(co, "low-two")["QuotaReserved"] == ("False", "WaitingForQuota")
    submit(co, "high-job", "lq", gpus=8, priority="high")
    kubesim.advance(1)
    low = workload(co, "low-job")
    assert cond(low, "Preempted")["reason"] == "InClusterQueue"
    assert "due to prioritization in the ClusterQueue" in cond(low, "Preempted")["message"]
    assert cond(workload(co, "low-two"), "Evicted") is None  # equal priority: not preempted
    kubesim.advance(40)
    assert status_of(co, "high-job")["Admitted"][0] == "True"
    low = workload(co, "low-job")
    assert cond(low, "Requeued")["status"] == "True"
    # requeued at its eviction time: behind low-two (created earlier than the eviction)
    summary = get(kubesim, f"{VIS}/clusterqueues/cq-a/pendingworkloads")
    assert [i["metadata"]["name"].split("-")[1:3] for i in summary["items"]] == [
        ["low", "two"], ["low", "job"]]


def test_zero_nominal_batch_queue_borrows_idle_capacity_only(kubesim, api):
    _, co = api
    cq(co, "prod", 8, cohort="all", borrowing=0, preemption={"reclaimWithinCohort": "Any"})
    cq(co, "batch", 0, cohort="all")
    lq(co, NS, "prod-q", "prod")
    lq(co, NS2, "batch-q", "batch")
    submit(co, "batch-1", "batch-q", ns=NS2, gpus=8)
    kubesim.advance(3)
    assert status_of(co, "batch-1", NS2)["Admitted"][0] == "True"
    submit(co, "batch-2", "batch-q", ns=NS2, gpus=1)
    kubesim.advance(2)
    qr = cond(workload(co, "batch-2", NS2), "QuotaReserved")
    assert qr["reason"] == "WaitingForQuota"
    submit(co, "prod-1", "prod-q", gpus=2)
    kubesim.advance(1)
    assert cond(workload(co, "batch-1", NS2), "Preempted")["reason"] == "InCohortReclamation"
    kubesim.advance(40)
    assert status_of(co, "prod-1")["Admitted"][0] == "True"
    # the idle 6 GPUs go to the batch queue again: batch-2 (1 GPU) fits, batch-1 (8) waits
    assert status_of(co, "batch-2", NS2)["Admitted"][0] == "True"
    assert status_of(co, "batch-1", NS2)["QuotaReserved"][0] == "False"


def test_strict_fifo_blocks_behind_the_head(kubesim, api):
    _, co = api
    cq(co, "strict", 4, strategy="StrictFIFO")
    cq(co, "besteffort", 4)
    lq(co, NS, "s", "strict")
    lq(co, NS2, "b", "besteffort")
    for ns, q in ((NS, "s"), (NS2, "b")):
        submit(co, "first", q, ns=ns, gpus=2)
    kubesim.advance(2)
    for ns, q in ((NS, "s"), (NS2, "b")):
        submit(co, "head", q, ns=ns, gpus=4)
    kubesim.advance(1)
    for ns, q in ((NS, "s"), (NS2, "b")):
        submit(co, "small", q, ns=ns, gpus=1)
    kubesim.advance(2)
    # StrictFIFO: the head that does not fit blocks the smaller one behind it
    assert status_of(co, "head", NS)["QuotaReserved"] == ("False", "WaitingForQuota")
    assert "QuotaReserved" not in status_of(co, "small", NS)
    assert suspended(co, "small", NS)
    # BestEffortFIFO (the default): the smaller one goes past
    assert status_of(co, "head", NS2)["QuotaReserved"] == ("False", "WaitingForQuota")
    assert status_of(co, "small", NS2)["Admitted"][0] == "True"


def test_visibility_api_positions_limit_offset_and_discovery(kubesim, api):
    _, co = api
    cq(co, "cq-a", 1)
    lq(co, NS, "lq", "cq-a")
    lq(co, NS2, "lq2", "cq-a")
    submit(co, "running", "lq", gpus=1)
    kubesim.advance(2)
    submit(co, "p-low", "lq", gpus=1, priority="low")
    kubesim.advance(1)
    submit(co, "p-other", "lq2", ns=NS2, gpus=1, priority="low")
    kubesim.advance(1)
    submit(co, "p-high", "lq", gpus=1, priority="high")
    kubesim.advance(1)
    doc = get(kubesim, f"{VIS}/clusterqueues/cq-a/pendingworkloads")
    assert doc["kind"] == "PendingWorkloadsSummary"
    rows = [(i["metadata"]["ownerReferences"][0]["name"], i["positionInClusterQueue"],
             i["positionInLocalQueue"], i["priority"], i["localQueueName"])
            for i in doc["items"]]
    assert rows == [("p-high", 0, 0, 1000, "lq"), ("p-low", 1, 1, 100, "lq"),
                    ("p-other", 2, 0, 100, "lq2")]
    page = get(kubesim, f"{VIS}/clusterqueues/cq-a/pendingworkloads?limit=1&offset=1")
    assert [i["positionInClusterQueue"] for i in page["items"]] == [1]
    local = get(kubesim, f"{VIS}/namespaces/{NS}/localqueues/lq/pendingworkloads")
    assert [(i["positionInLocalQueue"], i["positionInClusterQueue"]) for i in
            local["items"]] == [(0, 0), (1, 1)]
    missing = get(kubesim, f"{VIS}/clusterqueues/nope/pendingworkloads", expect=404)
    assert missing["reason"] == "NotFound"
    assert get(kubesim, f"{VIS}/clusterqueues/cq-a/pendingworkloads?limit=x", expect=400)
    # discovery: the dynamic client finds the subresource and calls it
    groups = kubernetes.client.ApisApi(kubesim.api_client).get_api_versions()
    assert "visibility.kueue.x-k8s.io" in [g.name for g in groups.groups]
    dyn = DynamicClient(kubesim.api_client)
    res = dyn.resources.get(api_version="visibility.kueue.x-k8s.io/v1beta2",
                            kind="ClusterQueue")
    out = res.subresources["pendingworkloads"].get(name="cq-a")
    assert [i.positionInClusterQueue for i in out.items] == [0, 1, 2]


def test_tas_required_topology_level(kubesim, api):
    core, co = api
    co.create_cluster_custom_object(K, V, "topologies", {
        "apiVersion": f"{K}/{V}", "kind": "Topology", "metadata": {"name": "dc"},
        "spec": {"levels": [{"nodeLabel": "trainyard.io/rack"},
                            {"nodeLabel": "trainyard.io/switch"}]}})
    co.patch_cluster_custom_object(K, V, "resourceflavors", "a100",
                                   {"spec": {"topologyName": "dc"}})
    cq(co, "cq-a", 32)
    lq(co, NS, "lq", "cq-a")
    # one podset of 2 pods x 8 GPUs: no leaf switch has two A100 nodes, rack-a1 has
    submit(co, "by-switch", "lq", gpus=8, workers=2, master=False,
           annotations={f"{K}/podset-required-topology": "trainyard.io/switch"})
    submit(co, "by-rack", "lq", gpus=8, workers=2, master=False,
           annotations={f"{K}/podset-required-topology": "trainyard.io/rack"})
    kubesim.advance(3)
    qr = cond(workload(co, "by-switch"), "QuotaReserved")
    assert qr["reason"] == "TopologyPlacementFailed"
    assert 'topology "dc" doesn\'t allow to fit any of 2 pod(s)' in qr["message"]
    wl = workload(co, "by-rack")
    ta = wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    assert ta["levels"] == ["trainyard.io/rack"]
    assert ta["slices"][0]["valuesPerLevel"] == [{"universal": "rack-a1"}]
    kubesim.advance(5)
    pods = core.list_namespaced_pod(NS, label_selector="training.kubeflow.org/job-name=by-rack")
    assert sorted(p.spec.node_name for p in pods.items) == ["a100-0", "a100-1"]
    assert all(p.spec.node_selector["trainyard.io/rack"] == "rack-a1" for p in pods.items)


def test_missing_queues_and_deleted_job(kubesim, api):
    _, co = api
    submit(co, "orphan", "nope")
    kubesim.advance(2)
    qr = cond(workload(co, "orphan"), "QuotaReserved")
    assert (qr["reason"], qr["message"]) == ("Misconfigured", "LocalQueue nope doesn't exist")
    lq(co, NS, "nope", "missing-cq")
    kubesim.advance(2)
    qr = cond(workload(co, "orphan"), "QuotaReserved")
    assert qr["message"] == "ClusterQueue missing-cq doesn't exist"
    co.delete_namespaced_custom_object("kubeflow.org", "v1", NS, "pytorchjobs", "orphan")
    kubesim.advance(3)
    assert co.list_namespaced_custom_object(K, V, NS, "workloads")["items"] == []


def test_no_kueue_objects_no_cost(kubesim):
    co = kubernetes.client.CustomObjectsApi(kubesim.api_client)
    kubernetes.client.CoreV1Api(kubesim.api_client).create_namespace(
        kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=NS)))
    body = make_job("plain", gpus=1, run_seconds=100)
    co.create_namespaced_custom_object("kubeflow.org", "v1", NS, "pytorchjobs", body)
    kubesim.advance(5)
    assert kubesim.sim.kueue.reconciles == 0
    assert co.list_namespaced_custom_object(K, V, NS, "workloads")["items"] == []


def test_deactivated_workload_is_evicted_and_reactivated(kubesim, api):
    _, co = api
    cq(co, "cq-a", 8)
    lq(co, NS, "lq", "cq-a")
    submit(co, "job", "lq", gpus=4)
    kubesim.advance(5)
    name = workload(co, "job")["metadata"]["name"]
    co.patch_namespaced_custom_object(K, V, NS, "workloads", name, {"spec": {"active": False}})
    kubesim.advance(40)
    wl = workload(co, "job")
    assert (cond(wl, "Evicted")["reason"], cond(wl, "Evicted")["message"]) == (
        "Deactivated", "The workload is deactivated")
    assert cond(wl, "Requeued")["status"] == "False"
    assert cond(wl, "QuotaReserved")["reason"] == "Deactivated"
    assert suspended(co, "job")
    co.patch_namespaced_custom_object(K, V, NS, "workloads", name, {"spec": {"active": True}})
    kubesim.advance(3)
    wl = workload(co, "job")
    assert (cond(wl, "Requeued")["status"], cond(wl, "Requeued")["reason"]) == ("True",
                                                                                "Reactivated")
    assert cond(wl, "Admitted")["status"] == "True" and not suspended(co, "job")


def test_tas_podsets_of_one_workload_do_not_share_room(kubesim, api):
    core, co = api
    co.create_cluster_custom_object(K, V, "topologies", {
        "apiVersion": f"{K}/{V}", "kind": "Topology", "metadata": {"name": "dc"},
        "spec": {"levels": [{"nodeLabel": "trainyard.io/switch"}]}})
    co.patch_cluster_custom_object(K, V, "resourceflavors", "a100",
                                   {"spec": {"topologyName": "dc"}})
    cq(co, "cq-a", 32)
    lq(co, NS, "lq", "cq-a")
    submit(co, "two", "lq", gpus=8, workers=1,
           annotations={f"{K}/podset-required-topology": "trainyard.io/switch"})
    kubesim.advance(5)
    psa = workload(co, "two")["status"]["admission"]["podSetAssignments"]
    domains = [p["topologyAssignment"]["slices"][0]["valuesPerLevel"][0]["universal"]
               for p in psa]
    assert sorted(domains) == ["switch-a1", "switch-a2"]
    pods = core.list_namespaced_pod(NS, label_selector="training.kubeflow.org/job-name=two")
    assert all(p.status.phase == "Running" for p in pods.items) and len(pods.items) == 2


def test_trainjob_shares_the_queue(kubesim, api):
    _, co = api
    ext = kubernetes.client.ApiextensionsV1Api(kubesim.api_client)
    # kubesim serves Trainer v2's CRD from the start (kubesim/crds)
    assert ext.read_custom_resource_definition("trainjobs.trainer.kubeflow.org")
    cq(co, "cq-a", 8)
    lq(co, NS, "lq", "cq-a")
    submit(co, "pj", "lq", gpus=4)
    tj = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
          "metadata": {"name": "tj", "namespace": NS,
                       "labels": {f"{K}/queue-name": "lq"}},
          "spec": {"suspend": True, "runtimeRef": {"name": "torch-distributed"},
                   "trainer": {"numNodes": 2, "resourcesPerNode": {"limits": {
                       "nvidia.com/gpu": "2", "cpu": "4", "memory": "16Gi"}}}}}
    kubesim.advance(1)
    co.create_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", NS, "trainjobs", tj)
    kubesim.advance(1)
    submit(co, "pj2", "lq", gpus=1)
    kubesim.advance(3)
    wl = workload(co, "tj")
    assert wl["metadata"]["name"].startswith("trainjob-tj-")
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("node", 2)]
    assert cond(wl, "Admitted")["status"] == "True"
    out = co.get_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", NS, "trainjobs",
                                          "tj")
    assert out["spec"]["suspend"] is False
    patch = next(p for p in out["spec"]["runtimePatches"] if p["manager"] == f"{K}/manager")
    rj = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    assert rj["name"] == "node"
    assert rj["template"]["spec"]["template"]["spec"]["nodeSelector"] == {
        "nvidia.com/gpu.product": A100}
    # 4 (PyTorchJob) + 4 (TrainJob) of 8: the third job waits
    assert cond(workload(co, "pj2"), "QuotaReserved")["reason"] == "WaitingForQuota"


def test_waiting_workload_follows_a_changed_job(kubesim, api):
    _, co = api
    cq(co, "cq-a", 4)
    lq(co, NS, "lq", "cq-a")
    submit(co, "first", "lq", gpus=4)
    kubesim.advance(2)
    submit(co, "grows", "lq", gpus=2, priority="low")
    kubesim.advance(2)
    assert "2 more needed" in cond(workload(co, "grows"), "QuotaReserved")["message"]
    job = job_obj(co, "grows")
    rs = job["spec"]["pytorchReplicaSpecs"]
    rs["Master"]["template"]["spec"]["containers"][0]["resources"]["limits"][
        "nvidia.com/gpu"] = 3
    co.patch_namespaced_custom_object("kubeflow.org", "v1", NS, "pytorchjobs", "grows", {
        "metadata": {"labels": {f"{K}/priority-class": "high"}},
        "spec": {"pytorchReplicaSpecs": rs}})
    kubesim.advance(2)
    wl = workload(co, "grows")
    assert wl["spec"]["priority"] == 1000
    assert "3 more needed" in cond(wl, "QuotaReserved")["message"]


@pytest.mark.parametrize(("dev_gpus", "reason"), [
    (4, "InCohortReclamation"),             # dev stays within its nominal quota of 4
    (6, "InCohortReclaimWhileBorrowing"),   # dev borrows 2 beyond it, by borrowWithinCohort
])
def test_the_preempted_reason_follows_whether_the_preemptor_borrows(kubesim, api, dev_gpus,
                                                                   reason):
    """Kueue's classifyPreemptionVariant (classical/hierarchical_preemption.go): a preemptor
    whose requests fit in its own ClusterQueue's nominal quota has a hierarchical advantage
    over borrowers (``InCohortReclamation``) even when ``borrowWithinCohort`` is set; only a
    preemptor that itself borrows reclaims by ``borrowWithinCohort``
    (``InCohortReclaimWhileBorrowing``)."""
    _, co = api
    cq(co, "dev", 4, cohort="all", borrowing=4, preemption={
        "reclaimWithinCohort": "Any", "withinClusterQueue": "Never",
        "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}})
    cq(co, "idle", 4, cohort="all", borrowing=0)
    cq(co, "batch", 0, cohort="all")
    lq(co, NS, "dev-q", "dev")
    lq(co, NS2, "batch-q", "batch")
    submit(co, "sweep", "batch-q", ns=NS2, gpus=8, priority="low")  # borrows all 8
    kubesim.advance(3)
    assert status_of(co, "sweep", NS2)["Admitted"][0] == "True"
    submit(co, "dev-run", "dev-q", gpus=dev_gpus, priority="high")
    kubesim.advance(2)
    preempted = cond(workload(co, "sweep", NS2), "Preempted")
    assert (preempted["status"], preempted["reason"]) == ("True", reason)
    kubesim.advance(40)
    assert status_of(co, "dev-run")["Admitted"][0] == "True"


def test_a_cohorts_own_quota_is_lent_to_borrowers_and_reclaimed_from_them(kubesim, api):
    """A Cohort's own ``resourceGroups`` add to its ``SubtreeQuota``
    (pkg/cache/scheduler/resource_node.go ``updateCohortResourceNode``): borrowers may use
    it beyond what the queues' nominal quotas add up to, and a queue within its nominal
    quota reclaims from a borrower above its own."""
    _, co = api
    co.create_cluster_custom_object(K, V, "cohorts", {
        "apiVersion": f"{K}/{V}", "kind": "Cohort", "metadata": {"name": "all"},
        "spec": {"resourceGroups": [{
            "coveredResources": ["nvidia.com/gpu", "cpu", "memory"],
            "flavors": [{"name": "a100", "resources": [
                {"name": "nvidia.com/gpu", "nominalQuota": 4},
                {"name": "cpu", "nominalQuota": 0}, {"name": "memory", "nominalQuota": 0}]}],
        }]}})
    cq(co, "prod", 2, cohort="all", borrowing=0,
       preemption={"reclaimWithinCohort": "Any", "withinClusterQueue": "Never"})
    cq(co, "dev", 2, cohort="all")   # no borrowingLimit
    lq(co, NS, "prod-q", "prod")
    lq(co, NS2, "dev-q", "dev")
    submit(co, "too-big", "dev-q", ns=NS2, gpus=9)
    submit(co, "dev-big", "dev-q", ns=NS2, gpus=8)   # 2 its own, 2 of prod's, 4 the cohort's
    kubesim.advance(3)
    qr = cond(workload(co, "too-big", NS2), "QuotaReserved")
    assert qr["reason"] == "ExceedsMaxQuota" and "maximum capacity (8)" in qr["message"]
    assert status_of(co, "dev-big", NS2)["Admitted"][0] == "True"
    assert co.get_cluster_custom_object(K, V, "clusterqueues", "dev")["status"][
        "flavorsUsage"][0]["resources"][0] == {"name": "nvidia.com/gpu", "total": "8",
                                               "borrowed": "6"}
    submit(co, "prod-job", "prod-q", gpus=2)   # within its nominal quota: reclaims
    kubesim.advance(3)
    assert cond(workload(co, "dev-big", NS2), "Preempted")["reason"] == "InCohortReclamation"
    kubesim.advance(40)
    assert status_of(co, "prod-job")["Admitted"][0] == "True"


def test_a_flavor_not_matching_does_not_hide_the_quota_reason(kubesim, api):
    """The pending reason is the nominated flavor's (KEP-10852's tiers): a workload whose
    first flavor does not match its node selector and whose second lacks unused quota
    waits ``WaitingForQuota``, not ``NoMatchingFlavor``."""
    _, co = api
    cq(co, "cq-a", 4, extra_flavors=(("h800", 2),))
    lq(co, NS, "lq", "cq-a")
    submit(co, "first", "lq", gpus=2, product=H800)
    kubesim.advance(2)
    submit(co, "second", "lq", gpus=2, product=H800)
    kubesim.advance(2)
    assert status_of(co, "first")["Admitted"][0] == "True"
    qr = cond(workload(co, "second"), "QuotaReserved")
    assert qr["reason"] == "WaitingForQuota", qr
    assert "flavor a100 doesn't match node affinity" in qr["message"]
