"""The TrainJob builder (Kubeflow Trainer v2, ``trainer.kubeflow.org/v1alpha1``): the same
JobSpec as a PyTorchJob, validated against Trainer v2.3.0's CRD and webhook rules; its
runtime patch carries placement and volumes; the resume patch; the observer's parse; and
one lifecycle against kubesim over HTTP."""

from __future__ import annotations

import copy
import dataclasses

import kubernetes_validate
import pytest

from k8s_sync import manifests
from k8s_sync.client import get_client
from k8s_sync.crd_validation import (
    CrdValidationError,
    schema_errors,
    trainjob_errors,
    validate_trainjob,
)
from k8s_sync.naming import Tier
from k8s_sync.observe import parse_trainjob
from k8s_sync.reconcile import converge
from k8s_sync.specs import JobSpec, PoolSpec
from k8s_sync.tests.test_pytorchjob import BASE, DEV, SPECS

TJ = ("trainer.kubeflow.org/v1alpha1", "TrainJob")


def trainjob_spec(case: str, **overrides) -> JobSpec:
    return dataclasses.replace(SPECS[case](), kind="trainjob", **overrides)


def _node_patch(obj: dict, manager: str = manifests.TRAINYARD_PATCH_MANAGER) -> dict:
    """The pod template of Trainyard's runtime patch on the ``node`` job."""
    patch = next(p for p in obj["spec"]["runtimePatches"] if p["manager"] == manager)
    [rjob] = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert rjob["name"] == "node"
    return rjob["template"]["spec"]["template"]


@pytest.mark.parametrize("case", sorted(SPECS))
def test_every_shape_builds_a_valid_trainjob_with_the_pytorchjob_pods(case):
    """Whatever a PyTorchJob carries per pod, the TrainJob carries too: the trainer's
    resources, image and command, and in Trainyard's runtime patch the labels, node
    selector, tolerations, affinity, volumes, mounts and grace of the same pod."""
    spec = trainjob_spec(case)
    obj = manifests.build_workload(spec)
    validate_trainjob(obj)  # the CRD schema (unknown fields too) + Trainer's webhook rules
    pytorch = manifests.build_pytorchjob(dataclasses.replace(spec, kind="pytorchjob", runtime=""))
    pod = pytorch["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
    container = pod["spec"]["containers"][0]
    trainer = obj["spec"]["trainer"]
    assert obj["metadata"] == pytorch["metadata"]
    assert obj["spec"]["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org",
                                         "kind": "ClusterTrainingRuntime",
                                         "name": f"torch-distributed-{spec.tier}"}
    assert trainer["numNodes"] == spec.replicas
    assert trainer["numProcPerNode"] == int(pytorch["spec"]["nprocPerNode"])
    assert trainer["resourcesPerNode"] == container["resources"]
    assert trainer["image"] == container["image"]
    assert trainer.get("command") == container.get("command")
    assert trainer.get("args") == container.get("args")
    assert obj["spec"]["suspend"] is spec.suspend
    assert obj["spec"]["activeDeadlineSeconds"] == spec.max_run_seconds
    patched = _node_patch(obj)
    assert patched["metadata"]["labels"] == pod["metadata"]["labels"]
    for key in ("serviceAccountName", "terminationGracePeriodSeconds", "nodeSelector",
                "affinity", "tolerations", "volumes"):
        assert patched["spec"].get(key) == pod["spec"].get(key), key
    assert patched["spec"]["containers"] == [{"name": "node",
                                              "volumeMounts": container["volumeMounts"]}]
    # what a runtime patch cannot carry (Trainer's PodSpecPatch has no such field)
    assert "priorityClassName" not in patched["spec"]
    pvc = manifests.build_checkpoint_pvc(spec)
    assert pvc == manifests.build_checkpoint_pvc(
        dataclasses.replace(spec, kind="pytorchjob", runtime=""))


def test_the_checkpoint_contract_reaches_the_node_container():
    """Trainyard's variables: the static ones in ``trainer.env`` (immutable), the two that
    change on a resume read from the pod's annotations, which the runtime patch sets."""
    spec = trainjob_spec("resume")
    obj = manifests.build_trainjob(spec)
    pytorch_env = {e["name"]: e["value"] for e in manifests.build_pytorchjob(
        dataclasses.replace(spec, kind="pytorchjob", runtime=""))["spec"]["pytorchReplicaSpecs"][
        "Master"]["template"]["spec"]["containers"][0]["env"]}
    env = {e["name"]: e for e in obj["spec"]["trainer"]["env"]}
    assert list(env) == list(pytorch_env)  # same variables, same order
    for name, value in pytorch_env.items():
        if name in ("TRAINYARD_RESUME", "TRAINYARD_RESTART_COUNT"):
            continue
        assert env[name] == {"name": name, "value": value}
    annotations = _node_patch(obj)["metadata"]["annotations"]
    for name, key in (("TRAINYARD_RESUME", "trainyard.io/resume"),
                      ("TRAINYARD_RESTART_COUNT", "trainyard.io/restart-count")):
        assert env[name]["valueFrom"]["fieldRef"]["fieldPath"] == (
            f"metadata.annotations['{key}']")
        assert annotations[key] == pytorch_env[name]
    assert annotations["trainyard.io/resume"] == "1"
    assert annotations["trainyard.io/restart-count"] == "2"
    # the node container of a patch takes no env (Trainer's webhook)
    assert "env" not in _node_patch(obj)["spec"]["containers"][0]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "node", "image": "x",
                                    "env": obj["spec"]["trainer"]["env"]}]}}
    kubernetes_validate.validate(pod, "1.33", strict=True)


def test_a_named_runtime_and_its_checks():
    spec = trainjob_spec("single_gpu", runtime="torch-distributed-with-cache")
    assert manifests.build_trainjob(spec)["spec"]["runtimeRef"]["name"] == (
        f"torch-distributed-with-cache-{spec.tier}")
    with pytest.raises(ValueError, match=r"^runtime: not a ClusterTrainingRuntime"):
        trainjob_spec("single_gpu", runtime="Torch_Distributed")
    with pytest.raises(ValueError, match=r"^runtime: only a TrainJob"):
        dataclasses.replace(SPECS["single_gpu"](), runtime="torch-distributed")
    with pytest.raises(ValueError, match=r"^kind: unknown job kind"):
        dataclasses.replace(SPECS["single_gpu"](), kind="mpijob")
    with pytest.raises(ValueError, match=r"^env: 'PET_NNODES' is set by the training"):
        trainjob_spec("single_gpu", env={"PET_NNODES": "4"})


def test_resume_replaces_trainyards_patch_and_keeps_the_others():
    queued = trainjob_spec("dedicated")
    stored = manifests.build_trainjob(queued)
    kueue = {"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": {"template": {
        "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {
            "spec": {"nodeSelector": {"cloud.example.com/flavor": "h800"}}}}}}]}}}}
    stored["spec"]["runtimePatches"].append(kueue)
    admitted = dataclasses.replace(queued, nodes=("gpu-a1-0", "gpu-a1-1"), resume=True,
                                   restart_count=1, suspend=False)
    patch = manifests.workload_resume_patch(admitted, stored)
    assert patch["spec"]["suspend"] is False
    managers = [p["manager"] for p in patch["spec"]["runtimePatches"]]
    assert managers == ["kueue.x-k8s.io/manager", manifests.TRAINYARD_PATCH_MANAGER]
    ours = _node_patch(patch)
    terms = ours["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert sorted(f["values"][0] for t in terms for f in t["matchFields"]) == [
        "gpu-a1-0", "gpu-a1-1"]
    assert ours["metadata"]["annotations"]["trainyard.io/resume"] == "1"
    # the trainer (immutable) is untouched, and the result is what Trainer accepts: the
    # patches change while the job was suspended before the update
    after = copy.deepcopy(stored)
    after["spec"].update(patch["spec"])
    assert after["spec"]["trainer"] == stored["spec"]["trainer"]
    validate_trainjob(after)
    assert manifests.workload_suspended("trainjob", stored) is True
    assert manifests.workload_suspended("trainjob", after) is False
    assert manifests.workload_suspend_patch("trainjob", True) == {"spec": {"suspend": True}}
    assert manifests.workload_suspend_patch("pytorchjob", True) == {
        "spec": {"runPolicy": {"suspend": True}}}


@pytest.mark.parametrize(("mutate", "error"), [
    (lambda o: o["metadata"].update(name="Tj-1"), ".metadata.name"),
    (lambda o: o["spec"]["runtimeRef"].update(kind="Runtime"), ".spec.runtimeRef.kind"),
    (lambda o: o["spec"]["trainer"]["env"].append({"name": "PET_NNODES", "value": "2"}),
     "reserved envs"),
    (lambda o: o["spec"]["runtimePatches"][0].update(manager="trainyard"), ".manager"),
    (lambda o: o["spec"]["runtimePatches"].append(copy.deepcopy(o["spec"]["runtimePatches"][0])),
     "duplicate"),
    (lambda o: _node_patch(o)["spec"]["containers"][0].update(
        env=[{"name": "X", "value": "1"}]), "must not have envs"),
    (lambda o: _node_patch(o)["spec"]["containers"].append({"name": "sidecar"}),
     "container 'sidecar' is not in the runtime"),
    (lambda o: o["spec"].update(managedBy="someone"), ".spec.managedBy"),
])
def test_trainers_webhook_rules(mutate, error):
    obj = manifests.build_trainjob(trainjob_spec("single_gpu"))
    assert trainjob_errors(obj) == []
    mutate(obj)
    with pytest.raises(CrdValidationError, match=error.replace(".", r"\.").replace("(", r"\(")):
        validate_trainjob(obj)


def test_schema_errors_name_unknown_fields_and_wrong_kinds():
    obj = manifests.build_trainjob(trainjob_spec("cpu_only"))
    obj["spec"]["trainer"]["numNodez"] = 2
    obj["spec"]["trainer"]["numNodes"] = "two"
    errors = schema_errors(obj)
    assert any(e.startswith(".spec.trainer.numNodez: unknown field") for e in errors)
    assert any(e.startswith(".spec.trainer.numNodes:") for e in errors)
    with pytest.raises(CrdValidationError, match=r"not a trainer\.kubeflow\.org/v1alpha1"):
        validate_trainjob(manifests.build_pytorchjob(SPECS["cpu_only"]()))


def _status(conditions=(), jobs=(), suspend=False) -> dict:
    return {"spec": {"suspend": suspend}, "status": {
        "conditions": [{"type": t, "status": s, "reason": r, "message": m,
                        "lastTransitionTime": "2026-01-05T08:00:00Z"}
                       for t, s, r, m in conditions],
        "jobsStatus": [{"name": "node", "active": a, "ready": r, "succeeded": s,
                        "failed": f, "suspended": u} for a, r, s, f, u in jobs]}}


def test_the_observer_reads_a_trainjob_as_the_loop_reads_every_kind():
    suspended = parse_trainjob(_status([("Suspended", "True", "Suspended", "x")],
                                       [(0, 0, 0, 0, 1)], suspend=True))
    assert suspended["suspended"] is True and suspended["active"] == 0
    assert {c["type"] for c in suspended["conditions"]} == {"Suspended"}
    starting = parse_trainjob(_status([("Suspended", "False", "Resumed", "x")],
                                      [(1, 0, 0, 0, 0)]))
    assert "Running" not in {c["type"] for c in starting["conditions"]}
    assert starting["active"] == 1
    running = parse_trainjob(_status([("Suspended", "False", "Resumed", "x")],
                                     [(1, 1, 0, 0, 0)]))
    assert [c["type"] for c in running["conditions"]] == ["Suspended", "Running"]
    assert running["replica_statuses"] == {"node": {"active": 1, "ready": 1, "succeeded": 0,
                                                    "failed": 0, "suspended": 0}}
    done = parse_trainjob(_status([("Complete", "True", "AllJobsCompleted", "ok")],
                                  [(0, 0, 1, 0, 0)]))
    succeeded = next(c for c in done["conditions"] if c["type"] == "Succeeded")
    # no time: the loop dates a TrainJob's run by its pods at both ends
    assert succeeded == {"type": "Succeeded", "status": "True", "reason": "AllJobsCompleted",
                         "message": "ok"}
    failed = parse_trainjob(_status([("Failed", "True", "DeadlineExceeded", "late")],
                                    [(1, 1, 0, 0, 0)]))
    assert [c["type"] for c in failed["conditions"]] == ["Failed"]  # not also Running


def _pods(client, spec):
    return sorted(client.list_objects("v1", "Pod", spec.namespace,
                                      label_selector=f"trainyard.io/job={spec.job_id}"),
                  key=lambda p: p["metadata"]["name"])


def _conditions(client, spec) -> dict:
    obj = client.read(*TJ, spec.name, spec.namespace)
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}


def test_trainjob_lifecycle_against_kubesim(cluster):
    """Built, created suspended, admitted, preempted, resumed with the new annotations,
    completed: what sync_job does, against kubesim's Trainer over HTTP."""
    client = get_client()
    pool = PoolSpec(tenant_slug="acme", pool="dev", tenant_group="oidc:acme")
    converge(client, [*manifests.desired_cluster_objects(), *manifests.desired_pool_objects(pool)])
    nodes = {n["metadata"]["name"]: n for n in client.list_objects("v1", "Node")}
    product, switch = sorted(
        (n["metadata"]["labels"]["nvidia.com/gpu.product"],
         n["metadata"]["labels"]["trainyard.io/switch"])
        for n in nodes.values()
        if int(n["status"]["allocatable"].get("nvidia.com/gpu", "0")) >= 8)[0]
    spec = JobSpec(
        **{**BASE, **DEV, "grace_seconds": 20}, job_id=601, name_hint="e2e-v2",
        worker_replicas=1, gpus_per_replica=4, gpu_product=product, switch=switch,
        cpu_request=4, cpu_limit=8, memory_request_gib=16, memory_limit_gib=32,
        checkpoint_storage_class="fast-ssd", checkpoint_size_gib=10, kind="trainjob",
        annotations={"kubesim.trainyard.io/run-seconds": "120"})
    client.create_if_absent(manifests.build_checkpoint_pvc(spec))
    # what jobs.converge.ensure_tier_runtime writes first: the runtime at the tier's class
    from k8s_sync.tier_runtime import build_tier_runtime
    client.apply(build_tier_runtime(client.read(
        "trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", "torch-distributed"),
        spec.tier))
    stored, created = client.create_if_absent(manifests.build_workload(spec))
    assert created and manifests.workload_suspended("trainjob", stored)
    cluster.advance(10)
    assert _pods(client, spec) == []
    assert _conditions(client, spec) == {"Suspended": "True"}

    admitted = dataclasses.replace(spec, suspend=False)
    client.patch(*TJ, spec.name, manifests.workload_resume_patch(admitted, stored),
                 spec.namespace)
    cluster.advance(10)
    pods = _pods(client, spec)
    assert [p["metadata"]["name"].rsplit("-", 1)[0] for p in pods] == [
        f"{spec.name}-node-0-0", f"{spec.name}-node-0-1"]
    for index, pod in enumerate(pods):
        assert pod["status"]["phase"] == "Running"
        labels = nodes[pod["spec"]["nodeName"]]["metadata"]["labels"]
        assert labels["nvidia.com/gpu.product"] == product
        assert labels["trainyard.io/switch"] == switch
        assert pod["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == spec.name
        assert pod["metadata"]["labels"]["trainyard.io/tier"] == "development"
        # the tier's PriorityClass, from the tier's runtime, resolved by pod admission
        assert pod["spec"]["priorityClassName"] == "trainyard-development"
        assert pod["spec"]["priority"] == next(
            t.value for t in manifests.default_tiers() if t.name == "development")
        assert pod["metadata"]["annotations"]["trainyard.io/resume"] == "0"
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        assert env["PET_NNODES"] == "2" and env["TRAINYARD_CHECKPOINT_DIR"] == "/checkpoints"
        assert env["PET_MASTER_ADDR"] == f"{spec.name}-node-0-0.{spec.name}"
        assert pod["spec"]["terminationGracePeriodSeconds"] == 20
        assert pod["spec"]["hostname"] == f"{spec.name}-node-0-{index}"
        claims = [v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"]
                  if "persistentVolumeClaim" in v]
        assert claims == [f"{spec.name}-ckpt"]
    assert parse_trainjob(client.read(*TJ, spec.name, spec.namespace))["conditions"][-1][
        "type"] == "Running"

    # Preempted: suspended; the pods get their grace period, then are gone.
    client.patch(*TJ, spec.name, manifests.workload_suspend_patch("trainjob", True),
                 spec.namespace)
    cluster.advance(spec.grace_seconds + 5)
    assert _pods(client, spec) == []
    assert _conditions(client, spec)["Suspended"] == "True"

    # Resumed with the new restart count: the pods say so; then it completes.
    resumed = dataclasses.replace(admitted, resume=True, restart_count=1)
    current = client.read(*TJ, spec.name, spec.namespace)
    client.patch(*TJ, spec.name, manifests.workload_resume_patch(resumed, current),
                 spec.namespace)
    cluster.advance(10)
    pods = _pods(client, spec)
    assert len(pods) == 2
    assert all(p["metadata"]["annotations"]["trainyard.io/resume"] == "1" for p in pods)
    assert all(p["metadata"]["annotations"]["trainyard.io/restart-count"] == "1"
               for p in pods)
    assert _conditions(client, spec)["Suspended"] == "False"
    cluster.advance(130, step=5)
    assert _conditions(client, spec)["Complete"] == "True"
    assert parse_trainjob(client.read(*TJ, spec.name, spec.namespace))["conditions"][-1][
        "type"] == "Succeeded"
    validate_trainjob({k: v for k, v in client.read(*TJ, spec.name, spec.namespace).items()
                       if k != "status" and k != "metadata"} | {"metadata": {
                           "name": spec.name}})


def test_a_production_trainjob_is_valid_too():
    spec = dataclasses.replace(SPECS["ddp_one_node"](), kind="trainjob")
    assert spec.tier == Tier.PRODUCTION
    validate_trainjob(manifests.build_workload(spec))


def test_the_tier_runtime_is_the_runtime_at_the_tier_priority_class():
    """Trainer's PodSpecPatch has no priorityClassName, so the tier comes from Trainyard's
    copy of the runtime (k8s_sync.tier_runtime): every replicated job's pod template at the
    tier's PriorityClass, the rest as the runtime has it."""
    from k8s_sync.tier_runtime import build_tier_runtime, is_tier_runtime, tier_runtime_name

    TORCH_DISTRIBUTED = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "torch-distributed",
                     "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {
            "replicatedJobs": [{"name": "node", "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step":
                                        "trainer"}},
                "spec": {"template": {"spec": {"containers": [
                    {"name": "node", "image": "pytorch/pytorch:2.13.0"}]}}}}}]}}}}
    base = copy.deepcopy(TORCH_DISTRIBUTED)
    base["metadata"].update(uid="u", resourceVersion="7")
    copy_ = build_tier_runtime(base, "production")
    assert copy_["metadata"]["name"] == "torch-distributed-production"
    assert "uid" not in copy_["metadata"] and "resourceVersion" not in copy_["metadata"]
    assert copy_["metadata"]["labels"]["trainyard.io/runtime-of"] == "torch-distributed"
    assert copy_["metadata"]["labels"]["trainer.kubeflow.org/framework"] == "torch"
    assert is_tier_runtime(copy_) and not is_tier_runtime(base)
    [rjob] = copy_["spec"]["template"]["spec"]["replicatedJobs"]
    pod = rjob["template"]["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "trainyard-production"
    assert pod["containers"] == TORCH_DISTRIBUTED["spec"]["template"]["spec"][
        "replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"]
    assert copy_["spec"]["mlPolicy"] == base["spec"]["mlPolicy"]
    assert "priorityClassName" not in str(TORCH_DISTRIBUTED)  # the original is untouched
    name = tier_runtime_name("r" * 253, "development")
    assert len(name) == 253 and name.endswith("-development")
