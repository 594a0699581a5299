"""A Kubeflow Trainer v2 TrainJob as a second job kind (issue 18, item 5): submitted by the
API and the form, shown on the job page, and, against kubesim over HTTP, sharing its
tenant's quota with PyTorchJobs, preempted and resumed from its checkpoint like one."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s

from core.texts import english
from jobs import services
from jobs.models import TrainingJob
from jobs.tests import test_lifecycle
from jobs.tests.conftest import cap_borrowing, cycle, states, submission
from jobs.tests.test_contract import FORM
from tenants.access import access_for

TRAINER = ("trainer.kubeflow.org", "v1alpha1")
world = test_lifecycle.world  # the fixture: both tenants' pools synced, quota granted


# --- submission -----------------------------------------------------------------------------


def test_the_api_submits_a_trainjob_and_shows_its_kind(api, bob, quota, login):
    response = api(bob).post("/api/v1/tenants/acme/jobs/", {
        **submission(name="v2-run", kind="trainjob", workers=2), "pool": "dev"}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["kind"], body["runtime"]) == ("trainjob", "torch-distributed")
    job = TrainingJob.objects.get(name="v2-run")
    assert (job.kind, job.runtime, job.workers) == ("trainjob", "torch-distributed", 2)
    page = login(bob).get(f"/t/acme/jobs/{job.pk}/").content.decode()
    assert "TrainJob (Kubeflow Trainer v2)" in page and "<code>torch-distributed</code>" in page
    listed = api(bob).get(f"/api/v1/tenants/acme/jobs/{job.pk}/").json()
    assert listed["kind"] == "trainjob"
    # a PyTorchJob stays the default, with no runtime
    response = api(bob).post("/api/v1/tenants/acme/jobs/", {
        **submission(name="v1-run"), "pool": "dev"}, format="json")
    assert response.status_code == 201 and response.json()["kind"] == "pytorchjob"
    assert response.json()["runtime"] == ""


@pytest.mark.parametrize(("overrides", "field", "words"), [
    ({"kind": "trainjob", "runtime": "Torch_Distributed"}, "runtime",
     "not a ClusterTrainingRuntime name"),
    ({"kind": "pytorchjob", "runtime": "torch-distributed"}, "runtime", "Only a TrainJob"),
    ({"kind": "trainjob", "env": {"PET_NNODES": "4"}}, "env", "set by the training operator"),
    ({"kind": "mpijob"}, "kind", ""),
])
def test_the_api_refuses_a_bad_kind_or_runtime_naming_the_field(api, bob, quota, overrides,
                                                                field, words):
    response = api(bob).post("/api/v1/tenants/acme/jobs/", {
        **submission(**overrides), "pool": "dev"}, format="json")
    assert response.status_code == 400, response.content
    body = response.json()
    assert body.get("field") == field or field in (body.get("errors") or body), body
    assert words in str(body)
    assert not TrainingJob.objects.exists()


def test_the_form_submits_a_trainjob_on_a_named_runtime(login, bob, quota):
    client = login(bob)
    page = client.get("/t/acme/jobs/new/").content.decode()
    assert 'name="kind"' in page and 'name="runtime"' in page
    response = client.post("/t/acme/jobs/new/", {**FORM, "kind": "trainjob",
                                                  "runtime": "Bad_Runtime"})
    assert response.status_code == 400
    assert "not a ClusterTrainingRuntime name" in response.context["form"].errors["runtime"][0]
    response = client.post("/t/acme/jobs/new/", {**FORM, "kind": "trainjob",
                                                  "runtime": "torch-distributed-with-cache"})
    assert response.status_code == 302, response.content.decode()[:2000]
    job = TrainingJob.objects.get(name=FORM["name"])
    assert (job.kind, job.runtime) == ("trainjob", "torch-distributed-with-cache")
    # a clone keeps the kind and the runtime
    page = client.get(f"/t/acme/jobs/new/?clone={job.pk}").content.decode()
    assert '<option value="trainjob" selected>' in page
    assert 'value="torch-distributed-with-cache"' in page


# --- against kubesim ------------------------------------------------------------------------


def _submit(world, user, tenant, name, tier, pool, model, *, kind, gpus=8, run_seconds=600):
    with world["capture"](execute=True):
        return services.job_submit(access=access_for(user, tenant), actor=user, pool=pool, data={
            "name": name, "kind": kind, "image": "registry.example.org/ml/trainer:1",
            "tier": tier, "workers": 1, "gpus_per_worker": gpus, "gpu_model": model,
            "cpu_per_worker": 8, "memory_gib_per_worker": 32, "max_run_seconds": 86400,
            "command": ["torchrun", "/workspace/train_resumable.py"],
            "annotations": {"kubesim.trainyard.io/run-seconds": str(run_seconds)}})


def _pods(cluster, job):
    return k8s.CoreV1Api(cluster.api_client).list_namespaced_pod(
        job.pool.namespace, label_selector=f"trainyard.io/job={job.pk}").items


def _env(pod) -> dict:
    """The container's variables as the kubelet resolves them: a value, or a pod
    annotation through the downward API (``metadata.annotations['<key>']``)."""
    out = {}
    for e in pod.spec.containers[0].env:
        if e.value_from is None:
            out[e.name] = e.value
        else:
            path = e.value_from.field_ref.field_path
            key = path[len("metadata.annotations['"):-2]
            assert path == f"metadata.annotations['{key}']", path
            out[e.name] = (pod.metadata.annotations or {}).get(key)
    return out


@pytest.mark.parametrize("first", ["trainjob", "pytorchjob"])
def test_a_trainjob_and_a_pytorchjob_share_the_tenants_quota(
        world, cluster, bob, tenant_a, first):
    """The dev pool's A100 quota is 8; the cluster has 16 A100s. The first job takes the
    8; the second (the other kind) waits for quota, not for capacity, and runs once the
    first has finished."""
    second = "pytorchjob" if first == "trainjob" else "trainjob"
    cap_borrowing(tenant_a)   # the quota binds: the second may not borrow the idle A100s
    one = _submit(world, bob, tenant_a, "first", "development", "dev", world["a100"],
                  kind=first, run_seconds=120)
    two = _submit(world, bob, tenant_a, "second", "development", "dev", world["a100"],
                  kind=second, run_seconds=60)
    cycle(world, cluster)
    assert states(one, two) == ["admitted", "queued"]
    waiting = TrainingJob.objects.get(pk=two.pk)
    assert "quota" in english(waiting.wait_reason).lower(), english(waiting.wait_reason)
    cycle(world, cluster, 30)
    assert states(one, two) == ["running", "queued"]
    plural = {"trainjob": (*TRAINER, "trainjobs"), "pytorchjob": ("kubeflow.org", "v1",
                                                                  "pytorchjobs")}
    objs = k8s.CustomObjectsApi(cluster.api_client).list_namespaced_custom_object(
        plural[first][0], plural[first][1], "ty-acme-dev", plural[first][2])["items"]
    assert [o["spec"].get("suspend", (o["spec"].get("runPolicy") or {}).get("suspend"))
            for o in objs] == [False]
    for _ in range(30):
        cycle(world, cluster, 10)
        if states(one, two) == ["succeeded", "running"]:
            break
    assert states(one, two) == ["succeeded", "running"]
    for _ in range(20):
        cycle(world, cluster, 10)
        if states(two) == ["succeeded"]:
            break
    assert states(one, two) == ["succeeded", "succeeded"]


@pytest.mark.slow
def test_dev_jobs_of_both_kinds_are_preempted_and_resume_from_their_checkpoints(
        world, cluster, alice, bob, tenant_a):
    """A development TrainJob and a development PyTorchJob share the H800 node; a
    production TrainJob needs the whole node: both are preempted with their grace, go back
    to the queue and resume (TRAINYARD_RESUME=1, restart count 1) once it has finished."""
    dev_v2 = _submit(world, bob, tenant_a, "dev-v2", "development", "dev", world["h800"],
                     kind="trainjob", gpus=4, run_seconds=3600)
    dev_v1 = _submit(world, bob, tenant_a, "dev-v1", "development", "dev", world["h800"],
                     kind="pytorchjob", gpus=4, run_seconds=3600)
    cycle(world, cluster)
    cycle(world, cluster, 30)
    assert states(dev_v2, dev_v1) == ["running", "running"]
    first_run = _pods(cluster, dev_v2)
    assert _env(first_run[0])["TRAINYARD_RESUME"] == "0"

    prod = _submit(world, alice, tenant_a, "prod-v2", "production", "prod", world["h800"],
                   kind="trainjob", gpus=8, run_seconds=300)
    cycle(world, cluster)
    assert states(dev_v2, dev_v1, prod) == ["preempting", "preempting", "queued"]
    for _ in range(40):  # the development grace is 5 minutes of simulated time
        cycle(world, cluster, 20)
        if states(prod) == ["running"]:
            break
    assert states(dev_v2, dev_v1, prod) == ["queued", "queued", "running"]
    for job in (dev_v2, dev_v1):
        job.refresh_from_db()
        assert job.restart_count == 1
    for _ in range(40):
        cycle(world, cluster, 20)
        if states(dev_v2, dev_v1) == ["running", "running"]:
            break
    assert states(prod, dev_v2, dev_v1) == ["succeeded", "running", "running"]
    for job in (dev_v2, dev_v1):
        pods = _pods(cluster, job)
        assert pods and all(_env(p)["TRAINYARD_RESUME"] == "1" for p in pods), job.kind
        assert all(_env(p)["TRAINYARD_RESTART_COUNT"] == "1" for p in pods)
        assert all(_env(p)["TRAINYARD_CHECKPOINT_DIR"] == "/checkpoints" for p in pods)
        assert list(job.transitions.values_list("to_state", flat=True)) == [
            "queued", "admitted", "running", "preempting", "queued", "admitted", "running"]
    [v2_pod] = _pods(cluster, dev_v2)
    assert v2_pod.metadata.labels["jobset.sigs.k8s.io/jobset-name"] == dev_v2.k8s_name
    assert v2_pod.spec.containers[0].env[0].name == "TRAINYARD_JOB_ID"


def test_cancel_removes_the_trainjob(world, cluster, bob, tenant_a):
    job = _submit(world, bob, tenant_a, "short-v2", "development", "dev", world["h800"],
                  kind="trainjob", gpus=2)
    cycle(world, cluster, 30)
    cycle(world, cluster, 30)
    assert states(job) == ["running"]
    with world["capture"](execute=True):
        services.job_cancel(access=access_for(bob, tenant_a), actor=bob,
                            job=TrainingJob.objects.get(pk=job.pk))
    def trainjobs():
        return k8s.CustomObjectsApi(cluster.api_client).list_namespaced_custom_object(
            *TRAINER, "ty-acme-dev", "trainjobs")["items"]
    # Foreground deletion, as on a real cluster: the TrainJob stays, marked for deletion,
    # until its pods have used their grace period
    assert all(o["metadata"].get("deletionTimestamp") for o in trainjobs())
    assert states(job) == ["cancelled"]
    assert [p for p in _pods(cluster, job) if p.metadata.deletion_timestamp is None] == []
    grace = max([p.spec.termination_grace_period_seconds or 30 for p in _pods(cluster, job)]
                or [0])
    cluster.advance(grace + 30, step=5)
    assert trainjobs() == []
