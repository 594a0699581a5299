"""One job contract: whatever submission accepts, the spec builder can build.

A researcher who sets MASTER_ADDR, asks for two MIG slices per worker or checkpoints to
/etc gets a field error from the form and the API, and nothing is created; random
submissions that validation accepts all build a JobSpec and a PyTorchJob the CRD schema
takes; a job that cannot be built any more fails with the reason instead of an exception.
"""

from __future__ import annotations

import random
import string
from decimal import Decimal

import pytest

from core.exceptions import ApplicationError
from core.texts import english
from jobs import selectors, services
from jobs.contract import NON_FIELD, check_buildable, field_of, spec_errors
from jobs.models import TrainingJob
from jobs.tasks import sync_job
from jobs.tests.conftest import A100, H800, submission
from jobs.validation import Inventory, SubmissionError, validate_submission
from k8s_sync import manifests
from k8s_sync.crd_validation import validate_pytorchjob
from tenants.access import access_for
from tenants.models import Notification

FORM = {"name": "ddp-run", "pool": "dev", "tier": "development", "image": "pytorch/pytorch:2.4.0",
        "command": "torchrun train.py", "args": "", "env": "SEED=1", "workers": "1",
        "gpus_per_worker": "2", "gpu_model": H800, "mig_profile": "", "cpu_per_worker": "8",
        "memory_gib_per_worker": "64", "max_run_hours": "2", "checkpoint_claim": "",
        "checkpoint_path": "/checkpoints"}


def _api_submit(api, user, **overrides):
    return api(user).post("/api/v1/tenants/acme/jobs/",
                          {**submission(**overrides), "pool": "dev"}, format="json")


@pytest.mark.parametrize(("overrides", "field", "words"), [
    ({"env": {"MASTER_ADDR": "10.0.0.1"}}, "env", "set by the training operator"),
    ({"env": {"WORLD_SIZE": "8"}}, "env", "set by the training operator"),
    ({"env": {"PET_NNODES": "2"}}, "env", "set by the training operator"),
    ({"env": {"trainyard_x": "1"}}, "env", "reserved"),
    ({"mig_profile": "1g.10gb", "gpu_model": "", "gpus_per_worker": 2}, "gpus_per_worker",
     "exactly one slice"),
    ({"checkpoint_path": "/etc"}, "checkpoint_path", "system directory"),
    ({"checkpoint_path": "/etc/ckpt"}, "checkpoint_path", "system directory"),
    ({"checkpoint_path": "/proc/self"}, "checkpoint_path", "system directory"),
    ({"checkpoint_path": "/var/run/secrets/x"}, "checkpoint_path", "system directory"),
    ({"checkpoint_path": "/my checkpoints"}, "checkpoint_path", "spaces"),
    ({"checkpoint_path": "/data:rw"}, "checkpoint_path", "spaces or ':'"),
    ({"image": "registry.example.org/" + "a" * 260 + ":1"}, "image", "not a valid image"),
    ({"memory_gib_per_worker": "0.3"}, "memory_gib_per_worker", "whole MiB"),
    ({"cpu_per_worker": "0.1234"}, "cpu_per_worker", "millicores"),
    ({"gpus_per_worker": -1}, "gpus_per_worker", "0 to 64"),
    ({"workers": "many"}, "workers", "not a number"),
    ({"cpu_per_worker": 10_000}, "cpu_per_worker", "largest node"),
    ({"memory_gib_per_worker": -4}, "memory_gib_per_worker", "0.25 to"),
    ({"gpus_per_worker": 9}, "gpus_per_worker", "the largest has 8"),
    ({"gpu_model": "NVIDIA-TPU"}, "gpu_model", "no GPU model"),
    ({"mig_profile": "7g.80gb", "gpu_model": "", "gpus_per_worker": 1}, "mig_profile",
     "no MIG profile"),
    ({"expected_seconds": -5}, "expected_seconds", "one second and 30 days"),
])
def test_the_api_refuses_what_the_cluster_side_cannot_build_with_a_field_error(
        api, bob, quota, overrides, field, words):
    response = _api_submit(api, bob, **overrides)
    assert response.status_code == 400, response.content
    body = response.json()
    # the service's error names its field; the API's own type checks (DRF) key it
    assert body.get("field") == field or field in (body.get("errors") or body), body
    assert words in str(body) or body.get("field") is None, body
    assert not TrainingJob.objects.exists()


def test_the_form_refuses_master_addr_and_two_mig_slices_and_creates_nothing(
        login, bob, quota):
    client = login(bob)
    response = client.post("/t/acme/jobs/new/", {**FORM, "env": "MASTER_ADDR=10.0.0.1"})
    assert response.status_code == 400
    form = response.context["form"]
    assert "set by the training operator" in form.errors["env"][0]
    response = client.post("/t/acme/jobs/new/", {**FORM, "gpu_model": "",
                                                 "mig_profile": "1g.10gb"})
    assert response.status_code == 400
    assert "exactly one slice" in response.context["form"].errors["gpus_per_worker"][0]
    response = client.post("/t/acme/jobs/new/", {**FORM, "checkpoint_path": "/etc"})
    assert "system directory" in response.context["form"].errors["checkpoint_path"][0]
    assert not TrainingJob.objects.exists()
    # The live preview says the same before anything is submitted.
    preview = client.post("/t/acme/jobs/preview/", {**FORM, "env": "RANK=0"}).json()
    assert "set by the training operator" in preview["errors"]["env"]


def test_a_spec_refusal_is_mapped_to_the_submitted_field_generically():
    assert field_of(ValueError("env: 'X' is set by the training operator")) == "env"
    assert field_of(ValueError("gpus_per_replica: must be 1")) == "gpus_per_worker"
    assert field_of(ValueError("worker_replicas: must be >= 0")) == "workers"
    assert field_of(ValueError("memory_limit_gib: GiB: finer than 1Mi")) == (
        "memory_gib_per_worker")
    # A field the spec and the job both have needs no entry (e.g. a new GPU field).
    assert field_of(ValueError("gpu_shared: expected a bool")) == "gpu_shared"
    assert field_of(ValueError("switch_label: not a label key")) == NON_FIELD
    assert field_of(ValueError("no colon here")) == NON_FIELD
    errors = spec_errors(ValueError("checkpoint_path: no ':' or whitespace: '/a b'"))
    assert list(errors) == ["checkpoint_path"]
    assert errors["checkpoint_path"].startswith("The cluster cannot run this as given: no ':'")


def test_submission_builds_the_spec_with_sync_jobs_code(bob, quota):
    """Even a rule validation does not know is caught at submission: check_buildable runs
    selectors.job_spec and the manifest builders on the unsaved job."""
    pool = quota.pools.get(kind="dev")
    clean = validate_submission(submission(), pool="dev", inventory=selectors.inventory())
    check_buildable(tenant=quota, pool=pool, clean=clean)  # fine
    with pytest.raises(SubmissionError) as caught:
        check_buildable(tenant=quota, pool=pool, clean=clean,
                        annotations={"kubesim.trainyard.io/bad key!": "1"})
    assert list(caught.value.errors) == ["annotations"]
    with pytest.raises(ApplicationError) as refused:
        services.job_submit(access=access_for(bob, quota), actor=bob, pool="dev",
                            data={**submission(), "annotations": {
                                "kubesim.trainyard.io/bad key!": "1"}})
    assert refused.value.field == "annotations"
    assert not TrainingJob.objects.exists()


# --- the property: no accepted job fails to build ----------------------------------------

INVENTORY = Inventory(gpus_per_node={H800: 8, A100: 4},
                      mig_per_node={"1g.10gb": 12, "3g.40gb": 4},
                      max_cpu=Decimal(192), max_memory_gib=Decimal(2048),
                      storage_classes={"fast-ssd": True, "nfs": False})


def _random_submission(rng: random.Random) -> tuple[dict, str]:
    """Mostly plausible values, each field wrong one time in twenty (so that both accepted
    and refused submissions are many, and the accepted ones cover the edges)."""
    def pick(good, bad):
        return rng.choice(bad if rng.random() < 0.05 else good)

    pool = rng.choice(["dev", "prod"])
    env_names = ["SEED", "EPOCHS", "LR", "LOCAL_RANK", "OK_2", "NCCL_DEBUG", "PYTHONPATH"]
    bad_env = ["MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "PET_NNODES",
               "TRAINYARD_X", "trainyard_y", "1BAD", "A-B"]
    env = {pick(env_names, bad_env): rng.choice(["1", "", "a b", "x=y"])
           for _ in range(rng.randint(0, 3))}
    letters = string.ascii_lowercase + string.digits
    name = rng.choice(letters) + "".join(rng.choice(letters + "-") for _ in range(
        rng.randint(0, 10))) + rng.choice(letters)
    mig = rng.random() < 0.25
    data = {
        "name": pick([name], ["-bad", "UPPER", "x" * 61]),
        "image": pick(["pytorch/pytorch:2.4.0", "registry.example.org/team/t:1.4",
                       "localhost:5000/x/y", "x@sha256:" + "a" * 64,
                       "registry.invalid/ml/x:1", "ubuntu"],
                      ["Bad/Image", "a" * 300, "", "x:tag with space"]),
        "tier": (["production", "batch"] if pool == "prod" else ["development", "batch"])[
            rng.random() < 0.3] if rng.random() > 0.1 else "gold",
        "workers": pick([1, 2, 8, 64, "3"], [65, 0, -1, "x", 1.5]),
        "gpus_per_worker": (pick([1], [2, 0, 4, -1]) if mig else
                            pick([0, 1, 2, 4, 8, "2"], [9, -1, 65])),
        "gpu_model": "" if mig else pick([H800, A100], ["NVIDIA-TPU"]),
        "mig_profile": pick(["1g.10gb", "3g.40gb"], ["2g.20gb"]) if mig else "",
        "cpu_per_worker": pick([0.1, 0.5, 1, 8, 7.25, "0.125", 192], [193, -1, "x", 0.3333,
                                                                     "0.0005"]),
        "memory_gib_per_worker": pick([0.25, 0.5, 1, 64, 2048, "1.125", "0.375"],
                                      [0.3, 2049, -1, 0.001]),
        "max_run_seconds": pick([60, 3600, 30 * 86400], [59, 30 * 86400 + 1, "x"]),
        "env": env,
        "command": pick([[], ["python", "train.py"]], ["python train.py", [1]]),
        "args": pick([[], ["--lr", "3e-4"]], [[None]]),
        "checkpoint_path": pick(["/checkpoints", "/data/ckpt", "/work/./ckpt", "",
                                 "/mnt/etc", "/home/me/ckpt/", "/run/user/ckpt"],
                                ["/etc", "/etc/x", "/proc/self", "/var/run/secrets/k",
                                 "/a b", "/a:b", "rel/path", "/../x", "/", "//etc",
                                 "/dev/shm", "/usr", "/sys/fs"]),
        "checkpoint_claim": pick(["", "", "my-ckpt", "a.b-c"], ["Bad_Claim"]),
        "checkpoint_storage_class": pick(["", "", "fast-ssd", "nfs"], ["nope"]),
        "checkpoint_size_gib": pick([None, 1, 50, "20"], [0, 10241, "x"]),
        "expected_seconds": pick([None, 600], [-1]),
    }
    return data, pool


def test_property_every_accepted_submission_builds_a_spec_and_a_valid_pytorchjob(tenant_a):
    """Over 1,500 random submissions (fixed seed): every one validate_submission accepts
    builds a JobSpec with sync_job's code and a PyTorchJob the CRD schema accepts; every
    one it refuses names a field."""
    rng = random.Random(20261113)
    pools = {p.kind: p for p in tenant_a.pools.all()}
    accepted = refused = 0
    for i in range(1500):
        data, pool = _random_submission(rng)
        try:
            clean = validate_submission(data, pool=pool, inventory=INVENTORY)
        except SubmissionError as exc:
            refused += 1
            assert exc.errors and all(k and v for k, v in exc.errors.items())
            continue
        accepted += 1
        job = TrainingJob(tenant=tenant_a, pool=pools[pool], annotations={}, **clean)
        for state, job.pk in (("queued", None), ("admitted", 1000 + i)):
            job.state = state
            try:
                spec = selectors.job_spec(job)
                manifests.build_checkpoint_pvc(spec)
                validate_pytorchjob(manifests.build_pytorchjob(spec))
            except ValueError as exc:  # pragma: no cover - the failure this test hunts
                pytest.fail(f"accepted but unbuildable ({exc}): {data}")
    print(f"accepted {accepted}, refused {refused}")
    assert accepted > 250 and refused > 250, (accepted, refused)


# --- sync_job: a spec that cannot be built fails the job, it does not raise ----------------


def test_a_job_whose_spec_cannot_be_built_fails_with_the_reason_instead_of_raising(
        cluster, bob, quota, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        job = services.job_submit(access=access_for(bob, quota), actor=bob, pool="dev",
                                  data=submission())
    # A row from before a rule existed (or edited behind the form's back).
    TrainingJob.objects.filter(pk=job.pk).update(env={"MASTER_ADDR": "x"}, state="admitted")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert sync_job.apply(args=[job.pk]).get() == "unbuildable"
    job.refresh_from_db()
    assert job.state == "failed" and not job.in_cluster and job.finished_at is not None
    assert "MASTER_ADDR" in job.last_error
    step = job.transitions.order_by("-at", "-id").first()
    assert (step.from_state, step.to_state, step.reason) == ("admitted", "failed", "Unbuildable")
    assert english(step.message).startswith("Trainyard cannot build this job for the cluster")
    assert callbacks, "admission is kicked: its reservation is free"
    note = Notification.objects.get(user=bob)
    assert "llama-ft" in english(note.text) and "cannot build" in english(note.text)
    assert note.link == f"/t/acme/jobs/{job.pk}/"
    # Asked again (a retry, a resync), nothing more happens.
    assert sync_job.apply(args=[job.pk]).get() == "finished"
