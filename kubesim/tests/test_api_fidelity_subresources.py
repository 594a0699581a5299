"""Subresources and APIs that controllers and kubectl use, through the official client, each
stating the real API server's behaviour and where it is written (kubernetes/kubernetes)."""
from __future__ import annotations

import base64
import json

import kubernetes
import pytest

from .helpers import api_error, core, ns, pod, request

pytestmark = pytest.mark.kubesim(simulate=False)

LABELS = {"app": "web"}


def policy(k):
    return kubernetes.client.PolicyV1Api(k.api_client)


def apps(k):
    return kubernetes.client.AppsV1Api(k.api_client)


def _ready_pod(k, namespace, name, node="node-a", labels=LABELS):
    c = core(k)
    body = pod(name, labels=labels)
    body["spec"]["nodeName"] = node
    c.create_namespaced_pod(namespace, body)
    c.patch_namespaced_pod_status(name, namespace, {"status": {
        "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})


def _pdb(k, namespace, **spec):
    return policy(k).create_namespaced_pod_disruption_budget(namespace, {
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": LABELS}, **spec}})


def _evict(k, namespace, name):
    return core(k).create_namespaced_pod_eviction(name, namespace, {
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}})


def test_pdb_status_counts_ready_pods(kubesim):
    """pkg/controller/disruption/disruption.go: an integer minAvailable expects the matching
    pods; currentHealthy counts the Ready ones; disruptionsAllowed = healthy - desired."""
    n = ns(kubesim)
    for i in range(3):
        _ready_pod(kubesim, n, f"w{i}")
    core(kubesim).create_namespaced_pod(n, pod("unready", labels=LABELS))
    _pdb(kubesim, n, minAvailable=2)
    st = policy(kubesim).read_namespaced_pod_disruption_budget("web", n).status
    assert (st.expected_pods, st.current_healthy, st.desired_healthy,
            st.disruptions_allowed) == (4, 3, 2, 1)
    assert st.observed_generation == 1
    cond = {c.type: c for c in st.conditions}["DisruptionAllowed"]
    assert (cond.status, cond.reason) == ("True", "SufficientPods")


def test_pdb_max_unavailable_scales_the_controller(kubesim):
    """getExpectedPodCount: maxUnavailable uses the controller's replicas (a ReplicaSet owned
    by a Deployment counts the Deployment's); desiredHealthy = expected - maxUnavailable."""
    n = ns(kubesim)
    a = apps(kubesim)
    tpl = {"metadata": {"labels": LABELS}, "spec": {"containers": [{"name": "c",
                                                                     "image": "web:1"}]}}
    dep = a.create_namespaced_deployment(n, {"metadata": {"name": "web"}, "spec": {
        "replicas": 4, "selector": {"matchLabels": LABELS}, "template": tpl}})
    rs = a.create_namespaced_replica_set(n, {"metadata": {"name": "web-1", "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": dep.metadata.uid,
         "controller": True}]}, "spec": {"replicas": 4, "selector": {"matchLabels": LABELS},
                                         "template": tpl}})
    for i in range(3):
        body = pod(f"w{i}", labels=LABELS)
        body["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                "name": "web-1", "uid": rs.metadata.uid,
                                                "controller": True}]
        core(kubesim).create_namespaced_pod(n, body)
        core(kubesim).patch_namespaced_pod_status(f"w{i}", n, {"status": {
            "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
    _pdb(kubesim, n, maxUnavailable="50%")
    st = policy(kubesim).read_namespaced_pod_disruption_budget("web", n).status
    assert (st.expected_pods, st.desired_healthy, st.current_healthy,
            st.disruptions_allowed) == (4, 2, 3, 1)


def test_eviction_allowed_then_blocked(kubesim):
    """pkg/registry/core/pod/storage/eviction.go: an allowed eviction answers 201 Success,
    records the pod in disruptedPods, marks it DisruptionTarget (EvictionByEvictionAPI) and
    deletes it; with no disruption left it is 429 TooManyRequests "Cannot evict pod as it
    would violate the pod's disruption budget." with a DisruptionBudget cause."""
    n = ns(kubesim)
    for i in range(2):
        _ready_pod(kubesim, n, f"w{i}")
    _pdb(kubesim, n, minAvailable=1)
    status, _, body = request(kubesim, "POST", f"/api/v1/namespaces/{n}/pods/w0/eviction",
                              {"apiVersion": "policy/v1", "kind": "Eviction",
                               "metadata": {"name": "w0"}})
    assert status == 201
    assert json.loads(body)["status"] == "Success"
    gone = core(kubesim).read_namespaced_pod("w0", n)   # bound: graceful deletion
    assert gone.metadata.deletion_timestamp is not None
    cond = {c.type: c for c in gone.status.conditions}["DisruptionTarget"]
    assert (cond.status, cond.reason) == ("True", "EvictionByEvictionAPI")
    st = policy(kubesim).read_namespaced_pod_disruption_budget("web", n).status
    assert st.disruptions_allowed == 0 and st.current_healthy == 1
    code, err = api_error(_evict, kubesim, n, "w1")
    assert code == 429
    assert err["reason"] == "TooManyRequests"
    assert err["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert err["details"]["causes"] == [{
        "reason": "DisruptionBudget",
        "message": "The disruption budget web needs 1 healthy pods and has 1 currently"}]
    assert core(kubesim).read_namespaced_pod("w1", n).metadata.deletion_timestamp is None


def test_eviction_ignores_budgets_for_pending_pods_and_rejects_two_budgets(kubesim):
    """canIgnorePDB: a Pending pod is deleted without asking the budget; a pod under two
    budgets gets the 500 Status "This pod has more than one PodDisruptionBudget..."."""
    n = ns(kubesim)
    core(kubesim).create_namespaced_pod(n, pod("pending", labels=LABELS))
    _ready_pod(kubesim, n, "running")
    _pdb(kubesim, n, minAvailable=5)
    _evict(kubesim, n, "pending")
    assert [p.metadata.name for p in core(kubesim).list_namespaced_pod(n).items] == ["running"]
    policy(kubesim).create_namespaced_pod_disruption_budget(n, {
        "metadata": {"name": "second"}, "spec": {"selector": {"matchLabels": LABELS},
                                                 "maxUnavailable": 1}})
    status, _, body = request(kubesim, "POST",
                              f"/api/v1/namespaces/{n}/pods/running/eviction",
                              {"apiVersion": "policy/v1", "kind": "Eviction",
                               "metadata": {"name": "running"}})
    assert status == 500
    assert "more than one PodDisruptionBudget" in json.loads(body)["message"]


def test_pdb_validation(kubesim):
    """pkg/apis/policy/validation: minAvailable and maxUnavailable cannot be both set."""
    n = ns(kubesim)
    code, err = api_error(_pdb, kubesim, n, minAvailable=1, maxUnavailable=1)
    assert code == 422
    assert "minAvailable and maxUnavailable cannot be both set" in err["message"]


def test_binding_sets_node_and_pod_scheduled(kubesim):
    """pkg/registry/core/pod/storage/storage.go BindingREST: binding sets spec.nodeName and
    PodScheduled=True; binding a bound pod is 409 on pods/binding."""
    n = ns(kubesim)
    core(kubesim).create_namespaced_pod(n, pod("p"))
    status, _, _ = request(kubesim, "POST", f"/api/v1/namespaces/{n}/pods/p/binding",
                           {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
                            "target": {"kind": "Node", "name": "node-a"}})
    assert status == 201
    p = core(kubesim).read_namespaced_pod("p", n)
    assert p.spec.node_name == "node-a"
    assert {c.type: c.status for c in p.status.conditions}["PodScheduled"] == "True"
    status, _, body = request(kubesim, "POST", f"/api/v1/namespaces/{n}/pods/p/binding",
                              {"apiVersion": "v1", "kind": "Binding",
                               "metadata": {"name": "p"},
                               "target": {"kind": "Node", "name": "node-b"}})
    assert status == 409
    assert json.loads(body)["message"] == ('Operation cannot be fulfilled on pods/binding "p": '
                                           'pod p is already assigned to node "node-a"')


def test_pod_log_errors(kubesim):
    """pkg/registry/core/pod/strategy.go LogLocation: several containers need a name ("a
    container name must be specified for pod X, choose one of: [...]"), an unknown one is
    "container Y is not valid for pod X"."""
    n = ns(kubesim)
    core(kubesim).create_namespaced_pod(n, pod("two", containers=[
        {"name": "a", "image": "busybox:1"}, {"name": "b", "image": "busybox:1"}]))
    code, err = api_error(core(kubesim).read_namespaced_pod_log, "two", n)
    assert code == 400
    assert err["message"] == "a container name must be specified for pod two, choose one " \
                             "of: [a b]"
    code, err = api_error(core(kubesim).read_namespaced_pod_log, "two", n, container="zz")
    assert code == 400 and err["message"] == "container zz is not valid for pod two"


def test_deployment_crud_scale_and_validation(kubesim):
    """apps/v1 defaults (pkg/apis/apps/v1/defaults.go) and validation
    (pkg/apis/apps/validation): selector must match the template labels; the scale
    subresource reads and writes spec.replicas (autoscaling/v1 Scale)."""
    n = ns(kubesim)
    a = apps(kubesim)
    tpl = {"metadata": {"labels": LABELS}, "spec": {"containers": [{"name": "c",
                                                                     "image": "web:1"}]}}
    d = a.create_namespaced_deployment(n, {"metadata": {"name": "web"}, "spec": {
        "selector": {"matchLabels": LABELS}, "template": tpl}})
    assert d.spec.replicas == 1 and d.spec.strategy.type == "RollingUpdate"
    assert d.spec.revision_history_limit == 10 and d.spec.progress_deadline_seconds == 600
    bad = {"metadata": {"name": "bad"}, "spec": {"selector": {"matchLabels": {"app": "x"}},
                                                 "template": tpl}}
    code, err = api_error(a.create_namespaced_deployment, n, bad)
    assert code == 422
    assert err["message"].endswith("`selector` does not match template `labels`")
    sc = a.read_namespaced_deployment_scale("web", n)
    assert sc.spec.replicas == 1 and sc.status.selector == "app=web"
    a.patch_namespaced_deployment_scale("web", n, {"spec": {"replicas": 3}})
    assert a.read_namespaced_deployment("web", n).spec.replicas == 3
    a.patch_namespaced_deployment_status("web", n, {"status": {"replicas": 3,
                                                               "readyReplicas": 3}})
    assert a.read_namespaced_deployment_scale("web", n).status.replicas == 3


CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": "widgets.example.com"},
       "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": True, "storage": True,
                              "subresources": {"status": {}, "scale": {
                                  "specReplicasPath": ".spec.size",
                                  "statusReplicasPath": ".status.ready",
                                  "labelSelectorPath": ".status.selector"}},
                              "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                  "spec": {"type": "object",
                                           "properties": {"size": {"type": "integer"}}},
                                  "status": {"type": "object", "properties": {
                                      "ready": {"type": "integer"},
                                      "selector": {"type": "string"}}}}}}}]}}


def test_crd_scale_subresource(kubesim):
    """apiextensions-apiserver pkg/registry/customresource/etcd.go: the scale subresource maps
    specReplicasPath/statusReplicasPath/labelSelectorPath onto autoscaling/v1 Scale."""
    n = ns(kubesim)
    kubernetes.client.ApiextensionsV1Api(kubesim.api_client).create_custom_resource_definition(
        CRD)
    co = kubernetes.client.CustomObjectsApi(kubesim.api_client)
    co.create_namespaced_custom_object("example.com", "v1", n, "widgets", {
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"size": 2}})
    co.patch_namespaced_custom_object_status("example.com", "v1", n, "widgets", "w", {
        "status": {"ready": 1, "selector": "app=w"}})
    sc = co.get_namespaced_custom_object_scale("example.com", "v1", n, "widgets", "w")
    assert sc["kind"] == "Scale" and sc["spec"] == {"replicas": 2}
    assert sc["status"] == {"replicas": 1, "selector": "app=w"}
    co.patch_namespaced_custom_object_scale("example.com", "v1", n, "widgets", "w",
                                            {"spec": {"replicas": 5}})
    assert co.get_namespaced_custom_object("example.com", "v1", n, "widgets", "w")[
        "spec"]["size"] == 5
    status, _, _ = request(kubesim, "GET", f"/apis/example.com/v1/namespaces/{n}/widgets/w/"
                                           "nothing")
    assert status == 404


def test_service_account_token_request(kubesim):
    """pkg/registry/core/serviceaccount/storage/token.go and
    pkg/apis/authentication/validation: 1 h by default, at least 10 minutes, the account
    must exist."""
    n = ns(kubesim)
    c = core(kubesim)
    c.create_namespaced_service_account(n, {"metadata": {"name": "runner"}})
    tr = c.create_namespaced_service_account_token("runner", n, {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"audiences": ["api"]}})
    assert tr.spec.expiration_seconds == 3600 and tr.spec.audiences == ["api"]
    payload = tr.status.token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["sub"] == f"system:serviceaccount:{n}:runner"
    code, err = api_error(c.create_namespaced_service_account_token, "runner", n, {
        "spec": {"expirationSeconds": 60}})
    assert code == 422 and "may not specify a duration less than 10 minutes" in err["message"]
    code, _ = api_error(c.create_namespaced_service_account_token, "nobody", n, {"spec": {}})
    assert code == 404


def test_self_reviews(kubesim):
    """authorization.k8s.io/v1 SelfSubjectAccessReview and SelfSubjectRulesReview,
    authentication.k8s.io/v1 SelfSubjectReview (what `kubectl auth can-i` and `whoami`
    send). kubesim authorizes everything and says so in the reason."""
    authz = kubernetes.client.AuthorizationV1Api(kubesim.api_client)
    r = authz.create_self_subject_access_review({"spec": {"resourceAttributes": {
        "verb": "create", "resource": "pods", "namespace": "default"}}})
    assert r.status.allowed is True and r.spec.resource_attributes.verb == "create"
    code, err = api_error(authz.create_self_subject_access_review, {"spec": {}})
    assert code == 422 and err["reason"] == "Invalid"
    rules = authz.create_self_subject_rules_review({"spec": {"namespace": "default"}})
    assert rules.status.resource_rules[0].verbs == ["*"] and not rules.status.incomplete
    who = kubernetes.client.AuthenticationV1Api(kubesim.api_client) \
        .create_self_subject_review({"apiVersion": "authentication.k8s.io/v1",
                                     "kind": "SelfSubjectReview"})
    assert who.status.user_info.username == "system:unsecured"
    status, _, _ = request(kubesim, "GET",
                           "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
    assert status == 405


@pytest.mark.kubesim(simulate=True)
def test_pod_log_of_a_container_waiting_to_start(kubesim):
    """pkg/kubelet/kubelet_pods.go validateContainerLogStatus: a container that has not
    started answers 400 'container "c" in pod "p" is waiting to start: ContainerCreating'
    ("image can't be pulled" once the pull failed)."""
    n = ns(kubesim)
    node = core(kubesim).list_node().items[0].metadata.name
    body = pod("p")
    body["spec"]["nodeName"] = node
    body["metadata"]["annotations"] = {"kubesim.trainyard.io/image-pull": "not-found"}
    core(kubesim).create_namespaced_pod(n, body)
    code, err = api_error(core(kubesim).read_namespaced_pod_log, "p", n)
    assert code == 400
    assert err["message"] == 'container "main" in pod "p" is waiting to start: ' \
                             'ContainerCreating'
    kubesim.advance(30, step=5)
    code, err = api_error(core(kubesim).read_namespaced_pod_log, "p", n)
    assert code == 400 and err["message"].startswith(
        'container "main" in pod "p" is waiting to start: ')
    assert err["message"].endswith(("image can't be pulled", "trying and failing to pull image"))
