"""reconcile: the pure decision (what to write, what to delete) and converge against kubesim."""

from __future__ import annotations

import copy
import dataclasses
import time

import pytest

from k8s_sync import manifests, naming
from k8s_sync.client import ClusterConfig, K8sTransientError, KubeClient, ObjectRef
from k8s_sync.reconcile import (
    NEVER_DELETED_KINDS,
    Owner,
    converge,
    needs_apply,
    plan,
    pool_owner,
    stale_objects,
)
from k8s_sync.specs import PoolSpec, QuotaSpec
from k8s_sync.storage import build_iops_storage_class, iops_class_name

# --- helpers ------------------------------------------------------------------------------


def _pool(slug: str = "team-a", pool: str = "prod", **kwargs) -> PoolSpec:
    quota = kwargs.pop("quota", QuotaSpec(cpu_cores=32, memory_gib=256, gpus=8,
                                          storage_gib=1024, pvc_count=10))
    return PoolSpec(slug, pool, f"oidc:{slug}", quota=quota, **kwargs)


def _iops_class(spec: PoolSpec, iops: int, base: str = "fast-ssd") -> dict:
    """A pool's IOPS StorageClass, labelled as tenants.selectors.pool_objects labels it."""
    return build_iops_storage_class(
        {"metadata": {"name": base}, "provisioner": "local.csi.kubesim.trainyard.io"},
        name=iops_class_name(spec.namespace, base, iops), iops=iops, labels=spec.labels)


def _objects(spec: PoolSpec, *iops: int) -> list[dict]:
    """The pool's objects in apply order, IOPS classes before the quota (as pool_objects)."""
    built = manifests.desired_pool_objects(spec)
    return [*built[:-1], *(_iops_class(spec, amount) for amount in iops), built[-1]]


def _owner(spec: PoolSpec) -> Owner:
    return pool_owner(spec.tenant_slug, spec.pool)


def _stored(obj: dict, **meta) -> dict:
    """``obj`` as a list would return it: server fields added."""
    stored = copy.deepcopy(obj)
    stored["metadata"].update({"uid": "u-1", "resourceVersion": "7", **meta})
    return stored


def _network_policy(name: str, namespace: str, labels: dict | None = None) -> dict:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}


def _storage_class(name: str, labels: dict | None = None) -> dict:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": name, "labels": labels or {}},
            "provisioner": "local.csi.kubesim.trainyard.io"}


def _missing_leaves(sent, stored, path="") -> list[str]:
    """Paths of values in ``sent`` that ``stored`` lacks or holds differently."""
    if isinstance(sent, dict):
        if not isinstance(stored, dict):
            return [path]
        return [m for k, v in sent.items()
                for m in _missing_leaves(v, stored.get(k), f"{path}.{k}")]
    if isinstance(sent, list):
        if not isinstance(stored, list) or len(stored) != len(sent):
            return [path]
        return [m for i, (a, b) in enumerate(zip(sent, stored, strict=True))
                for m in _missing_leaves(a, b, f"{path}[{i}]")]
    return [] if sent == stored else [f"{path}: {sent!r} != {stored!r}"]


# --- the pure decision ----------------------------------------------------------------------


def test_a_pool_owner_covers_every_object_of_a_pool():
    spec = _pool("acme")
    owner = _owner(spec)
    assert owner.labels == naming.pool_labels("acme", "prod")
    assert owner.kinds == manifests.POOL_KINDS and owner.namespace == "ty-acme-prod"
    assert owner.selector == naming.label_selector(naming.pool_labels("acme", "prod"))
    for obj in _objects(spec, 3000):  # the IOPS StorageClass is cluster-scoped and owned
        assert owner.owns(obj), ObjectRef.of(obj)
    assert ("storage.k8s.io/v1", "StorageClass") in manifests.POOL_KINDS
    assert len(set(manifests.POOL_KINDS)) == len(manifests.POOL_KINDS)


def test_an_owner_must_be_marked_as_trainyards():
    with pytest.raises(ValueError, match="managed-by"):
        Owner(labels={naming.LABEL_POOL: "prod"}, kinds=manifests.POOL_KINDS)
    with pytest.raises(ValueError, match="beyond managed-by"):
        Owner(labels=naming.managed_labels(), kinds=manifests.POOL_KINDS)


def test_plan_writes_only_what_is_missing_or_differs():
    spec = _pool()
    desired = _objects(spec)
    observed = [_stored(obj) for obj in desired]
    assert plan(desired, observed, _owner(spec)).empty
    bigger = _objects(dataclasses.replace(spec, quota=QuotaSpec(cpu_cores=64)))
    todo = plan(bigger, observed[1:], _owner(spec))  # the namespace is gone too
    assert [ObjectRef.of(o).kind for o in todo.apply] == ["Namespace", "ResourceQuota"]
    assert todo.delete == ()


def test_stale_objects_are_the_owners_undeclared_objects_only():
    spec, other = _pool("acme"), _pool("acme", "dev")
    owner = _owner(spec)
    declared = _objects(spec, 5000)
    old_class = _iops_class(spec, 3000)
    old_binding = manifests.build_role_binding(spec)
    old_binding["metadata"]["name"] = "trainyard-old-binding"
    terminating = _network_policy("going", spec.namespace, spec.labels)
    observed = [
        *[_stored(obj) for obj in declared],
        _stored(old_class),                                     # stale: deleted
        _stored(old_binding),                                   # stale: deleted
        _network_policy("someone-elses", spec.namespace),        # unlabelled
        _network_policy("half", spec.namespace, naming.managed_labels()),  # whose?
        _storage_class("fast-ssd"),                             # the cluster's own
        _stored(_iops_class(other, 3000)),                      # another pool's
        _stored(_iops_class(_pool("globex"), 3000)),            # another tenant's
        _network_policy("copied", "elsewhere", spec.labels),    # outside the namespace
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim",  # not a kind it prunes
         "metadata": {"name": "ckpt", "namespace": spec.namespace, "labels": spec.labels}},
        _stored(terminating, deletionTimestamp="2026-01-01T00:00:00Z"),  # already going
    ]
    assert stale_objects(declared, observed, owner) == [ObjectRef.of(old_class),
                                                         ObjectRef.of(old_binding)]
    assert plan(declared, observed, owner).delete == (ObjectRef.of(old_class),
                                                      ObjectRef.of(old_binding))
    assert plan(declared, observed).delete == ()  # no owner: nothing is deleted


def test_a_namespace_is_never_stale():
    spec = _pool()
    namespace = manifests.build_namespace(spec)
    assert ("v1", "Namespace") in NEVER_DELETED_KINDS
    assert stale_objects([], [_stored(namespace)], _owner(spec)) == []
    # only the namespace declared: the rest is stale, the namespace itself stays
    everything = [_stored(obj) for obj in _objects(spec, 3000)]
    stale = stale_objects([namespace], everything, _owner(spec))
    assert [ref.kind for ref in stale] == ["ServiceAccount", "Role", "RoleBinding",
                                           "NetworkPolicy", "LimitRange", "StorageClass",
                                           "ResourceQuota"]


def test_needs_apply_ignores_server_fields_and_reapplies_what_is_being_deleted():
    quota = manifests.build_resource_quota(_pool())
    assert not needs_apply(quota, _stored(quota))
    assert needs_apply(quota, _stored(quota, deletionTimestamp="2026-01-01T00:00:00Z"))
    assert needs_apply(quota, None)


# --- converge against kubesim ---------------------------------------------------------------


@pytest.fixture
def kube(kubesim):
    client = KubeClient(ClusterConfig(mode="url", url=kubesim.url, request_timeout=5))
    yield client
    client.close()


class _Counting:
    """A client that counts the calls converge makes, by verb."""

    def __init__(self, client: KubeClient):
        self.client = client
        self.calls: dict[str, int] = {}

    def __getattr__(self, verb: str):
        method = getattr(self.client, verb)

        def counted(*args, **kwargs):
            self.calls[verb] = self.calls.get(verb, 0) + 1
            return method(*args, **kwargs)
        return counted


def test_converge_applies_everything_and_a_second_converge_does_nothing(kube):
    spec = _pool("acme")
    cluster_objects = manifests.desired_cluster_objects()
    first = converge(kube, cluster_objects)  # no owner: read one by one
    assert first.applied == [ObjectRef.of(o) for o in cluster_objects]
    pool_objects = _objects(spec, 3000)
    first = converge(kube, pool_objects, owner=_owner(spec))
    assert first.applied == [ObjectRef.of(o) for o in pool_objects]
    assert first.deleted == [] and first.writes == len(pool_objects)
    for obj in [*cluster_objects, *pool_objects]:
        ref = ObjectRef.of(obj)
        stored = kube.read(ref.api_version, ref.kind, ref.name, ref.namespace)
        assert stored is not None, ref
        # everything declared is stored verbatim (canonical quantities, labels, rules)
        assert _missing_leaves(obj, stored) == [], ref
    again = converge(kube, pool_objects, owner=_owner(spec))
    assert (again.writes, again.deletes, again.changed) == (0, 0, False)
    assert not converge(kube, cluster_objects).changed


def test_a_converge_with_an_owner_lists_each_kind_once_and_reads_nothing(kube):
    spec = _pool("calls")
    converge(kube, _objects(spec), owner=_owner(spec))
    counting = _Counting(kube)
    result = converge(counting, _objects(spec), owner=_owner(spec))
    assert counting.calls == {"list_objects": len(manifests.POOL_KINDS)}
    assert result.reads == len(manifests.POOL_KINDS)
    first_sync = _Counting(kube)  # a new pool: every object is written, nothing read
    converge(first_sync, _objects(_pool("fresh")), owner=_owner(_pool("fresh")),
             assume_missing=True)
    assert first_sync.calls == {"apply": len(_objects(_pool("fresh")))}


def test_changing_the_quota_reconfigures_only_the_quota(kube):
    spec = _pool("grow")
    converge(kube, _objects(spec), owner=_owner(spec))
    bigger = dataclasses.replace(spec, quota=QuotaSpec(cpu_cores=64, gpus=16))
    result = converge(kube, _objects(bigger), owner=_owner(spec))
    assert [ref.kind for ref in result.applied] == ["ResourceQuota"] and result.deleted == []
    hard = kube.read("v1", "ResourceQuota", naming.RESOURCE_QUOTA_NAME, spec.namespace)
    # keys no longer declared (memory, storage, pvc) are removed by server-side apply
    assert hard["spec"]["hard"] == {"requests.cpu": "64", "requests.nvidia.com/gpu": "16"}


def test_suspending_a_pool_changes_only_namespace_and_quota(kube):
    spec = _pool("susp")
    converge(kube, _objects(spec), owner=_owner(spec))
    result = converge(kube, _objects(dataclasses.replace(spec, suspended=True)),
                      owner=_owner(spec))
    assert sorted(ref.kind for ref in result.applied) == ["Namespace", "ResourceQuota"]
    assert result.deleted == []
    quota = kube.read("v1", "ResourceQuota", naming.RESOURCE_QUOTA_NAME, spec.namespace)
    assert quota["spec"]["hard"]["pods"] == "0"
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "0"
    assert kube.read("v1", "Namespace", spec.namespace) is not None


def test_converge_deletes_only_the_owners_objects_no_longer_declared(kube):
    spec, neighbour = _pool("prune"), _pool("prune", "dev")
    converge(kube, _objects(neighbour, 3000), owner=_owner(neighbour))
    converge(kube, _objects(spec, 3000), owner=_owner(spec))
    stale_binding = manifests.build_role_binding(spec)
    stale_binding["metadata"]["name"] = "trainyard-old-binding"
    kube.apply(stale_binding)
    kube.apply(_network_policy("someone-elses", spec.namespace))  # unlabelled: never touched
    kube.apply(_storage_class("someone-elses"))
    kube.apply({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "not-a-pool-kind", "namespace": spec.namespace,
                             "labels": spec.labels}})

    result = converge(kube, _objects(spec, 5000), owner=_owner(spec))  # IOPS 3000 -> 5000
    assert [ref.name for ref in result.applied] == ["ty-prune-prod-fast-ssd-5000iops"]
    assert result.deleted == [ObjectRef.of(stale_binding),
                              ObjectRef.of(_iops_class(spec, 3000))]
    owned_classes = kube.list_objects("storage.k8s.io/v1", "StorageClass",
                                      label_selector=_owner(spec).selector)
    assert [c["metadata"]["name"] for c in owned_classes] == ["ty-prune-prod-fast-ssd-5000iops"]
    assert kube.read("networking.k8s.io/v1", "NetworkPolicy", "someone-elses",
                     spec.namespace) is not None
    assert kube.read("storage.k8s.io/v1", "StorageClass", "someone-elses") is not None
    assert kube.read("storage.k8s.io/v1", "StorageClass", "fast-ssd") is not None
    assert kube.read("v1", "ConfigMap", "not-a-pool-kind", spec.namespace) is not None
    assert kube.read("storage.k8s.io/v1", "StorageClass",
                     "ty-prune-dev-fast-ssd-3000iops") is not None  # the neighbour's
    again = converge(kube, _objects(spec, 5000), owner=_owner(spec))
    assert (again.writes, again.deletes) == (0, 0)


def test_a_converge_that_times_out_is_completed_by_the_next(kubesim):
    kube = KubeClient(ClusterConfig(mode="url", url=kubesim.url, request_timeout=0.3))
    kubesim.faults.add(method="PATCH", path_regex=r"/resourcequotas/", timeout=True, times=1)
    spec = _pool("hang")
    started = time.monotonic()
    with pytest.raises(K8sTransientError) as info:
        converge(kube, _objects(spec), owner=_owner(spec))
    assert info.value.status is None and time.monotonic() - started < 5
    # the objects before the quota were applied; a retry completes the set
    assert kube.read("v1", "LimitRange", naming.LIMIT_RANGE_NAME, spec.namespace) is not None
    assert kube.read("v1", "ResourceQuota", naming.RESOURCE_QUOTA_NAME, spec.namespace) is None
    result = converge(kube, _objects(spec), owner=_owner(spec))
    assert [ref.kind for ref in result.applied] == ["ResourceQuota"] and result.deleted == []
    kube.close()
