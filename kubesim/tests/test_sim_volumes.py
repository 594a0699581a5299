"""PersistentVolumeClaims: provisioning, binding modes, missing claims, reclaim."""

from __future__ import annotations

import pytest
from kubernetes.client import ApiClient

from kubesim.sim.harness import SimHarness, condition, make_pod

NS = "team-a"


@pytest.fixture
def h():
    h = SimHarness("small", seed=9)
    h.namespace(NS)
    return h


def pvc(h, name, size="100Gi", sc=None):
    body = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}},
    }
    if sc:
        body["spec"]["storageClassName"] = sc
    return h.store.create("persistentvolumeclaims", body, namespace=NS)


def with_claim(pod, claim):
    pod["spec"]["volumes"] = [{"name": "ckpt", "persistentVolumeClaim": {"claimName": claim}}]
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "ckpt", "mountPath": "/ckpt"}]
    return pod


def test_immediate_class_binds_at_once(h):
    pvc(h, "data", sc="shared-nfs")
    h.advance(1)
    claim = h.store.get("persistentvolumeclaims", "data", namespace=NS)
    assert claim["status"]["phase"] == "Bound"
    assert claim["status"]["capacity"]["storage"] == "100Gi"
    pv = h.store.get("persistentvolumes", f"pvc-{claim['metadata']['uid']}")
    assert pv["spec"]["claimRef"]["name"] == "data" and pv["status"]["phase"] == "Bound"
    assert pv["spec"]["storageClassName"] == "shared-nfs"
    ApiClient()._ApiClient__deserialize(claim, "V1PersistentVolumeClaim")
    ApiClient()._ApiClient__deserialize(pv, "V1PersistentVolume")
    assert any(e["reason"] == "ProvisioningSucceeded" for e in h.events(NS))


def test_wait_for_first_consumer_binds_when_pod_is_scheduled(h):
    pvc(h, "ckpt")  # default class fast-ssd is WaitForFirstConsumer
    h.advance(2)
    assert (h.store.get("persistentvolumeclaims", "ckpt", namespace=NS).get("status") or {}).get(
        "phase"
    ) != "Bound"
    assert any(e["reason"] == "WaitForFirstConsumer" for e in h.events(NS))
    h.store.create("pods", with_claim(make_pod("user", gpus=1), "ckpt"), namespace=NS)
    h.advance(2)
    claim = h.store.get("persistentvolumeclaims", "ckpt", namespace=NS)
    node = h.pod(NS, "user")["spec"]["nodeName"]
    assert claim["status"]["phase"] == "Bound"
    assert claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == node


def test_pod_with_missing_claim_is_unschedulable_until_it_exists(h):
    h.store.create("pods", with_claim(make_pod("waits", gpus=1), "later"), namespace=NS)
    h.advance(1)
    msg = condition(h.pod(NS, "waits"), "PodScheduled")["message"]
    assert msg == (
        '0/6 nodes are available: persistentvolumeclaim "later" not found. preemption: '
        "0/6 nodes are available: 6 Preemption is not helpful for scheduling."
    )
    pvc(h, "later")
    h.advance(2)
    assert h.pod(NS, "waits")["spec"]["nodeName"]


def test_deleting_claim_reclaims_volume(h):
    pvc(h, "tmp", sc="shared-nfs")
    h.advance(1)
    uid = h.store.get("persistentvolumeclaims", "tmp", namespace=NS)["metadata"]["uid"]
    h.store.delete("persistentvolumeclaims", "tmp", namespace=NS)
    h.advance(1)
    assert f"pvc-{uid}" not in {pv["metadata"]["name"] for pv in h.store.list("persistentvolumes")}


def test_unknown_storage_class_reports_provisioning_failed(h):
    pvc(h, "nope", sc="no-such-class")
    h.advance(1)
    ev = [e for e in h.events(NS) if e["reason"] == "ProvisioningFailed"]
    assert ev and ev[0]["message"] == 'storageclass.storage.k8s.io "no-such-class" not found'


def _vac(h, name, driver, iops="3000"):
    return h.store.create("volumeattributesclasses.storage.k8s.io", {
        "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttributesClass",
        "metadata": {"name": name}, "driverName": driver, "parameters": {"iops": iops}})


def test_a_claim_with_a_volume_attributes_class_waits_for_it_and_reports_it(h):
    driver = h.store.get("storageclasses.storage.k8s.io", "shared-nfs")["provisioner"]
    body = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "fast"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "shared-nfs",
                     "volumeAttributesClassName": "iops-3000",
                     "resources": {"requests": {"storage": "10Gi"}}}}
    h.store.create("persistentvolumeclaims", body, namespace=NS)
    h.advance(1)
    claim = h.store.get("persistentvolumeclaims", "fast", namespace=NS)
    assert (claim.get("status") or {}).get("phase") != "Bound"
    assert any(e["reason"] == "ProvisioningFailed" and "iops-3000" in e["message"]
               and "not found" in e["message"] for e in h.events(NS))
    _vac(h, "iops-3000", "other.csi.example.com")  # for another driver: still refused
    h.advance(1)
    assert (h.store.get("persistentvolumeclaims", "fast", namespace=NS).get("status")
            or {}).get("phase") != "Bound"
    assert any("does not match driver name" in e["message"] for e in h.events(NS))
    h.store.delete("volumeattributesclasses.storage.k8s.io", "iops-3000")
    _vac(h, "iops-3000", driver)
    h.advance(1)
    claim = h.store.get("persistentvolumeclaims", "fast", namespace=NS)
    assert claim["status"]["phase"] == "Bound"
    assert claim["status"]["currentVolumeAttributesClassName"] == "iops-3000"
    pv = h.store.get("persistentvolumes", f"pvc-{claim['metadata']['uid']}")
    assert pv["spec"]["volumeAttributesClassName"] == "iops-3000"
    ApiClient()._ApiClient__deserialize(claim, "V1PersistentVolumeClaim")
    ApiClient()._ApiClient__deserialize(pv, "V1PersistentVolume")


def test_a_volume_attributes_class_keeps_its_driver_and_parameters(h):
    from kubesim.errors import ApiError

    vac = _vac(h, "iops-1", "local.csi.kubesim.trainyard.io", "1000")
    ApiClient()._ApiClient__deserialize(vac, "V1VolumeAttributesClass")
    vac["parameters"] = {"iops": "2000"}
    with pytest.raises(ApiError) as err:
        h.store.replace("volumeattributesclasses.storage.k8s.io", vac)
    assert err.value.code == 422
    # ValidateVolumeAttributesClass: a driver name and at least one parameter
    for body, field in (({"parameters": {"iops": "1"}}, "driverName"),
                        ({"driverName": "x" * 64, "parameters": {"iops": "1"}}, "driverName"),
                        ({"driverName": "Not_A_Driver", "parameters": {"a": "1"}}, "driverName"),
                        ({"driverName": "csi.example.com"}, "parameters"),
                        ({"driverName": "csi.example.com", "parameters": {"": "1"}},
                         "parameters")):
        with pytest.raises(ApiError) as err:
            h.store.create("volumeattributesclasses.storage.k8s.io", {
                "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttributesClass",
                "metadata": {"name": "bad"}, **body})
        assert err.value.code == 422 and field in str(err.value), body
