"""Dedicated nodes: labelled and tainted in the cluster; only the tenant's pods land there."""

import pytest
from kubernetes import client as k8s

from core.exceptions import ApplicationError, Conflict, NotAllowed
from k8s_sync.placement import DEDICATED_KEY, dedicated_placement, node_dedication_patch
from tenants import services
from tenants.access import access_for
from tenants.models import NodeDedication
from tenants.tasks import reconcile_nodes


def _nodes(cluster):
    return {n.metadata.name: n for n in k8s.CoreV1Api(cluster.api_client).list_node().items}


def _gpu_node(cluster):
    return sorted(name for name, n in _nodes(cluster).items()
                  if "nvidia.com/gpu.product" in (n.metadata.labels or {}))[0]


def test_dedicating_labels_and_taints_the_node_and_release_clears_it(
        platform_admin, tenant_a, cluster, django_capture_on_commit_callbacks):
    node = _gpu_node(cluster)
    access = access_for(platform_admin, tenant_a)
    with django_capture_on_commit_callbacks(execute=True):
        services.node_dedicate(access=access, actor=platform_admin, node_name=node,
                               reason="big project")
    observed = _nodes(cluster)[node]
    assert observed.metadata.labels[DEDICATED_KEY] == "acme"
    assert [(t.key, t.value, t.effect) for t in observed.spec.taints or []] == [
        (DEDICATED_KEY, "acme", "NoSchedule")]
    assert reconcile_nodes.apply().get() == {"patched": 0, "missing": 0}  # no-op resync
    with django_capture_on_commit_callbacks(execute=True):
        services.node_release(access=access, actor=platform_admin, node_name=node)
    observed = _nodes(cluster)[node]
    assert DEDICATED_KEY not in (observed.metadata.labels or {})
    assert not observed.spec.taints


def test_a_node_edited_by_hand_is_repaired(platform_admin, tenant_a, cluster):
    node = _gpu_node(cluster)
    services.node_dedicate(access=access_for(platform_admin, tenant_a), actor=platform_admin,
                           node_name=node)
    reconcile_nodes.apply().get()
    k8s.CoreV1Api(cluster.api_client).patch_node(node, {"spec": {"taints": None}})
    assert reconcile_nodes.apply().get()["patched"] == 1
    assert _nodes(cluster)[node].spec.taints[0].key == DEDICATED_KEY


def test_only_the_tenants_pods_schedule_on_its_dedicated_node(platform_admin, tenant_a,
                                                              cluster):
    node = _gpu_node(cluster)
    services.node_dedicate(access=access_for(platform_admin, tenant_a), actor=platform_admin,
                           node_name=node)
    reconcile_nodes.apply().get()
    core = k8s.CoreV1Api(cluster.api_client)
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name="scratch")))
    placement = dedicated_placement("acme")

    def pod(name, **extra):
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                         "containers": [{"name": "c", "image": "busybox"}], **extra}}
    core.create_namespaced_pod("scratch", pod("theirs", **placement))
    core.create_namespaced_pod("scratch", pod("other"))
    cluster.advance(3)
    theirs = core.read_namespaced_pod("theirs", "scratch")
    other = core.read_namespaced_pod("other", "scratch")
    assert theirs.spec.node_name == node
    assert other.spec.node_name is None
    assert "untolerated taint" in other.status.conditions[0].message


def test_dedication_rules(platform_admin, alice, tenant_a, tenant_b):
    node = "gpu-node-1"
    services.node_dedicate(access=access_for(platform_admin, tenant_a), actor=platform_admin,
                           node_name=node)
    services.node_dedicate(access=access_for(platform_admin, tenant_a), actor=platform_admin,
                           node_name=node)  # idempotent
    with pytest.raises(Conflict, match="dedicated to acme"):
        services.node_dedicate(access=access_for(platform_admin, tenant_b),
                               actor=platform_admin, node_name=node)
    with pytest.raises(ApplicationError, match="not a valid node name"):
        services.node_dedicate(access=access_for(platform_admin, tenant_a),
                               actor=platform_admin, node_name="Bad Name")
    with pytest.raises(NotAllowed):
        services.node_dedicate(access=access_for(alice, tenant_a), actor=alice,
                               node_name="other")
    assert list(NodeDedication.objects.values_list("node_name", flat=True)) == [node]


def test_the_api_lists_and_manages_dedicated_nodes(api, platform_admin, bob, charlie,
                                                   tenant_a, tenant_b):
    admin = api(platform_admin)
    created = admin.post("/api/v1/tenants/acme/dedicated-nodes/", {"node_name": "n1"},
                         format="json")
    assert created.status_code == 201
    assert [d["node_name"] for d in api(bob).get(
        "/api/v1/tenants/acme/dedicated-nodes/").json()] == ["n1"]
    assert api(charlie).get("/api/v1/tenants/acme/dedicated-nodes/").status_code == 404
    assert api(charlie).delete("/api/v1/tenants/globex/dedicated-nodes/n1/").status_code == 404
    assert api(bob).delete("/api/v1/tenants/acme/dedicated-nodes/n1/").status_code == 403
    assert admin.delete("/api/v1/tenants/acme/dedicated-nodes/n1/").status_code == 204
    assert not NodeDedication.objects.exists()


def test_the_patch_keeps_other_taints():
    node = {"metadata": {"name": "n", "resourceVersion": "7", "labels": {"a": "b"}},
            "spec": {"taints": [{"key": "gpu", "value": "x", "effect": "NoSchedule"}]}}
    patch = node_dedication_patch(node, "acme")
    assert patch["spec"]["taints"] == [
        {"key": "gpu", "value": "x", "effect": "NoSchedule"},
        {"key": DEDICATED_KEY, "value": "acme", "effect": "NoSchedule"}]
    assert patch["metadata"]["resourceVersion"] == "7"
    assert node_dedication_patch(node, None) is None
