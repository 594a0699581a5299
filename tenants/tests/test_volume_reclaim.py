"""Dev-pool volumes unused for N days are reclaimed; used ones stay."""

import datetime as dt

import pytest
from django.utils import timezone
from kubernetes import client as k8s

from k8s_sync.models import ObservedPod, ObservedPVC
from tenants import services
from tenants.models import AuditEvent, Notification, VolumeUse
from tenants.tasks import reclaim_dev_volumes


@pytest.fixture
def dev_volumes(tenant_a, platform_admin, cluster):
    from tenants.tasks import reconcile_pool

    pool = tenant_a.pools.get(kind="dev")
    services.quota_set(actor=platform_admin, pool=pool, reason="t",
                       amounts={"storage:fast-ssd": 100, "pvcs": 5})
    reconcile_pool.apply(args=[pool.pk]).get()
    core = k8s.CoreV1Api(cluster.api_client)
    old = timezone.now() - dt.timedelta(days=40)
    for name in ("stale", "mounted", "fresh"):
        core.create_namespaced_persistent_volume_claim("ty-acme-dev", {
            "metadata": {"name": name}, "spec": {
                "accessModes": ["ReadWriteOnce"], "storageClassName": "fast-ssd",
                "resources": {"requests": {"storage": "1Gi"}}}})
        ObservedPVC.objects.create(namespace="ty-acme-dev", name=name, uid=name,
                                   resource_version="1", observed_at=timezone.now(),
                                   created_at=timezone.now() if name == "fresh" else old,
                                   storage_class="fast-ssd")
    ObservedPod.objects.create(namespace="ty-acme-dev", name="trainer", uid="p",
                               resource_version="1", observed_at=timezone.now(),
                               phase="Running", raw={"spec": {"volumes": [
                                   {"name": "data",
                                    "persistentVolumeClaim": {"claimName": "mounted"}}]}})
    return core


def test_unused_dev_volumes_are_reclaimed_after_n_days(platform_admin, alice, dev_volumes):
    assert reclaim_dev_volumes.apply().get() == 0  # off until the policy sets N
    services.policy_update(actor=platform_admin, dev_pvc_reclaim_days=30)
    assert reclaim_dev_volumes.apply().get() == 1
    names = {p.metadata.name for p in
             dev_volumes.list_namespaced_persistent_volume_claim("ty-acme-dev").items}
    assert names == {"mounted", "fresh"}
    assert VolumeUse.objects.get(name="mounted").last_used_at is not None
    assert AuditEvent.objects.filter(action="volume.reclaim").count() == 1
    assert "stale" in Notification.objects.get(user=alice).message
