"""DCGM-exporter / cAdvisor style metrics text."""

from __future__ import annotations

import re

import pytest

from kubesim.sim.harness import SimHarness, make_pod

NS = "team-a"
_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')


def parse(text: str):
    """A small Prometheus text-format parser: returns (types, samples)."""
    types, helps, samples = {}, {}, []
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ", 3)
            types[name] = typ
            continue
        if line.startswith("# HELP "):
            helps[line.split(" ", 3)[2]] = True
            continue
        assert not line.startswith("#"), line
        m = _LINE.match(line)
        assert m, f"unparsable line: {line!r}"
        name, _, body, value = m.groups()
        labels = {}
        if body:
            pos = 0
            while pos < len(body):
                lm = _LABEL.match(body, pos)
                assert lm, f"bad labels in {line!r}"
                labels[lm.group(1)] = lm.group(2)
                pos = lm.end()
        assert name in types and name in helps, f"{name} has no # TYPE/# HELP"
        samples.append((name, labels, float(value)))
    return types, samples


@pytest.fixture
def h():
    h = SimHarness("small", seed=11)
    h.namespace(NS)
    return h


def test_idle_cluster_metrics(h):
    types, samples = parse(h.sim.metrics_text())
    assert types["DCGM_FI_DEV_GPU_UTIL"] == "gauge"
    assert types["container_network_transmit_bytes_total"] == "counter"
    util = [s for s in samples if s[0] == "DCGM_FI_DEV_GPU_UTIL"]
    # 2x8 A100 + 8 H800 + 4 whole GPUs on the MIG node + 4 shared L40S;
    # MIG instances report no GPU_UTIL
    assert len(util) == 16 + 8 + 4 + 4
    for _, lab, v in util:
        assert v == 0 and lab["pod"] == "" and lab["namespace"] == "" and lab["container"] == ""
        assert set(lab) >= {
            "gpu",
            "UUID",
            "device",
            "modelName",
            "Hostname",
            "pod",
            "namespace",
            "container",
        }
        assert lab["UUID"].startswith("GPU-")
    free = {
        (lab["Hostname"], lab["gpu"]): v
        for n, lab, v in samples
        if n == "DCGM_FI_DEV_FB_FREE" and "GPU_I_ID" not in lab
    }
    assert free[("h800-0", "0")] == 81559
    models = {lab["modelName"] for n, lab, _ in util}
    assert models == {"NVIDIA A100-SXM4-80GB", "NVIDIA H800", "NVIDIA L40S"}


def test_running_pod_metrics_and_labels(h):
    h.store.create(
        "pods",
        make_pod(
            "train",
            gpus=2,
            node_selector={"nvidia.com/gpu.product": "NVIDIA-H800"},
            annotations={
                "gpu-util": 80,
                "gpu-mem-gib": 40,
                "run-seconds": 1000,
                "egress-bytes-per-second": 1000,
            },
        ),
        namespace=NS,
    )
    h.advance(5)
    _, samples = parse(h.sim.metrics_text())
    mine = [(n, lab, v) for n, lab, v in samples if lab.get("pod") == "train"]
    util = [v for n, lab, v in mine if n == "DCGM_FI_DEV_GPU_UTIL"]
    assert len(util) == 2 and all(75 <= v <= 85 for v in util)
    power = [v for n, lab, v in mine if n == "DCGM_FI_DEV_POWER_USAGE"]
    assert len(power) == 2 and all(500 < v < 700 for v in power)  # H800: 700 W at full load
    idle_power = [
        v
        for n, lab, v in samples
        if n == "DCGM_FI_DEV_POWER_USAGE" and lab["Hostname"] == "h800-0" and lab["pod"] == ""
    ]
    assert idle_power and all(v < min(power) for v in idle_power)
    used = [v for n, lab, v in mine if n == "DCGM_FI_DEV_FB_USED"]
    assert used == [40960, 40960]
    gpus = {lab["gpu"] for n, lab, v in mine if n == "DCGM_FI_DEV_GPU_UTIL"}
    uuids = {lab["UUID"] for n, lab, v in mine if n == "DCGM_FI_DEV_GPU_UTIL"}
    assumed = {str(d["gpu"]) for d in h.sim.gpu_assignment(NS, "train")}
    assert gpus == assumed and {d["uuid"] for d in h.sim.gpu_assignment(NS, "train")} == uuids
    for n, lab, _v in mine:
        if n.startswith("DCGM"):
            assert (
                lab["namespace"] == NS
                and lab["container"] == "main"
                and lab["Hostname"] == "h800-0"
            )
    tx1 = next(v for n, lab, v in mine if n == "container_network_transmit_bytes_total")
    h.advance(10)
    _, samples = parse(h.sim.metrics_text())
    tx2 = next(
        v
        for n, lab, v in samples
        if n == "container_network_transmit_bytes_total" and lab["pod"] == "train"
    )
    assert tx2 - tx1 == pytest.approx(10 * 1000, abs=1)
    rx = next(
        v
        for n, lab, v in samples
        if n == "container_network_receive_bytes_total" and lab["pod"] == "train"
    )
    assert 0 < rx <= tx2


def test_mig_instances_report_engine_activity(h):
    h.store.create(
        "pods",
        make_pod(
            "mig",
            resources={"nvidia.com/mig-1g.10gb": "1"},
            annotations={"gpu-util": 50, "run-seconds": 1000},
        ),
        namespace=NS,
    )
    h.advance(5)
    _, samples = parse(h.sim.metrics_text())
    mig = [(n, lab, v) for n, lab, v in samples if "GPU_I_PROFILE" in lab]
    assert mig and not any(n == "DCGM_FI_DEV_GPU_UTIL" for n, _, _ in mig)
    profiles = {lab["GPU_I_PROFILE"] for _, lab, _ in mig}
    assert profiles == {"3g.40gb", "1g.10gb"}
    active = [
        (lab, v)
        for n, lab, v in mig
        if n == "DCGM_FI_PROF_GR_ENGINE_ACTIVE" and lab["pod"] == "mig"
    ]
    assert len(active) == 1
    lab, v = active[0]
    assert lab["GPU_I_PROFILE"] == "1g.10gb" and lab["GPU_I_ID"].isdigit() and 0.45 <= v <= 0.55
    assert lab["UUID"].startswith("GPU-") and int(lab["gpu"]) >= 4
    free = next(v for n, lb, v in mig if n == "DCGM_FI_DEV_FB_FREE" and lb["pod"] == "mig")
    used = next(v for n, lb, v in mig if n == "DCGM_FI_DEV_FB_USED" and lb["pod"] == "mig")
    assert used + free == 9856


def test_shared_gpu_lists_each_pod(h):
    for i in range(5):
        h.store.create(
            "pods",
            make_pod(
                f"s{i}",
                resources={"nvidia.com/gpu.shared": "1"},
                annotations={"gpu-util": 20, "run-seconds": 1000},
            ),
            namespace=NS,
        )
    h.advance(5)
    _, samples = parse(h.sim.metrics_text())
    util = [
        (lab, v)
        for n, lab, v in samples
        if n == "DCGM_FI_DEV_GPU_UTIL" and lab["Hostname"] == "shared-0"
    ]
    pods = {lab["pod"] for lab, _ in util}
    assert pods == {f"s{i}" for i in range(5)}
    by_gpu: dict = {}
    for lab, _v in util:
        by_gpu.setdefault(lab["gpu"], set()).add(lab["pod"])
    assert max(len(p) for p in by_gpu.values()) == 2  # 5 shares spread over 4 GPUs


def test_metrics_stop_after_pod_finishes(h):
    h.store.create("pods", make_pod("short", gpus=1, annotations={"run-seconds": 10}), namespace=NS)
    h.advance(5)
    assert 'pod="short"' in h.sim.metrics_text()
    h.advance(10)
    assert 'pod="short"' not in h.sim.metrics_text()


def test_hostname_label_variant():
    from kubesim.sim.profile import load_profile

    prof = load_profile("small")
    prof["simulation"]["metrics_hostname_label"] = "hostname"
    h = SimHarness(prof)
    _, samples = parse(h.sim.metrics_text())
    dcgm = [lab for n, lab, _ in samples if n.startswith("DCGM")]
    assert dcgm and all("hostname" in lab and "Hostname" not in lab for lab in dcgm)


def test_network_costs_egress_by_destination(h):
    """A job's pod-to-pod traffic is told apart from its internet traffic: within the zone
    (sameZone) or to another zone, as OpenCost's network-costs daemonset labels it; the
    cAdvisor counter is every byte sent."""
    job = {"training.kubeflow.org/job-name": "j"}
    for name, node in [("j-0", "a100-0"), ("j-1", "a100-1"), ("j-2", "h800-0")]:
        h.store.create("pods", make_pod(
            name, labels=job, node_selector={"kubernetes.io/hostname": node},
            annotations={"run-seconds": 1000, "egress-bytes-per-second": 1000,
                         "peer-bytes-per-second": 4000}), namespace=NS)
    h.store.create("pods", make_pod("alone", annotations={
        "run-seconds": 1000, "egress-bytes-per-second": 10}), namespace=NS)
    h.advance(5)
    _, before = parse(h.sim.metrics_text())
    h.advance(100)
    types, after = parse(h.sim.metrics_text())
    assert types["kubecost_pod_network_egress_bytes_total"] == "counter"

    def counters(samples):
        return {(lab["pod_name"], lab["internet"], lab["sameRegion"], lab["sameZone"]): v
                for n, lab, v in samples if n == "kubecost_pod_network_egress_bytes_total"}

    start, end = counters(before), counters(after)
    assert set(end) == {
        ("j-0", "true", "false", "false"), ("j-0", "false", "true", "true"),
        ("j-0", "false", "true", "false"),  # a100-1 in zone-a, h800-0 in zone-b
        ("j-1", "true", "false", "false"), ("j-1", "false", "true", "true"),
        ("j-1", "false", "true", "false"),
        ("j-2", "true", "false", "false"), ("j-2", "false", "true", "false"),
        ("alone", "true", "false", "false")}
    sent = {k: end[k] - start.get(k, 0) for k in end}
    assert sent[("j-0", "true", "false", "false")] == pytest.approx(100 * 1000, abs=1)
    assert sent[("j-0", "false", "true", "true")] == pytest.approx(100 * 2000, abs=1)
    assert sent[("j-0", "false", "true", "false")] == pytest.approx(100 * 2000, abs=1)
    assert sent[("j-2", "false", "true", "false")] == pytest.approx(100 * 4000, abs=1)
    assert sent[("alone", "true", "false", "false")] == pytest.approx(100 * 10, abs=1)
    tx = {lab["pod"]: v for n, lab, v in after if n == "container_network_transmit_bytes_total"}
    assert tx["j-2"] == pytest.approx(sum(v for k, v in end.items() if k[0] == "j-2"), abs=2)
