"""kubectl commands that exercise subresources, reviews, discovery and OpenAPI against
kubesim: drain with a PodDisruptionBudget, auth can-i / whoami, describe, wait, explain.
What kubectl does is read from staging/src/k8s.io/kubectl (kubernetes/kubernetes)."""
from __future__ import annotations

import subprocess

import pytest

from .helpers import core, ns
from .test_api_kubectl import KUBECTL, kubectl

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(120),
              pytest.mark.skipif(KUBECTL is None, reason="no kubectl (scripts/ensure-kubectl.sh)")]

NODE = {"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                   "message": "kubelet is posting ready status"}],
                   "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                   "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                   "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}

WORKLOADS = """\
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web, namespace: team-a}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: "web:1"}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: team-a}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: c, image: "agent:1"}]}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: team-a}
spec:
  minAvailable: 2
  selector: {matchLabels: {app: web}}
"""


def _owned_pod(k, name, node, owner_kind, owner, labels, ready=True):
    body = {"metadata": {"name": name, "labels": labels, "ownerReferences": [{
        "apiVersion": "apps/v1", "kind": owner_kind, "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"], "controller": True}]},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "web:1"}]}}
    core(k).create_namespaced_pod("team-a", body)
    if ready:
        core(k).patch_namespaced_pod_status(name, "team-a", {"status": {
            "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})


@pytest.mark.kubesim(simulate=False)
def test_drain_waits_for_the_disruption_budget(kubesim):
    """kubectl drain (staging/src/k8s.io/kubectl/pkg/drain/drain.go, cmd/drain/drain.go):
    cordons, refuses DaemonSet-managed pods without --ignore-daemonsets, evicts through
    policy/v1 pods/eviction (CheckEvictionSupport reads the group/version of pods/eviction
    in /api/v1) and retries every 5 s while the API answers 429; it finishes once the budget
    allows (here: the ReplicaSet's replacements are Ready on another node)."""
    core(kubesim).create_node(NODE)
    core(kubesim).create_node({**NODE, "metadata": {"name": "n2"}})
    ns(kubesim)
    kubectl(kubesim, "apply", "--validate=false", "-f", "-", input=WORKLOADS)
    rs = kubesim.store.get("replicasets.apps", "web", namespace="team-a")
    ds = kubesim.store.get("daemonsets.apps", "agent", namespace="team-a")
    for i in (1, 2):
        _owned_pod(kubesim, f"web-{i}", "n1", "ReplicaSet", rs, {"app": "web"})
    _owned_pod(kubesim, "agent-n1", "n1", "DaemonSet", ds, {"app": "agent"})

    p = kubectl(kubesim, "drain", "n1", "--timeout=3s", check=False)
    assert p.returncode != 0
    assert "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): " \
           "team-a/agent-n1" in p.stderr
    assert core(kubesim).read_node("n1").spec.unschedulable is True   # cordoned

    p = kubectl(kubesim, "drain", "n1", "--ignore-daemonsets", "--timeout=3s", check=False)
    assert p.returncode != 0
    assert "Cannot evict pod as it would violate the pod's disruption budget." in p.stderr
    assert {x.metadata.name for x in core(kubesim).list_namespaced_pod("team-a").items} == {
        "web-1", "web-2", "agent-n1"}
    assert kubectl(kubesim, "get", "pdb", "web", "-n", "team-a").stdout.split("\n")[0].split() \
        == ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED", "DISRUPTIONS", "AGE"]

    for i in (3, 4):   # the ReplicaSet controller's replacements, Ready on n2
        _owned_pod(kubesim, f"web-{i}", "n2", "ReplicaSet", rs, {"app": "web"})
    # --grace-period=0: the evictions delete at once (no kubelet runs here to finish a
    # graceful deletion), as the API server deletes a pod whose grace period is 0
    p = kubectl(kubesim, "drain", "n1", "--ignore-daemonsets", "--grace-period=0",
                "--timeout=30s")
    assert "Warning: ignoring DaemonSet-managed Pods: team-a/agent-n1" in p.stderr
    assert "node/n1 drained" in p.stdout
    assert {x.metadata.name for x in core(kubesim).list_namespaced_pod("team-a").items} == {
        "web-3", "web-4", "agent-n1"}


@pytest.mark.kubesim(simulate=False)
def test_auth_can_i_and_whoami(kubesim):
    """kubectl auth can-i sends a SelfSubjectAccessReview (--list: SelfSubjectRulesReview)
    and prints yes/no; kubectl auth whoami sends an authentication.k8s.io/v1
    SelfSubjectReview (staging/src/k8s.io/kubectl/pkg/cmd/auth/cani.go, whoami.go)."""
    p = kubectl(kubesim, "auth", "can-i", "create", "pods", "-n", "default")
    assert p.stdout.strip() == "yes"
    p = kubectl(kubesim, "auth", "can-i", "--list", "-n", "default")
    assert "*.*" in p.stdout and "[*]" in p.stdout
    p = kubectl(kubesim, "auth", "whoami")
    assert p.stdout.split() == ["ATTRIBUTE", "VALUE", "Username", "system:unsecured",
                                "Groups", "[system:masters", "system:authenticated]"]
    p = kubectl(kubesim, "auth", "whoami", "--as", "alice")
    assert "alice" in p.stdout


def test_describe_pod_and_node(kubesim):
    """kubectl describe (staging/src/k8s.io/kubectl/pkg/describe/describe.go) reads the
    object, its events (fieldSelector involvedObject.*) and, for a node, the pods on it
    (fieldSelector spec.nodeName) and its Lease."""
    ns(kubesim)
    node = core(kubesim).list_node().items[0].metadata.name
    core(kubesim).create_namespaced_pod("team-a", {"metadata": {"name": "p"}, "spec": {
        "nodeName": node, "containers": [{"name": "main", "image": "busybox:1",
                                          "resources": {"requests": {"cpu": "1"}}}]}})
    kubesim.advance(30, step=5)
    out = kubectl(kubesim, "describe", "pod", "p", "-n", "team-a").stdout
    assert "Name:             p" in out and f"Node:             {node}/" in out
    assert "Status:           Running" in out
    assert "Events:" in out
    out = kubectl(kubesim, "describe", "node", node).stdout
    assert f"Name:               {node}" in out
    assert "team-a                      p" in out
    assert "Allocated resources:" in out


@pytest.mark.kubesim(simulate=False)
def test_wait_for_condition(kubesim):
    """kubectl wait --for=condition=Ready (staging/src/k8s.io/kubectl/pkg/cmd/wait) watches
    the object until the condition is True; without it, it times out."""
    ns(kubesim)
    core(kubesim).create_namespaced_pod("team-a", {"metadata": {"name": "p"}, "spec": {
        "nodeName": "n1", "containers": [{"name": "main", "image": "busybox:1"}]}})
    p = kubectl(kubesim, "wait", "--for=condition=Ready", "pod/p", "-n", "team-a",
                "--timeout=1s", check=False)
    assert p.returncode != 0 and "timed out waiting for the condition on pods/p" in p.stderr
    env_cmd = [KUBECTL, "--kubeconfig", str(kubesim.kubeconfig), "wait",
               "--for=condition=Ready", "pod/p", "-n", "team-a", "--timeout=30s"]
    proc = subprocess.Popen(env_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={"HOME": str(kubesim.kubeconfig.parent)})
    try:
        core(kubesim).patch_namespaced_pod_status("p", "team-a", {"status": {
            "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert out.strip() == "pod/p condition met"


@pytest.mark.kubesim(simulate=False)
def test_explain_uses_the_openapi_v3_schemas(kubesim):
    """kubectl explain (kubectl/pkg/explain/v2, plaintext.tmpl) renders a CRD's structural
    schema and the built-in definitions from /openapi/v3."""
    out = kubectl(kubesim, "explain", "pytorchjob.spec").stdout
    assert "KIND:       PyTorchJob" in out and "GROUP:      kubeflow.org" in out
    assert "pytorchReplicaSpecs\t<map[string]Object> -required-" in out
    out = kubectl(kubesim, "explain", "pytorchjob.spec.runPolicy.suspend").stdout
    assert "FIELD: suspend <boolean>" in out
    out = kubectl(kubesim, "explain", "pods.spec.containers").stdout
    assert "FIELD: containers <[]Container>" in out
    p = kubectl(kubesim, "explain", "pytorchjob.spec.nothing", check=False)
    assert p.returncode != 0 and 'field "nothing" does not exist' in p.stderr


@pytest.mark.kubesim(simulate=False)
def test_apply_validates_on_the_server(kubesim):
    """With fieldValidation listed in /openapi/v3, kubectl apply sends fieldValidation=Strict
    and reports the server's strict decoding error (cli-runtime query_param_verifier_v3.go)."""
    ns(kubesim)
    p = kubectl(kubesim, "apply", "-f", "-", check=False, input=(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: team-a}\n"
        "data: {a: '1'}\nbogus: 1\n"))
    assert p.returncode != 0
    assert 'strict decoding error: unknown field "bogus"' in p.stderr


@pytest.mark.kubesim(simulate=False)
def test_the_portal_deploy_manifests_apply(kubesim):
    """The portal's kustomize overlay (Deployments, a PodDisruptionBudget, a Job, an Ingress,
    RBAC) applies with server-side strict validation, and a second apply changes nothing
    kubesim defaulted (a PodDisruptionBudget is always "configured": its selector's patch
    strategy is "replace" in the OpenAPI schema, so client-side apply always sends it)."""
    from pathlib import Path
    overlay = Path(__file__).resolve().parents[2] / "deploy" / "k8s" / "overlays" / "example"
    if not overlay.is_dir():
        pytest.skip("no deploy/ overlay in this checkout")
    out = kubectl(kubesim, "apply", "-k", str(overlay)).stdout
    assert "deployment.apps/trainyard-web created" in out
    assert "poddisruptionbudget.policy/trainyard-web created" in out
    assert "job.batch/trainyard-migrate created" in out
    again = kubectl(kubesim, "apply", "-k", str(overlay)).stdout.splitlines()
    assert again and all(line.endswith(" unchanged") for line in again
                         if not line.startswith("poddisruptionbudget"))
    out = kubectl(kubesim, "get", "deploy", "trainyard-web", "-n", "trainyard").stdout
    assert out.split("\n")[0].split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
