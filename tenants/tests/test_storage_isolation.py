"""Storage isolation: PVCs only of granted classes; IOPS grants become the pool's own class."""

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from k8s_sync.storage import build_iops_storage_class, iops_class_name
from tenants import services
from tenants.tasks import reconcile_pool, resync_pools


def _pvc(name, storage_class, size="10Gi"):
    return k8s.V1PersistentVolumeClaim(
        metadata=k8s.V1ObjectMeta(name=name),
        spec=k8s.V1PersistentVolumeClaimSpec(
            access_modes=["ReadWriteOnce"], storage_class_name=storage_class,
            resources=k8s.V1VolumeResourceRequirements(requests={"storage": size})))


@pytest.fixture
def granted(platform_admin, tenant_a, cluster):
    def grant(**amounts):
        pool = tenant_a.pools.get(kind="prod")
        services.quota_set(actor=platform_admin, pool=pool, reason="t", amounts=amounts)
        assert reconcile_pool.apply(args=[pool.pk]).get() != "error", \
            pool.__class__.objects.get(pk=pool.pk).sync_error
        return pool
    return grant


def test_a_namespace_creates_pvcs_only_of_granted_classes(granted, cluster):
    granted(**{"storage:fast-ssd": 100, "pvcs": 5})
    core = k8s.CoreV1Api(cluster.api_client)
    core.create_namespaced_persistent_volume_claim("ty-acme-prod", _pvc("ok", "fast-ssd"))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_persistent_volume_claim("ty-acme-prod", _pvc("no", "shared-nfs"))
    assert err.value.status == 403 and "shared-nfs.storageclass" in err.value.body


def test_an_iops_grant_becomes_a_storage_class_of_the_pools_own(granted, cluster):
    granted(**{"storage:fast-ssd": 100, "iops:fast-ssd": 3000})
    name = "ty-acme-prod-fast-ssd-3000iops"
    storage = k8s.StorageV1Api(cluster.api_client)
    sc = storage.read_storage_class(name)
    assert sc.parameters["iops"] == "3000"
    assert sc.provisioner == storage.read_storage_class("fast-ssd").provisioner
    assert sc.metadata.labels["trainyard.io/tenant"] == "acme"
    hard = k8s.CoreV1Api(cluster.api_client).read_namespaced_resource_quota(
        "trainyard-quota", "ty-acme-prod").spec.hard
    assert hard[f"{name}.storageclass.storage.k8s.io/requests.storage"] == "100Gi"
    assert hard["fast-ssd.storageclass.storage.k8s.io/requests.storage"] == "0"
    core = k8s.CoreV1Api(cluster.api_client)
    core.create_namespaced_persistent_volume_claim("ty-acme-prod", _pvc("fast", name))
    with pytest.raises(ApiException):
        core.create_namespaced_persistent_volume_claim("ty-acme-prod", _pvc("base", "fast-ssd"))
    assert resync_pools.apply().get()["drifted"] == 1  # only the never-synced dev pool


def test_iops_on_a_class_that_cannot_carry_it_is_an_error_on_the_pool(platform_admin,
                                                                       tenant_a, cluster):
    pool = tenant_a.pools.get(kind="dev")
    services.quota_set(actor=platform_admin, pool=pool, reason="t",
                       amounts={"iops:shared-nfs": 500})
    assert reconcile_pool.apply(args=[pool.pk]).get() == "error"
    pool.refresh_from_db()
    assert "nfs.csi.k8s.io" in pool.sync_error and not pool.sync_error_transient
    services.quota_set(actor=platform_admin, pool=pool, reason="t",
                       amounts={"iops:shared-nfs": 0, "iops:nope": 5})
    assert reconcile_pool.apply(args=[pool.pk]).get() == "error"
    pool.refresh_from_db()
    assert "'nope' does not exist" in pool.sync_error


def test_iops_class_names_and_builder():
    base = {"metadata": {"name": "gp3"}, "provisioner": "ebs.csi.aws.com",
            "parameters": {"type": "gp3"}, "reclaimPolicy": "Delete",
            "allowVolumeExpansion": True}
    built = build_iops_storage_class(base, name="x", iops=4000, labels={"b": "1", "a": "2"})
    assert built == {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                     "metadata": {"name": "x", "labels": {"a": "2", "b": "1"}},
                     "provisioner": "ebs.csi.aws.com", "reclaimPolicy": "Delete",
                     "allowVolumeExpansion": True,
                     "parameters": {"type": "gp3", "iops": "4000"}}
    assert iops_class_name("ty-a-prod", "gp3", 4000) == "ty-a-prod-gp3-4000iops"
    long_name = iops_class_name("ty-" + "x" * 60 + "-prod", "c" * 200, 7)
    assert len(long_name) <= 63
    with pytest.raises(ValueError, match="provisioner"):
        build_iops_storage_class({"provisioner": "foo"}, name="x", iops=1, labels={})
