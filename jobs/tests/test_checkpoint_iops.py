"""IOPS as a pool total (issue 32, item 2): a grant ``iops:<class>`` is the sum of the
provisioned IOPS of the pool's volumes of that class. Each new checkpoint volume carries
its own provisioned IOPS (a tier's VolumeAttributesClass); a volume that would take the
pool's sum over the grant is refused at submission, naming ``checkpoint_iops``; use is
shown; the base class keeps its GiB. Against kubesim over HTTP where the cluster is
involved."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.utils import timezone, translation
from kubernetes import client as k8s

from core.exceptions import ApplicationError
from jobs import services
from jobs.models import TrainingJob
from jobs.tests.conftest import submission
from jobs.validation import Inventory, SubmissionError, validate_submission
from k8s_sync.client import get_client
from k8s_sync.models import ObservedStorageClass
from k8s_sync.observe import relist_all
from tenants import services as tenant_services
from tenants.access import access_for
from tenants.selectors import effective_grants
from tenants.tasks import reconcile_pool
from tenants.usage import in_use_by_pool

from .test_kueue_mode import kworld  # noqa: F401  (Kueue mode)
from .test_lifecycle import _cycle, world  # noqa: F401  (the kubesim world)

INVENTORY = Inventory(gpus_per_node={"NVIDIA-H800": 8}, max_cpu=64, max_memory_gib=512,
                      storage_classes={"fast-ssd": True, "shared-nfs": False})
VAC = "trainyard-iops-{n}-local-csi-kubesim-trainyard-io"


def _errors(**overrides) -> dict[str, str]:
    with pytest.raises(SubmissionError) as caught:
        validate_submission(submission(**overrides), pool="dev", inventory=INVENTORY)
    return caught.value.errors


def test_a_volume_asks_for_a_tier_of_iops_or_the_class_default(settings):
    settings.TRAINYARD_IOPS_TIERS = [3000, 6000]
    clean = validate_submission(submission(checkpoint_storage_class="fast-ssd",
                                           checkpoint_iops=6000), pool="dev",
                                inventory=INVENTORY)
    assert clean["checkpoint_iops"] == 6000
    clean = validate_submission(submission(checkpoint_storage_class="fast-ssd"), pool="dev",
                                inventory=INVENTORY)
    assert clean["checkpoint_iops"] is None  # the class's default: not counted
    assert "3000, 6000" in _errors(checkpoint_storage_class="fast-ssd",
                                   checkpoint_iops=4000)["checkpoint_iops"]
    assert set(_errors(checkpoint_storage_class="fast-ssd", checkpoint_iops="lots")) == {
        "checkpoint_iops"}
    assert "new checkpoint volume" in _errors(checkpoint_iops=3000)["checkpoint_iops"]
    assert "new checkpoint volume" in _errors(checkpoint_claim="mine",
                                              checkpoint_iops=3000)["checkpoint_iops"]


def _grant(pool, platform_admin, **amounts):
    current = {k: str(v) for k, v in effective_grants(pool).items()}
    tenant_services.quota_set(actor=platform_admin, pool=pool, reason="test",
                              amounts={**current, **amounts})
    assert reconcile_pool.apply(args=[pool.pk]).get() != "error", \
        pool.__class__.objects.get(pk=pool.pk).sync_error
    relist_all(get_client())


def _data(w, name, iops=None, gib=20):
    data = {**submission(name=name, gpu_model=w["h800"], gpus_per_worker=1),
            "checkpoint_storage_class": "fast-ssd", "checkpoint_size_gib": gib}
    if iops is not None:
        data["checkpoint_iops"] = iops
    return data


@pytest.mark.slow
def test_the_iops_grant_is_the_sum_over_the_pools_volumes(
        world, cluster, bob, tenant_a, platform_admin, api, login):  # noqa: F811
    access = access_for(bob, tenant_a)
    pool = tenant_a.pools.get(kind="dev")
    _grant(pool, platform_admin, **{"storage:fast-ssd": "100", "iops:fast-ssd": "9000"})
    core = k8s.CoreV1Api(cluster.api_client)
    hard = core.read_namespaced_resource_quota("trainyard-quota", pool.namespace).spec.hard
    # the base class keeps its granted GiB with an IOPS grant
    assert hard["fast-ssd.storageclass.storage.k8s.io/requests.storage"] == "100Gi"

    with world["capture"](execute=True):
        first = services.job_submit(access=access, actor=bob, pool="dev",
                                    data=_data(world, "iops-a", 6000))
    # counted at once, before the cluster shows the volume
    assert in_use_by_pool([pool])[pool.pk]["iops:fast-ssd"] == Decimal(6000)
    _cycle(world, cluster)
    first.refresh_from_db()
    assert first.in_cluster, first.last_error
    pvc = core.read_namespaced_persistent_volume_claim(f"{first.k8s_name}-ckpt",
                                                       pool.namespace)
    assert pvc.spec.storage_class_name == "fast-ssd"  # the base class, not a pool's own
    assert pvc.spec.volume_attributes_class_name == VAC.format(n=6000)
    vac = k8s.StorageV1Api(cluster.api_client).read_volume_attributes_class(VAC.format(n=6000))
    assert vac.parameters == {"iops": "6000"}
    # observed now (relisted by the cycle): still 6000, counted once
    assert in_use_by_pool([pool])[pool.pk]["iops:fast-ssd"] == Decimal(6000)

    # 6000 more would make 12000 of 9000: refused, naming the field, nothing created
    with pytest.raises(ApplicationError) as refused:
        services.job_submit(access=access, actor=bob, pool="dev",
                            data=_data(world, "iops-b", 6000))
    assert refused.value.field == "checkpoint_iops"
    message = str(refused.value.message)
    assert "6000 of its 9000 IOPS" in message and "3000 are left" in message, message
    assert not TrainingJob.objects.filter(name="iops-b").exists()
    with translation.override("zh-hans"):
        with pytest.raises(ApplicationError) as refused_zh:
            services.job_submit(access=access, actor=bob, pool="dev",
                                data=_data(world, "iops-b", 6000))
        assert "只剩 3000" in str(refused_zh.value.message)  # in Chinese

    # 3000 fits exactly; a volume at the class's default IOPS is not counted, and the
    # base class's GiB hold both (no "no storage quota left")
    with world["capture"](execute=True):
        services.job_submit(access=access, actor=bob, pool="dev",
                            data=_data(world, "iops-c", 3000))
        services.job_submit(access=access, actor=bob, pool="dev",
                            data=_data(world, "iops-d"))
    _cycle(world, cluster)
    assert in_use_by_pool([pool])[pool.pk]["iops:fast-ssd"] == Decimal(9000)
    with pytest.raises(ApplicationError) as full:
        services.job_submit(access=access, actor=bob, pool="dev",
                            data=_data(world, "iops-e", 3000))
    assert full.value.field == "checkpoint_iops" and "0 are left" in str(full.value.message)

    # the API's quota overview: used / granted IOPS
    overview = api(bob).get("/api/v1/tenants/acme/quota/").json()
    dev = next(p for p in overview["pools"] if p["pool"] == "dev")
    row = next(r for r in dev["resources"] if r["key"] == "iops:fast-ssd")
    assert (row["used"], row["granted"]) == ("9000", "9000")
    page = login(bob).get("/t/acme/quota/").content.decode()
    html_row = re.search(r'<tr data-pool="dev" data-key="iops:fast-ssd">.*?</tr>', page, re.S)
    assert html_row, page
    assert "<td>9,000 IOPS</td>" in html_row.group(0)  # granted
    assert 'data-field="used">9,000</span> <small class="muted">IOPS' in html_row.group(0)
    # the other pool, without an IOPS grant, is refused any tier
    with pytest.raises(ApplicationError) as none:
        services.job_submit(access=access, actor=bob, pool="prod", data={
            **_data(world, "iops-p", 3000), "tier": "production"})
    assert none.value.field in ("checkpoint_iops", "checkpoint_size_gib")


def test_the_form_offers_the_tiers_and_the_preview_refuses_naming_the_field(
        quota, bob, login, platform_admin, settings):
    settings.TRAINYARD_IOPS_TIERS = [3000, 6000]
    ObservedStorageClass.objects.create(
        name="fast-ssd", uid="sc1", resource_version="1", observed_at=timezone.now(),
        is_default=True, provisioner="local.csi.kubesim.trainyard.io")
    client = login(bob)
    page = client.get("/t/acme/jobs/new/").content.decode()
    assert 'name="checkpoint_iops"' in page and 'value="6000"' in page
    form = {"name": "x", "image": "registry.example.org/a/b:1", "pool": "dev",
            "tier": "development", "workers": 1, "gpus_per_worker": 1,
            "gpu_model": "NVIDIA-H800", "cpu_per_worker": 4, "memory_gib_per_worker": 16,
            "max_run_hours": 1, "checkpoint_path": "/checkpoints",
            "checkpoint_storage_class": "fast-ssd", "checkpoint_size_gib": 10,
            "checkpoint_iops": "6000"}
    answer = client.post("/t/acme/jobs/preview/", form).json()
    assert answer["preview"]["verdict"] == "refused"
    assert "no IOPS quota for fast-ssd" in answer["errors"]["checkpoint_iops"]
    pool = quota.pools.get(kind="dev")
    current = {k: str(v) for k, v in effective_grants(pool).items()}
    tenant_services.quota_set(actor=platform_admin, pool=pool, reason="t",
                              amounts={**current, "iops:fast-ssd": "5000"})
    answer = client.post("/t/acme/jobs/preview/", form).json()
    assert "5000 are left" in answer["errors"]["checkpoint_iops"]
    answer = client.post("/t/acme/jobs/preview/", {**form, "checkpoint_iops": "3000"}).json()
    assert answer["preview"]["verdict"] != "refused", answer
    page = client.get("/t/acme/quota/").content.decode()
    assert 'data-key="iops:fast-ssd"' in page


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_kueue_mode_volumes_carry_their_iops_and_the_grant_binds_the_same(
        kworld, cluster, bob, tenant_a, platform_admin):  # noqa: F811
    """Kueue mode: the same service check refuses, and the checkpoint PVC the Kueue
    backend creates names the tier's VolumeAttributesClass, which kubesim's provisioner
    honours once a pod uses the claim (fast-ssd binds on first consumer)."""
    access = access_for(bob, tenant_a)
    pool = tenant_a.pools.get(kind="dev")
    _grant(pool, platform_admin, **{"storage:fast-ssd": "100", "iops:fast-ssd": "3000"})
    data = {**_data(kworld, "kq-iops", 3000), "gpus_per_worker": 1,
            "annotations": {"kubesim.trainyard.io/run-seconds": "3600"}}
    with kworld["capture"](execute=True):
        job = services.job_submit(access=access, actor=bob, pool="dev", data=data)
    with pytest.raises(ApplicationError) as refused:
        services.job_submit(access=access, actor=bob, pool="dev",
                            data=_data(kworld, "kq-iops-2", 3000))
    assert refused.value.field == "checkpoint_iops"
    core = k8s.CoreV1Api(cluster.api_client)
    job.refresh_from_db()
    claim = f"{job.k8s_name}-ckpt"
    pvc = core.read_namespaced_persistent_volume_claim(claim, pool.namespace)
    assert pvc.spec.volume_attributes_class_name == VAC.format(n=3000), job.last_error
    for _ in range(6):
        _cycle(kworld, cluster, 20)
        pvc = core.read_namespaced_persistent_volume_claim(claim, pool.namespace)
        if pvc.status.phase == "Bound":
            break
    assert pvc.status.phase == "Bound", TrainingJob.objects.get(pk=job.pk).state
    assert pvc.status.current_volume_attributes_class_name == VAC.format(n=3000)
    assert in_use_by_pool([pool])[pool.pk]["iops:fast-ssd"] == Decimal(3000)


def test_a_class_whose_driver_cannot_set_iops_is_refused_in_words(quota, bob, platform_admin,
                                                                  tenant_a):
    ObservedStorageClass.objects.create(
        name="shared-nfs", uid="sc-nfs", resource_version="1", observed_at=timezone.now(),
        provisioner="nfs.csi.k8s.io")
    pool = tenant_a.pools.get(kind="dev")
    current = {k: str(v) for k, v in effective_grants(pool).items()}
    tenant_services.quota_set(actor=platform_admin, pool=pool, reason="t",
                              amounts={**current, "iops:shared-nfs": "9000"})
    with pytest.raises(ApplicationError) as refused:
        services.job_submit(access=access_for(bob, tenant_a), actor=bob, pool="dev", data={
            **submission(name="nfs-iops", gpus_per_worker=1),
            "checkpoint_storage_class": "shared-nfs", "checkpoint_iops": 3000})
    assert refused.value.field == "checkpoint_iops"
    assert "shared-nfs cannot set provisioned IOPS per volume" in str(refused.value.message)
    assert not TrainingJob.objects.filter(name="nfs-iops").exists()


def test_a_tenant_is_shown_the_shared_classes_and_its_own_only():
    inventory = Inventory(storage_classes={"fast-ssd": True, "ty-acme-prod-fast-ssd-3000iops":
                                           False, "ty-globex-prod-fast-ssd-3000iops": False},
                          storage_class_owners={"ty-acme-prod-fast-ssd-3000iops": "acme",
                                                "ty-globex-prod-fast-ssd-3000iops": "globex"})
    assert set(inventory.for_tenant("acme").storage_classes) == {
        "fast-ssd", "ty-acme-prod-fast-ssd-3000iops"}
    with pytest.raises(SubmissionError) as caught:
        validate_submission(submission(checkpoint_storage_class="ty-globex-prod-fast-ssd-3000iops"),
                            pool="dev", inventory=inventory.for_tenant("acme"))
    message = caught.value.errors["checkpoint_storage_class"]
    assert "fast-ssd" in message and message.count("globex") == 1  # the name sent, no list
