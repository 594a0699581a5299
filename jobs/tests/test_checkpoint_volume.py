"""Checkpoint volumes: an existing PVC of the tenant's, or one Trainyard creates with the
job (a StorageClass and a size), or neither, which the preview warns about for jobs that
can be preempted."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s

from core.exceptions import ApplicationError
from jobs import services
from jobs.models import TrainingJob
from jobs.tests.conftest import submission
from jobs.validation import Inventory, SubmissionError, validate_submission
from k8s_sync.client import get_client
from k8s_sync.observe import relist_all
from tenants import services as tenant_services
from tenants.access import access_for
from tenants.selectors import effective_grants
from tenants.tasks import reconcile_pool

from .test_lifecycle import _cycle, _submit, world  # noqa: F401  (the kubesim world)

INVENTORY = Inventory(gpus_per_node={"NVIDIA-H800": 8}, max_cpu=64, max_memory_gib=512,
                      storage_classes={"fast-ssd": True, "shared-nfs": False})


def _errors(**overrides) -> dict[str, str]:
    with pytest.raises(SubmissionError) as caught:
        validate_submission(submission(**overrides), pool="dev", inventory=INVENTORY)
    return caught.value.errors


def test_a_new_volume_needs_a_class_the_cluster_has_and_a_sane_size():
    clean = validate_submission(submission(checkpoint_storage_class="shared-nfs"), pool="dev",
                                inventory=INVENTORY)
    assert (clean["checkpoint_storage_class"], clean["checkpoint_size_gib"]) == (
        "shared-nfs", 50)  # the default size
    assert "no StorageClass “gold”" in _errors(checkpoint_storage_class="gold")[
        "checkpoint_storage_class"]
    assert set(_errors(checkpoint_storage_class="fast-ssd", checkpoint_size_gib=0)) == {
        "checkpoint_size_gib"}
    assert set(_errors(checkpoint_storage_class="fast-ssd", checkpoint_size_gib="lots")) == {
        "checkpoint_size_gib"}
    assert "not both" in _errors(checkpoint_claim="mine", checkpoint_storage_class="fast-ssd")[
        "checkpoint_storage_class"]
    assert set(_errors(checkpoint_claim="Not_A_Name")) == {"checkpoint_claim"}
    clean = validate_submission(submission(checkpoint_claim="team-ckpt"), pool="dev",
                                inventory=INVENTORY)
    assert (clean["checkpoint_claim"], clean["checkpoint_storage_class"],
            clean["checkpoint_size_gib"]) == ("team-ckpt", "", None)


def test_the_preview_warns_a_preemptible_job_without_a_volume(quota, bob, login):
    client = login(bob)
    url = "/t/acme/jobs/preview/"
    form = {"name": "x", "image": "registry.example.org/a/b:1", "pool": "dev",
            "tier": "development", "workers": 1, "gpus_per_worker": 1,
            "gpu_model": "NVIDIA-H800", "cpu_per_worker": 4, "memory_gib_per_worker": 16,
            "max_run_hours": 1, "checkpoint_path": "/checkpoints"}
    notes = client.post(url, form).json()["preview"]["notes"]
    assert len(notes) == 1 and "checkpoint volume" in notes[0]
    assert client.post(url, {**form, "checkpoint_claim": "team-ckpt"}).json()[
        "preview"]["notes"] == []
    assert client.post(url, {**form, "tier": "production", "pool": "prod"}).json()[
        "preview"]["notes"] == []


def test_trainyard_creates_the_volume_mounts_it_and_a_clone_reuses_it(
        world, cluster, bob, tenant_a, platform_admin):  # noqa: F811
    relist_all(get_client())  # the pools' ResourceQuotas, as the watcher records them
    access = access_for(bob, tenant_a)
    data = {**submission(name="ckpt-run", gpu_model=world["h800"], gpus_per_worker=1),
            "checkpoint_storage_class": "fast-ssd", "checkpoint_size_gib": 20}
    # The dev pool has no storage quota yet: refused before anything is created, rather
    # than admitted and then refused by Kubernetes.
    with pytest.raises(ApplicationError) as refused:
        services.job_submit(access=access, actor=bob, pool="dev", data=data)
    assert refused.value.field == "checkpoint_size_gib"
    assert "no storage quota left for fast-ssd" in str(refused.value.message)
    assert not TrainingJob.objects.filter(name="ckpt-run").exists()
    pool = tenant_a.pools.get(kind="dev")
    amounts = {k: str(v) for k, v in effective_grants(pool).items()}
    tenant_services.quota_set(actor=platform_admin, pool=pool, reason="test",
                              amounts={**amounts, "storage:fast-ssd": 30})
    reconcile_pool.apply(args=[pool.pk]).get()
    relist_all(get_client())
    data["checkpoint_size_gib"] = 40
    with pytest.raises(ApplicationError) as refused:
        services.job_submit(access=access, actor=bob, pool="dev", data=data)
    assert "has 30 GiB of fast-ssd left" in str(refused.value.message)
    data["checkpoint_size_gib"] = 20
    with world["capture"](execute=True):
        job = services.job_submit(access=access, actor=bob, pool="dev", data=data)
    _cycle(world, cluster)
    job.refresh_from_db()
    assert job.in_cluster and job.k8s_name, job.last_error
    ns = job.pool.namespace
    pvc = k8s.CoreV1Api(cluster.api_client).read_namespaced_persistent_volume_claim(
        f"{job.k8s_name}-ckpt", ns)
    assert pvc.spec.storage_class_name == "fast-ssd"
    assert pvc.spec.resources.requests["storage"] == "20Gi"
    assert pvc.spec.access_modes == ["ReadWriteOnce"]  # one pod
    obj = k8s.CustomObjectsApi(cluster.api_client).get_namespaced_custom_object(
        "kubeflow.org", "v1", ns, "pytorchjobs", job.k8s_name)
    pod = obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "checkpoints")
    assert volume["persistentVolumeClaim"]["claimName"] == f"{job.k8s_name}-ckpt"
    clone = services.clone_initial(TrainingJob.objects.get(pk=job.pk))
    assert clone["checkpoint_claim"] == f"{job.k8s_name}-ckpt"


def test_the_form_offers_the_clusters_classes_and_the_api_takes_them(quota, bob, login, api):
    from django.utils import timezone

    from k8s_sync.models import ObservedStorageClass

    ObservedStorageClass.objects.create(name="fast-ssd", uid="sc1", resource_version="1",
                                        observed_at=timezone.now(), is_default=True)
    page = login(bob).get("/t/acme/jobs/new/").content.decode()
    assert 'value="fast-ssd"' in page and "(default)" in page
    response = api(bob).post("/api/v1/tenants/acme/jobs/", {
        **submission(name="api-ckpt", gpus_per_worker=1), "pool": "dev",
        "checkpoint_storage_class": "fast-ssd", "checkpoint_size_gib": 30}, format="json")
    assert response.status_code == 201, response.content
    assert (response.json()["checkpoint_storage_class"], response.json()["checkpoint_size_gib"]
            ) == ("fast-ssd", 30)
    bad = api(bob).post("/api/v1/tenants/acme/jobs/", {
        **submission(name="api-ckpt2", gpus_per_worker=1), "pool": "dev",
        "checkpoint_storage_class": "gold"}, format="json")
    assert bad.status_code == 400 and not TrainingJob.objects.filter(name="api-ckpt2").exists()
