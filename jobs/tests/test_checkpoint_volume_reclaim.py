"""The dev-volume reclaim never deletes the checkpoint volume of a job that still needs
it (queued, admitted, running, preempting: a preempted job has no pods but resumes from
it); a finished job's unused checkpoint volume goes like any other. Against kubesim."""

import datetime as dt

import pytest
from django.utils import timezone
from kubernetes import client as k8s

from jobs.models import TrainingJob
from k8s_sync.models import ObservedPVC
from tenants import services
from tenants.models import VolumeUse
from tenants.tasks import reclaim_dev_volumes

NS = "ty-acme-dev"


@pytest.fixture
def dev_pool(tenant_a, platform_admin, cluster):
    from tenants.tasks import reconcile_pool

    pool = tenant_a.pools.get(kind="dev")
    services.quota_set(actor=platform_admin, pool=pool, reason="t",
                       amounts={"storage:fast-ssd": 100, "pvcs": 10})
    reconcile_pool.apply(args=[pool.pk]).get()
    services.policy_update(actor=platform_admin, dev_pvc_reclaim_days=30)
    return pool


def _volume(core, name: str, created) -> None:
    core.create_namespaced_persistent_volume_claim(NS, {
        "metadata": {"name": name}, "spec": {
            "accessModes": ["ReadWriteOnce"], "storageClassName": "fast-ssd",
            "resources": {"requests": {"storage": "1Gi"}}}})
    ObservedPVC.objects.create(namespace=NS, name=name, uid=name, resource_version="1",
                               observed_at=timezone.now(), created_at=created,
                               storage_class="fast-ssd")


def _job(pool, name: str, state: str, **fields) -> TrainingJob:
    job = TrainingJob.objects.create(tenant=pool.tenant, pool=pool, name=name,
                                     image="python:3.12-slim", tier="development",
                                     max_run_seconds=3600, state=state, **fields)
    job.k8s_name = f"tj-{job.pk}-{name}"
    job.save(update_fields=["k8s_name"])
    return job


def test_checkpoint_volumes_of_active_jobs_survive_the_reclaim(dev_pool, cluster):
    core = k8s.CoreV1Api(cluster.api_client)
    old = timezone.now() - dt.timedelta(days=45)
    created = {}
    # Trainyard-created <job>-ckpt volumes, one per state; none is mounted by a pod.
    for state in ("queued", "admitted", "running", "preempting", "succeeded", "cancelled"):
        job = _job(dev_pool, state, state, checkpoint_storage_class="fast-ssd",
                   checkpoint_size_gib=1)
        created[state] = f"{job.k8s_name}-ckpt"
        _volume(core, created[state], old)
    # An existing volume a preempted job names as its checkpoint_claim, and one of a
    # failed job.
    _job(dev_pool, "resumer", "preempting", checkpoint_claim="team-ckpt")
    _volume(core, "team-ckpt", old)
    _job(dev_pool, "broken", "failed", checkpoint_claim="old-ckpt")
    _volume(core, "old-ckpt", old)
    # A job in the prod pool holds nothing in the dev pool.
    prod = dev_pool.tenant.pools.get(kind="prod")
    _job(prod, "elsewhere", "queued", checkpoint_claim="stray")
    _volume(core, "stray", old)

    assert reclaim_dev_volumes.apply().get() == 4
    left = {p.metadata.name for p in core.list_namespaced_persistent_volume_claim(NS).items}
    assert left == {created[s] for s in ("queued", "admitted", "running", "preempting")} | {
        "team-ckpt"}
    # Held volumes count as used now: once their job ends they get the full N days.
    assert VolumeUse.objects.filter(namespace=NS, name="team-ckpt").exists()


def test_a_held_volume_is_reclaimed_n_days_after_its_job_finished(dev_pool, cluster):
    core = k8s.CoreV1Api(cluster.api_client)
    job = _job(dev_pool, "done", "preempting", checkpoint_storage_class="fast-ssd",
               checkpoint_size_gib=1)
    name = f"{job.k8s_name}-ckpt"
    _volume(core, name, timezone.now() - dt.timedelta(days=90))
    assert reclaim_dev_volumes.apply().get() == 0  # held: recorded as in use now
    TrainingJob.objects.filter(pk=job.pk).update(state="succeeded")
    assert reclaim_dev_volumes.apply().get() == 0  # unused for less than 30 days
    VolumeUse.objects.filter(name=name).update(
        last_used_at=timezone.now() - dt.timedelta(days=31))
    assert reclaim_dev_volumes.apply().get() == 1
