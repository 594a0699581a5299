"""kubesim's Kueue with its Configuration: ``waitForPodsReady`` (timeout, requeue backoff,
the limit's deactivation, recovery) and ``resources.transformations``, through the
official client over HTTP. Several scenarios are transcribed from Kueue's
``test/integration/singlecluster/scheduler/podsready/scheduler_test.go`` (v0.19.2): each
names its ``ginkgo.It``. Jobs whose pods cannot start use kubesim's ``image-pull``
annotation (the kubelet cannot pull the image: the pod stays Pending)."""

from __future__ import annotations

import contextlib

import kubernetes
import pytest
import yaml

from kubesim.sim.kueue_config import backoff_seconds, parse, parse_duration

from .test_sim_kueue import NS, K, V, api, cond, cq, lq, submit, suspended, workload

__all__ = ["api"]

BAD = {"image-pull": "not-found"}


def configure(kubesim, config: dict) -> None:
    core = kubernetes.client.CoreV1Api(kubesim.api_client)
    with contextlib.suppress(kubernetes.client.ApiException):
        core.create_namespace(kubernetes.client.V1Namespace(
            metadata=kubernetes.client.V1ObjectMeta(name="kueue-system")))
    body = kubernetes.client.V1ConfigMap(
        metadata=kubernetes.client.V1ObjectMeta(name="kueue-manager-config",
                                                namespace="kueue-system"),
        data={"controller_manager_config.yaml": yaml.safe_dump(
            {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
             **config})})
    try:
        core.create_namespaced_config_map("kueue-system", body)
    except kubernetes.client.ApiException:
        core.replace_namespaced_config_map("kueue-manager-config", "kueue-system", body)


def wfpr(timeout="60s", limit=None, base=10, cap=3600, **extra) -> dict:
    rs: dict = {"timestamp": extra.pop("timestamp", "Eviction"), "backoffBaseSeconds": base,
                "backoffMaxSeconds": cap}
    if limit is not None:
        rs["backoffLimitCount"] = limit
    return {"waitForPodsReady": {"timeout": timeout, "requeuingStrategy": rs, **extra}}


def state(co, job):
    wl = workload(co, job)
    st = wl.get("status") or {}
    return wl, st.get("requeueState"), (st.get("schedulingStats") or {}).get("evictions")


# ---- the Configuration ------------------------------------------------------------------------
def test_defaults_durations_and_backoff_formula():
    d = parse("")
    # apis/config/v1beta2/defaults.go: on by default, 30m, recovery = timeout, 60s..3600s
    assert (d.pods_ready.enabled, d.pods_ready.timeout, d.pods_ready.recovery_timeout,
            d.pods_ready.backoff_limit, d.pods_ready.backoff_base,
            d.pods_ready.backoff_max, d.pods_ready.timestamp) == (
        True, 1800.0, 1800.0, None, 60, 3600, "Eviction")
    assert parse_duration("1h30m") == 5400 and parse_duration("90s") == 90
    assert parse_duration("0s") == 0
    with pytest.raises(ValueError):
        parse_duration("ten minutes")
    # UpdateRequeueState: base * 2^(n-1), capped (configuration_types.go: 60s, 120s, 240s...)
    assert [backoff_seconds(n, 60, 3600) for n in (1, 2, 3, 7, 8)] == [
        60, 120, 240, 3600, 3600]
    off = parse(yaml.safe_dump({"featureGates": {"DisableWaitForPodsReady": True}}))
    assert off.pods_ready.enabled is False
    bad = parse("waitForPodsReady: {timeout: -5m}")
    assert bad.error and bad.pods_ready.timeout == 1800  # refused: the defaults apply
    zero = parse(yaml.safe_dump({"waitForPodsReady": {"timeout": "5m",
                                                      "recoveryTimeout": "0s"}}))
    assert zero.pods_ready.recovery_timeout is None  # "0s" disables the recovery timeout


def test_transformations_retain_replace_multiply_and_exclude():
    cfg = parse(yaml.safe_dump({"resources": {
        "excludeResourcePrefixes": ["example.com/"],
        "transformations": [
            {"input": "nvidia.com/mig-4g.5gb", "strategy": "Replace",
             "outputs": {"example.com/accelerator-memory": "5Gi",
                         "trainyard.io/gpu-memory": "5Gi"}},
            {"input": "nvidia.com/gpu", "outputs": {"trainyard.io/gpu-memory": "80Gi"}},
            {"input": "nvidia.com/gpucores", "multiplyBy": "nvidia.com/gpu",
             "outputs": {"trainyard.io/gpu-cores": "1"}}]}}))
    gi = 1024 ** 3
    got = cfg.requests({"nvidia.com/mig-4g.5gb": 2, "cpu": 4000, "example.com/foo": 3})
    # Replace drops the input; the excluded prefix is dropped from the pod's requests,
    # before the transformations (their outputs are kept)
    assert got == {"cpu": 4000, "trainyard.io/gpu-memory": 10 * gi,
                   "example.com/accelerator-memory": 10 * gi}
    got = cfg.requests({"nvidia.com/gpu": 2, "nvidia.com/gpucores": 30})
    # Retain keeps the input; multiplyBy scales the outputs by the named request
    assert got == {"nvidia.com/gpu": 2, "nvidia.com/gpucores": 30,
                   "trainyard.io/gpu-memory": 160 * gi, "trainyard.io/gpu-cores": 60}


def test_a_transformed_request_is_charged_to_the_clusterqueue(kubesim, api):
    _, co = api
    configure(kubesim, {"resources": {"transformations": [
        {"input": "nvidia.com/gpu", "outputs": {"trainyard.io/gpu-memory": "80Gi"}}]}})
    co.create_cluster_custom_object(K, V, "clusterqueues", {
        "apiVersion": f"{K}/{V}", "kind": "ClusterQueue", "metadata": {"name": "mem"},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": ["nvidia.com/gpu", "cpu", "memory", "trainyard.io/gpu-memory"],
            "flavors": [{"name": "a100", "resources": [
                {"name": "nvidia.com/gpu", "nominalQuota": 8},
                {"name": "cpu", "nominalQuota": 100}, {"name": "memory", "nominalQuota": "1Ti"},
                {"name": "trainyard.io/gpu-memory", "nominalQuota": "160Gi"}]}]}]}})
    lq(co, NS, "lq", "mem")
    submit(co, "two", "lq", gpus=2)
    kubesim.advance(1)
    submit(co, "one", "lq", gpus=1)
    kubesim.advance(3)
    wl = workload(co, "two")
    assert wl["status"]["admission"]["podSetAssignments"][0]["resourceUsage"][
        "trainyard.io/gpu-memory"] == "160Gi"
    qr = cond(workload(co, "one"), "QuotaReserved")
    assert qr["status"] == "False" and "trainyard.io/gpu-memory" in qr["message"]


# ---- waitForPodsReady -------------------------------------------------------------------------
def test_podsready_condition_reasons_and_no_eviction_when_pods_start(kubesim, api):
    _, co = api
    configure(kubesim, wfpr(timeout="60s"))
    cq(co, "cq", 8)
    lq(co, NS, "lq", "cq")
    submit(co, "good", "lq", gpus=1)
    kubesim.advance(2)
    pr = cond(workload(co, "good"), "PodsReady")
    assert (pr["status"], pr["reason"], pr["message"]) in (
        ("False", "WaitForStart", "Not all pods are ready or succeeded"),
        ("True", "Started", "All pods reached readiness and the workload is running"))
    kubesim.advance(120)
    wl, rq, evs = state(co, "good")
    assert cond(wl, "PodsReady")["reason"] == "Started" and rq is None and not evs
    assert cond(wl, "Evicted") is None


def test_requeue_a_workload_which_exceeded_the_timeout(kubesim, api):
    """scheduler_test.go, "Should requeue a workload which exceeded the timeout to reach
    PodsReady=True": prod1 (high) times out, is evicted with requeueState count 1 and a
    requeueAt; prod2 (low) is admitted while prod1 waits out its backoff."""
    _, co = api
    configure(kubesim, wfpr(timeout="60s", limit=2, base=100))
    cq(co, "prod-cq", 2)
    lq(co, NS, "prod-queue", "prod-cq")
    submit(co, "prod1", "prod-queue", gpus=2, priority="high", annotations=BAD)
    kubesim.advance(2)
    submit(co, "prod2", "prod-queue", gpus=2, priority="low")
    kubesim.advance(3)
    assert cond(workload(co, "prod1"), "Admitted")["status"] == "True"
    assert cond(workload(co, "prod2"), "QuotaReserved")["status"] == "False"
    kubesim.advance(60)
    wl, rq, evs = state(co, "prod1")
    ev = cond(wl, "Evicted")
    assert (ev["status"], ev["reason"]) == ("True", "PodsReadyTimeout")
    ns, name = wl["metadata"]["namespace"], wl["metadata"]["name"]
    assert ev["message"] == f"Exceeded the PodsReady timeout {ns}/{name}"
    assert rq["count"] == 1 and rq["requeueAt"]
    assert evs == [{"reason": "PodsReadyTimeout", "underlyingCause": "WaitForStart",
                    "count": 1}]
    kubesim.advance(10)  # the pods go; the quota is released; prod2 admitted
    wl, rq, _ = state(co, "prod1")
    assert cond(wl, "Requeued")["status"] == "False"
    assert cond(wl, "Requeued")["reason"] == "PodsReadyTimeout"
    assert cond(wl, "QuotaReserved")["status"] == "False"
    assert suspended(co, "prod1")
    assert cond(workload(co, "prod2"), "Admitted")["status"] == "True"


def test_readmit_then_deactivate_past_the_requeue_limit_then_reactivate(kubesim, api):
    """scheduler_test.go, "Should re-admit a timed out workload and deactivate a workload
    exceeded the re-queue count limit. After that re-activating a workload"."""
    _, co = api
    configure(kubesim, wfpr(timeout="30s", limit=2, base=5))
    cq(co, "prod-cq", 4)
    lq(co, NS, "prod-queue", "prod-cq")
    submit(co, "prod", "prod-queue", gpus=2, annotations=BAD)
    kubesim.advance(35)
    wl, rq, _ = state(co, "prod")
    assert cond(wl, "Evicted")["reason"] == "PodsReadyTimeout" and rq["count"] == 1
    kubesim.advance(20)  # pods gone, backoff 5s over: re-admitted (the 2nd admission)
    wl, rq, _ = state(co, "prod")
    assert cond(wl, "Admitted")["status"] == "True" and rq == {"count": 1}
    assert cond(wl, "Requeued")["reason"] == "BackoffFinished"
    assert cond(wl, "Requeued")["message"] == "The workload backoff was finished"
    kubesim.advance(20)  # 2nd timeout (30s after the 2nd admission): count 2, backoff 10s
    wl, rq, _ = state(co, "prod")
    assert rq["count"] == 2
    kubesim.advance(50)  # 3rd admission, 3rd timeout: 2 + 1 > limit: deactivated
    wl, rq, evs = state(co, "prod")
    assert wl["spec"]["active"] is False and rq is None
    ev = cond(wl, "Evicted")
    assert (ev["reason"], ev["message"]) == (
        "DeactivatedDueToRequeuingLimitExceeded",
        "The workload is deactivated due to exceeding the maximum number of re-queuing "
        "retries")
    assert cond(wl, "DeactivationTarget") is None
    assert {(e["reason"], e["underlyingCause"]): e["count"] for e in evs} == {
        ("PodsReadyTimeout", "WaitForStart"): 2, ("Deactivated", "RequeuingLimitExceeded"): 1}
    kubesim.advance(10)
    wl = workload(co, "prod")
    assert cond(wl, "QuotaReserved")["status"] == "False" and suspended(co, "prod")
    assert cond(wl, "Requeued")["status"] == "False"
    # reactivated: admitted again, and timed out again from a fresh requeue count
    co.patch_namespaced_custom_object(K, V, NS, "workloads", wl["metadata"]["name"],
                                      {"spec": {"active": True}})
    kubesim.advance(5)
    assert cond(workload(co, "prod"), "Admitted")["status"] == "True"
    kubesim.advance(40)
    _, rq, _ = state(co, "prod")
    assert rq["count"] == 1


def test_move_the_evicted_workload_at_the_end_of_the_queue(kubesim, api):
    """scheduler_test.go, "Should move the evicted workload at the end of the queue":
    timestamp Eviction, one fits at a time; prod1 times out and queues behind prod2 and
    prod3."""
    _, co = api
    configure(kubesim, wfpr(timeout="30s", limit=2, base=1))
    cq(co, "prod-cq", 2)
    for name in ("prod1", "prod2", "prod3"):
        submit(co, name, "eviction-lq", gpus=2, annotations=BAD if name == "prod1" else None,
               run_seconds=40)
        kubesim.advance(1)
    lq(co, NS, "eviction-lq", "prod-cq")
    kubesim.advance(2)
    assert cond(workload(co, "prod1"), "Admitted")["status"] == "True"
    kubesim.advance(40)
    assert cond(workload(co, "prod2"), "Admitted")["status"] == "True"
    assert cond(workload(co, "prod1"), "QuotaReserved")["status"] == "False"
    kubesim.advance(50)  # prod2 finishes: prod3 (created before prod1's eviction) next
    assert cond(workload(co, "prod3"), "Admitted")["status"] == "True"
    assert cond(workload(co, "prod1"), "QuotaReserved")["status"] == "False"


def test_keep_the_evicted_workload_at_the_front_with_creation_timestamp(kubesim, api):
    """scheduler_test.go, "Requeuing timestamp set to Creation" / "Should keep the
    evicted workload at the front of the queue"."""
    _, co = api
    configure(kubesim, wfpr(timeout="30s", base=10, timestamp="Creation"))
    cq(co, "standalone-cq", 2)
    lq(co, NS, "standalone-queue", "standalone-cq")
    submit(co, "wl-1", "standalone-queue", gpus=2, annotations=BAD)
    kubesim.advance(1)
    submit(co, "wl-2", "standalone-queue", gpus=2, annotations=BAD)
    kubesim.advance(1)
    submit(co, "wl-3", "standalone-queue", gpus=2, annotations=BAD)
    kubesim.advance(2)
    assert cond(workload(co, "wl-1"), "Admitted")["status"] == "True"
    kubesim.advance(38)  # wl-1 timed out and waits out its 10s backoff: wl-2 admitted
    assert cond(workload(co, "wl-2"), "Admitted")["status"] == "True"
    kubesim.advance(40)  # wl-2 times out: wl-1 (created first) is admitted, not wl-3
    assert cond(workload(co, "wl-1"), "Admitted")["status"] == "True"
    assert cond(workload(co, "wl-3"), "QuotaReserved")["status"] == "False"
    assert (workload(co, "wl-1")["status"].get("requeueState") or {}).get("count") == 1


def test_recovery_timeout_after_a_pod_fails(kubesim, api):
    """recoveryTimeout (configuration_types.go): a ready workload that loses a pod goes to
    ``PodsReady=False`` ``WaitForRecovery``; when the replacement cannot start within the
    recovery timeout the workload is evicted (``PodsReadyTimeout``, underlying cause
    ``WaitForRecovery``)."""
    core, co = api
    configure(kubesim, wfpr(timeout="60s", recoveryTimeout="20s", base=300))
    cq(co, "cq", 8)
    lq(co, NS, "lq", "cq")
    submit(co, "r", "lq", gpus=1)
    kubesim.advance(15)
    assert cond(workload(co, "r"), "PodsReady")["reason"] == "Started"
    for node in core.list_node().items:  # the replacement pod finds no node
        core.patch_node(node.metadata.name, {"spec": {"unschedulable": True}})
    for p in core.list_namespaced_pod(NS, label_selector="training.kubeflow.org/job-name=r"
                                      ).items:
        core.delete_namespaced_pod(p.metadata.name, NS, grace_period_seconds=0)
    kubesim.advance(5)
    pr = cond(workload(co, "r"), "PodsReady")
    assert (pr["status"], pr["reason"], pr["message"]) == (
        "False", "WaitForRecovery", "At least one pod has failed, waiting for recovery")
    kubesim.advance(20)
    wl, rq, evs = state(co, "r")
    assert cond(wl, "Evicted")["reason"] == "PodsReadyTimeout" and rq["count"] == 1
    assert evs == [{"reason": "PodsReadyTimeout", "underlyingCause": "WaitForRecovery",
                    "count": 1}]


def test_block_admission_unblocks_other_clusterqueues_once_the_admitted_exceeds_timeout(
        kubesim, api):
    """scheduler_test.go, "Should unblock admission of new workloads in other
    ClusterQueues once the admitted workload exceeds timeout" (``blockAdmission: true``):
    dev-wl waits with ``WaitingForPodsReady`` while prod-wl's pods are not ready, and is
    admitted once prod-wl is evicted by the timeout."""
    _, co = api
    configure(kubesim, wfpr(timeout="60s", base=100, blockAdmission=True))
    cq(co, "prod-cq", 2, cohort="all")
    cq(co, "dev-cq", 2, cohort="all")
    lq(co, NS, "prod-queue", "prod-cq")
    lq(co, NS, "dev-queue", "dev-cq")
    submit(co, "prod-wl", "prod-queue", gpus=2, annotations=BAD)
    kubesim.advance(2)
    submit(co, "dev-wl", "dev-queue", gpus=2)
    kubesim.advance(5)
    assert cond(workload(co, "prod-wl"), "Admitted")["status"] == "True"
    qr = cond(workload(co, "dev-wl"), "QuotaReserved")
    assert (qr["status"], qr["reason"], qr["message"]) == (
        "False", "WaitingForPodsReady",
        "waiting for all admitted workloads to be in PodsReady condition")
    kubesim.advance(70)
    assert cond(workload(co, "prod-wl"), "Evicted")["reason"] == "PodsReadyTimeout"
    assert cond(workload(co, "dev-wl"), "Admitted")["status"] == "True"


def test_block_admission_of_one_of_two_workloads_in_the_same_cycle(kubesim, api):
    """scheduler_test.go, "Should block admission of one new workload if two are
    considered in the same scheduling cycle": both pending before their queues exist;
    the first created is admitted, the second waits as the first is not ready; once the
    first's pods are ready the second is admitted."""
    _, co = api
    configure(kubesim, wfpr(timeout="300s", blockAdmission=True))
    submit(co, "prod-wl", "prod-queue", gpus=2)
    kubesim.advance(1)
    submit(co, "dev-wl", "dev-queue", gpus=2)
    kubesim.advance(1)
    lq(co, NS, "prod-queue", "prod-cq")
    lq(co, NS, "dev-queue", "dev-cq")
    cq(co, "prod-cq", 2, cohort="all")
    cq(co, "dev-cq", 2, cohort="all")
    kubesim.advance(1)
    assert cond(workload(co, "prod-wl"), "QuotaReserved")["status"] == "True"
    assert cond(workload(co, "dev-wl"), "QuotaReserved")["reason"] == "WaitingForPodsReady"
    kubesim.advance(20)  # prod-wl's pods run: PodsReady=True unblocks admission
    assert cond(workload(co, "prod-wl"), "PodsReady")["status"] == "True"
    assert cond(workload(co, "dev-wl"), "Admitted")["status"] == "True"


def test_a_workload_that_gets_its_pod_back_is_recovered(kubesim, api):
    """generatePodsReadyCondition: ready again after ``WaitForRecovery`` is ``Recovered``
    (not ``Started``), and nothing is evicted."""
    core, co = api
    configure(kubesim, wfpr(timeout="60s", recoveryTimeout="60s"))
    cq(co, "cq", 8)
    lq(co, NS, "lq", "cq")
    submit(co, "r", "lq", gpus=1)
    kubesim.advance(15)
    nodes = [n.metadata.name for n in core.list_node().items]
    for name in nodes:
        core.patch_node(name, {"spec": {"unschedulable": True}})
    for p in core.list_namespaced_pod(NS, label_selector="training.kubeflow.org/job-name=r"
                                      ).items:
        core.delete_namespaced_pod(p.metadata.name, NS, grace_period_seconds=0)
    kubesim.advance(5)
    assert cond(workload(co, "r"), "PodsReady")["reason"] == "WaitForRecovery"
    for name in nodes:
        core.patch_node(name, {"spec": {"unschedulable": False}})
    kubesim.advance(20)
    wl, rq, evs = state(co, "r")
    pr = cond(wl, "PodsReady")
    assert (pr["status"], pr["reason"]) == ("True", "Recovered")
    assert rq is None and not evs and cond(wl, "Evicted") is None
