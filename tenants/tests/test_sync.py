"""Cluster sync of tenant pools, against kubesim over HTTP (the quota is real)."""

import shutil
import subprocess

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from k8s_sync.client import get_client
from k8s_sync.observe import relist_all
from tenants import services
from tenants.access import access_for
from tenants.models import Pool, Tenant
from tenants.tasks import reconcile_cluster, reconcile_pool, resync_pools

EXPECTED = {
    ("Namespace", None), ("ServiceAccount", "trainyard-workload"),
    ("Role", "trainyard-researcher"), ("RoleBinding", "trainyard-researcher"),
    ("NetworkPolicy", "trainyard-isolation"), ("LimitRange", "trainyard-defaults"),
    ("ResourceQuota", "trainyard-quota"),
}
EXPECTED_PROD = EXPECTED | {("ResourceQuota", "trainyard-production-quota")}
"""A prod pool also has a ResourceQuota for its production pods: production never borrows."""


@pytest.fixture
def team(platform_admin, alice, django_capture_on_commit_callbacks, cluster):
    """Tenant "a" with quotas on both pools, synced through the on-commit tasks."""
    with django_capture_on_commit_callbacks(execute=True):
        tenant = services.tenant_create(actor=platform_admin, slug="a", name="Team A",
                                        cost_center="CC-A", contact_email="a@example.org",
                                        admins=[alice])
    for pool in tenant.pools.all():
        with django_capture_on_commit_callbacks(execute=True):
            services.quota_set(actor=platform_admin, pool=pool, reason="initial", amounts={
                "cpu": 64, "memory": 256, "gpu:NVIDIA-A100-SXM4-80GB": 4,
                "gpu:NVIDIA-H800": 4, "mig:1g.10gb": 7, "storage:fast-ssd": 500, "pvcs": 20})
    return tenant


def _core(cluster):
    return k8s.CoreV1Api(cluster.api_client)


def _quota(cluster, ns, name="trainyard-quota"):
    return _core(cluster).read_namespaced_resource_quota(name, ns)


def _cap(tenant, factor) -> None:
    """A platform admin caps the tenant's borrowing (development and batch jobs may hold
    ``factor`` x the grant; factor 1: the grant itself), and the pools are synced."""
    tenant.borrowing_cap = factor
    tenant.save(update_fields=["borrowing_cap", "updated_at"])
    for pool in tenant.pools.all():
        reconcile_pool.apply(args=[pool.pk]).get()


def _objects(cluster, ns):
    """(kind, name) of every object Trainyard may have put in ``ns``."""
    api = cluster.api_client
    core, rbac = k8s.CoreV1Api(api), k8s.RbacAuthorizationV1Api(api)
    net = k8s.NetworkingV1Api(api)
    found = {("Namespace", None)} if core.read_namespace(ns) else set()
    for kind, lister in [
        ("ServiceAccount", core.list_namespaced_service_account),
        ("Role", rbac.list_namespaced_role), ("RoleBinding", rbac.list_namespaced_role_binding),
        ("NetworkPolicy", net.list_namespaced_network_policy),
        ("LimitRange", core.list_namespaced_limit_range),
        ("ResourceQuota", core.list_namespaced_resource_quota),
    ]:
        found |= {(kind, item.metadata.name) for item in lister(ns).items}
    # the cluster's ServiceAccount controller puts `default` in every namespace
    found.discard(("ServiceAccount", "default"))
    return found


def test_creating_a_tenant_with_quotas_produces_exactly_the_expected_objects(team, cluster):
    """Without a borrowing cap, development and batch pods may borrow any idle capacity:
    the unscoped quota bounds storage only; the prod pool's production pods are held to
    the grant by a quota scoped to the production PriorityClass."""
    for ns in ("ty-a-prod", "ty-a-dev"):
        assert _objects(cluster, ns) == (EXPECTED_PROD if ns.endswith("prod") else EXPECTED)
        hard = _quota(cluster, ns).spec.hard
        assert not {"requests.cpu", "requests.memory", "requests.nvidia.com/gpu",
                    "requests.nvidia.com/mig-1g.10gb"} & set(hard)
        assert hard["fast-ssd.storageclass.storage.k8s.io/requests.storage"] == "500Gi"
    production = _quota(cluster, "ty-a-prod", "trainyard-production-quota")
    hard = production.spec.hard
    assert hard["requests.cpu"] == "64" and hard["requests.memory"] == "256Gi"
    assert hard["requests.nvidia.com/gpu"] == "8"
    assert hard["requests.nvidia.com/mig-1g.10gb"] == "7"
    assert hard["requests.nvidia.com/mig-3g.40gb"] == "0"  # not granted: zero
    assert not any("storage" in key for key in hard)   # pod resources only
    assert production.spec.scope_selector.match_expressions[0].values == [
        "trainyard-production"]


def test_a_borrowing_cap_bounds_every_pool_in_the_cluster(team, cluster):
    _cap(team, 1)   # the grant itself
    for ns in ("ty-a-prod", "ty-a-dev"):
        hard = _quota(cluster, ns).spec.hard
        assert hard["requests.cpu"] == "64" and hard["requests.memory"] == "256Gi"
        assert hard["requests.nvidia.com/gpu"] == "8"
        assert hard["requests.nvidia.com/mig-1g.10gb"] == "7"
        assert hard["requests.nvidia.com/mig-3g.40gb"] == "0"  # not granted: zero
        assert hard["fast-ssd.storageclass.storage.k8s.io/requests.storage"] == "500Gi"
    _cap(team, 2)
    assert _quota(cluster, "ty-a-dev").spec.hard["requests.nvidia.com/gpu"] == "16"
    assert _quota(cluster, "ty-a-prod", "trainyard-production-quota").spec.hard[
        "requests.nvidia.com/gpu"] == "8"   # production never borrows


    # Applied, but the pool's state comes from what the cluster shows (the watcher's
    # records), not from the writes having returned: until observed it is not "in sync".
    for pool in team.pools.all():
        pool.refresh_from_db()
        assert pool.write_state == "in_sync" and pool.last_synced_at is not None
        assert pool.sync_state == "missing"
    relist_all(get_client())
    for pool in team.pools.all():
        assert pool.sync_state == "in_sync"
    ns = _core(cluster).read_namespace("ty-a-prod")
    assert ns.metadata.labels["trainyard.io/tenant"] == "a"


def test_changing_a_quota_updates_the_resource_quota(team, platform_admin, cluster,
                                                     django_capture_on_commit_callbacks):
    prod = team.pools.get(kind="prod")
    with django_capture_on_commit_callbacks(execute=True):
        services.quota_set(actor=platform_admin, pool=prod, reason="more",
                           amounts={"gpu:NVIDIA-H800": 8, "cpu": 96})
    hard = _quota(cluster, "ty-a-prod", "trainyard-production-quota").spec.hard
    assert hard["requests.nvidia.com/gpu"] == "12" and hard["requests.cpu"] == "96"
    _cap(team, 1)
    assert _quota(cluster, "ty-a-prod").spec.hard["requests.nvidia.com/gpu"] == "12"
    assert _quota(cluster, "ty-a-dev").spec.hard["requests.nvidia.com/gpu"] == "8"


def _gpu_pod(name, gpus, priority_class=None):
    return k8s.V1Pod(metadata=k8s.V1ObjectMeta(name=name), spec=k8s.V1PodSpec(
        priority_class_name=priority_class,
        containers=[k8s.V1Container(name="c", image="pytorch", resources=k8s.V1ResourceRequirements(
            requests={"nvidia.com/gpu": str(gpus), "cpu": "1", "memory": "1Gi"},
            limits={"nvidia.com/gpu": str(gpus)}))]))


def test_a_pod_above_the_quota_is_refused_by_the_api_server(team, cluster):
    reconcile_cluster.apply().get()   # the tiers' PriorityClasses
    # a production pod above the prod pool's grant: production never borrows
    with pytest.raises(ApiException) as err:
        _core(cluster).create_namespaced_pod(
            "ty-a-prod", _gpu_pod("greedy", 9, "trainyard-production"))
    assert err.value.status == 403
    assert "exceeded quota: trainyard-production-quota" in err.value.body
    # under a borrowing cap, any pod above grant x cap
    _cap(team, 1)
    with pytest.raises(ApiException) as err:
        _core(cluster).create_namespaced_pod("ty-a-dev", _gpu_pod("greedy", 9))
    assert err.value.status == 403
    assert "exceeded quota: trainyard-quota" in err.value.body


def test_an_object_deleted_or_edited_by_hand_is_restored_by_the_resync(team, cluster):
    core = _core(cluster)
    k8s.NetworkingV1Api(cluster.api_client).delete_namespaced_network_policy(
        "trainyard-isolation", "ty-a-dev")
    core.patch_namespaced_resource_quota("trainyard-production-quota", "ty-a-prod",
                                         {"spec": {"hard": {"requests.nvidia.com/gpu": "100"}}})
    outcome = resync_pools.apply().get()
    assert outcome == {"drifted": 2, "in_sync": 0}
    assert _objects(cluster, "ty-a-dev") == EXPECTED
    assert _quota(cluster, "ty-a-prod", "trainyard-production-quota").spec.hard[
        "requests.nvidia.com/gpu"] == "8"


def _resource_version(cluster) -> int:
    return int(_core(cluster).list_namespace().metadata.resource_version)


def test_a_resync_with_no_changes_writes_nothing(team, cluster):
    before = _resource_version(cluster)
    assert resync_pools.apply().get() == {"drifted": 0, "in_sync": 2}
    assert _resource_version(cluster) == before
    # reconciling an in-sync pool reads but does not write either
    assert reconcile_pool.apply(args=[team.pools.get(kind="prod").pk]).get() == "unchanged"
    assert _resource_version(cluster) == before


def run_like_a_worker(task, *args, max_attempts=10):
    """Run ``task`` as a worker would: on Retry, run it again with the retry count
    raised (the broker would redeliver it after the countdown). Returns (result,
    countdowns)."""
    from celery.exceptions import Retry

    countdowns = []
    for retries in range(max_attempts):
        try:
            return task.apply(args=args, retries=retries).get(), countdowns
        except Retry as exc:
            countdowns.append(exc.when)
    raise AssertionError(f"{task.name} did not finish in {max_attempts} attempts")


@pytest.mark.parametrize("fault", [
    {"status": 500}, {"status": 429}, {"status": 409}, {"timeout": True},
])
@pytest.mark.slow
def test_transient_failures_are_retried_with_backoff_until_the_state_converges(
        platform_admin, cluster, django_capture_on_commit_callbacks, fault, settings):
    if fault.get("timeout"):  # each held request costs one request timeout: keep it short
        from k8s_sync.client import reset_clients

        settings.TRAINYARD_CLUSTER = {**settings.TRAINYARD_CLUSTER, "request_timeout": 1}
        reset_clients()
    rule = cluster.faults.add(method="PATCH", path_regex="/ty-flaky-prod/resourcequotas/",
                              times=3, **fault)
    with django_capture_on_commit_callbacks(execute=True):  # first attempts fail, robustly
        tenant = services.tenant_create(actor=platform_admin, slug="flaky", name="Flaky",
                                        cost_center="C", contact_email="f@example.org")
    prod = tenant.pools.get(kind="prod")
    prod.refresh_from_db()
    assert prod.sync_state == "error" and prod.sync_error_transient
    result, countdowns = run_like_a_worker(reconcile_pool, prod.pk)
    assert result.startswith("applied") and rule.hits == 3
    assert len(countdowns) == 2 and 0 < countdowns[0] <= 2 and countdowns[1] <= 4
    for pool in tenant.pools.all():
        assert pool.write_state == "in_sync", pool.sync_error
    assert _objects(cluster, "ty-flaky-prod") == EXPECTED_PROD


def test_the_pool_shows_the_error_while_the_api_fails(platform_admin, cluster, tenant_a,
                                                      monkeypatch):
    import tenants.tasks as tasks

    monkeypatch.setattr(tasks, "MAX_RETRIES", 0)  # see the error instead of retrying
    cluster.faults.add(path_regex="/namespaces", status=500, message="etcd is on fire")
    pool = tenant_a.pools.get(kind="prod")
    assert reconcile_pool.apply(args=[pool.pk]).get() == "error"
    pool.refresh_from_db()
    assert pool.sync_state == "error" and "etcd is on fire" in pool.sync_error
    assert pool.sync_error_transient
    cluster.faults.clear()
    assert reconcile_pool.apply(args=[pool.pk]).get().startswith("applied")
    pool.refresh_from_db()
    assert pool.write_state == "in_sync" and pool.sync_error == ""


def test_an_invalid_object_is_a_permanent_error_shown_on_the_pool(platform_admin, cluster,
                                                                  tenant_a):
    cluster.faults.add(method="PATCH", path_regex="/limitranges/", status=422,
                       message="LimitRange is invalid")
    pool = tenant_a.pools.get(kind="dev")
    assert reconcile_pool.apply(args=[pool.pk]).get() == "error"
    pool.refresh_from_db()
    assert pool.sync_state == "error" and not pool.sync_error_transient


def test_a_lost_task_is_picked_up_by_the_resync(tenant_a, cluster):
    """tenant_a's pools were created without any task (as if the broker was down)."""
    assert {p.sync_state for p in tenant_a.pools.all()} == {"pending"}
    assert resync_pools.apply().get() == {"drifted": 2, "in_sync": 0}
    assert {p.write_state for p in Pool.objects.filter(tenant=tenant_a)} == {"in_sync"}


def test_suspending_stops_new_work_without_deleting_anything(team, platform_admin, cluster,
                                                            django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        services.tenant_suspend(access=access_for(platform_admin, team), actor=platform_admin,
                                reason="budget")
    hard = _quota(cluster, "ty-a-prod").spec.hard
    assert hard["pods"] == "0" and hard["requests.nvidia.com/gpu"] == "0"
    assert _objects(cluster, "ty-a-prod") == EXPECTED_PROD
    with django_capture_on_commit_callbacks(execute=True):
        services.tenant_reactivate(access=access_for(platform_admin, team), actor=platform_admin)
    assert "pods" not in _quota(cluster, "ty-a-prod").spec.hard


def test_deleting_a_tenant_removes_its_namespaces_after_confirmation(
        team, platform_admin, cluster, django_capture_on_commit_callbacks):
    from core.exceptions import ApplicationError

    access = access_for(platform_admin, team)
    with pytest.raises(ApplicationError, match="Type the tenant's slug"):
        services.tenant_delete(access=access, actor=platform_admin, confirm="yes")
    with django_capture_on_commit_callbacks(execute=True):
        services.tenant_delete(access=access, actor=platform_admin, confirm="a")
    cluster.advance(5)  # namespace deletion goes through Terminating
    resync_pools.apply().get()
    names = {ns.metadata.name for ns in _core(cluster).list_namespace().items}
    assert "ty-a-prod" not in names and "ty-a-dev" not in names
    assert Tenant.objects.get(slug="a").status == "deleted"


def test_removing_a_namespace_that_is_still_terminating_is_not_an_error(
        team, platform_admin, cluster, django_capture_on_commit_callbacks):
    """A second DELETE of a namespace whose content is still being removed gets 409 "The
    system is ensuring all content is removed from this namespace"
    (pkg/registry/core/namespace/storage/storage.go Delete). The reconcile of a deleting
    tenant's pool runs again meanwhile (resync, retries): it must say "deleting", not fail
    and retry."""
    core = _core(cluster)
    core.create_namespaced_config_map("ty-a-dev", {"metadata": {
        "name": "held", "finalizers": ["example.com/hold"]}})
    with django_capture_on_commit_callbacks(execute=True):
        services.tenant_delete(access=access_for(platform_admin, team), actor=platform_admin,
                               confirm="a")
    assert core.read_namespace("ty-a-dev").status.phase == "Terminating"
    dev = Pool.objects.get(tenant=team, kind="dev")
    assert reconcile_pool.apply(args=[dev.pk]).get() == "deleting"
    dev.refresh_from_db()
    assert dev.sync_error == ""
    assert Tenant.objects.get(slug="a").status == "deleting"
    core.patch_namespaced_config_map("held", "ty-a-dev", {"metadata": {"finalizers": None}})
    assert reconcile_pool.apply(args=[dev.pk]).get() == "deleted"
    assert Tenant.objects.get(slug="a").status == "deleted"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_shows_what_the_portal_created(team, cluster):
    out = subprocess.run(["kubectl", "--kubeconfig", str(cluster.kubeconfig),
                          "--request-timeout", "10s", "get", "resourcequota", "-n", "ty-a-prod",
                          "-o", "name"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["resourcequota/trainyard-production-quota",
                                  "resourcequota/trainyard-quota"]
