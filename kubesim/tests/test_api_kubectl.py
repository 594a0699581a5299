"""kubectl (Debian's, or whatever `kubectl` is on PATH) against kubesim.

KUBESIM_KUBECTL may name another binary (e.g. a Debian kubectl unpacked elsewhere)."""
from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time

import pytest

from .helpers import core, custom

KUBECTL = os.environ.get("KUBESIM_KUBECTL") or shutil.which("kubectl")
pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(60),
              pytest.mark.skipif(KUBECTL is None, reason="no kubectl (scripts/ensure-kubectl.sh)")]

MANIFEST = """\
apiVersion: v1
kind: Namespace
metadata:
  name: team-k
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: team-k}
data: {a: "1"}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: gpu, namespace: team-k}
spec:
  hard:
    requests.nvidia.com/gpu: 4
    pods: "10"
---
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: train, namespace: team-k, labels: {app: a}}
spec:
  runPolicy: {suspend: true}
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers: [{name: pytorch, image: "trainer:1"}]
"""


def kubectl(k, *args, input=None, check=True, timeout=30):
    env = {**os.environ, "KUBECONFIG": str(k.kubeconfig), "HOME": str(k.kubeconfig.parent)}
    p = subprocess.run([KUBECTL, "--request-timeout=10s", *args], input=input, env=env,
                       capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {p.stdout}\n{p.stderr}")
    return p


def test_get_apply_delete(kubesim):
    out = kubectl(kubesim, "apply", "--validate=false", "-f", "-", input=MANIFEST).stdout
    assert "namespace/team-k created" in out
    assert "pytorchjob.kubeflow.org/train created" in out
    c = core(kubesim)
    assert c.read_namespaced_resource_quota("gpu", "team-k").spec.hard["requests.nvidia.com/gpu"] \
        == "4"
    out = kubectl(kubesim, "get", "ns").stdout
    assert "team-k" in out and "default" in out
    out = kubectl(kubesim, "get", "resourcequota", "-A").stdout
    assert "gpu" in out and "team-k" in out
    out = kubectl(kubesim, "get", "pytorchjobs", "-A", "-l", "app=a").stdout
    assert "train" in out
    out = kubectl(kubesim, "get", "quota", "gpu", "-n", "team-k", "-o",
                  "jsonpath={.status.used.pods}").stdout
    assert out == "0"
    changed = MANIFEST.replace('{a: "1"}', '{a: "2"}').replace("pods: \"10\"", "pods: \"12\"")
    out = kubectl(kubesim, "apply", "--validate=false", "-f", "-", input=changed).stdout
    assert "configmap/settings configured" in out
    assert "resourcequota/gpu configured" in out
    assert "pytorchjob.kubeflow.org/train unchanged" in out
    assert c.read_namespaced_config_map("settings", "team-k").data == {"a": "2"}
    assert c.read_namespaced_resource_quota("gpu", "team-k").spec.hard["pods"] == "12"
    c.create_namespaced_pod("team-k", {"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "busybox:1"}]}})
    assert "pod \"p\" deleted" in kubectl(kubesim, "delete", "pod", "p", "-n", "team-k").stdout
    kubectl(kubesim, "delete", "quota", "gpu", "-n", "team-k")
    assert c.list_namespaced_resource_quota("team-k").items == []
    kubectl(kubesim, "delete", "pytorchjob", "train", "-n", "team-k")
    assert custom(kubesim).list_namespaced_custom_object(
        "kubeflow.org", "v1", "team-k", "pytorchjobs")["items"] == []
    kubectl(kubesim, "delete", "namespace", "team-k", "--wait=false")
    p = kubectl(kubesim, "get", "ns", "team-k", check=False)
    assert p.returncode != 0 or "Terminating" in p.stdout


def test_apply_server_side(kubesim):
    out = kubectl(kubesim, "apply", "--server-side", "--validate=false", "-f", "-",
                  input=MANIFEST).stdout
    assert "serverside-applied" in out
    q = core(kubesim).read_namespaced_resource_quota("gpu", "team-k")
    assert any(m.manager == "kubectl" and m.operation == "Apply"
               for m in q.metadata.managed_fields)
    out = kubectl(kubesim, "apply", "--server-side", "--validate=false", "-f", "-",
                  input=MANIFEST.replace("requests.nvidia.com/gpu: 4",
                                         "requests.nvidia.com/gpu: 6")).stdout
    assert "resourcequota/gpu serverside-applied" in out
    assert core(kubesim).read_namespaced_resource_quota("gpu", "team-k").spec.hard[
        "requests.nvidia.com/gpu"] == "6"
    # another manager owning the field makes kubectl report the conflict
    core(kubesim).patch_namespaced_resource_quota(
        "gpu", "team-k", {"apiVersion": "v1", "kind": "ResourceQuota",
                          "metadata": {"name": "gpu"}, "spec": {"hard": {"pods": "3"}}},
        field_manager="portal", force=True, _content_type="application/apply-patch+yaml")
    p = kubectl(kubesim, "apply", "--server-side", "--validate=false", "-f", "-",
                input=MANIFEST, check=False)
    assert p.returncode != 0 and "conflict" in p.stderr.lower()


def _watch_until(k, args, trigger, expect: str, timeout: float = 20.0) -> str:
    """Run `kubectl get -w ...`, call trigger() once it runs, return its output up to the
    first line containing `expect`."""
    env = {**os.environ, "KUBECONFIG": str(k.kubeconfig), "HOME": str(k.kubeconfig.parent)}
    proc = subprocess.Popen([KUBECTL, "get", "-w", "--request-timeout=15s", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    found = threading.Event()

    def reader():
        for line in proc.stdout:
            lines.append(line)
            if expect in line:
                found.set()
    th = threading.Thread(target=reader, daemon=True)
    th.start()
    try:
        time.sleep(0.7)
        trigger()
        found.wait(timeout)
    finally:
        proc.kill()
        proc.wait()
    return "".join(lines)


@pytest.mark.parametrize("what", ["pods", "namespaces", "resourcequotas", "pytorchjobs",
                                  "pods-table"])
def test_get_watch(kubesim, what):
    c = core(kubesim)
    c.create_namespace({"metadata": {"name": "team-w"}})
    pod = {"metadata": {"name": "watched"},
           "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}
    created = {
        "pods-table": lambda: c.create_namespaced_pod("team-w", pod),
        "pods": lambda: c.create_namespaced_pod("team-w", {
            "metadata": {"name": "watched"},
            "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}),
        "namespaces": lambda: c.create_namespace({"metadata": {"name": "watched"}}),
        "resourcequotas": lambda: c.create_namespaced_resource_quota("team-w", {
            "metadata": {"name": "watched"}, "spec": {"hard": {"pods": "1"}}}),
        "pytorchjobs": lambda: kubectl(kubesim, "apply", "--validate=false", "-f", "-",
                                       input=MANIFEST.replace("team-k", "team-w")
                                       .replace("name: train", "name: watched")),
    }[what]
    if what == "pods-table":   # server-side printing: a Table per watch event
        out = _watch_until(kubesim, ["pods", "-n", "team-w"], created, "watched")
        assert out.splitlines()[0].split()[:3] == ["NAME", "READY", "STATUS"], out
        assert out.splitlines()[1].split()[:3] == ["watched", "0/1", "Pending"], out
        return
    args = [what, "-o", "name"] + ([] if what == "namespaces" else ["-n", "team-w"])
    out = _watch_until(kubesim, args, created, "watched")
    assert "/watched" in out, out


def test_create_namespace_and_delete(kubesim):
    kubectl(kubesim, "create", "namespace", "made-by-kubectl")
    assert core(kubesim).read_namespace("made-by-kubectl").status.phase == "Active"
    kubectl(kubesim, "delete", "namespace", "made-by-kubectl")
    p = kubectl(kubesim, "get", "ns", "made-by-kubectl", check=False)
    assert p.returncode != 0 and "NotFound" in p.stderr


def test_server_side_printing(kubesim):
    c = core(kubesim)
    c.create_namespace({"metadata": {"name": "team-t"}})
    c.create_namespaced_pod("team-t", {"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "busybox:1"}]}})
    kubesim.advance(120)
    out = kubectl(kubesim, "get", "pods", "-n", "team-t", "-o", "wide").stdout
    header, row = out.splitlines()[:2]
    assert header.split()[:5] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert row.split()[:3] == ["p", "1/1", "Running"]
    assert row.split()[4] in ("2m", "2m1s", "2m2s")      # age from the simulated clock
    assert "No resources found" in kubectl(kubesim, "get", "pytorchjobs", "-A").stderr
    kubectl(kubesim, "apply", "--validate=false", "-f", "-",
            input=MANIFEST.replace("team-k", "team-t").split("---", 1)[1])
    out = kubectl(kubesim, "get", "pytorchjobs", "-n", "team-t").stdout
    assert out.splitlines()[0].split() == ["NAME", "STATE", "AGE"]
    out = kubectl(kubesim, "get", "quota", "-A").stdout
    assert "requests.nvidia.com/gpu: 0/4" in out
    out = kubectl(kubesim, "get", "events", "-n", "team-t").stdout
    assert out.splitlines()[0].split()[:3] == ["LAST", "SEEN", "TYPE"] and "pod/p" in out


def test_apply_without_validate_flag(kubesim):
    """An empty /openapi/v2 lets kubectl's client-side validation pass (it skips kinds the
    document does not describe), as with a CRD-only schema."""
    out = kubectl(kubesim, "apply", "-f", "-", input=MANIFEST).stdout
    assert "resourcequota/gpu created" in out and "pytorchjob.kubeflow.org/train created" in out
    out = kubectl(kubesim, "apply", "--server-side", "-f", "-", input=MANIFEST).stdout
    assert "configmap/settings serverside-applied" in out
