"""Admission and update rules a real cluster applies, through the official client (issue 20).

Sources (kubernetes/kubernetes):
- plugin/pkg/admission/serviceaccount/admission.go (SA lookup, kube-api-access-xxxxx)
- pkg/controller/serviceaccount/serviceaccounts_controller.go (`default` per namespace)
- plugin/pkg/admission/priority/admission.go (priority, preemptionPolicy, globalDefault)
- plugin/pkg/admission/limitranger/admission.go (mergePodResourceRequirements annotation)
- pkg/registry/core/service/storage/alloc.go, pkg/apis/core/validation/validation.go
  validateUpgradeDowngradeClusterIPs (ClusterIP allocation and immutability)
- pkg/apis/core/validation/validation.go ValidatePersistentVolumeClaimUpdate
- pkg/apis/core/validation/events.go ValidateEventCreate (events.k8s.io/v1)
"""
from __future__ import annotations

import ipaddress
import json

import kubernetes
import pytest

from .helpers import api_error, core, ns, pod, request

pytestmark = [pytest.mark.timeout(30), pytest.mark.kubesim(simulate=False)]
SA_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"


# ---- ServiceAccount --------------------------------------------------------------------------
def test_every_namespace_gets_the_default_service_account(kubesim):
    c = core(kubesim)
    ns(kubesim)
    assert [s.metadata.name for s in c.list_namespaced_service_account("team-a").items] == [
        "default"]


def test_a_pod_naming_a_missing_service_account_is_refused(kubesim):
    c = core(kubesim)
    ns(kubesim)
    body = pod("p")
    body["spec"]["serviceAccountName"] = "builder"
    status, err = api_error(c.create_namespaced_pod, "team-a", body)
    assert status == 403 and err["reason"] == "Forbidden"
    assert err["message"] == ('pods "p" is forbidden: error looking up service account '
                              'team-a/builder: serviceaccount "builder" not found')
    c.create_namespaced_service_account("team-a", {"metadata": {"name": "builder"}})
    assert c.create_namespaced_pod("team-a", body).spec.service_account_name == "builder"


def test_the_token_volume_is_projected_and_mounted_in_every_container(kubesim):
    c = core(kubesim)
    ns(kubesim)
    body = pod("p", containers=[
        {"name": "a", "image": "busybox:1"},
        {"name": "b", "image": "busybox:1",
         "volumeMounts": [{"name": "own", "mountPath": SA_PATH}]}])
    body["spec"]["volumes"] = [{"name": "own", "emptyDir": {}}]
    body["spec"]["initContainers"] = [{"name": "init", "image": "busybox:1"}]
    p = c.create_namespaced_pod("team-a", body)
    assert p.spec.service_account_name == "default"
    token = [v for v in p.spec.volumes if v.name.startswith("kube-api-access-")]
    assert len(token) == 1 and len(token[0].name) == len("kube-api-access-") + 5
    proj = token[0].projected
    assert proj.default_mode == 420
    assert proj.sources[0].service_account_token.expiration_seconds == 3607
    assert proj.sources[0].service_account_token.path == "token"
    assert proj.sources[1].config_map.name == "kube-root-ca.crt"
    assert proj.sources[2].downward_api.items[0].field_ref.field_path == "metadata.namespace"
    mounts = {ctr.name: [(m.name, m.mount_path, m.read_only) for m in ctr.volume_mounts or []]
              for ctr in p.spec.containers + p.spec.init_containers}
    assert mounts["a"] == [(token[0].name, SA_PATH, True)]
    assert mounts["init"] == [(token[0].name, SA_PATH, True)]
    assert mounts["b"] == [("own", SA_PATH, None)]     # a mount there already: left alone


def test_automount_off_on_the_pod_or_the_account_adds_nothing(kubesim):
    c = core(kubesim)
    ns(kubesim)
    body = pod("off")
    body["spec"]["automountServiceAccountToken"] = False
    p = c.create_namespaced_pod("team-a", body)
    assert not p.spec.volumes and not p.spec.containers[0].volume_mounts
    c.create_namespaced_service_account("team-a", {"metadata": {"name": "quiet"},
                                                   "automountServiceAccountToken": False})
    body = pod("quiet")
    body["spec"]["serviceAccountName"] = "quiet"
    assert not c.create_namespaced_pod("team-a", body).spec.volumes


# ---- Priority --------------------------------------------------------------------------------
def test_priority_class_sets_priority_and_preemption_policy(kubesim):
    c = core(kubesim)
    sched = kubernetes.client.SchedulingV1Api(kubesim.api_client)
    ns(kubesim)
    sched.create_priority_class({"metadata": {"name": "polite"}, "value": 500,
                                 "preemptionPolicy": "Never"})
    p = c.create_namespaced_pod("team-a", pod("p", priority_class="polite"))
    assert (p.spec.priority, p.spec.preemption_policy) == (500, "Never")
    status, err = api_error(c.create_namespaced_pod, "team-a", pod("q", priority_class="nope"))
    assert status == 403 and err["message"] == (
        'pods "q" is forbidden: no PriorityClass with name nope was found')
    sched.create_priority_class({"metadata": {"name": "base"}, "value": 7,
                                 "globalDefault": True})
    d = c.create_namespaced_pod("team-a", pod("d"))
    assert (d.spec.priority_class_name, d.spec.priority, d.spec.preemption_policy) == (
        "base", 7, "PreemptLowerPriority")


# ---- LimitRanger -----------------------------------------------------------------------------
def test_limit_ranger_annotates_what_it_set(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_limit_range("team-a", {"metadata": {"name": "lr"}, "spec": {"limits": [{
        "type": "Container", "default": {"cpu": "1", "memory": "1Gi"},
        "defaultRequest": {"cpu": "500m", "memory": "512Mi"}}]}})
    body = pod("p", containers=[
        {"name": "main", "image": "busybox:1"},
        {"name": "side", "image": "busybox:1",
         "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}}])
    p = c.create_namespaced_pod("team-a", body)
    assert p.metadata.annotations["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: cpu, memory request for container main; cpu, memory limit "
        "for container main; memory request for container side; memory limit for container "
        "side")
    assert p.spec.containers[0].resources.requests == {"cpu": "500m", "memory": "512Mi"}
    q = c.create_namespaced_pod("team-a", pod("q", requests={"cpu": "1", "memory": "1Gi"},
                                              limits={"cpu": "1", "memory": "1Gi"}))
    assert "kubernetes.io/limit-ranger" not in (q.metadata.annotations or {})


# ---- Service ClusterIP -----------------------------------------------------------------------
def _svc(name, ip=None):
    spec = {"ports": [{"port": 80}], "selector": {"app": name}}
    if ip:
        spec["clusterIP"] = ip
    return {"metadata": {"name": name}, "spec": spec}


def test_cluster_ips_come_from_the_service_cidr_and_are_unique(kubesim):
    c = core(kubesim)
    ns(kubesim)
    ips = {c.create_namespaced_service("team-a", _svc(f"s{i}")).spec.cluster_ip
           for i in range(5)}
    assert len(ips) == 5
    assert all(ipaddress.ip_address(ip) in ipaddress.ip_network("10.96.0.0/12") for ip in ips)
    s0 = c.read_namespaced_service("s0", "team-a").spec
    assert (s0.cluster_ips, s0.ip_families, s0.ip_family_policy) == (
        [s0.cluster_ip], ["IPv4"], "SingleStack")
    status, err = api_error(c.create_namespaced_service, "team-a", _svc("dup", s0.cluster_ip))
    assert status == 422 and err["message"] == (
        f'Service "dup" is invalid: spec.clusterIPs: Invalid value: []string{{'
        f'"{s0.cluster_ip}"}}: failed to allocate IP {s0.cluster_ip}: provided IP is already '
        'allocated')
    status, err = api_error(c.create_namespaced_service, "team-a", _svc("far", "192.168.0.9"))
    assert status == 422 and err["message"].endswith(
        "failed to allocate IP 192.168.0.9: the provided IP (192.168.0.9) is not in the valid "
        "range. The range of valid IPs is 10.96.0.0/12")
    assert c.create_namespaced_service("team-a", _svc("mine", "10.100.0.42")).spec.cluster_ip \
        == "10.100.0.42"


def test_cluster_ip_is_immutable_and_kept_when_an_update_omits_it(kubesim):
    c = core(kubesim)
    ns(kubesim)
    s = c.create_namespaced_service("team-a", _svc("web"))
    ip = s.spec.cluster_ip
    status, err = api_error(c.patch_namespaced_service, "web", "team-a",
                            {"spec": {"clusterIP": "10.96.3.3", "clusterIPs": ["10.96.3.3"]}})
    assert status == 422 and err["message"] == (
        'Service "web" is invalid: spec.clusterIPs[0]: Invalid value: []string{"10.96.3.3"}: '
        'may not change once set')
    body = {"metadata": {"name": "web", "resourceVersion": s.metadata.resource_version},
            "spec": {"ports": [{"port": 8080}], "selector": {"app": "web"}}}
    out = c.replace_namespaced_service("web", "team-a", body)
    assert (out.spec.cluster_ip, out.spec.ports[0].port) == (ip, 8080)


# ---- PersistentVolumeClaim -------------------------------------------------------------------
def _pvc(name, storage="1Gi"):
    return {"metadata": {"name": name}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}}}


def test_pvc_spec_is_immutable_except_requests_of_a_bound_claim(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_persistent_volume_claim("team-a", _pvc("data"))
    status, err = api_error(c.patch_namespaced_persistent_volume_claim, "data", "team-a",
                            {"spec": {"accessModes": ["ReadWriteMany"]}})
    assert status == 422 and err["message"].startswith(
        'PersistentVolumeClaim "data" is invalid: spec: Forbidden: spec is immutable after '
        'creation except resources.requests and volumeAttributesClassName for bound claims\n')
    assert err["details"]["causes"][0]["field"] == "spec"
    # an unbound claim cannot be resized either
    status, _ = api_error(c.patch_namespaced_persistent_volume_claim, "data", "team-a",
                          {"spec": {"resources": {"requests": {"storage": "2Gi"}}}})
    assert status == 422
    c.patch_namespaced_persistent_volume_claim_status(
        "data", "team-a", {"status": {"phase": "Bound", "capacity": {"storage": "1Gi"}}})
    out = c.patch_namespaced_persistent_volume_claim(
        "data", "team-a", {"spec": {"resources": {"requests": {"storage": "2Gi"}}}})
    assert out.spec.resources.requests["storage"] == "2Gi"
    status, err = api_error(c.patch_namespaced_persistent_volume_claim, "data", "team-a",
                            {"spec": {"resources": {"requests": {"storage": "1Gi"}}}})
    assert status == 422 and err["message"] == (
        'PersistentVolumeClaim "data" is invalid: spec.resources.requests.storage: Forbidden: '
        'field can not be less than previous value')


def test_pvc_volume_name_may_be_set_once(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_persistent_volume_claim("team-a", _pvc("data"))
    c.patch_namespaced_persistent_volume_claim("data", "team-a", {"spec": {"volumeName": "pv1"}})
    status, _ = api_error(c.patch_namespaced_persistent_volume_claim, "data", "team-a",
                          {"spec": {"volumeName": "pv2"}})
    assert status == 422


# ---- events.k8s.io/v1 ------------------------------------------------------------------------
def _event(**over):
    body = {"metadata": {"name": "e"}, "eventTime": "2026-01-01T10:00:01.000000Z",
            "reason": "Started", "note": "ok", "type": "Normal", "action": "Start",
            "reportingController": "example.com/ctl", "reportingInstance": "ctl-0",
            "regarding": {"kind": "Pod", "name": "p", "namespace": "team-a"}}
    body.update(over)
    return {k: v for k, v in body.items() if v is not None}


def test_events_v1_create_requires_the_new_fields(kubesim):
    ev1 = kubernetes.client.EventsV1Api(kubesim.api_client)
    ns(kubesim)
    status, err = api_error(ev1.create_namespaced_event, "team-a", _event(
        reportingController=None, reportingInstance=None, action=None))
    assert status == 422 and err["message"] == (
        'Event.events.k8s.io "e" is invalid: [reportingController: Required value, '
        'reportingInstance: Required value, action: Required value]')
    # the client's model requires eventTime, so this one goes raw
    status, _, raw = request(kubesim, "POST", "/apis/events.k8s.io/v1/namespaces/team-a/events",
                             _event(eventTime=None, type="Info"))
    err = json.loads(raw)
    assert status == 422 and err["message"] == (
        'Event.events.k8s.io "e" is invalid: [eventTime: Required value, type: Invalid '
        'value: "": has invalid value: Info]')
    status, err = api_error(ev1.create_namespaced_event, "team-a", _event(
        deprecatedCount=3, series={"count": 1, "lastObservedTime": "2026-01-01T10:00:02.000000Z"}))
    assert status == 422 and [c["field"] for c in err["details"]["causes"]] == [
        "series.count", "count"]
    assert ev1.create_namespaced_event("team-a", _event()).reporting_instance == "ctl-0"
