"""ResourceQuota and LimitRange admission, PriorityClass scopes, the quota controller."""
from __future__ import annotations

import kubernetes
import pytest

from .helpers import api_error, core, custom, ns, pod

pytestmark = pytest.mark.timeout(30)


def _quota(c, name, hard, scope_values=None, namespace="team-a"):
    spec = {"hard": hard}
    if scope_values:
        spec["scopeSelector"] = {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": scope_values}]}
    return c.create_namespaced_resource_quota(namespace, {"metadata": {"name": name},
                                                          "spec": spec})


def _pcs(k):
    s = kubernetes.client.SchedulingV1Api(k.api_client)
    for name, value in (("prod", 1000), ("dev", 100)):
        s.create_priority_class({"metadata": {"name": name}, "value": value})


def test_gpu_quota_exceeded_message_and_status(kubesim):
    c = core(kubesim)
    ns(kubesim)
    _quota(c, "gpu", {"requests.nvidia.com/gpu": "2", "pods": "5"})
    q = c.read_namespaced_resource_quota("gpu", "team-a")
    assert q.status.hard == {"requests.nvidia.com/gpu": "2", "pods": "5"}
    assert q.status.used == {"requests.nvidia.com/gpu": "0", "pods": "0"}
    c.create_namespaced_pod("team-a", pod("w0", limits={"nvidia.com/gpu": "2"}))
    q = c.read_namespaced_resource_quota("gpu", "team-a")
    assert q.status.used == {"requests.nvidia.com/gpu": "2", "pods": "1"}
    status, body = api_error(c.create_namespaced_pod, "team-a",
                             pod("w1", limits={"nvidia.com/gpu": "1"}))
    assert (status, body["reason"]) == (403, "Forbidden")
    assert body["message"] == (
        'pods "w1" is forbidden: exceeded quota: gpu, requested: requests.nvidia.com/gpu=1, '
        'used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2')
    assert body["details"] == {"name": "w1", "kind": "pods"}
    # a pod without GPUs still fits: GPUs need not be specified
    c.create_namespaced_pod("team-a", pod("cpu-only"))
    # deleting (unbound) and terminal pods release quota
    c.delete_namespaced_pod("w0", "team-a")
    q = c.read_namespaced_resource_quota("gpu", "team-a")
    assert q.status.used == {"requests.nvidia.com/gpu": "0", "pods": "1"}
    c.create_namespaced_pod("team-a", pod("w2", limits={"nvidia.com/gpu": "2"}))
    kubesim.call(kubesim.store.patch, "pods", "w2", {"status": {"phase": "Failed"}},
                 namespace="team-a", subresource="status")
    q = c.read_namespaced_resource_quota("gpu", "team-a")
    assert q.status.used["requests.nvidia.com/gpu"] == "0"


def test_multiple_keys_pretty_printed_sorted(kubesim):
    c = core(kubesim)
    ns(kubesim)
    _quota(c, "compute", {"requests.cpu": "1", "requests.memory": "1Gi"})
    status, body = api_error(c.create_namespaced_pod, "team-a",
                             pod("big", requests={"cpu": "2", "memory": "2Gi"}))
    assert status == 403
    assert body["message"].endswith(
        "exceeded quota: compute, requested: requests.cpu=2,requests.memory=2Gi, "
        "used: requests.cpu=0,requests.memory=0, limited: requests.cpu=1,requests.memory=1Gi")


def test_must_specify_when_quota_tracks_cpu_memory(kubesim):
    c = core(kubesim)
    ns(kubesim)
    _quota(c, "compute", {"requests.cpu": "10", "limits.memory": "10Gi"})
    status, body = api_error(c.create_namespaced_pod, "team-a", pod("p"))
    assert status == 403
    assert body["message"] == ('pods "p" is forbidden: failed quota: compute: must specify '
                               'limits.memory for: main; requests.cpu for: main')


def test_limit_range_defaults_satisfy_quota(kubesim):
    c = core(kubesim)
    ns(kubesim)
    lr = c.create_namespaced_limit_range("team-a", {"metadata": {"name": "d"}, "spec": {"limits": [
        {"type": "Container", "default": {"cpu": "2", "memory": "8Gi"},
         "defaultRequest": {"cpu": "1"}, "max": {"nvidia.com/gpu": "8", "cpu": "4"}}]}})
    item = lr.spec.limits[0]
    # API defaulting: max -> default -> defaultRequest (the GPU trap of facts §0.3)
    assert item.default == {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "8"}
    assert item.default_request == {"cpu": "1", "memory": "8Gi", "nvidia.com/gpu": "8"}
    _quota(c, "compute", {"requests.cpu": "3", "limits.memory": "100Gi"})
    p = c.create_namespaced_pod("team-a", pod("p"))
    res = p.spec.containers[0].resources
    assert res.requests["cpu"] == "1" and res.limits["memory"] == "8Gi"
    assert res.limits["nvidia.com/gpu"] == "8"
    status, body = api_error(c.create_namespaced_pod, "team-a", pod("huge", limits={"cpu": "6"}))
    assert status == 403
    assert "maximum cpu usage per Container is 4, but limit is 6" in body["message"]


def test_limit_range_validation_gpu_default_must_equal_request(kubesim):
    c = core(kubesim)
    ns(kubesim)
    status, body = api_error(c.create_namespaced_limit_range, "team-a", {
        "metadata": {"name": "bad"}, "spec": {"limits": [{
            "type": "Container", "default": {"nvidia.com/gpu": "1"},
            "defaultRequest": {"nvidia.com/gpu": "0"}}]}})
    assert status == 422 and "must equal to defaultRequest" in body["message"]


def test_limit_range_min_and_ratio_and_pvc(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_limit_range("team-a", {"metadata": {"name": "l"}, "spec": {"limits": [
        {"type": "Container", "min": {"memory": "1Gi"}, "maxLimitRequestRatio": {"cpu": "2"}},
        {"type": "PersistentVolumeClaim", "max": {"storage": "2Ti"}}]}})
    status, body = api_error(c.create_namespaced_pod, "team-a",
                             pod("small", requests={"memory": "512Mi", "cpu": "1"},
                                 limits={"cpu": "1", "memory": "2Gi"}))
    assert status == 403 and "minimum memory usage per Container is 1Gi" in body["message"]
    status, body = api_error(c.create_namespaced_pod, "team-a",
                             pod("ratio", requests={"cpu": "1"}, limits={"cpu": "4"}))
    assert status == 403 and "cpu max limit to request ratio per Container is 2" in \
        body["message"]
    status, body = api_error(c.create_namespaced_persistent_volume_claim, "team-a", _pvc(
        "big", "3Ti"))
    assert status == 403 and "maximum storage usage per PersistentVolumeClaim is 2Ti" in \
        body["message"]


def _pvc(name, size, sc=None):
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
    if sc:
        spec["storageClassName"] = sc
    return {"metadata": {"name": name}, "spec": spec}


def test_storage_class_quota_keys(kubesim):
    c = core(kubesim)
    ns(kubesim)
    _quota(c, "storage", {"requests.storage": "10Ti", "persistentvolumeclaims": "3",
                          "fast-nvme.storageclass.storage.k8s.io/requests.storage": "2Ti",
                          "fast-nvme.storageclass.storage.k8s.io/persistentvolumeclaims": "1"})
    c.create_namespaced_persistent_volume_claim("team-a", _pvc("a", "1Ti", "fast-nvme"))
    status, body = api_error(c.create_namespaced_persistent_volume_claim, "team-a",
                             _pvc("b", "100Gi", "fast-nvme"))
    assert status == 403
    assert "fast-nvme.storageclass.storage.k8s.io/persistentvolumeclaims=1" in body["message"]
    assert body["message"].startswith('persistentvolumeclaims "b" is forbidden: exceeded quota')
    c.create_namespaced_persistent_volume_claim("team-a", _pvc("c", "1536Gi", "standard"))
    used = c.read_namespaced_resource_quota("storage", "team-a").status.used
    assert used["requests.storage"] == "2560Gi"
    assert used["persistentvolumeclaims"] == "2"
    assert used["fast-nvme.storageclass.storage.k8s.io/requests.storage"] == "1Ti"


def test_object_count_quota_for_custom_resources(kubesim):
    c = core(kubesim)
    ns(kubesim)
    _quota(c, "objects", {"count/pytorchjobs.kubeflow.org": "1", "count/configmaps": "5"})
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "j1"},
           "spec": {"runPolicy": {"suspend": True}, "pytorchReplicaSpecs": {"Master": {
               "replicas": 1, "template": {"spec": {"containers": [
                   {"name": "pytorch", "image": "x"}]}}}}}}
    co = custom(kubesim)
    co.create_namespaced_custom_object("kubeflow.org", "v1", "team-a", "pytorchjobs", job)
    job["metadata"]["name"] = "j2"
    status, body = api_error(co.create_namespaced_custom_object, "kubeflow.org", "v1", "team-a",
                             "pytorchjobs", job)
    assert status == 403
    assert body["message"] == (
        'pytorchjobs.kubeflow.org "j2" is forbidden: exceeded quota: objects, requested: '
        'count/pytorchjobs.kubeflow.org=1, used: count/pytorchjobs.kubeflow.org=1, limited: '
        'count/pytorchjobs.kubeflow.org=1')


def test_priority_class_scoped_quotas_and_mig(kubesim):
    c = core(kubesim)
    ns(kubesim)
    _pcs(kubesim)
    _quota(c, "gpu-prod", {"requests.nvidia.com/gpu": "4", "pods": "10"}, ["prod"])
    _quota(c, "gpu-dev", {"requests.nvidia.com/gpu": "1",
                          "requests.nvidia.com/mig-1g.10gb": "2"}, ["dev"])
    p = c.create_namespaced_pod("team-a", pod("p", limits={"nvidia.com/gpu": "4"},
                                              priority_class="prod"))
    assert p.spec.priority == 1000
    status, body = api_error(c.create_namespaced_pod, "team-a",
                             pod("d", limits={"nvidia.com/gpu": "2"}, priority_class="dev"))
    assert status == 403 and "exceeded quota: gpu-dev" in body["message"]
    c.create_namespaced_pod("team-a", pod("m", limits={"nvidia.com/mig-1g.10gb": "2"},
                                          priority_class="dev"))
    status, body = api_error(c.create_namespaced_pod, "team-a",
                             pod("m2", limits={"nvidia.com/mig-1g.10gb": "1"},
                                 priority_class="dev"))
    assert "requests.nvidia.com/mig-1g.10gb=1" in body["message"]
    # a pod without a priority class escapes both scoped quotas
    c.create_namespaced_pod("team-a", pod("free", limits={"nvidia.com/gpu": "8"}))
    prod = c.read_namespaced_resource_quota("gpu-prod", "team-a").status.used
    assert prod == {"requests.nvidia.com/gpu": "4", "pods": "1"}
    status, body = api_error(c.create_namespaced_pod, "team-a",
                             pod("x", priority_class="missing"))
    assert status == 403 and "no PriorityClass with name missing" in body["message"]


def test_priority_class_scope_rejects_storage_keys(kubesim):
    c = core(kubesim)
    ns(kubesim)
    status, body = api_error(_quota, c, "bad", {"requests.storage": "1Ti",
                                                "requests.nvidia.com/gpu": "1"}, ["prod"])
    assert status == 422 and "unsupported scope applied to resource" in body["message"]
    assert body["details"]["causes"][0]["field"] == "spec.scopeSelector.matchExpressions"
    _quota(c, "ok", {"requests.nvidia.com/gpu": "1", "requests.cpu": "1"}, ["prod"])
    status, body = api_error(_quota, c, "bad2", {"limits.nvidia.com/gpux": "1",
                                                 "bogus": "1"})
    assert status == 422 and "must be a standard resource for quota" in body["message"]


def test_quota_status_recomputed_when_quota_created_after_pods(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_pod("team-a", pod("a", limits={"nvidia.com/gpu": "1"}))
    c.create_namespaced_pod("team-a", pod("b", limits={"nvidia.com/gpu": "2"}))
    _quota(c, "late", {"requests.nvidia.com/gpu": "10", "count/pods": "10"})
    used = c.read_namespaced_resource_quota("late", "team-a").status.used
    assert used == {"requests.nvidia.com/gpu": "3", "count/pods": "2"}
    c.patch_namespaced_resource_quota("late", "team-a", {"spec": {"hard": {"pods": "4"}}})
    q = c.read_namespaced_resource_quota("late", "team-a")
    assert q.status.hard["pods"] == "4" and q.status.used["pods"] == "2"
