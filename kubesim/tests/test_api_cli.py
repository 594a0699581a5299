"""`python -m kubesim` and state persistence across restarts."""
from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time

import kubernetes
import pytest
import yaml

from kubesim.testing import make_api_client

pytestmark = pytest.mark.timeout(60)


def _start(tmp_path, *extra):
    kc = tmp_path / "kubeconfig"
    kc.unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "kubesim", "--port", "0", "--kubeconfig",
                             str(kc), "--state", str(tmp_path / "state.json"), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not kc.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(proc.communicate()[1])
        time.sleep(0.05)
    url = yaml.safe_load(kc.read_text())["clusters"][0]["cluster"]["server"]
    return proc, url


def _stop(proc):
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    return err


@pytest.mark.slow
def test_cli_serves_writes_kubeconfig_and_keeps_state(tmp_path):
    proc, url = _start(tmp_path, "--no-sim")
    try:
        assert url.startswith("http://127.0.0.1:")
        core = kubernetes.client.CoreV1Api(make_api_client(url))
        core.create_namespace({"metadata": {"name": "kept"}})
        cm = core.create_namespaced_config_map("kept", {"metadata": {"name": "c"},
                                                        "data": {"x": "1"}})
    finally:
        err = _stop(proc)
    assert "state saved" in err
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["resourceVersion"] >= int(cm.metadata.resource_version)
    proc, url = _start(tmp_path, "--no-sim")
    try:
        core = kubernetes.client.CoreV1Api(make_api_client(url))
        again = core.read_namespaced_config_map("c", "kept")
        assert again.data == {"x": "1"} and again.metadata.uid == cm.metadata.uid
        newer = core.create_namespaced_config_map("kept", {"metadata": {"name": "d"}})
        assert int(newer.metadata.resource_version) > int(cm.metadata.resource_version)
        assert kubernetes.client.CustomObjectsApi(core.api_client).list_cluster_custom_object(
            "kubeflow.org", "v1", "pytorchjobs")["items"] == []
    finally:
        _stop(proc)


def test_cli_with_simulation_serves_metrics(tmp_path):
    proc, url = _start(tmp_path, "--profile", "small", "--speed", "10")
    try:
        api = make_api_client(url)
        nodes = kubernetes.client.CoreV1Api(api).list_node().items
        assert nodes and all(n.status.capacity for n in nodes)
        resp = api.rest_client.pool_manager.request("GET", url + "/metrics", timeout=10)
        assert resp.status == 200 and b"DCGM_FI_DEV_GPU_UTIL" in resp.data
        assert resp.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    finally:
        _stop(proc)


def test_cli_rejects_a_busy_port(tmp_path):
    with socket.socket() as busy:   # a listener on the port: what another server would be
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        p = subprocess.run([sys.executable, "-m", "kubesim", "--no-sim", "--port", port,
                            "--kubeconfig", str(tmp_path / "kc2")], capture_output=True,
                           text=True, timeout=30)
    assert p.returncode == 1 and "cannot start" in p.stderr


def test_metrics_404_without_simulation(kubesim_factory):
    k = kubesim_factory(simulate=False)
    resp = k.api_client.rest_client.pool_manager.request("GET", k.url + "/metrics", timeout=10)
    assert resp.status == 404


def test_cluster_state_round_trip_with_simulation(kubesim_factory, tmp_path):
    state = tmp_path / "state.json"
    k = kubesim_factory(state_file=state)
    c = kubernetes.client.CoreV1Api(k.api_client)
    c.create_namespace({"metadata": {"name": "keep"}})
    c.create_namespaced_pod("keep", {"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "busybox:1"}]}})
    k.advance(10)
    nodes = sorted(n.metadata.name for n in c.list_node().items)
    k.cluster.stop()
    assert state.exists()
    k2 = kubesim_factory(state_file=state)
    c2 = kubernetes.client.CoreV1Api(k2.api_client)
    p = c2.read_namespaced_pod("p", "keep")
    assert p.status.phase == "Running" and p.spec.node_name
    assert sorted(n.metadata.name for n in c2.list_node().items) == nodes
    fresh = c2.create_namespaced_config_map("keep", {"metadata": {"name": "x"}})
    assert int(fresh.metadata.resource_version) > int(p.metadata.resource_version)
    assert fresh.metadata.uid not in {p.metadata.uid}
