"""Cluster profiles: YAML files describing node pools, GPU models and simulation knobs.

A bare name resolves to ``kubesim/profiles/<name>.yaml``; anything with a path
separator or a ``.yaml``/``.yml`` suffix is read as a file path.  See
``kubesim/profiles/default.yaml`` for the documented schema.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import yaml

PROFILES_DIR = Path(__file__).resolve().parent.parent / "profiles"

# Topology label keys (documented in the profiles).
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
RACK_LABEL = "trainyard.io/rack"
SWITCH_LABEL = "trainyard.io/switch"
POOL_LABEL = "trainyard.io/node-pool"
SHARED_MEMORY_LABEL = "trainyard.io/gpu.shared-memory"  # MiB of GPU memory per share
# HAMi: the label its device-plugin DaemonSet selects nodes by (charts/hami values
# devicePlugin.nvidianodeSelector {gpu: "on"}), and the node annotations its device plugin
# writes (pkg/device/nvidia/device.go RegisterAnnos / HandshakeAnnos).
HAMI_NODE_LABEL = ("gpu", "on")
HAMI_REGISTER_ANNOTATION = "hami.io/node-nvidia-register"
HAMI_HANDSHAKE_ANNOTATION = "hami.io/node-handshake"

# GPU catalog: key -> facts used for GFD labels, capacity and DCGM metrics.
# mig: profile -> (compute slices, memory slices of 8, memory MiB, multiprocessors)
_A100_80_MIG = {
    "1g.10gb": (1, 1, 9856, 14),
    "1g.20gb": (1, 2, 19968, 14),
    "2g.20gb": (2, 2, 19968, 28),
    "3g.40gb": (3, 4, 40192, 42),
    "4g.40gb": (4, 4, 40192, 56),
    "7g.80gb": (7, 8, 80768, 98),
}
_A100_40_MIG = {
    "1g.5gb": (1, 1, 4864, 14),
    "1g.10gb": (1, 2, 9984, 14),
    "2g.10gb": (2, 2, 9984, 28),
    "3g.20gb": (3, 4, 19968, 42),
    "4g.20gb": (4, 4, 19968, 56),
    "7g.40gb": (7, 8, 40192, 98),
}
_H100_MIG = {
    "1g.10gb": (1, 1, 9984, 16),
    "1g.20gb": (1, 2, 20096, 26),
    "2g.20gb": (2, 2, 20096, 32),
    "3g.40gb": (3, 4, 40320, 60),
    "4g.40gb": (4, 4, 40320, 64),
    "7g.80gb": (7, 8, 80640, 132),
}
GPU_MODELS: dict[str, dict[str, Any]] = {
    "A100-SXM4-80GB": {
        "tdp": 400,
        "product": "NVIDIA-A100-SXM4-80GB",
        "name": "NVIDIA A100-SXM4-80GB",
        "memory": 81920,
        "family": "ampere",
        "compute": (8, 0),
        "mig": _A100_80_MIG,
    },
    "A100-SXM4-40GB": {
        "tdp": 400,
        "product": "NVIDIA-A100-SXM4-40GB",
        "name": "NVIDIA A100-SXM4-40GB",
        "memory": 40960,
        "family": "ampere",
        "compute": (8, 0),
        "mig": _A100_40_MIG,
    },
    "H100-80GB-HBM3": {
        "tdp": 700,
        "product": "NVIDIA-H100-80GB-HBM3",
        "name": "NVIDIA H100 80GB HBM3",
        "memory": 81559,
        "family": "hopper",
        "compute": (9, 0),
        "mig": _H100_MIG,
    },
    "H800": {
        "tdp": 700,
        "product": "NVIDIA-H800",
        "name": "NVIDIA H800",
        "memory": 81559,
        "family": "hopper",
        "compute": (9, 0),
        "mig": _H100_MIG,
    },
    "L40S": {
        "tdp": 350,
        "product": "NVIDIA-L40S",
        "name": "NVIDIA L40S",
        "memory": 46068,
        "family": "ada-lovelace",
        "compute": (8, 9),
        "mig": {},
    },
    "A10": {
        "tdp": 150,
        "product": "NVIDIA-A10",
        "name": "NVIDIA A10",
        "memory": 23028,
        "family": "ampere",
        "compute": (8, 6),
        "mig": {},
    },
    "L4": {
        "tdp": 72,
        "product": "NVIDIA-L4",
        "name": "NVIDIA L4",
        "memory": 23034,
        "family": "ada-lovelace",
        "compute": (8, 9),
        "mig": {},
    },
    "T4": {
        "tdp": 70,
        "product": "Tesla-T4",
        "name": "Tesla T4",
        "memory": 15360,
        "family": "turing",
        "compute": (7, 5),
        "mig": {},
    },
}

DEFAULT_SIM = {
    "startup_seconds": 2.0,  # bind -> Running
    "run_seconds": 3600.0,  # default container run time
    "failure_rate": 0.0,  # probability that a container run fails (seeded RNG)
    "failure_exit_code": 1,
    "restart_backoff_seconds": 10.0,
    "default_gpu_util": [70, 98],  # % range for pods without a gpu-util annotation
    "default_gpu_mem_fraction": [0.4, 0.9],
    "default_egress_bytes_per_second": [1.0e4, 1.0e6],  # to the internet
    "default_peer_bytes_per_second": [2.0e7, 2.0e8],  # to the job's other pods (NCCL)
    "event_ttl_seconds": 3600.0,
    "kubelet_events": True,  # Created/Started/Killing events per pod
    "driver_version": "550.90.07",
    "cuda_version": "12.4",
    "kubelet_version": "v1.31.4",
    "metrics_hostname_label": "Hostname",  # or "hostname" (dcgm-exporter main since d5e5f51)
    # work bounds per tick, so a burst never stalls the API server's event loop for long
    "max_job_reconciles_per_tick": 200,
    "max_schedule_attempts_per_tick": 1000,
}


def load_profile(name_or_path: str | os.PathLike | dict) -> dict:
    """Load and normalise a cluster profile."""
    if isinstance(name_or_path, dict):
        raw = copy.deepcopy(name_or_path)
    else:
        s = os.fspath(name_or_path)
        if os.sep in s or "/" in s or s.endswith((".yaml", ".yml")):
            path = Path(s)
        else:
            path = PROFILES_DIR / f"{s}.yaml"
        if not path.exists():
            known = sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))
            raise FileNotFoundError(f"kubesim profile {s!r} not found (known: {', '.join(known)})")
        with open(path) as fh:
            raw = yaml.safe_load(fh) or {}
    return normalise_profile(raw)


def normalise_profile(raw: dict) -> dict:
    prof: dict[str, Any] = {"name": raw.get("name", "custom")}
    sim = dict(DEFAULT_SIM)
    sim.update(raw.get("simulation") or {})
    prof["simulation"] = sim
    models = copy.deepcopy(GPU_MODELS)
    for key, m in (raw.get("gpu_models") or {}).items():
        base = models.get(key, {"mig": {}, "compute": (8, 0), "family": "unknown"})
        base.update(m)
        if isinstance(base.get("compute"), list):
            base["compute"] = tuple(base["compute"])
        base["mig"] = {k: tuple(v) for k, v in (base.get("mig") or {}).items()}
        base.setdefault("product", key)
        base.setdefault("name", key.replace("-", " "))
        models[key] = base
    prof["gpu_models"] = models
    prof["cluster"] = {"region": "sim-region-1", **(raw.get("cluster") or {})}
    pools = []
    seen: set[str] = set()
    for p in raw.get("pools") or []:
        pool = _normalise_pool(p, models)
        if pool["name"] in seen:
            raise ValueError(f"duplicate pool name {pool['name']!r}")
        seen.add(pool["name"])
        pools.append(pool)
    if not pools:
        raise ValueError("profile has no pools")
    prof["pools"] = pools
    prof["storage_classes"] = list(raw.get("storage_classes") or [])
    prof["priority_classes"] = list(raw.get("priority_classes") or [])
    return prof


def _normalise_pool(p: dict, models: dict) -> dict:
    if "name" not in p:
        raise ValueError(f"pool without a name: {p!r}")
    pool: dict[str, Any] = {
        "name": str(p["name"]),
        "count": int(p.get("count", 1)),
        "prefix": str(p.get("prefix", f"{p['name']}-")),
        "zone": str(p.get("zone", "zone-a")),
        "racks": list(p.get("racks") or ["rack-1"]),
        "switches": list(p.get("switches") or ["switch-1"]),
        "nodes_per_rack": int(p.get("nodes_per_rack", 0)),
        "cpu": str(p.get("cpu", "64")),
        "memory": str(p.get("memory", "512Gi")),
        "pods": str(p.get("pods", "110")),
        "ephemeral_storage": str(p.get("ephemeral_storage", "1Ti")),
        "reserved": {"cpu": "1", "memory": "4Gi", **(p.get("reserved") or {})},
        "instance_type": str(p.get("instance_type", p["name"])),
        "labels": {str(k): str(v) for k, v in (p.get("labels") or {}).items()},
        "annotations": {str(k): str(v) for k, v in (p.get("annotations") or {}).items()},
        "taints": list(p.get("taints") or []),
        "unschedulable": bool(p.get("unschedulable", False)),
        # other device plugins' extended resources, e.g. Mellanox's
        # k8s-rdma-shared-dev-plugin: {rdma/hca_shared_devices_a: 1000}
        "extended_resources": {str(k): str(int(v)) for k, v in
                               (p.get("extended_resources") or {}).items()},
        "gpu": None,
    }
    g = p.get("gpu")
    if g:
        model = g.get("model")
        if model not in models:
            raise ValueError(
                f"pool {pool['name']}: unknown GPU model {model!r}; known: {sorted(models)}"
            )
        gpu: dict[str, Any] = {
            "model": model,
            "count": int(g.get("count", 8)),
            "mig": None,
            "sharing": None,
            "machine": str(g.get("machine", pool["instance_type"])),
            # devices published by the NVIDIA DRA driver as ResourceSlices (sim/dra.py),
            # not by the device plugin as nvidia.com/* extended resources
            "dra": bool(g.get("dra", False)),
        }
        mig = g.get("mig")
        if mig:
            gpu["mig"] = _normalise_mig(pool["name"], mig, models[model], gpu["count"])
        sharing = g.get("sharing")
        if sharing:
            if gpu["mig"]:
                raise ValueError(f"pool {pool['name']}: MIG and sharing together are not simulated")
            strategy = sharing.get("strategy", "time-slicing")
            if strategy not in ("time-slicing", "mps"):
                raise ValueError(
                    f"pool {pool['name']}: sharing strategy must be time-slicing or mps"
                )
            gpu["sharing"] = {
                "strategy": strategy,
                "replicas": int(sharing.get("replicas", 4)),
                "rename": bool(sharing.get("rename", True)),
            }
        hami = g.get("hami")
        if hami:
            if gpu["mig"] or gpu["sharing"]:
                raise ValueError(f"pool {pool['name']}: HAMi with MIG or sharing is not simulated")
            hami = {} if hami is True else hami
            # HAMi's defaults: deviceSplitCount 10, deviceMemoryScaling 1 (no oversubscription)
            gpu["hami"] = {
                "split": int(hami.get("split", 10)),
                "memory_scaling": float(hami.get("memory_scaling", 1.0)),
            }
            if gpu["hami"]["split"] < 1:
                raise ValueError(f"pool {pool['name']}: hami.split must be at least 1")
        else:
            gpu["hami"] = None
        pool["gpu"] = gpu
    return pool


def _normalise_mig(pool: str, mig: dict, model: dict, count: int) -> dict:
    strategy = mig.get("strategy", "mixed")
    if strategy not in ("mixed", "single"):
        raise ValueError(f"pool {pool}: mig.strategy must be mixed or single")
    layout = {str(k): int(v) for k, v in (mig.get("layout") or {}).items()}
    partitioned = int(mig.get("gpus", count if strategy == "single" else 0))
    if strategy == "single":
        partitioned = count
        if len(layout) != 1:
            raise ValueError(f"pool {pool}: mig single strategy needs exactly one profile")
    if not 0 < partitioned <= count:
        raise ValueError(f"pool {pool}: mig.gpus must be between 1 and {count}")
    cslices = mslices = 0
    for prof_name, n in layout.items():
        if prof_name not in model["mig"]:
            raise ValueError(
                f"pool {pool}: MIG profile {prof_name!r} not available on {model['product']}"
            )
        cs, ms, _mem, _sm = model["mig"][prof_name]
        cslices += cs * n
        mslices += ms * n
    if cslices > 7 or mslices > 8 or not layout:
        raise ValueError(
            f"pool {pool}: MIG layout {layout} does not fit one GPU (7 compute, 8 memory slices)"
        )
    return {"strategy": strategy, "gpus": partitioned, "layout": layout}
