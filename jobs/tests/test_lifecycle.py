"""A job's whole life against kubesim over HTTP: queued, admitted, running, preempted by
production, resumed from its checkpoint, succeeded; batch yields; cancel removes it."""

import pytest
from kubernetes import client as k8s

from core.texts import english
from jobs import enqueue, services
from jobs.models import TrainingJob
from jobs.tests.conftest import cycle as _cycle
from jobs.tests.conftest import states as _states
from k8s_sync.client import get_client
from k8s_sync.observe import relist_all
from tenants import services as tenant_services
from tenants.access import access_for
from tenants.tasks import reconcile_cluster, reconcile_pool

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def world(cluster, platform_admin, tenant_a, tenant_b, django_capture_on_commit_callbacks):
    """Both tenants' pools synced with H800 and A100 quota; the cluster observed."""
    reconcile_cluster.apply().get()  # the tiers' PriorityClasses
    relist_all(get_client())
    # Four pools are each granted the whole model: allow that much overcommit.
    tenant_services.policy_update(actor=platform_admin,
                                  overcommit_factors={"gpu": 4, "cpu": 4, "memory": 4})
    h800 = _model(cluster, "H800")
    a100 = _model(cluster, "A100")
    for tenant in (tenant_a, tenant_b):
        for pool in tenant.pools.all():
            tenant_services.quota_set(actor=platform_admin, pool=pool, reason="test", amounts={
                f"gpu:{h800}": 8, f"gpu:{a100}": 8, "cpu": 128, "memory": 1024})
            reconcile_pool.apply(args=[pool.pk]).get()
    relist_all(get_client(), kinds=["quotas"])  # the pools are in the cluster, as observed
    return {"h800": h800, "a100": a100, "capture": django_capture_on_commit_callbacks}


def _model(cluster, fragment):
    for node in k8s.CoreV1Api(cluster.api_client).list_node().items:
        product = (node.metadata.labels or {}).get("nvidia.com/gpu.product", "")
        if fragment in product and "MIG" not in product and "SHARED" not in product:
            return product
    raise AssertionError(f"no {fragment} node in the profile")


def _submit(world, user, tenant, name, tier, pool, model, gpus=8, run_seconds=600):
    with world["capture"](execute=True):
        return services.job_submit(access=access_for(user, tenant), actor=user, pool=pool, data={
            "name": name, "image": "registry.example.org/ml/trainer:1", "tier": tier,
            "workers": 1, "gpus_per_worker": gpus, "gpu_model": model, "cpu_per_worker": 8,
            "memory_gib_per_worker": 32, "max_run_seconds": 86400,
            "annotations": {"kubesim.trainyard.io/run-seconds": str(run_seconds)}})


@pytest.mark.slow
def test_production_preempts_development_which_resumes_from_its_checkpoint(
        world, cluster, alice, bob, tenant_a):
    dev = _submit(world, bob, tenant_a, "dev-exp", "development", "dev", world["h800"],
                  run_seconds=3600)
    _cycle(world, cluster)
    assert _states(dev) == ["admitted"]
    _cycle(world, cluster, 30)
    assert _states(dev) == ["running"]

    prod = _submit(world, alice, tenant_a, "prod-run", "production", "prod", world["h800"],
                   run_seconds=600)
    _cycle(world, cluster)
    dev.refresh_from_db()
    assert dev.state == "preempting" and dev.preempt_deadline is not None
    assert _states(prod) == ["queued"]
    assert "checkpoint" in english(TrainingJob.objects.get(pk=prod.pk).wait_reason)
    for _ in range(40):  # the development grace is 5 minutes of simulated time
        _cycle(world, cluster, 20)
        if _states(prod) == ["running"]:
            break
    dev.refresh_from_db()
    assert dev.state == "queued" and dev.restart_count == 1
    assert _states(prod) == ["running"]
    for _ in range(40):
        _cycle(world, cluster, 20)
        if _states(dev) == ["running"]:
            break
    assert _states(prod, dev) == ["succeeded", "running"]
    pods = k8s.CoreV1Api(cluster.api_client).list_namespaced_pod(
        "ty-acme-dev", label_selector=f"trainyard.io/job={dev.pk}").items
    env = {e.name: e.value for e in pods[0].spec.containers[0].env}
    assert env["TRAINYARD_RESUME"] == "1" and env["TRAINYARD_RESTART_COUNT"] == "1"
    states = list(dev.transitions.values_list("to_state", flat=True))
    assert states == ["queued", "admitted", "running", "preempting", "queued", "admitted",
                      "running"]


def test_batch_runs_on_idle_capacity_and_yields(world, cluster, alice, bob, charlie, tenant_a,
                                                tenant_b):
    batch = _submit(world, charlie, tenant_b, "sweep", "batch", "dev", world["a100"],
                    run_seconds=7200)
    _cycle(world, cluster, 30)
    _cycle(world, cluster, 30)
    assert _states(batch) == ["running"]
    # Another tenant's jobs within their nominal quotas take the capacity back: two
    # A100 nodes of 8, one of them held by the batch job.
    dev = _submit(world, bob, tenant_a, "needs-a100", "development", "dev", world["a100"],
                  gpus=8)
    dev2 = _submit(world, alice, tenant_a, "needs-a100-2", "production", "prod",
                   world["a100"], gpus=8)
    for _ in range(20):
        _cycle(world, cluster, 10)
        if _states(dev, dev2) == ["running", "running"]:
            break
    assert _states(dev, dev2) == ["running", "running"]
    batch.refresh_from_db()
    assert batch.state == "queued" and batch.restart_count == 1
    assert "Preempted" in batch.transitions.values_list("reason", flat=True)


def test_cancel_removes_the_pytorchjob_in_every_state(world, cluster, bob, tenant_a):
    job = _submit(world, bob, tenant_a, "short", "development", "dev", world["h800"])
    _cycle(world, cluster, 30)
    _cycle(world, cluster, 30)
    assert _states(job) == ["running"]
    with world["capture"](execute=True):
        services.job_cancel(access=access_for(bob, tenant_a), actor=bob,
                            job=TrainingJob.objects.get(pk=job.pk))
    def pytorchjobs():
        return k8s.CustomObjectsApi(cluster.api_client).list_namespaced_custom_object(
            "kubeflow.org", "v1", "ty-acme-dev", "pytorchjobs")["items"]
    # Foreground deletion, as on a real cluster: the PyTorchJob stays, marked for deletion
    # with the foregroundDeletion finalizer, until its pods have used their grace period
    objs = pytorchjobs()
    assert all(o["metadata"].get("deletionTimestamp") for o in objs)
    grace = max((p.spec.termination_grace_period_seconds or 30) for p in k8s.CoreV1Api(
        cluster.api_client).list_namespaced_pod("ty-acme-dev").items)
    cluster.advance(grace + 30, step=5)
    assert [o["metadata"]["name"] for o in pytorchjobs()] == []
    assert _states(job) == ["cancelled"]


def test_the_loop_moves_jobs_from_the_recorded_pytorchjobs_without_listing_them(
        world, cluster, bob, tenant_a):
    """observe_jobs reads the PyTorchJobs as the watcher recorded them: a status the
    watcher has not recorded yet moves nothing, and no cycle lists PyTorchJobs."""
    from jobs.tasks import admission_cycle

    job = _submit(world, bob, tenant_a, "observed", "development", "dev", world["h800"],
                  run_seconds=60)
    _cycle(world, cluster)
    assert _states(job) == ["admitted"]

    def admission_pass():
        """One cycle, during which any list of PyTorchJobs (a query string follows the
        plural; a GET of one object by name has none) fails and is counted by kubesim."""
        listing = cluster.faults.add(method="GET", path_regex=r"/pytorchjobs\?", status=500)
        try:
            with world["capture"](execute=True):
                result = admission_cycle.apply().get()
        finally:
            cluster.faults.remove(listing)
        assert listing.hits == 0
        return result

    cluster.advance(30, step=5)  # the pods run, but the watcher has not said so yet
    admission_pass()
    assert _states(job) == ["admitted"]
    relist_all(get_client(), ["pytorchjobs"])  # what the watcher records
    assert admission_pass()["running"] == 1
    assert _states(job) == ["running"]

    cluster.advance(60, step=5)  # the run's 60 s are over
    relist_all(get_client(), ["pytorchjobs"])
    assert admission_pass()["succeeded"] == 1
    assert _states(job) == ["succeeded"]


def test_a_job_that_ran_and_finished_between_two_observations_has_its_run_recorded(
        world, cluster, bob, tenant_a):
    """Found by the chaos run (``make chaos``): the watcher or the worker was down while a
    short job started and finished, so the loop saw it go from admitted straight to
    succeeded, with no running stretch: nothing billed and no start. The cluster's
    Running condition says it ran; the stretch is recorded, never before its admission."""
    from jobs.models import JobTransition
    from jobs.tasks import admission_cycle

    job = _submit(world, bob, tenant_a, "blink", "development", "dev", world["h800"],
                  run_seconds=60)
    _cycle(world, cluster)
    assert _states(job) == ["admitted"]
    cluster.advance(120, step=5)   # it runs its 60 s and succeeds, unobserved
    relist_all(get_client(), ["pytorchjobs"])
    with world["capture"](execute=True):
        result = admission_cycle.apply().get()
    assert result["succeeded"] == 1 and result["running"] == 1
    steps = list(JobTransition.objects.filter(job=job).values_list("from_state", "to_state",
                                                                   "at"))
    assert [(a, b) for a, b, _at in steps] == [
        ("", "queued"), ("queued", "admitted"), ("admitted", "running"),
        ("running", "succeeded")]
    admitted_at, running_at, finished_at = steps[1][2], steps[2][2], steps[3][2]
    assert admitted_at <= running_at < finished_at   # it ran, after its admission
    job.refresh_from_db()
    assert job.started_at == running_at and job.finished_at is not None


def test_a_pass_syncs_its_admissions_together_and_a_write_failing_mid_way_is_retried(
        world, cluster, bob, tenant_a, monkeypatch):
    """One pass admits three jobs; their PyTorchJobs are un-suspended by one batch
    (``jobs.sync_jobs``); the second one's PATCH fails once (503) in the middle of the
    batch: the others are done, and its retry converges it as well."""
    monkeypatch.setattr(enqueue, "kick_admission", lambda: None)  # one pass for all three
    jobs = [_submit(world, bob, tenant_a, f"batch-{i}", "development", "dev", world["h800"],
                    gpus=2) for i in range(3)]
    fault = cluster.faults.add(method="PATCH", path_regex=rf"/pytorchjobs/{jobs[1].k8s_name}",
                               status=503, times=1)
    try:
        assert _cycle(world, cluster)["admitted"] == 3
    finally:
        cluster.faults.remove(fault)
    assert fault.hits == 1
    for job in jobs:
        obj = get_client().read("kubeflow.org/v1", "PyTorchJob", job.k8s_name,
                                job.pool.namespace)
        assert not obj["spec"]["runPolicy"].get("suspend"), job.name
        job.refresh_from_db()
        assert (job.state, job.cluster_suspended, job.last_error) == ("admitted", False, "")
