"""The pool reconcile deletes what Trainyard labelled as the pool's and no longer declares,
and nothing else; against kubesim over HTTP."""

import pytest
from kubernetes import client as k8s

from k8s_sync import naming
from k8s_sync.client import get_client
from k8s_sync.storage import build_iops_storage_class
from tenants import services
from tenants.models import Pool
from tenants.tasks import reconcile_pool, resync_pools


@pytest.fixture
def sync(platform_admin, cluster):
    """Grant ``amounts`` to ``pool`` and reconcile it; returns the task's result."""
    def grant_and_sync(pool, **amounts):
        if amounts:
            services.quota_set(actor=platform_admin, pool=pool, reason="t", amounts=amounts)
        result = reconcile_pool.apply(args=[pool.pk]).get()
        assert result != "error", Pool.objects.get(pk=pool.pk).sync_error
        return result
    return grant_and_sync


def _storage(cluster):
    return k8s.StorageV1Api(cluster.api_client)


def _pool_classes(cluster, tenant_slug, pool):
    """Names of the StorageClasses labelled as this pool's."""
    selector = naming.label_selector(naming.pool_labels(tenant_slug, pool))
    return sorted(sc.metadata.name
                  for sc in _storage(cluster).list_storage_class(label_selector=selector).items)


def _exists(read, *args) -> bool:
    try:
        read(*args)
    except k8s.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def _network_policy(name, labels=None):
    return k8s.V1NetworkPolicy(
        metadata=k8s.V1ObjectMeta(name=name, labels=labels),
        spec=k8s.V1NetworkPolicySpec(pod_selector=k8s.V1LabelSelector(),
                                     policy_types=["Ingress"]))


def _resource_version(cluster) -> int:
    return int(k8s.CoreV1Api(cluster.api_client).list_namespace().metadata.resource_version)


def _legacy_class(cluster, tenant_slug, pool, iops=3000):
    """The per-pool IOPS StorageClass an older Trainyard made for a grant."""
    base = _storage(cluster).read_storage_class("fast-ssd")
    get_client().apply(build_iops_storage_class(
        {"provisioner": base.provisioner, "metadata": {"name": "fast-ssd"}},
        name=f"ty-{tenant_slug}-{pool}-fast-ssd-{iops}iops", iops=iops,
        labels=naming.pool_labels(tenant_slug, pool)))


def test_an_iops_grant_prunes_the_pools_old_iops_storage_class_and_nothing_else(
        sync, tenant_a, tenant_b, cluster):
    prod, dev = tenant_a.pools.get(kind="prod"), tenant_a.pools.get(kind="dev")
    grant = {"storage:fast-ssd": 100, "iops:fast-ssd": 3000}
    sync(dev, **grant)                                # the same tenant's other pool
    sync(tenant_b.pools.get(kind="prod"), **grant)    # another tenant's pool
    sync(prod, **grant)
    for tenant_slug, pool in (("acme", "prod"), ("acme", "dev"), ("globex", "prod")):
        _legacy_class(cluster, tenant_slug, pool)     # as an older Trainyard left them
    # objects of the same kinds that Trainyard did not label as this pool's
    net = k8s.NetworkingV1Api(cluster.api_client)
    net.create_namespaced_network_policy("ty-acme-prod", _network_policy("someone-elses"))
    net.create_namespaced_network_policy("ty-acme-prod", _network_policy(
        "half-labelled", naming.managed_labels()))
    _storage(cluster).create_storage_class(k8s.V1StorageClass(
        metadata=k8s.V1ObjectMeta(name="team-made"), provisioner="local.csi.kubesim.trainyard.io"))

    # 6000's VolumeAttributesClass, and the quota (the new team-made class at 0)
    assert sync(prod, **{"iops:fast-ssd": 6000}) == "applied 2, pruned 1"

    assert _pool_classes(cluster, "acme", "prod") == []
    vacs = sorted(v.metadata.name for v in _storage(cluster).list_volume_attributes_class(
        ).items)
    assert vacs == ["trainyard-iops-3000-local-csi-kubesim-trainyard-io",
                    "trainyard-iops-6000-local-csi-kubesim-trainyard-io"]
    hard = k8s.CoreV1Api(cluster.api_client).read_namespaced_resource_quota(
        "trainyard-quota", "ty-acme-prod").spec.hard
    assert hard["fast-ssd.storageclass.storage.k8s.io/requests.storage"] == "100Gi"
    assert not [key for key in hard if "iops" in key]
    # what is not this pool's survives
    for name in ("someone-elses", "half-labelled"):
        assert _exists(net.read_namespaced_network_policy, name, "ty-acme-prod")
    for name in ("team-made", "fast-ssd", "ty-acme-dev-fast-ssd-3000iops",
                 "ty-globex-prod-fast-ssd-3000iops"):
        assert _exists(_storage(cluster).read_storage_class, name), name

    # a second reconcile writes and deletes nothing
    before = _resource_version(cluster)
    assert sync(prod) == "unchanged"
    assert _resource_version(cluster) == before


def test_the_resync_counts_an_owned_undeclared_object_as_drift(sync, tenant_a, cluster):
    prod, dev = tenant_a.pools.get(kind="prod"), tenant_a.pools.get(kind="dev")
    sync(prod, **{"storage:fast-ssd": 100, "iops:fast-ssd": 3000})
    sync(dev)
    assert resync_pools.apply().get() == {"drifted": 0, "in_sync": 2}
    # left behind (say, by a reconcile that failed half-way): labelled as prod's
    net = k8s.NetworkingV1Api(cluster.api_client)
    net.create_namespaced_network_policy("ty-acme-prod", _network_policy(
        "trainyard-old", naming.pool_labels("acme", "prod")))

    assert resync_pools.apply().get() == {"drifted": 1, "in_sync": 1}  # and reconciles it

    assert not _exists(net.read_namespaced_network_policy, "trainyard-old", "ty-acme-prod")
    assert _exists(net.read_namespaced_network_policy, "trainyard-isolation", "ty-acme-prod")
    assert resync_pools.apply().get() == {"drifted": 0, "in_sync": 2}


def test_the_periodic_pass_removes_a_stale_iops_storage_class(sync, tenant_a, cluster):
    prod, dev = tenant_a.pools.get(kind="prod"), tenant_a.pools.get(kind="dev")
    sync(prod, **{"storage:fast-ssd": 100, "iops:fast-ssd": 3000})
    sync(dev)
    base = _storage(cluster).read_storage_class("fast-ssd")
    stale = build_iops_storage_class(
        {"provisioner": base.provisioner, "metadata": {"name": "fast-ssd"}},
        name="ty-acme-prod-fast-ssd-7000iops", iops=7000,
        labels=naming.pool_labels("acme", "prod"))
    get_client().apply(stale)  # as an older Trainyard's reconcile left it

    # A pool's quota names the cluster's shared classes only (a class a pool owns is not
    # another's business), so only prod drifts; its reconcile deletes it.
    assert resync_pools.apply().get() == {"drifted": 1, "in_sync": 1}
    assert _pool_classes(cluster, "acme", "prod") == []
    assert resync_pools.apply().get() == {"drifted": 0, "in_sync": 2}
