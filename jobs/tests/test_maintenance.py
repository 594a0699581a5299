"""Maintenance windows keep the nodes they free free until they end, against kubesim
over HTTP: the window cordons them (and only them), admission places nothing there even
before the cordon is observed, and at the end (or on cancel) exactly those nodes are
uncordoned; a node cordoned before the window stays cordoned."""

import datetime as dt

import pytest
import time_machine
from django.utils import timezone
from kubernetes import client as k8s

from jobs import services
from jobs.models import MaintenanceWindow, TrainingJob
from jobs.tasks import admission_cycle, apply_maintenance_windows
from k8s_sync.client import get_client
from k8s_sync.maintenance import cordon_patch, maintenance_taint
from k8s_sync.observe import relist_all
from tenants import services as tenant_services
from tenants.access import access_for
from tenants.tasks import reconcile_cluster, reconcile_pool
from tenants.tests.test_sync import run_like_a_worker

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def world(cluster, platform_admin, tenant_a, django_capture_on_commit_callbacks):
    reconcile_cluster.apply().get()
    relist_all(get_client())
    tenant_services.policy_update(actor=platform_admin,
                                  overcommit_factors={"gpu": 4, "cpu": 4, "memory": 4})
    models = {}
    for node in _core(cluster).list_node().items:
        product = (node.metadata.labels or {}).get("nvidia.com/gpu.product", "")
        models.setdefault(node.metadata.name.rsplit("-", 1)[0], product)
    for pool in tenant_a.pools.all():
        tenant_services.quota_set(actor=platform_admin, pool=pool, reason="test", amounts={
            f"gpu:{models['h800']}": 8, f"gpu:{models['a100']}": 16, "cpu": 256,
            "memory": 2048})
        reconcile_pool.apply(args=[pool.pk]).get()
    relist_all(get_client(), kinds=["quotas"])  # the pools are in the cluster, as observed
    return {"models": models, "capture": django_capture_on_commit_callbacks}


def _core(cluster):
    return k8s.CoreV1Api(cluster.api_client)


def _node(cluster, name):
    node = _core(cluster).read_node(name)
    return bool(node.spec.unschedulable), [(t.key, t.value) for t in node.spec.taints or []]


def _run(world, task, *args):
    with world["capture"](execute=True):
        return task.apply(args=args).get()


def _cycle(world, cluster, seconds=0.0, observe=True):
    if seconds:
        cluster.advance(seconds, step=5)
    if observe:
        relist_all(get_client())
    return _run(world, admission_cycle)


def _window(platform_admin, model, wanted, hours=1):
    start = timezone.now()
    return services.window_schedule(actor=platform_admin, gpu_model=model, nodes_wanted=wanted,
                                    starts_at=start, ends_at=start + dt.timedelta(hours=hours),
                                    reason="firmware")


def _submit(world, bob, tenant, model):
    with world["capture"](execute=True):
        return services.job_submit(access=access_for(bob, tenant), actor=bob, pool="dev", data={
            "name": "needs-h800", "image": "registry.example.org/ml/trainer:1",
            "tier": "development", "workers": 1, "gpus_per_worker": 8, "gpu_model": model,
            "cpu_per_worker": 8, "memory_gib_per_worker": 32, "max_run_seconds": 86400,
            "annotations": {"kubesim.trainyard.io/run-seconds": "3600"}})


def test_freed_nodes_stay_free_until_the_window_ends(world, cluster, platform_admin, bob,
                                                     tenant_a, login):
    h800 = world["models"]["h800"]
    window = _window(platform_admin, h800, 1)
    assert window.plan["nodes"] == ["h800-0"]
    result = _run(world, apply_maintenance_windows)
    assert result == {"moved": 0, "cordoned": 1, "released": 0}
    assert _node(cluster, "h800-0") == (True, [("trainyard.io/maintenance", str(window.pk))])
    window.refresh_from_db()
    assert window.status == "applied" and window.nodes == ["h800-0"]
    assert window.plan["applied"]["already_cordoned"] == []

    # Running the pass again is harmless: nothing is written to the cluster.
    version = _core(cluster).read_node("h800-0").metadata.resource_version
    assert _run(world, apply_maintenance_windows) == {"moved": 0, "cordoned": 0, "released": 0}
    assert _core(cluster).read_node("h800-0").metadata.resource_version == version

    # A job that fits only there waits, before the cordon is observed and after.
    job = _submit(world, bob, tenant_a, h800)
    _cycle(world, cluster, observe=False)
    assert TrainingJob.objects.get(pk=job.pk).state == "queued"
    for _ in range(3):
        _cycle(world, cluster, 10)
    assert TrainingJob.objects.get(pk=job.pk).state == "queued"
    page = login(platform_admin).get("/platform/defrag/").content.decode()
    assert "Open: nodes held until" in page and "h800-0" in page

    # At the end the node is uncordoned, the window released, and the job admitted.
    with time_machine.travel(window.ends_at + dt.timedelta(seconds=30), tick=True):
        assert _run(world, apply_maintenance_windows) == {"moved": 0, "cordoned": 0,
                                                          "released": 1}
        assert _node(cluster, "h800-0") == (False, [])
        window.refresh_from_db()
        assert window.released_at is not None and window.nodes == ["h800-0"]
        assert _run(world, apply_maintenance_windows) == {"moved": 0, "cordoned": 0,
                                                          "released": 0}
        for _ in range(6):
            _cycle(world, cluster, 10)
            if TrainingJob.objects.get(pk=job.pk).state == "running":
                break
        assert TrainingJob.objects.get(pk=job.pk).state == "running"
        page = login(platform_admin).get("/platform/defrag/").content.decode()
        assert "Ended, nodes released at" in page


def test_a_node_cordoned_before_the_window_stays_cordoned_after_it(world, cluster,
                                                                   platform_admin):
    a100 = world["models"]["a100"]
    # Someone cordons a100-1 by hand; Trainyard has not observed it yet.
    _core(cluster).patch_node("a100-1", {"spec": {"unschedulable": True}})
    window = _window(platform_admin, a100, 2)
    assert window.plan["nodes"] == ["a100-0", "a100-1"]  # as observed: both schedulable
    _run(world, apply_maintenance_windows)
    window.refresh_from_db()
    freed = window.plan["applied"]["nodes"]
    assert "a100-1" in freed and "a100-0" in freed
    assert window.plan["applied"]["already_cordoned"] == ["a100-1"]
    assert "a100-1" not in window.nodes and "a100-0" in window.nodes
    assert _node(cluster, "a100-0")[0] is True
    assert _node(cluster, "a100-1") == (True, [])  # left as it was: no taint of ours

    with time_machine.travel(window.ends_at + dt.timedelta(minutes=1), tick=True):
        _run(world, apply_maintenance_windows)
    assert _node(cluster, "a100-0") == (False, [])
    assert _node(cluster, "a100-1") == (True, [])


def test_cancelling_an_open_window_releases_its_nodes_and_retries_on_api_errors(
        world, cluster, platform_admin, login):
    h800 = world["models"]["h800"]
    window = _window(platform_admin, h800, 1)
    # The first node patch fails (503): the pass is retried and then succeeds.
    rule = cluster.faults.add(method="PATCH", path_regex=r"/nodes/h800-0", status=503, times=1)
    result, countdowns = run_like_a_worker(apply_maintenance_windows)
    assert rule.hits == 1 and len(countdowns) == 1
    assert result["cordoned"] == 1 and _node(cluster, "h800-0")[0] is True

    with world["capture"](execute=True):
        response = login(platform_admin).post(f"/platform/defrag/{window.pk}/cancel/")
    assert response.status_code == 302
    window.refresh_from_db()
    assert window.status == "cancelled" and window.released_at is not None
    assert _node(cluster, "h800-0") == (False, [])
    # cancelling again is harmless; a cancelled window never re-cordons
    services.window_cancel(actor=platform_admin, window_id=window.pk)
    assert _run(world, apply_maintenance_windows)["cordoned"] == 0
    assert _node(cluster, "h800-0") == (False, [])
    assert MaintenanceWindow.objects.get(pk=window.pk).status == "cancelled"


def test_the_cordon_patch_keeps_other_taints_and_is_none_when_nothing_changes():
    other = {"key": "trainyard.io/dedicated", "value": "acme", "effect": "NoSchedule"}
    node = {"metadata": {"resourceVersion": "7"}, "spec": {"taints": [other]}}
    ours = maintenance_taint(3)
    patch = cordon_patch(node, unschedulable=True, taint=ours)
    assert patch == {"metadata": {"resourceVersion": "7"},
                     "spec": {"unschedulable": True, "taints": [other, ours]}}
    cordoned = {"metadata": {"resourceVersion": "8"},
                "spec": {"unschedulable": True, "taints": [other, ours]}}
    assert cordon_patch(cordoned, unschedulable=True, taint=ours) is None
    assert cordon_patch(cordoned, unschedulable=False, taint=ours) == {
        "metadata": {"resourceVersion": "8"}, "spec": {"unschedulable": None, "taints": [other]}}
    assert cordon_patch(cordoned, unschedulable=False, taint=ours,
                        keep_unschedulable=True)["spec"] == {"unschedulable": True,
                                                             "taints": [other]}
    assert cordon_patch(node, unschedulable=False, taint=ours) is None
