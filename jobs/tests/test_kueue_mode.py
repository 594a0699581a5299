"""Kueue mode end to end against kubesim's Kueue controller, over HTTP: Trainyard writes
Kueue's queues from its quotas (a re-sync with nothing changed writes nothing), submits
jobs suspended with Kueue's labels, and reads Kueue's decisions back: queued with a
position and a reason, admitted, preempted by a reclaim with the tier's grace, requeued and
resumed, cancelled, and a quota approval taking effect."""

import pytest
from kubernetes import client as k8s

from core.texts import english
from jobs import services
from jobs.models import TrainingJob
from jobs.tests.conftest import cycle as _cycle
from jobs.tests.conftest import states as _states
from k8s_sync import kueue
from k8s_sync.client import get_client
from k8s_sync.crd_validation import schema_errors
from k8s_sync.observe import relist_all
from k8s_sync.reconcile import converge
from tenants import services as tenant_services
from tenants.access import access_for
from tenants.kueue import kueue_spec
from tenants.tasks import kueue_owner, reconcile_cluster, reconcile_kueue, reconcile_pool

pytestmark = pytest.mark.timeout(180)

KUEUE = "kueue.x-k8s.io/v1beta2"


def _model(cluster, fragment):
    for node in k8s.CoreV1Api(cluster.api_client).list_node().items:
        product = (node.metadata.labels or {}).get("nvidia.com/gpu.product", "")
        if fragment in product and "MIG" not in product and "SHARED" not in product:
            return product
    raise AssertionError(f"no {fragment} node in the profile")


def kueue_configured(cluster):
    """Kueue is given Trainyard's recommended Configuration (``deploy/kueue/``, from the
    policy's pod-start deadline and attempts), as a platform team applies it."""
    from core.models import Policy
    from k8s_sync.kueue_config import config_map

    policy = Policy.current()
    cm = config_map(pod_start_deadline_seconds=policy.pod_start_deadline_seconds,
                    pod_start_attempts=policy.pod_start_attempts)
    core = k8s.CoreV1Api(cluster.api_client)
    if not any(n.metadata.name == "kueue-system" for n in core.list_namespace().items):
        core.create_namespace({"metadata": {"name": "kueue-system"}})
    try:
        core.replace_namespaced_config_map(cm["metadata"]["name"], "kueue-system", cm)
    except k8s.ApiException:
        core.create_namespaced_config_map("kueue-system", cm)


@pytest.fixture
def kworld(cluster, settings, platform_admin, tenant_a, django_capture_on_commit_callbacks):
    """tenant_a's pools with 4 H800 each (the cluster has one node of 8), in Kueue mode."""
    settings.TRAINYARD_ADMISSION_BACKEND = "kueue"
    kueue_configured(cluster)
    reconcile_cluster.apply().get()
    relist_all(get_client())
    h800 = _model(cluster, "H800")
    for pool in tenant_a.pools.all():
        tenant_services.quota_set(actor=platform_admin, pool=pool, reason="test", amounts={
            f"gpu:{h800}": 4, "cpu": 128, "memory": 1024})
        reconcile_pool.apply(args=[pool.pk]).get()
    relist_all(get_client(), kinds=["quotas"])
    return {"h800": h800, "capture": django_capture_on_commit_callbacks}


def _submit(world, user, tenant, name, tier, pool, gpus=4, run_seconds=600):
    with world["capture"](execute=True):
        return services.job_submit(access=access_for(user, tenant), actor=user, pool=pool, data={
            "name": name, "image": "registry.example.org/ml/trainer:1", "tier": tier,
            "workers": 1, "gpus_per_worker": gpus, "gpu_model": world["h800"],
            "cpu_per_worker": 8, "memory_gib_per_worker": 32, "max_run_seconds": 86400,
            "annotations": {"kubesim.trainyard.io/run-seconds": str(run_seconds)}})


def _gone(namespace, name):
    """The PyTorchJob is deleted (or being deleted: foreground deletion waits for pods)."""
    obj = get_client().read("kubeflow.org/v1", "PyTorchJob", name, namespace)
    return obj is None or bool(obj["metadata"].get("deletionTimestamp"))


def _debug():
    out = [(j.name, j.state, j.in_cluster, j.last_error[:200]) for j in TrainingJob.objects.all()]
    out += [(p["metadata"]["name"], p["metadata"].get("labels")) for p in
            get_client().list_objects("kubeflow.org/v1", "PyTorchJob")]
    for wl in get_client().list_objects(KUEUE, "Workload"):
        out.append((wl["metadata"]["name"], wl["spec"].get("queueName"), [
            (c["type"], c["status"], c.get("reason"), c.get("message"))
            for c in (wl.get("status") or {}).get("conditions") or []]))
    return out


def _cq(name):
    return get_client().read(KUEUE, "ClusterQueue", name)


def _gpu_quota(cq):
    for group in cq["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            for res in flavor["resources"]:
                if res["name"] == "nvidia.com/gpu" and flavor["name"].endswith("h800"):
                    return res
    raise AssertionError("no H800 quota")


def test_the_queues_follow_the_quotas_and_a_resync_writes_nothing(kworld, platform_admin,
                                                                  tenant_a):
    client = get_client()
    listed = {kind: client.list_objects(api, kind, label_selector=kueue_owner().selector)
              for api, kind in kueue.KINDS}
    assert {o["metadata"]["name"] for o in listed["ClusterQueue"]} == {
        "ty-acme-prod", "ty-acme-prod-batch", "ty-acme-dev", "ty-acme-dev-batch"}
    assert {(o["metadata"]["namespace"], o["metadata"]["name"])
            for o in listed["LocalQueue"]} == {
        ("ty-acme-prod", "trainyard"), ("ty-acme-prod", "trainyard-batch"),
        ("ty-acme-dev", "trainyard"), ("ty-acme-dev", "trainyard-batch")}
    for objects in listed.values():
        for obj in objects:  # as stored by the API server, Kueue's defaults included
            assert schema_errors(obj) == [], obj["metadata"]["name"]
    assert _gpu_quota(_cq("ty-acme-prod")) == {"name": "nvidia.com/gpu", "nominalQuota": "4",
                                               "borrowingLimit": "0"}

    # nothing changed: not one write, not one delete
    again = converge(client, kueue.desired_kueue_objects(kueue_spec()), owner=kueue_owner())
    assert (again.writes, again.deletes) == (0, 0)
    assert again.reads == len(kueue.KINDS)
    assert reconcile_kueue.apply().get() == "unchanged"

    # a quota approval changes exactly that pool's queues
    dev = tenant_a.pools.get(kind="dev")
    tenant_services.quota_set(actor=platform_admin, pool=dev, reason="more", amounts={
        f"gpu:{kworld['h800']}": 3, "cpu": 128, "memory": 1024})
    changed = converge(client, kueue.desired_kueue_objects(kueue_spec()), owner=kueue_owner())
    # (and the cohort, whose own quota holds the card nobody is granted now; the batch
    # queue, with no borrowing limit without a cap, does not change)
    assert sorted(ref.name for ref in changed.applied) == ["trainyard", "ty-acme-dev"]
    assert _gpu_quota(_cq("ty-acme-dev"))["nominalQuota"] == "3"
    assert _gpu_quota(client.read(KUEUE, "Cohort", "trainyard"))["nominalQuota"] == "1"


def test_a_job_is_submitted_suspended_with_kueues_labels_and_admitted_by_kueue(
        kworld, cluster, bob, tenant_a):
    job = _submit(kworld, bob, tenant_a, "dev-one", "development", "dev")
    obj = get_client().read("kubeflow.org/v1", "PyTorchJob", job.k8s_name, "ty-acme-dev")
    assert obj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "trainyard"
    assert obj["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "trainyard-development"
    _cycle(kworld, cluster, 5)
    _cycle(kworld, cluster, 5)
    job.refresh_from_db()
    assert job.state in ("admitted", "running"), (job.state, english(job.wait_reason))
    admitted = job.transitions.get(to_state="admitted")
    assert "ty-acme-dev" in english(admitted.message)
    for _ in range(10):
        if _states(job) == ["running"]:
            break
        _cycle(kworld, cluster, 10)
    assert _states(job) == ["running"]


def test_a_job_kueue_admitted_and_finished_between_two_passes_is_recorded_as_run(
        kworld, cluster, bob, tenant_a):
    job = _submit(kworld, bob, tenant_a, "short-one", "development", "dev", run_seconds=5)
    cluster.advance(60, step=5)  # admitted, run and finished before any pass looks
    _cycle(kworld, cluster)
    _cycle(kworld, cluster)
    assert _states(job) == ["succeeded"], _debug()
    assert [t.to_state for t in job.transitions.order_by("id")] == [
        "queued", "admitted", "running", "succeeded"]


@pytest.mark.slow
def test_reclaim_preempts_batch_with_its_grace_which_resumes_and_a_waiting_job_is_explained(
        kworld, cluster, alice, bob, platform_admin, tenant_a):
    # batch borrows the idle quota of the cohort: 4 H800 (its pool's batch ceiling)
    batch = _submit(kworld, bob, tenant_a, "sweep", "batch", "dev", gpus=4, run_seconds=3600)
    for _ in range(6):
        _cycle(kworld, cluster, 10)
        if _states(batch) == ["running"]:
            break
    assert _states(batch) == ["running"]
    prod = _submit(kworld, alice, tenant_a, "prod-run", "production", "prod", gpus=4,
                   run_seconds=3600)
    dev = _submit(kworld, bob, tenant_a, "dev-run", "development", "dev", gpus=4,
                  run_seconds=600)
    for _ in range(4):   # a pass may be skipped while another holds the cycle lock
        _cycle(kworld, cluster, 5)
        if _states(batch) == ["preempting"]:
            break
    batch.refresh_from_db()
    # the development queue reclaims its nominal quota from the borrowing batch queue
    assert batch.state == "preempting", batch.state
    assert batch.preempt_deadline is not None
    preempted = batch.transitions.get(to_state="preempting")
    assert preempted.reason == "Preempted"
    # Kueue's Preempted reason: the development queue stays within its nominal quota, so
    # it reclaims by its hierarchical advantage, not by borrowWithinCohort
    assert "InCohortReclamation" in english(preempted.message), english(preempted.message)
    assert "InCohortReclaimWhileBorrowing" not in english(preempted.message)
    assert _states(prod)[0] in ("admitted", "running")

    # a third job waits: Kueue's position and reason, Trainyard's ETA
    late = _submit(kworld, alice, tenant_a, "prod-late", "production", "prod", gpus=4)
    _cycle(kworld, cluster, 5)
    late.refresh_from_db()
    assert late.state == "queued"
    assert late.position_in_pool == 1 and late.position_in_model == 1
    assert "quota" in english(late.wait_reason)
    with kworld["capture"](execute=True):
        services.job_cancel(access=access_for(alice, tenant_a), actor=alice, job=late)
    assert _gone("ty-acme-prod", late.k8s_name)

    for _ in range(40):
        _cycle(kworld, cluster, 20)
        if _states(batch) == ["queued"]:
            break
    batch.refresh_from_db()
    assert batch.state == "queued" and batch.restart_count == 1
    for _ in range(60):  # the dev job ends after 10 minutes: batch borrows again
        _cycle(kworld, cluster, 20)
        if _states(batch) == ["running"]:
            break
    assert _states(dev, batch) == ["succeeded", "running"]
    assert list(batch.transitions.values_list("to_state", flat=True)) == [
        "queued", "admitted", "running", "preempting", "queued", "admitted", "running"]


def test_an_admin_preempts_through_kueues_active_flag_and_the_job_comes_back(
        kworld, cluster, bob, platform_admin, tenant_a):
    job = _submit(kworld, bob, tenant_a, "dev-long", "development", "dev", run_seconds=3600)
    for _ in range(6):
        _cycle(kworld, cluster, 10)
        if _states(job) == ["running"]:
            break
    with kworld["capture"](execute=True):
        services.job_preempt(actor=platform_admin, job=job, reason="node maintenance")
    job.refresh_from_db()
    assert job.state == "preempting"
    _cycle(kworld, cluster, 5)
    wl = kueue.workloads_by_job(get_client().list_objects(KUEUE, "Workload"))[
        ("ty-acme-dev", job.k8s_name)]
    assert wl.active is False
    for _ in range(40):
        _cycle(kworld, cluster, 20)
        if _states(job) == ["running"] and job.transitions.filter(to_state="queued").count() > 1:
            break
    job.refresh_from_db()
    assert job.state == "running" and job.restart_count == 1
    from jobs.tests.test_trainjob import _env, _pods
    pods = _pods(cluster, job)  # it resumes from its checkpoint
    assert pods and all(_env(p)["TRAINYARD_RESUME"] == "1" for p in pods)
    assert all(_env(p)["TRAINYARD_RESTART_COUNT"] == "1" for p in pods)
    wl = kueue.workloads_by_job(get_client().list_objects(KUEUE, "Workload"))[
        ("ty-acme-dev", job.k8s_name)]
    assert wl.active is True

    with kworld["capture"](execute=True):
        services.job_cancel(access=access_for(bob, tenant_a), actor=bob, job=job)
    assert _gone("ty-acme-dev", job.k8s_name)
    assert TrainingJob.objects.get(pk=job.pk).state == "cancelled"
