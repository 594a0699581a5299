"""DCGM-exporter and cAdvisor style Prometheus text for the simulated GPUs and pods."""

from __future__ import annotations

import math
import random

from kubesim.sim.profile import REGION_LABEL, ZONE_LABEL
from kubesim.sim.state import ClusterState
from kubesim.sim.util import GPU_SHARED, ann_float, stable_hash

GAUGES = [
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W)."),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C)."),
]


def _esc(v: str) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(d: dict) -> str:
    return "{" + ",".join(f'{k}="{_esc(v)}"' for k, v in d.items()) + "}"


class Metrics:
    def __init__(self, state: ClusterState, kubelet, profile: dict, seed: int, now_fn):
        self.state = state
        self.kubelet = kubelet
        self.sim = profile["simulation"]
        self.profile = profile
        self.seed = seed
        self.now_fn = now_fn
        self.tdp = {m["name"]: m.get("tdp", 400) for m in profile["gpu_models"].values()}
        # dcgm-exporter <= 4.5.3-4.8.2 says "Hostname"; main after d5e5f51 says "hostname"
        self.hostname_label = str(self.sim.get("metrics_hostname_label") or "Hostname")

    # per-pod workload characteristics -----------------------------------------------------
    def pod_util(self, info, now: float) -> float:
        v = ann_float(info.obj, "gpu-util")
        rng = random.Random(stable_hash(self.seed, info.uid, "util"))
        lo, hi = self.sim["default_gpu_util"]
        base = v if v is not None else rng.uniform(float(lo), float(hi))
        noise = random.Random(stable_hash(self.seed, info.uid, int(now // 15))).uniform(-3.0, 3.0)
        return max(0.0, min(100.0, base + noise))

    def pod_mem_mib(self, info, device_mib: int) -> int:
        v = ann_float(info.obj, "gpu-mem-gib")
        if v is not None:
            return int(min(device_mib, v * 1024))
        lo, hi = self.sim["default_gpu_mem_fraction"]
        frac = random.Random(stable_hash(self.seed, info.uid, "mem")).uniform(float(lo), float(hi))
        return int(device_mib * frac)

    def egress_rate(self, info) -> float:
        v = ann_float(info.obj, "egress-bytes-per-second")
        if v is not None:
            return max(0.0, v)
        lo, hi = self.sim["default_egress_bytes_per_second"]
        return random.Random(stable_hash(self.seed, info.uid, "net")).uniform(float(lo), float(hi))

    def peer_rate(self, info) -> float:
        """Bytes per second the pod sends to the other pods of its job (all-reduce)."""
        v = ann_float(info.obj, "peer-bytes-per-second")
        if v is not None:
            return max(0.0, v)
        lo, hi = self.sim.get("default_peer_bytes_per_second", (0.0, 0.0))
        return random.Random(stable_hash(self.seed, info.uid, "peer")).uniform(float(lo),
                                                                              float(hi))

    def _where(self, info) -> tuple[str, str]:
        node = self.state.nodes.get(info.node or "")
        labels = node.labels if node is not None else {}
        return labels.get(REGION_LABEL, ""), labels.get(ZONE_LABEL, "")

    def _peers(self, info) -> list:
        """The other running pods of the pod's job (none for a pod of no job)."""
        if info.job is None:
            return []
        keys = sorted(getattr(self.state, info.job_caches[0]).get(info.job, ()))
        return [p for k in keys if k != info.key and (p := self._running(k)) is not None]

    def _running(self, key):
        run = self.kubelet.runs.get(key)
        info = self.state.pods.get(key)
        if run is None or info is None or run.uid != info.uid or run.phase != "Running":
            return None
        return info

    # rendering ------------------------------------------------------------------------------
    def text(self) -> str:
        now = self.now_fn()
        driver = self.sim["driver_version"]
        rows: dict[str, list[str]] = {name: [] for name, _ in GAUGES}
        for node in sorted(self.state.nodes.values(), key=lambda n: n.order):
            inv = node.inv
            if inv is None or not inv.gpus or inv.model is None:
                continue
            model_name = inv.model["name"]
            devices_by_gpu: dict[int, list] = {}
            for devs in inv.devices.values():
                for d in devs:
                    devices_by_gpu.setdefault(d.gpu, []).append(d)
            for g in inv.gpus:
                base = {
                    "gpu": str(g.index),
                    "UUID": g.uuid,
                    "pci_bus_id": g.pci_bus_id,
                    "device": f"nvidia{g.index}",
                    "modelName": model_name,
                }
                devs = devices_by_gpu.get(g.index, [])
                if g.mig:
                    for d in sorted(devs, key=lambda d: d.gi_id or 0):
                        lab = dict(base, GPU_I_PROFILE=d.mig_profile, GPU_I_ID=str(d.gi_id))
                        self._device_rows(rows, lab, node.name, driver, d, now, mig=True)
                else:
                    for d in devs:
                        self._device_rows(rows, base, node.name, driver, d, now, mig=False)
        out = []
        for name, help_ in GAUGES:
            out.append(f"# HELP {name} {help_}")
            out.append(f"# TYPE {name} gauge")
            out.extend(rows[name])
        out.extend(self._network(now))
        return "\n".join(out) + "\n"

    def _device_rows(self, rows, base, host, driver, d, now, *, mig: bool) -> None:
        users = []
        seen = set()
        for key in d.users:
            if key in seen:
                continue
            seen.add(key)
            info = self._running(key)
            if info is not None:
                users.append(info)
        if not users:
            util = 0.0
            used = 0
            pods = [None]
        else:
            util = min(100.0, sum(self.pod_util(u, now) for u in users))
            if d.resource == GPU_SHARED:
                share = d.memory // max(1, d.capacity)
                used = min(d.memory, sum(self.pod_mem_mib(u, share) for u in users))
            else:
                used = min(d.memory, sum(self.pod_mem_mib(u, d.memory) for u in users))
            pods = users
        free = max(0, d.memory - used)
        for info in pods:
            lab = dict(base)
            lab[self.hostname_label] = host
            lab["DCGM_FI_DRIVER_VERSION"] = driver
            if info is None:
                lab.update(container="", namespace="", pod="")
            else:
                cs = (info.obj.get("spec") or {}).get("containers") or [{}]
                cname = next(
                    (c.get("name") for c in cs if c.get("name") == "pytorch"), cs[0].get("name", "")
                )
                lab.update(container=cname, namespace=info.key[0], pod=info.key[1])
            ls = _labels(lab)
            if not mig:
                rows["DCGM_FI_DEV_GPU_UTIL"].append(f"DCGM_FI_DEV_GPU_UTIL{ls} {round(util)}")
            rows["DCGM_FI_DEV_FB_USED"].append(f"DCGM_FI_DEV_FB_USED{ls} {used}")
            rows["DCGM_FI_DEV_FB_FREE"].append(f"DCGM_FI_DEV_FB_FREE{ls} {free}")
            rows["DCGM_FI_PROF_GR_ENGINE_ACTIVE"].append(
                f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{ls} {round(util / 100.0, 6)}"
            )
            rows["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"].append(
                f"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{ls} {round(util * 0.0055, 6)}"
            )
            if not mig:  # power and temperature belong to the physical GPU
                tdp = float(self.tdp.get(base.get("modelName", ""), 400))
                power = 0.15 * tdp + 0.8 * tdp * util / 100.0
                rows["DCGM_FI_DEV_POWER_USAGE"].append(f"DCGM_FI_DEV_POWER_USAGE{ls} {power:.3f}")
                rows["DCGM_FI_DEV_GPU_TEMP"].append(
                    f"DCGM_FI_DEV_GPU_TEMP{ls} {32 + round(util * 0.45)}"
                )

    def _network(self, now: float) -> list[str]:
        tx, rx, egress = [], [], []
        for key in sorted(self.kubelet.runs):
            info = self._running(key)
            if info is None:
                continue
            run = self.kubelet.runs[key]
            secs = max(0.0, now - run.started)
            internet = self.egress_rate(info)
            peers = self._peers(info)
            peer = self.peer_rate(info) if peers else 0.0
            # by destination, as OpenCost's network-costs daemonset labels it: the share of
            # the peer traffic that goes to each peer's node, in the same zone or not
            classes: dict[tuple[str, str, str], float] = {("true", "false", "false"): internet}
            region, zone = self._where(info)
            for p in peers:
                p_region, p_zone = self._where(p)
                same_region = "true" if p_region == region else "false"
                same_zone = "true" if same_region == "true" and p_zone == zone else "false"
                cls = ("false", same_region, same_zone)
                classes[cls] = classes.get(cls, 0.0) + peer / len(peers)
            for (inet, same_region, same_zone), rate in sorted(classes.items()):
                lab = _labels({"namespace": info.key[0], "pod_name": info.key[1],
                               "internet": inet, "sameRegion": same_region,
                               "sameZone": same_zone})
                egress.append(f"kubecost_pod_network_egress_bytes_total{lab} "
                              f"{math.floor(rate * secs)}")
            rate = internet + peer
            lab = _labels(
                {"container": "", "interface": "eth0", "namespace": info.key[0], "pod": info.key[1]}
            )
            tx.append(f"container_network_transmit_bytes_total{lab} {math.floor(rate * secs)}")
            rx.append(
                f"container_network_receive_bytes_total{lab} {math.floor(rate * 0.97 * secs)}"
            )
        return [
            "# HELP kubecost_pod_network_egress_bytes_total Bytes a pod sent, by destination "
            "(network-costs)",
            "# TYPE kubecost_pod_network_egress_bytes_total counter",
            *egress,
            "# HELP container_network_transmit_bytes_total Cumulative count of bytes transmitted",
            "# TYPE container_network_transmit_bytes_total counter",
            *tx,
            "# HELP container_network_receive_bytes_total Cumulative count of bytes received",
            "# TYPE container_network_receive_bytes_total counter",
            *rx,
        ]
