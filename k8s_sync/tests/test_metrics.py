"""k8s_sync.metrics: label variants, the Prometheus API, errors, and kubesim's endpoint."""
# ruff: noqa: E501 - exposition text kept verbatim, one sample a line

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from k8s_sync.client import ClusterConfig, get_client, is_transient
from k8s_sync.metrics import (
    GpuSample,
    MetricsSource,
    MetricsUnavailable,
    cluster_base_url,
    egress_class,
    gpu_samples,
    pod_network_bytes,
)
from k8s_sync.tests.observe_helpers import namespace, pod

RELEASE_TEXT = """\
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H800",Hostname="n1",container="pytorch",namespace="ty-acme-prod",pod="j-master-0"} 87
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA H800",Hostname="n1",container="",namespace="",pod=""} 0
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H800",Hostname="n1",container="pytorch",namespace="ty-acme-prod",pod="j-master-0"} 40960
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA H800",Hostname="n1",container="",namespace="",pod=""} 0
DCGM_FI_DEV_FB_USED{gpu="2",UUID="GPU-m",GPU_I_PROFILE="1g.10gb",GPU_I_ID="3",modelName="NVIDIA A100",Hostname="n2",container="c",namespace="ty-acme-dev",pod="mig-pod"} 5000
# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H800",Hostname="n1",container="pytorch",namespace="ty-acme-prod",pod="j-master-0"} 40599
DCGM_FI_DEV_FB_FREE{gpu="2",UUID="GPU-m",GPU_I_PROFILE="1g.10gb",GPU_I_ID="3",modelName="NVIDIA A100",Hostname="n2",container="c",namespace="ty-acme-dev",pod="mig-pod"} 4800
# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.
# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge
DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="2",UUID="GPU-m",GPU_I_PROFILE="1g.10gb",GPU_I_ID="3",modelName="NVIDIA A100",Hostname="n2",container="c",namespace="ty-acme-dev",pod="mig-pod"} 0.45
# HELP container_network_transmit_bytes_total Cumulative count of bytes transmitted
# TYPE container_network_transmit_bytes_total counter
container_network_transmit_bytes_total{interface="eth0",namespace="ty-acme-prod",pod="j-master-0"} 1000
container_network_transmit_bytes_total{interface="eth1",namespace="ty-acme-prod",pod="j-master-0"} 24
container_network_transmit_bytes_total{interface="lo",namespace="ty-acme-prod",pod="j-master-0"} 99999
# HELP container_network_receive_bytes_total Cumulative count of bytes received
# TYPE container_network_receive_bytes_total counter
container_network_receive_bytes_total{interface="eth0",namespace="ty-acme-prod",pod="j-master-0"} 500
"""

# main after the hostname rename, scraped by Prometheus with honorLabels: false.
MAIN_TEXT = """\
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",uuid="GPU-z",model_name="NVIDIA L40S",hostname="n9",exported_container="pytorch",exported_namespace="ty-globex-prod",exported_pod="w-0",namespace="gpu-operator",pod="dcgm-exporter-xyz"} 55
DCGM_FI_DEV_GPU_UTIL{gpu="1",uuid="GPU-y",model_name="NVIDIA L40S",hostname="n9",exported_container="",exported_namespace="",exported_pod="",namespace="gpu-operator",pod="dcgm-exporter-xyz"} 0
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",uuid="GPU-z",model_name="NVIDIA L40S",hostname="n9",exported_container="pytorch",exported_namespace="ty-globex-prod",exported_pod="w-0",namespace="gpu-operator",pod="dcgm-exporter-xyz"} 1024
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{gpu="0",uuid="GPU-z",model_name="NVIDIA L40S",hostname="n9",exported_container="pytorch",exported_namespace="ty-globex-prod",exported_pod="w-0",namespace="gpu-operator",pod="dcgm-exporter-xyz"} 2048
"""

OLD_NAMESPACE_TEXT = """\
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="3",UUID="GPU-q",modelName="NVIDIA A100",Hostname="n3",container_name="main",pod_namespace="ty-acme-prod",pod_name="old-0"} 12
"""


class _Handler(BaseHTTPRequestHandler):
    routes: dict[str, tuple[int, str, str]] = {}
    seen: list[str] = []

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        self.seen.append(self.path)
        if parts.path == "/api/v1/query":
            query = parse_qs(parts.query)["query"][0]
            status, ctype, body = self.routes.get(("query", query)) or self.routes.get(
                ("query", "*"), (200, "application/json",
                                 json.dumps({"status": "success",
                                             "data": {"resultType": "vector", "result": []}})))
        else:
            status, ctype, body = self.routes.get(parts.path, (404, "text/plain", "nope"))
        if status == 0:  # hang (timeout test)
            threading.Event().wait(3)
            status = 200
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http() -> Iterator[tuple[str, type[_Handler]]]:
    handler = type("H", (_Handler,), {"routes": {}, "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


def _scrape(http, text: str) -> MetricsSource:
    base, handler = http
    handler.routes["/metrics"] = (200, "text/plain; version=0.0.4", text)
    return MetricsSource(scrape_urls=[f"{base}/metrics"], timeout=2)


def test_release_labels_whole_card_mig_and_idle(http):
    samples = {(s.node, s.gpu): s for s in _scrape(http, RELEASE_TEXT).gpu_samples()}
    busy = samples[("n1", "0")]
    assert busy == GpuSample(namespace="ty-acme-prod", pod="j-master-0", node="n1", gpu="0",
                             uuid="GPU-a", model="NVIDIA H800", util_pct=87.0,
                             fb_used_mib=40960.0, fb_free_mib=40599.0, mig_profile="",
                             container="pytorch", gpu_instance="")
    assert samples[("n1", "1")].idle and samples[("n1", "1")].namespace == ""
    mig = samples[("n2", "2")]
    # GPU_UTIL is not supported on MIG: utilisation is 100 * GR_ENGINE_ACTIVE
    assert mig.mig_profile == "1g.10gb" and mig.gpu_instance == "3"
    assert mig.util_pct == pytest.approx(45.0) and mig.fb_used_mib == 5000


def test_main_labels_and_exported_labels_win(http):
    samples = _scrape(http, MAIN_TEXT).gpu_samples()
    busy = next(s for s in samples if s.uuid == "GPU-z")
    assert (busy.namespace, busy.pod, busy.container) == ("ty-globex-prod", "w-0", "pytorch")
    assert busy.node == "n9" and busy.model == "NVIDIA L40S" and busy.util_pct == 55
    assert busy.fb_used_mib == 1024 and busy.fb_free_mib == 2048
    idle = next(s for s in samples if s.uuid == "GPU-y")
    assert idle.idle and idle.namespace == ""  # not the exporter's own namespace


def test_old_namespace_labels(http):
    (s,) = _scrape(http, OLD_NAMESPACE_TEXT).gpu_samples()
    assert (s.namespace, s.pod, s.container, s.node) == ("ty-acme-prod", "old-0", "main", "n3")


def test_network_counters_sum_interfaces_but_not_loopback(http):
    source = _scrape(http, RELEASE_TEXT)
    assert source.pod_network_bytes() == {("ty-acme-prod", "j-master-0"): (1024, 500)}
    snap = source.snapshot()
    assert len(snap.gpus) == 3 and snap.network == source.pod_network_bytes()


NETWORK_COSTS_TEXT = """\
# TYPE kubecost_pod_network_egress_bytes_total counter
kubecost_pod_network_egress_bytes_total{namespace="ty-acme-prod",pod_name="j-0",internet="true",sameRegion="false",sameZone="false"} 10
kubecost_pod_network_egress_bytes_total{namespace="ty-acme-prod",pod_name="j-0",internet="true",sameRegion="false",sameZone="false",service="s3"} 5
kubecost_pod_network_egress_bytes_total{namespace="ty-acme-prod",pod_name="j-0",internet="false",sameRegion="true",sameZone="true"} 1000
kubecost_pod_network_egress_bytes_total{namespace="ty-acme-prod",pod_name="j-0",internet="false",sameRegion="true",sameZone="false"} 7
kubecost_pod_network_egress_bytes_total{exported_namespace="ty-acme-dev",pod_name="k",namespace="kubecost",pod="network-costs-x",internet="false",same_region="false",same_zone="false"} 3
kubecost_pod_network_egress_bytes_total{namespace="ty-acme-dev",pod_name="",internet="true"} 99
# TYPE container_network_transmit_bytes_total counter
container_network_transmit_bytes_total{namespace="ty-acme-prod",pod="j-0",interface="eth0"} 1022
"""


def test_egress_by_destination_from_network_costs_or_cadvisor(http, settings):
    """OpenCost's network-costs labels in both spellings, series of one pod and class
    summed; the cAdvisor family is every byte sent, unclassified."""
    assert egress_class({"internet": "true", "sameZone": "true"}) == "internet"
    assert egress_class({"internet": "false", "same_region": "false"}) == "cross_region"
    assert egress_class({"internet": "false", "sameRegion": "true",
                         "sameZone": "false"}) == "cross_zone"
    assert egress_class({"internet": "false", "sameRegion": "true",
                         "sameZone": "true"}) == "in_cluster"
    assert egress_class({"namespace": "x"}) == "unclassified"
    source = _scrape(http, NETWORK_COSTS_TEXT)
    settings.TRAINYARD_EGRESS_METRICS = "network-costs"
    assert source.pod_egress_bytes() == {
        ("ty-acme-prod", "j-0", "internet"): 15, ("ty-acme-prod", "j-0", "in_cluster"): 1000,
        ("ty-acme-prod", "j-0", "cross_zone"): 7, ("ty-acme-dev", "k", "cross_region"): 3}
    settings.TRAINYARD_EGRESS_METRICS = "cadvisor"
    assert source.pod_egress_bytes() == {("ty-acme-prod", "j-0", "unclassified"): 1022}
    with pytest.raises(MetricsUnavailable, match="unknown egress metric family") as exc:
        source.pod_egress_bytes("hubble")
    assert not is_transient(exc.value)


def test_prometheus_instant_queries(http):
    base, handler = http
    vector = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0", "UUID": "GPU-a",
                    "modelName": "NVIDIA H800", "Hostname": "n1",
                    "exported_namespace": "ty-acme-prod", "exported_pod": "p-0",
                    "namespace": "gpu-operator", "pod": "dcgm-x"}, "value": [1.7e9, "66"]},
        {"metric": {"__name__": "DCGM_FI_DEV_FB_USED", "gpu": "0", "UUID": "GPU-a",
                    "modelName": "NVIDIA H800", "Hostname": "n1",
                    "exported_namespace": "ty-acme-prod", "exported_pod": "p-0",
                    "namespace": "gpu-operator", "pod": "dcgm-x"}, "value": [1.7e9, "NaN"]},
    ]}}
    handler.routes[("query", "*")] = (200, "application/json", json.dumps(vector))
    source = MetricsSource(prometheus_url=base + "/", timeout=2)
    assert source.kind == "prometheus"
    (s,) = source.gpu_samples()
    assert (s.namespace, s.pod, s.util_pct, s.fb_used_mib) == ("ty-acme-prod", "p-0", 66, 0)
    assert any("/api/v1/query?query=" in p for p in handler.seen)
    net = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"namespace": "ty-acme-prod", "pod": "p-0"}, "value": [1.7e9, "42"]}]}}
    handler.routes[("query", "*")] = (200, "application/json", json.dumps(net))
    assert source.pod_network_bytes() == {("ty-acme-prod", "p-0"): (42, 42)}
    costs = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"exported_namespace": "ty-acme-prod", "pod_name": "p-0", "pod": "nc-1",
                    "internet": "true", "sameRegion": "false", "sameZone": "false"},
         "value": [1.7e9, "8"]}]}}
    handler.routes[("query", "*")] = (200, "application/json", json.dumps(costs))
    assert source.pod_egress_bytes("network-costs") == {("ty-acme-prod", "p-0", "internet"): 8}
    assert any("kubecost_pod_network_egress_bytes_total" in p for p in handler.seen)


def test_errors_are_metrics_unavailable(http):
    base, handler = http
    handler.routes[("query", "*")] = (400, "application/json", json.dumps(
        {"status": "error", "errorType": "bad_data", "error": "parse error"}))
    with pytest.raises(MetricsUnavailable) as exc:
        MetricsSource(prometheus_url=base, timeout=2).gpu_samples()
    assert exc.value.status == 400 and not is_transient(exc.value)
    handler.routes[("query", "*")] = (503, "application/json", "{}")
    with pytest.raises(MetricsUnavailable) as exc:
        MetricsSource(prometheus_url=base, timeout=2).gpu_samples()
    assert is_transient(exc.value)
    handler.routes["/metrics"] = (0, "text/plain", "")
    with pytest.raises(MetricsUnavailable) as exc:
        MetricsSource(scrape_urls=[base + "/metrics"], timeout=0.3).gpu_samples()
    assert is_transient(exc.value)
    with pytest.raises(MetricsUnavailable) as exc:
        MetricsSource(scrape_urls=["http://127.0.0.1:9/metrics"], timeout=0.5).gpu_samples()
    assert is_transient(exc.value)
    handler.routes["/metrics"] = (200, "text/plain", "not { prometheus text\n")
    with pytest.raises(MetricsUnavailable):
        MetricsSource(scrape_urls=[base + "/metrics"], timeout=2).gpu_samples()
    with pytest.raises(MetricsUnavailable) as exc:
        MetricsSource()
    assert not exc.value.transient


def test_cluster_base_url_from_url_and_kubeconfig(tmp_path, settings):
    assert cluster_base_url(ClusterConfig(mode="url", url="http://sim:6443/")) == "http://sim:6443"
    kc = tmp_path / "kubeconfig"
    kc.write_text("apiVersion: v1\nkind: Config\ncurrent-context: b\n"
                  "clusters:\n- name: ca\n  cluster: {server: 'https://a:6443'}\n"
                  "- name: cb\n  cluster: {server: 'http://b:1234/'}\n"
                  "contexts:\n- name: a\n  context: {cluster: ca}\n"
                  "- name: b\n  context: {cluster: cb}\n")
    assert cluster_base_url(ClusterConfig(mode="kubeconfig", kubeconfig=str(kc))) == "http://b:1234"
    assert cluster_base_url(ClusterConfig(mode="kubeconfig", kubeconfig=str(kc),
                                          context="a")) == "https://a:6443"
    assert cluster_base_url(ClusterConfig(mode="in-cluster")) is None
    with pytest.raises(MetricsUnavailable):
        cluster_base_url(ClusterConfig(mode="kubeconfig", kubeconfig=str(tmp_path / "nope")))
    settings.TRAINYARD_CLUSTER = {"mode": "kubeconfig", "kubeconfig": str(kc)}
    settings.PROMETHEUS_URL = ""
    settings.TRAINYARD_DCGM_URLS = []
    assert MetricsSource.from_settings().scrape_urls == ("http://b:1234/metrics",)
    settings.PROMETHEUS_URL = "http://prom:9090"
    assert MetricsSource.from_settings().kind == "prometheus"
    settings.PROMETHEUS_URL = ""
    settings.TRAINYARD_CLUSTER = {"mode": "in-cluster"}
    with pytest.raises(MetricsUnavailable):
        MetricsSource.from_settings()


@pytest.mark.django_db
def test_kubesim_metrics_for_a_running_gpu_pod(cluster, settings):
    settings.PROMETHEUS_URL = ""
    settings.TRAINYARD_DCGM_URLS = []
    client = get_client()
    ns = namespace(client, "ty-acme-prod")
    body = pod("train-0", gpus=2, namespace=ns,
               node_selector={"nvidia.com/gpu.product": "NVIDIA-H800"})
    body["metadata"]["annotations"] = {"kubesim.trainyard.io/gpu-util": "70",
                                       "kubesim.trainyard.io/gpu-mem-gib": "20",
                                       "kubesim.trainyard.io/egress-bytes-per-second": "100"}
    client.apply(body)
    cluster.advance(30)
    mine = [s for s in gpu_samples() if s.pod == "train-0"]
    assert len(mine) == 2 and all(s.namespace == ns for s in mine)
    assert all(60 <= s.util_pct <= 80 and s.fb_used_mib == 20480 for s in mine)
    assert {s.model for s in mine} == {"NVIDIA H800"}
    tx, rx = pod_network_bytes()[(ns, "train-0")]
    assert tx > 0 and rx > 0
