"""Storage isolation: PVCs only of granted classes; IOPS grants make the shared
VolumeAttributesClasses of their tiers, and the base class keeps its GiB."""

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from k8s_sync.storage import (
    build_iops_volume_class,
    iops_class_name,
    iops_of_volume_class,
    iops_volume_class_name,
)
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


VAC_3000 = "trainyard-iops-3000-local-csi-kubesim-trainyard-io"
VAC_6000 = "trainyard-iops-6000-local-csi-kubesim-trainyard-io"


def test_an_iops_grant_makes_the_tiers_classes_and_leaves_the_base_class_its_gib(granted,
                                                                                  cluster):
    """The grant is the pool's IOPS total: it makes the shared VolumeAttributesClasses of
    the tiers up to it (no class of the pool's own), and the base class keeps its GiB."""
    granted(**{"storage:fast-ssd": 100, "iops:fast-ssd": 7000})
    storage = k8s.StorageV1Api(cluster.api_client)
    provisioner = storage.read_storage_class("fast-ssd").provisioner
    vacs = {v.metadata.name: v for v in storage.list_volume_attributes_class().items}
    assert set(vacs) == {VAC_3000, VAC_6000}  # 10000 and 16000 are above the grant
    assert vacs[VAC_3000].driver_name == provisioner
    assert vacs[VAC_3000].parameters == {"iops": "3000"}
    assert "trainyard.io/tenant" not in (vacs[VAC_3000].metadata.labels or {})
    assert not [sc.metadata.name for sc in storage.list_storage_class().items
                if sc.metadata.name.startswith("ty-")]
    hard = k8s.CoreV1Api(cluster.api_client).read_namespaced_resource_quota(
        "trainyard-quota", "ty-acme-prod").spec.hard
    assert hard["fast-ssd.storageclass.storage.k8s.io/requests.storage"] == "100Gi"
    assert "fast-ssd.storageclass.storage.k8s.io/persistentvolumeclaims" not in hard
    core = k8s.CoreV1Api(cluster.api_client)
    claim = _pvc("fast", "fast-ssd")
    claim.spec.volume_attributes_class_name = VAC_3000
    core.create_namespaced_persistent_volume_claim("ty-acme-prod", claim)
    core.create_namespaced_persistent_volume_claim("ty-acme-prod", _pvc("plain", "fast-ssd"))
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


def test_iops_volume_class_names_and_builder():
    built = build_iops_volume_class("ebs.csi.aws.com", 4000)
    assert built == {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttributesClass",
                     "metadata": {"name": "trainyard-iops-4000-ebs-csi-aws-com",
                                  "labels": {"app.kubernetes.io/managed-by": "trainyard"},
                                  "annotations": {"trainyard.io/provisioned-iops": "4000"}},
                     "driverName": "ebs.csi.aws.com", "parameters": {"iops": "4000"}}
    assert build_iops_volume_class("pd.csi.storage.gke.io", 3000)["parameters"] == {
        "provisioned-iops": "3000"}
    assert iops_of_volume_class("trainyard-iops-4000-ebs-csi-aws-com") == 4000
    assert iops_of_volume_class("gold") == iops_of_volume_class("") == 0
    long_name = iops_volume_class_name("csi." + "x" * 300 + ".example.com", 7)
    assert len(long_name) <= 63 and iops_of_volume_class(long_name) == 7
    with pytest.raises(ValueError, match="driver"):
        build_iops_volume_class("foo", 1)
    with pytest.raises(ValueError, match="whole number"):
        build_iops_volume_class("ebs.csi.aws.com", 0)
    # an older Trainyard's per-pool class, as the reconcile prunes it
    assert iops_class_name("ty-a-prod", "gp3", 4000) == "ty-a-prod-gp3-4000iops"
