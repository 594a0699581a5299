"""A TrainJob in Kueue mode end to end (issue 18: "a TrainJob and a PyTorchJob from the
same tenant share its quota; both resume from their checkpoints after preemption"), against
kubesim's Kueue controller and Trainer v2 controller over HTTP: the TrainJob's Workload
(``trainjob-<name>-<hash>``) is read like a PyTorchJob's, a PyTorchJob of the same pool
waits behind it with Kueue's position and reason, Kueue admits (un-suspends) the TrainJob,
an admin's preemption and a reclaim stop it with its grace, and it resumes from its
checkpoint."""

import pytest

from core.texts import english
from jobs import services
from jobs.models import TrainingJob
from jobs.tests.conftest import cycle as _cycle
from jobs.tests.conftest import states as _states
from jobs.tests.test_kueue_mode import KUEUE, kworld  # noqa: F401  (the fixture)
from jobs.tests.test_kueue_mode import _submit as _submit_pytorchjob
from jobs.tests.test_trainjob import _env, _pods
from k8s_sync import kueue
from k8s_sync.client import get_client
from tenants.access import access_for

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]
TRAINER = "trainer.kubeflow.org/v1alpha1"


def _submit_trainjob(world, user, tenant, name, tier, pool, gpus=4, run_seconds=600):
    with world["capture"](execute=True):
        return services.job_submit(access=access_for(user, tenant), actor=user, pool=pool, data={
            "name": name, "kind": "trainjob", "image": "registry.example.org/ml/trainer:1",
            "tier": tier, "workers": 1, "gpus_per_worker": gpus, "gpu_model": world["h800"],
            "cpu_per_worker": 8, "memory_gib_per_worker": 32, "max_run_seconds": 86400,
            "command": ["torchrun", "/workspace/train_resumable.py"],
            "annotations": {"kubesim.trainyard.io/run-seconds": str(run_seconds)}})


def _workload(namespace, job):
    return kueue.workloads_by_job(get_client().list_objects(KUEUE, "Workload"))[
        (namespace, job.k8s_name)]


def _until(world, cluster, jobs, wanted, rounds=40, seconds=20):
    for _ in range(rounds):
        _cycle(world, cluster, seconds)
        if _states(*jobs) == wanted:
            break
    return _states(*jobs)


def test_a_trainjob_shares_the_quota_is_admitted_preempted_and_resumes_in_kueue_mode(
        kworld, cluster, bob, platform_admin, tenant_a):  # noqa: F811
    # exact quota: capped at its grant, else the PyTorchJob would borrow the production
    # pool's idle cards (no borrowingLimit) instead of waiting for the TrainJob's quota
    from decimal import Decimal

    from k8s_sync.observe import relist_all
    from tenants import services as tenant_services

    with kworld["capture"](execute=True):
        tenant_services.tenant_update(access=access_for(platform_admin, tenant_a),
                                      actor=platform_admin, borrowing_cap=Decimal(1))
    relist_all(get_client(), kinds=["quotas"])
    v2 = _submit_trainjob(kworld, bob, tenant_a, "v2-long", "development", "dev",
                          run_seconds=3600)
    obj = get_client().read(TRAINER, "TrainJob", v2.k8s_name, "ty-acme-dev")
    assert obj["spec"]["suspend"] is True  # created suspended, Kueue's labels on it
    assert obj["metadata"]["labels"][kueue.LABEL_QUEUE_NAME] == "trainyard"
    assert obj["metadata"]["labels"][kueue.LABEL_PRIORITY_CLASS] == "trainyard-development"
    _cycle(kworld, cluster, 5)
    v1 = _submit_pytorchjob(kworld, bob, tenant_a, "v1-short", "development", "dev",
                            run_seconds=300)
    assert _until(kworld, cluster, [v2, v1], ["running", "queued"], rounds=10,
                  seconds=10) == ["running", "queued"]
    wl = _workload("ty-acme-dev", v2)
    assert wl.name.startswith(f"trainjob-{v2.k8s_name}-") and wl.owner_kind == "TrainJob"
    assert wl.cluster_queue == "ty-acme-dev"
    obj = get_client().read(TRAINER, "TrainJob", v2.k8s_name, "ty-acme-dev")
    assert obj["spec"]["suspend"] is False  # Kueue un-suspended it
    admitted = TrainingJob.objects.get(pk=v2.pk).transitions.get(to_state="admitted")
    assert "ty-acme-dev" in english(admitted.message)
    [pod] = _pods(cluster, v2)
    assert _env(pod)["TRAINYARD_RESUME"] == "0"

    # the PyTorchJob waits for the quota the TrainJob holds: Kueue's position and reason
    v1.refresh_from_db()
    assert v1.position_in_pool == 1
    assert "quota" in english(v1.wait_reason), english(v1.wait_reason)
    assert _workload("ty-acme-dev", v1).pending.reason == "WaitingForQuota"

    # an admin preempts the TrainJob: Kueue evicts it (spec.active false), the PyTorchJob
    # takes the quota, and the TrainJob comes back after it and resumes from its checkpoint
    with kworld["capture"](execute=True):
        services.job_preempt(actor=platform_admin, job=v2, reason="rebalance")
    assert _states(v2) == ["preempting"]
    _cycle(kworld, cluster, 5)
    assert _workload("ty-acme-dev", v2).active is False
    assert _until(kworld, cluster, [v2, v1], ["queued", "running"]) == ["queued", "running"]
    v2.refresh_from_db()
    assert v2.restart_count == 1 and v2.position_in_pool == 1
    assert _until(kworld, cluster, [v2, v1], ["running", "succeeded"]) == [
        "running", "succeeded"]
    pods = _pods(cluster, v2)
    assert pods and all(_env(p)["TRAINYARD_RESUME"] == "1" for p in pods)
    assert all(_env(p)["TRAINYARD_RESTART_COUNT"] == "1" for p in pods)
    assert _workload("ty-acme-dev", v2).active is True
    assert list(v2.transitions.values_list("to_state", flat=True)) == [
        "queued", "admitted", "running", "preempting", "queued", "admitted", "running"]


def test_a_batch_trainjob_is_reclaimed_by_kueue_and_resumes(
        kworld, cluster, alice, bob, tenant_a):  # noqa: F811
    """A batch TrainJob borrows idle quota; a development PyTorchJob within its pool's
    quota reclaims it (Kueue's InCohortReclamation) and the TrainJob resumes when the
    PyTorchJob has finished."""
    sweep = _submit_trainjob(kworld, bob, tenant_a, "v2-sweep", "batch", "dev",
                             run_seconds=7200)
    assert _until(kworld, cluster, [sweep], ["running"], rounds=10, seconds=10) == ["running"]
    prod = _submit_pytorchjob(kworld, alice, tenant_a, "prod-run", "production", "prod",
                              run_seconds=3600)
    dev = _submit_pytorchjob(kworld, bob, tenant_a, "dev-run", "development", "dev",
                             run_seconds=300)
    _cycle(kworld, cluster, 5)
    _cycle(kworld, cluster, 5)
    sweep.refresh_from_db()
    assert sweep.state == "preempting"
    preempted = sweep.transitions.get(to_state="preempting")
    assert preempted.reason == "Preempted"
    assert "InCohortReclamation" in english(preempted.message), english(preempted.message)
    assert _until(kworld, cluster, [sweep], ["queued"]) == ["queued"]
    sweep.refresh_from_db()
    assert sweep.restart_count == 1
    assert _until(kworld, cluster, [dev, sweep], ["succeeded", "running"], rounds=60) == [
        "succeeded", "running"]
    assert _states(prod) == ["running"]
    pods = _pods(cluster, sweep)
    assert pods and all(_env(p)["TRAINYARD_RESUME"] == "1" for p in pods)
