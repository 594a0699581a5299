"""The PyTorchJob operator: pods, env, labels, conditions, suspend, quota refusals, restarts."""

from __future__ import annotations

import pytest
from kubernetes.client import ApiClient

from kubesim.sim.harness import SimHarness, condition, make_job
from kubesim.sim.operator import set_condition

NS = "team-a"
PJ = "pytorchjobs.kubeflow.org"
H800 = "NVIDIA-H800"


@pytest.fixture
def h():
    h = SimHarness("small", seed=7)
    h.namespace(NS)
    return h


def job(h, name):
    return h.store.get(PJ, name, namespace=NS)


def pods_of(h, name):
    return sorted(
        (p for p in h.pods(NS, label_selector=f"training.kubeflow.org/job-name={name}")),
        key=lambda p: p["metadata"]["name"],
    )


def test_set_condition_semantics():
    c = set_condition([], "Created", "True", "PyTorchJobCreated", "m", "t0")
    c = set_condition(c, "Running", "True", "PyTorchJobRunning", "m", "t1")
    c = set_condition(c, "Restarting", "True", "PyTorchJobRestarting", "m", "t2")
    assert [x["type"] for x in c] == ["Created", "Restarting"]  # Restarting replaces Running
    c = set_condition(c, "Running", "True", "PyTorchJobRunning", "m", "t3")
    c = set_condition(c, "Succeeded", "True", "PyTorchJobSucceeded", "m", "t4")
    assert [(x["type"], x["status"]) for x in c] == [
        ("Created", "True"),
        ("Running", "False"),
        ("Succeeded", "True"),
    ]
    failed = set_condition(c, "Failed", "True", "PyTorchJobFailed", "m", "t5")
    assert set_condition(failed, "Running", "True", "PyTorchJobRunning", "m", "t6") == failed


def test_pods_labels_env_owner_and_service(h):
    j = h.store.create(
        PJ, make_job("llm", workers=2, gpus=2, product=H800, run_seconds=100), namespace=NS
    )
    h.advance(1)
    pods = pods_of(h, "llm")
    assert [p["metadata"]["name"] for p in pods] == ["llm-master-0", "llm-worker-0", "llm-worker-1"]
    m, w1 = pods[0], pods[2]
    assert m["metadata"]["labels"] == {
        "app": "llm",
        "training.kubeflow.org/job-name": "llm",
        "training.kubeflow.org/replica-type": "master",
        "training.kubeflow.org/replica-index": "0",
        "training.kubeflow.org/job-role": "master",
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
    }
    assert "training.kubeflow.org/job-role" not in w1["metadata"]["labels"]
    ref = m["metadata"]["ownerReferences"][0]
    assert ref == {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "name": "llm",
        "uid": j["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    env = {e["name"]: e["value"] for e in w1["spec"]["containers"][0]["env"]}
    assert env["MASTER_ADDR"] == "llm-master-0" and env["MASTER_PORT"] == "23456"
    assert env["WORLD_SIZE"] == "3" and env["RANK"] == "2"
    assert (
        env["PET_NNODES"] == "3"
        and env["PET_NODE_RANK"] == "2"
        and env["PET_NPROC_PER_NODE"] == "auto"
    )
    menv = {e["name"]: e["value"] for e in m["spec"]["containers"][0]["env"]}
    assert menv["RANK"] == "0"
    assert m["spec"]["containers"][0]["ports"][0]["name"] == "pytorchjob-port"
    assert m["spec"]["restartPolicy"] == "OnFailure"
    svc = h.store.get("services", "llm-master-0", namespace=NS)
    assert svc["spec"]["clusterIP"] == "None"
    for p in pods:
        ApiClient()._ApiClient__deserialize(p, "V1Pod")


def test_suspended_job_has_no_pods_until_resumed_then_succeeds(h):
    h.store.create(
        PJ,
        make_job("s", workers=1, gpus=4, product=H800, suspend=True, run_seconds=50),
        namespace=NS,
    )
    h.advance(3)
    assert pods_of(h, "s") == []
    j = job(h, "s")
    assert condition(j, "Created")["reason"] == "PyTorchJobCreated"
    sus = condition(j, "Suspended")
    assert sus["status"] == "True" and sus["reason"] == "PyTorchJobSuspended"
    assert "startTime" not in j["status"]
    h.store.patch(PJ, "s", {"spec": {"runPolicy": {"suspend": False}}}, namespace=NS)
    h.advance(5)
    j = job(h, "s")
    assert condition(j, "Suspended")["status"] == "False"
    assert condition(j, "Suspended")["reason"] == "PyTorchJobResumed"
    assert condition(j, "Running")["status"] == "True"
    assert j["status"]["replicaStatuses"]["Master"]["active"] == 1
    assert j["status"]["replicaStatuses"]["Worker"]["active"] == 1
    assert j["status"]["startTime"]
    assert {p["spec"]["nodeName"] for p in pods_of(h, "s")} == {"h800-0"}
    h.advance(55)
    j = job(h, "s")
    assert condition(j, "Succeeded")["status"] == "True"
    assert condition(j, "Succeeded")["reason"] == "PyTorchJobSucceeded"
    assert condition(j, "Running")["status"] == "False"
    assert j["status"]["replicaStatuses"]["Master"] == {
        "active": 0,
        "succeeded": 1,
        "failed": 0,
        "selector": "training.kubeflow.org/job-name=s,"
        "training.kubeflow.org/operator-name=pytorchjob-controller,"
        "training.kubeflow.org/replica-type=master",
    }
    assert j["status"]["completionTime"]
    assert j["status"]["conditions"][-1]["type"] == "Succeeded"


def test_suspending_a_running_job_deletes_pods(h):
    h.store.create(PJ, make_job("r", workers=1, gpus=1, run_seconds=1000), namespace=NS)
    h.advance(5)
    assert len(pods_of(h, "r")) == 2
    h.store.patch(PJ, "r", {"spec": {"runPolicy": {"suspend": True}}}, namespace=NS)
    h.advance(1)
    assert all(p["metadata"].get("deletionTimestamp") for p in pods_of(h, "r"))
    j = job(h, "r")
    assert condition(j, "Suspended")["status"] == "True"
    assert condition(j, "Running")["status"] == "False"
    assert condition(j, "Running")["reason"] == "PyTorchJobSuspended"
    h.advance(31)
    assert pods_of(h, "r") == []


def test_quota_refusal_emits_failed_create_pod_then_retries(h):
    h.store.create(
        "resourcequotas",
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "gpu"},
            "spec": {"hard": {"requests.nvidia.com/gpu": "4"}},
        },
        namespace=NS,
    )
    h.store.create(PJ, make_job("q", workers=1, gpus=4, run_seconds=100), namespace=NS)
    h.advance(2)
    assert [p["metadata"]["name"] for p in pods_of(h, "q")] == ["q-master-0"]
    ev = [e for e in h.events(NS, "FailedCreatePod") if e["involvedObject"]["name"] == "q"]
    assert ev and ev[0]["type"] == "Warning"
    assert ev[0]["message"].startswith(
        'Error creating: pods "q-worker-0" is forbidden: exceeded quota: gpu'
    )
    assert ev[0]["involvedObject"]["kind"] == "PyTorchJob"
    h.store.patch(
        "resourcequotas", "gpu", {"spec": {"hard": {"requests.nvidia.com/gpu": "8"}}}, namespace=NS
    )
    h.advance(2)
    assert [p["metadata"]["name"] for p in pods_of(h, "q")] == ["q-master-0", "q-worker-0"]


def test_never_restart_policy_fails_the_job(h):
    h.store.create(
        PJ,
        make_job(
            "nf",
            workers=1,
            gpus=1,
            run_seconds=100,
            restart_policy="Never",
            annotations={"fail-after-seconds": 10},
        ),
        namespace=NS,
    )
    h.advance(20)
    j = job(h, "nf")
    failed = condition(j, "Failed")
    assert failed["status"] == "True" and failed["reason"] == "PyTorchJobFailed"
    assert "replica(s) failed" in failed["message"]
    assert j["status"]["completionTime"]


def test_exit_code_policy_recreates_on_retryable_code(h):
    h.store.create(
        PJ,
        make_job(
            "ec",
            workers=1,
            gpus=1,
            run_seconds=100,
            restart_policy="ExitCode",
            annotations={"fail-after-seconds": 10, "exit-code": 137},
        ),
        namespace=NS,
    )
    h.advance(5)
    first_uids = {p["metadata"]["uid"] for p in pods_of(h, "ec")}
    assert {p["spec"]["restartPolicy"] for p in pods_of(h, "ec")} == {"Never"}
    h.advance(9)
    j = job(h, "ec")
    assert condition(j, "Restarting")["reason"] == "PyTorchJobRestarting"
    assert condition(j, "Failed") is None
    h.advance(3)
    pods = pods_of(h, "ec")
    assert len(pods) == 2 and not first_uids & {p["metadata"]["uid"] for p in pods}  # recreated


def test_backoff_limit(h):
    h.store.create(
        PJ,
        make_job(
            "bo",
            workers=0,
            gpus=1,
            run_seconds=100,
            restart_policy="OnFailure",
            annotations={"fail-after-seconds": 2},
            run_policy={"backoffLimit": 2},
        ),
        namespace=NS,
    )
    h.advance(60)
    failed = condition(job(h, "bo"), "Failed")
    assert (
        failed
        and failed["message"]
        == "PyTorchJob bo has failed because it has reached the specified backoff limit"
    )


def test_node_failure_recreates_on_failure_pods(h):
    h.store.create(
        PJ, make_job("nl", workers=1, gpus=8, product=H800, run_seconds=500), namespace=NS
    )
    h.advance(5)
    h.store.patch(
        "nodes", "h800-0", {"metadata": {"annotations": {"kubesim.trainyard.io/fail": "true"}}}
    )
    h.advance(2)
    j = job(h, "nl")
    assert condition(j, "Failed") is None
    h.store.patch(
        "nodes", "h800-0", {"metadata": {"annotations": {"kubesim.trainyard.io/fail": "false"}}}
    )
    h.advance(10)
    assert any(p["status"].get("phase") == "Running" for p in pods_of(h, "nl"))


def test_clean_pod_policy_and_ttl(h):
    h.store.create(
        PJ,
        make_job(
            "ttl",
            workers=1,
            gpus=1,
            run_seconds=20,
            run_policy={"cleanPodPolicy": "All", "ttlSecondsAfterFinished": 30},
        ),
        namespace=NS,
    )
    h.advance(30)
    assert condition(job(h, "ttl"), "Succeeded")["status"] == "True"
    h.advance(2)
    assert pods_of(h, "ttl") == []
    h.advance(35)
    assert [j for j in h.store.list(PJ, namespace=NS) if j["metadata"]["name"] == "ttl"] == []


def test_deleting_the_job_garbage_collects_pods(h):
    h.store.create(PJ, make_job("del", workers=1, gpus=1, run_seconds=1000), namespace=NS)
    h.advance(5)
    h.store.delete(PJ, "del", namespace=NS)
    h.advance(40)
    assert pods_of(h, "del") == []


def test_active_deadline_fails_the_job(h):
    h.store.create(
        PJ,
        make_job(
            "dl", workers=1, gpus=1, run_seconds=1000, run_policy={"activeDeadlineSeconds": 30}
        ),
        namespace=NS,
    )
    h.advance(20)
    assert condition(job(h, "dl"), "Failed") is None
    h.advance(15)
    failed = condition(job(h, "dl"), "Failed")
    assert failed["reason"] == "PyTorchJobFailed"
    assert "active longer than specified deadline" in failed["message"]
    assert all(p["metadata"].get("deletionTimestamp") for p in pods_of(h, "dl"))


def test_jobs_managed_by_another_controller_are_left_alone(h):
    h.store.create(
        PJ,
        make_job("mk", workers=1, run_policy={"managedBy": "kueue.x-k8s.io/multikueue"}),
        namespace=NS,
    )
    h.advance(3)
    assert pods_of(h, "mk") == [] and not job(h, "mk").get("status")
