"""The whole path through the official kubernetes client over HTTP (kubesim fixture, small)."""

from __future__ import annotations

import urllib.request

import kubernetes
import pytest

from kubesim.sim.harness import condition, make_job
from kubesim.tests.test_sim_metrics import parse

NS = "team-http"
GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"
H800 = "NVIDIA-H800"
MERGE = "application/merge-patch+json"


@pytest.fixture
def apis(kubesim):
    core = kubernetes.client.CoreV1Api(kubesim.api_client)
    co = kubernetes.client.CustomObjectsApi(kubesim.api_client)
    core.create_namespace(
        kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=NS))
    )
    return core, co


def get_job(co, name):
    return co.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)


def test_suspended_job_resumed_runs_on_the_right_gpus_and_succeeds(kubesim, apis):
    core, co = apis
    body = make_job("llm", workers=2, gpus=2, product=H800, suspend=True, run_seconds=120)
    body["metadata"]["namespace"] = NS
    co.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, body)
    kubesim.advance(3)
    assert core.list_namespaced_pod(NS).items == []
    job = get_job(co, "llm")
    assert condition(job, "Suspended")["status"] == "True"
    assert condition(job, "Created")["reason"] == "PyTorchJobCreated"

    co.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        NS,
        PLURAL,
        "llm",
        {"spec": {"runPolicy": {"suspend": False}}},
        _content_type=MERGE,
    )
    kubesim.advance(5)
    pods = core.list_namespaced_pod(NS, label_selector="training.kubeflow.org/job-name=llm").items
    assert sorted(p.metadata.name for p in pods) == ["llm-master-0", "llm-worker-0", "llm-worker-1"]
    nodes = {n.metadata.name: n for n in core.list_node().items}
    for p in pods:
        assert p.status.phase == "Running"
        assert nodes[p.spec.node_name].metadata.labels["nvidia.com/gpu.product"] == H800
        assert p.status.container_statuses[0].ready is True
        assert p.spec.containers[0].resources.limits["nvidia.com/gpu"] == "2"
    job = get_job(co, "llm")
    assert condition(job, "Running")["status"] == "True"
    assert job["status"]["replicaStatuses"]["Worker"]["active"] == 2

    # metrics over HTTP carry the job's pods on H800 GPUs
    text = urllib.request.urlopen(kubesim.url + "/metrics", timeout=5).read().decode()
    _, samples = parse(text)
    busy = [
        lab
        for n, lab, v in samples
        if n == "DCGM_FI_DEV_GPU_UTIL" and lab["pod"].startswith("llm-")
    ]
    assert len(busy) == 6 and {lab["modelName"] for lab in busy} == {"NVIDIA H800"}

    kubesim.advance(125)
    job = get_job(co, "llm")
    assert condition(job, "Succeeded")["status"] == "True"
    assert condition(job, "Succeeded")["reason"] == "PyTorchJobSucceeded"
    rs = job["status"]["replicaStatuses"]
    assert (rs["Master"]["succeeded"], rs["Worker"]["succeeded"], rs["Worker"]["active"]) == (
        1,
        2,
        0,
    )
    assert job["status"]["startTime"] and job["status"]["completionTime"]
    assert {p.status.phase for p in core.list_namespaced_pod(NS).items} == {"Succeeded"}
    # everything the simulation wrote deserialises into the client's models
    core.list_pod_for_all_namespaces()
    core.list_node()
    core.list_event_for_all_namespaces()
    core.list_namespaced_service(NS)
    scs = kubernetes.client.StorageV1Api(kubesim.api_client).list_storage_class().items
    assert {"fast-ssd", "shared-nfs"} <= {sc.metadata.name for sc in scs}


def test_quota_refusal_then_created_when_quota_frees(kubesim, apis):
    core, co = apis
    core.create_namespaced_resource_quota(
        NS,
        kubernetes.client.V1ResourceQuota(
            metadata=kubernetes.client.V1ObjectMeta(name="gpus"),
            spec=kubernetes.client.V1ResourceQuotaSpec(hard={"requests.nvidia.com/gpu": "8"}),
        ),
    )
    first = make_job("first", workers=1, gpus=4, run_seconds=60)
    second = make_job("second", workers=1, gpus=4, run_seconds=60)
    co.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, first)
    kubesim.advance(2)
    co.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, second)
    kubesim.advance(3)
    assert (
        core.list_namespaced_pod(NS, label_selector="training.kubeflow.org/job-name=second").items
        == []
    )
    events = core.list_namespaced_event(NS, field_selector="involvedObject.name=second").items
    refused = [e for e in events if e.reason == "FailedCreatePod"]
    assert refused and refused[0].type == "Warning"
    assert "exceeded quota: gpus" in refused[0].message
    assert refused[0].message.startswith('Error creating: pods "second-master-0" is forbidden')
    assert refused[0].involved_object.kind == "PyTorchJob"
    kubesim.advance(70)  # "first" finishes, its pods stop counting against the quota
    assert condition(get_job(co, "first"), "Succeeded")["status"] == "True"
    kubesim.advance(5)
    pods = core.list_namespaced_pod(
        NS, label_selector="training.kubeflow.org/job-name=second"
    ).items
    assert sorted(p.metadata.name for p in pods) == ["second-master-0", "second-worker-0"]
    kubesim.advance(5)
    assert condition(get_job(co, "second"), "Running")["status"] == "True"


def test_cordon_and_fail_node_through_the_api(kubesim, apis):
    core, _ = apis
    core.patch_node("h800-0", {"spec": {"unschedulable": True}})
    pod = kubernetes.client.V1Pod(
        metadata=kubernetes.client.V1ObjectMeta(name="p"),
        spec=kubernetes.client.V1PodSpec(
            node_selector={"nvidia.com/gpu.product": H800},
            containers=[
                kubernetes.client.V1Container(
                    name="main",
                    image="busybox",
                    resources=kubernetes.client.V1ResourceRequirements(
                        limits={"nvidia.com/gpu": "1"}
                    ),
                )
            ],
        ),
    )
    core.create_namespaced_pod(NS, pod)
    kubesim.advance(2)
    p = core.read_namespaced_pod("p", NS)
    cond = next(c for c in p.status.conditions if c.type == "PodScheduled")
    assert cond.reason == "Unschedulable" and "1 node(s) were unschedulable" in cond.message
    core.patch_node("h800-0", {"spec": {"unschedulable": False}})
    kubesim.advance(4)
    assert core.read_namespaced_pod("p", NS).status.phase == "Running"
    core.patch_node("h800-0", {"metadata": {"annotations": {"kubesim.trainyard.io/fail": "true"}}})
    kubesim.advance(1)
    node = core.read_node("h800-0")
    assert next(c for c in node.status.conditions if c.type == "Ready").status != "True"
    assert core.read_namespaced_pod("p", NS).status.phase == "Failed"


def test_pod_log_over_http(kubesim, apis):
    core, co = apis
    body = make_job(
        "logs", workers=1, gpus=1, run_seconds=200, annotations={"log": "hello from the annotation"}
    )
    co.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, body)
    kubesim.advance(100)
    text = core.read_namespaced_pod_log("logs-worker-0", NS)
    lines = text.splitlines()
    assert lines[0] == "hello from the annotation"
    assert "started on" in lines[1] and "WORLD_SIZE=2" in lines[2]
    assert any(" step 100 loss=" in ln for ln in lines)
    assert core.read_namespaced_pod_log("logs-worker-0", NS, tail_lines=1).count("\n") == 1


def test_real_time_speed_factor(kubesim_factory):
    """Wall-clock mode: the cluster ticks by itself; at speed 300 a container of 2 simulated
    minutes runs for 0.4 s of the (wall) clock."""
    import time

    handle = kubesim_factory(profile="small", deterministic=False, speed=300, tick_seconds=0.02)
    core = kubernetes.client.CoreV1Api(handle.api_client)
    co = kubernetes.client.CustomObjectsApi(handle.api_client)
    core.create_namespace(
        kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=NS))
    )
    co.create_namespaced_custom_object(
        GROUP, VERSION, NS, PLURAL, make_job("rt", workers=1, gpus=1, run_seconds=120)
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        job = get_job(co, "rt")
        done = condition(job, "Succeeded")
        if done and done["status"] == "True":
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"job did not finish at speed 300: {job.get('status')}")
    assert {p.status.phase for p in core.list_namespaced_pod(NS).items} == {"Succeeded"}
