"""Kubeflow Trainer v2 TrainJobs over HTTP (kubesim fixture, small profile): the
torch-distributed runtime, pods as JobSet's Indexed Job creates them, runtime patches,
suspend/resume, completion, the deadline, failures, Trainer's webhook rules, GC."""

from __future__ import annotations

import kubernetes
import pytest

from kubesim.sim.harness import condition

from .helpers import api_error

pytestmark = pytest.mark.timeout(60)

NS = "team-v2"
GROUP, VERSION, PLURAL = "trainer.kubeflow.org", "v1alpha1", "trainjobs"
H800 = "NVIDIA-H800"
MERGE = "application/merge-patch+json"


@pytest.fixture
def apis(kubesim):
    core = kubernetes.client.CoreV1Api(kubesim.api_client)
    co = kubernetes.client.CustomObjectsApi(kubesim.api_client)
    core.create_namespace(
        kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=NS)))
    return core, co


def trainjob(name, *, nodes=2, gpus=2, suspend=False, run_seconds=120,
             runtime="torch-distributed", deadline=None, env=(), patch_spec=None):
    pod_patch = {"metadata": {"labels": {"team": "a"},
                              "annotations": {"kubesim.trainyard.io/run-seconds":
                                              str(run_seconds)}},
                 "spec": {"nodeSelector": {"nvidia.com/gpu.product": H800},
                          "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                           "effect": "NoSchedule"}],
                          "terminationGracePeriodSeconds": 10,
                          "volumes": [{"name": "ckpt", "emptyDir": {}}],
                          "containers": [{"name": "node", "volumeMounts": [
                              {"name": "ckpt", "mountPath": "/checkpoints"}]}],
                          **(patch_spec or {})}}
    body = {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "TrainJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "runtimeRef": {"name": runtime},
            "suspend": suspend,
            "trainer": {
                "image": "registry.example.org/ml/train:1",
                "command": ["torchrun", "train.py"],
                "numNodes": nodes,
                "env": [{"name": "EPOCHS", "value": "3"}, *env],
                "resourcesPerNode": {
                    "requests": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": str(gpus)},
                    "limits": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": str(gpus)}},
            },
            "runtimePatches": [{"manager": "example.org/tests", "trainingRuntimeSpec": {
                "template": {"spec": {"replicatedJobs": [{"name": "node", "template": {
                    "spec": {"template": pod_patch}}}]}}}}],
        },
    }
    if deadline is not None:
        body["spec"]["activeDeadlineSeconds"] = deadline
    return body


def create(co, body):
    return co.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, body)


def get(co, name):
    return co.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)


def patch(co, name, body):
    return co.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name, body,
                                             _content_type=MERGE)


def pods(core, name):
    items = core.list_namespaced_pod(
        NS, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}").items
    return sorted((p for p in items if p.metadata.deletion_timestamp is None),
                  key=lambda p: p.metadata.name)


def test_torch_distributed_is_installed(kubesim):
    co = kubernetes.client.CustomObjectsApi(kubesim.api_client)
    runtimes = co.list_cluster_custom_object(GROUP, VERSION, "clustertrainingruntimes")["items"]
    [torch] = [r for r in runtimes if r["metadata"]["name"] == "torch-distributed"]
    assert torch["spec"]["mlPolicy"] == {"numNodes": 1, "torch": {}}
    [node] = torch["spec"]["template"]["spec"]["replicatedJobs"]
    assert node["template"]["metadata"]["labels"] == {
        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}


def test_pods_as_jobset_creates_them_with_trainers_env_and_the_patches(kubesim, apis):
    core, co = apis
    created = create(co, trainjob("llm", nodes=2, gpus=2, run_seconds=120))
    kubesim.advance(5)
    got = pods(core, "llm")
    assert [p.metadata.name.rsplit("-", 1)[0] for p in got] == ["llm-node-0-0", "llm-node-0-1"]
    assert len({p.metadata.name for p in got}) == 2
    nodes = {n.metadata.name: n for n in core.list_node().items}
    for index, p in enumerate(got):
        labels = p.metadata.labels
        assert labels["jobset.sigs.k8s.io/jobset-name"] == "llm"
        assert labels["jobset.sigs.k8s.io/replicatedjob-name"] == "node"
        assert labels["jobset.sigs.k8s.io/job-index"] == "0"
        assert labels["batch.kubernetes.io/job-name"] == "llm-node-0"
        assert labels["batch.kubernetes.io/job-completion-index"] == str(index)
        assert labels["team"] == "a"  # the runtime patch's pod labels
        assert p.metadata.annotations["batch.kubernetes.io/job-completion-index"] == str(index)
        ref = p.metadata.owner_references[0]
        assert (ref.kind, ref.name, ref.uid, ref.controller) == (
            "TrainJob", "llm", created["metadata"]["uid"], True)
        assert p.spec.hostname == f"llm-node-0-{index}" and p.spec.subdomain == "llm"
        assert p.spec.restart_policy == "OnFailure"
        assert p.spec.termination_grace_period_seconds == 10
        [c] = p.spec.containers
        assert c.name == "node" and c.image == "registry.example.org/ml/train:1"
        assert c.command == ["torchrun", "train.py"]
        assert c.resources.limits["nvidia.com/gpu"] == "2"
        # the checkpoint volume, and the ServiceAccount token the admission plugin mounts
        assert [m.mount_path for m in c.volume_mounts] == [
            "/checkpoints", "/var/run/secrets/kubernetes.io/serviceaccount"]
        env = {e.name: e for e in c.env}
        assert env["EPOCHS"].value == "3"
        assert env["PET_NNODES"].value == "2" and env["PET_NPROC_PER_NODE"].value == "auto"
        assert env["PET_MASTER_ADDR"].value == "llm-node-0-0.llm"
        assert env["PET_MASTER_PORT"].value == "29500"
        assert env["PET_NODE_RANK"].value_from.field_ref.field_path == (
            "metadata.annotations['batch.kubernetes.io/job-completion-index']")
        assert p.status.phase == "Running"
        assert nodes[p.spec.node_name].metadata.labels["nvidia.com/gpu.product"] == H800
    svc = core.read_namespaced_service("llm", NS)
    assert svc.spec.cluster_ip == "None"
    assert svc.spec.selector == {"jobset.sigs.k8s.io/jobset-name": "llm"}
    job = get(co, "llm")
    assert job["status"]["jobsStatus"] == [{"name": "node", "active": 1, "ready": 1,
                                            "succeeded": 0, "failed": 0, "suspended": 0}]
    assert condition(job, "Complete") is None
    kubesim.advance(130, step=5)
    job = get(co, "llm")
    done = condition(job, "Complete")
    assert (done["status"], done["reason"], done["message"]) == (
        "True", "AllJobsCompleted", "jobset completed successfully")
    assert job["status"]["jobsStatus"][0]["succeeded"] == 1
    assert all(p.status.phase == "Succeeded" for p in pods(core, "llm"))


def test_suspend_resume_and_the_deadline_counted_from_the_resume(kubesim, apis):
    core, co = apis
    create(co, trainjob("sus", nodes=1, suspend=True, run_seconds=3600, deadline=300))
    kubesim.advance(400)  # suspended: no pods, and its deadline does not run
    assert pods(core, "sus") == []
    job = get(co, "sus")
    cond = condition(job, "Suspended")
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "True", "Suspended", "TrainJob is suspended")
    assert job["status"]["jobsStatus"][0]["suspended"] == 1

    patch(co, "sus", {"spec": {"suspend": False}})
    kubesim.advance(5)
    [first] = pods(core, "sus")
    cond = condition(get(co, "sus"), "Suspended")
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "False", "Resumed", "TrainJob is resumed")

    # preempted: the pods get their grace period, then are gone
    patch(co, "sus", {"spec": {"suspend": True}})
    kubesim.advance(15)
    assert pods(core, "sus") == []
    assert condition(get(co, "sus"), "Suspended")["status"] == "True"

    # resumed again: new pods (new names), and the deadline starts over
    patch(co, "sus", {"spec": {"suspend": False}})
    kubesim.advance(5)
    [second] = pods(core, "sus")
    assert second.metadata.name != first.metadata.name
    kubesim.advance(250, step=10)
    assert condition(get(co, "sus"), "Failed") is None
    kubesim.advance(60, step=10)
    failed = condition(get(co, "sus"), "Failed")
    assert (failed["status"], failed["reason"], failed["message"]) == (
        "True", "DeadlineExceeded", "TrainJob exceeded its active deadline")
    kubesim.advance(15)
    assert pods(core, "sus") == []


def test_a_failed_job_fails_the_trainjob_past_its_backoff_limit(kubesim, apis):
    """A runtime whose Job allows no retry (backoffLimit 0, restartPolicy Never): the first
    pod failure fails the JobSet, hence the TrainJob, with JobSet's reason."""
    core, co = apis
    runtime = {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "torch-once"},
        "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {
            "replicatedJobs": [{"name": "node", "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step":
                                        "trainer"}},
                "spec": {"backoffLimit": 0, "template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "node", "image": "pytorch/pytorch:2"}]}}}}}]}}},
    }
    co.create_cluster_custom_object(GROUP, VERSION, "clustertrainingruntimes", runtime)
    body = trainjob("crash", nodes=1, gpus=1, runtime="torch-once")
    body["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"][
        "replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["annotations"].update(
        {"kubesim.trainyard.io/fail-after-seconds": "20",
         "kubesim.trainyard.io/exit-code": "1"})
    create(co, body)
    kubesim.advance(5)
    [p] = pods(core, "crash")
    assert p.spec.restart_policy == "Never"
    kubesim.advance(40, step=5)
    job = get(co, "crash")
    failed = condition(job, "Failed")
    assert (failed["status"], failed["reason"], failed["message"]) == (
        "True", "FailedJobs", "jobset failed due to one or more job failures")
    assert job["status"]["jobsStatus"][0]["failed"] == 1
    assert condition(job, "Complete") is None


def test_a_missing_runtime_is_an_event_and_the_job_starts_once_it_exists(kubesim, apis):
    core, co = apis
    create(co, trainjob("later", nodes=1, gpus=1, runtime="torch-later"))
    kubesim.advance(5)
    assert pods(core, "later") == []
    events = core.list_namespaced_event(
        NS, field_selector="involvedObject.name=later").items
    assert any(e.reason == "TrainJobResourcesCreationFailed" and e.type == "Warning"
               and "torch-later" in e.message for e in events)
    torch = co.get_cluster_custom_object(GROUP, VERSION, "clustertrainingruntimes",
                                         "torch-distributed")
    torch["metadata"] = {"name": "torch-later"}
    co.create_cluster_custom_object(GROUP, VERSION, "clustertrainingruntimes", torch)
    kubesim.advance(5)
    assert len(pods(core, "later")) == 1


def test_trainers_webhook_and_immutable_trainer(kubesim, apis):
    _core, co = apis
    status, body = api_error(create, co, trainjob(
        "bad", env=[{"name": "PET_NNODES", "value": "8"}]))
    assert status == 403
    assert 'admission webhook "validator.trainjob.trainer.kubeflow.org" denied' in (
        body["message"]) and "PET_NNODES" in body["message"]
    bad_env = trainjob("bad2")
    bad_env["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"][
        "replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0][
        "env"] = [{"name": "X", "value": "1"}]
    assert "must not have envs" in api_error(create, co, bad_env)[1]["message"]
    bad_manager = trainjob("bad3")
    bad_manager["spec"]["runtimePatches"][0]["manager"] = "tests"
    assert "domain-prefixed path" in api_error(create, co, bad_manager)[1]["message"]

    create(co, trainjob("run", nodes=1, gpus=1, run_seconds=3600))
    kubesim.advance(5)
    moved = {"spec": {"runtimePatches": [{"manager": "example.org/tests",
                                          "trainingRuntimeSpec": {"template": {"spec": {
                                              "replicatedJobs": [{"name": "node"}]}}}}]}}
    status, body = api_error(patch, co, "run", moved)
    assert status == 403 and "can only be modified when the TrainJob is suspended" in (
        body["message"])
    status, body = api_error(patch, co, "run", {"spec": {"trainer": {"numNodes": 4}}})
    assert status == 422 and "immutable" in body["message"]
    # suspending and changing the patches in one request is allowed (as Kueue does)
    patch(co, "run", {**moved, "spec": {**moved["spec"], "suspend": True}})
    assert get(co, "run")["spec"]["suspend"] is True


def test_deleting_the_trainjob_deletes_its_pods(kubesim, apis):
    core, co = apis
    create(co, trainjob("gone", nodes=2, gpus=1, run_seconds=3600))
    kubesim.advance(5)
    assert len(pods(core, "gone")) == 2
    co.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "gone")
    kubesim.advance(20, step=5)
    assert core.list_namespaced_pod(
        NS, label_selector="jobset.sigs.k8s.io/jobset-name=gone").items == []


def test_managed_by_another_controller_is_left_alone(kubesim, apis):
    core, co = apis
    body = trainjob("mk", nodes=1, gpus=1)
    body["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    create(co, body)
    kubesim.advance(5)
    assert pods(core, "mk") == [] and "status" not in get(co, "mk")
