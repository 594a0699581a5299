"""Small helpers shared by the simulation controllers: quantities, times, keys."""

from __future__ import annotations

import datetime as _dt
import hashlib
from typing import Any

_SUFFIX = {
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
    "Pi": 1024**5,
    "Ei": 1024**6,
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "": 1,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
}
_QCACHE: dict[str, float] = {}

GPU = "nvidia.com/gpu"
GPU_SHARED = "nvidia.com/gpu.shared"
MIG_PREFIX = "nvidia.com/mig-"
# HAMi (Project-HAMi/HAMi): its device plugin registers only nvidia.com/gpu (vGPUs, a card's
# count times deviceSplitCount); GPU memory (MiB per card) and cores (% of a card) are pod
# limits its scheduler extender checks per card from the node annotation
# hami.io/node-nvidia-register (managedResources with ignoredByScheduler: true, so
# kube-scheduler's NodeResourcesFit does not count them against node allocatable).
GPU_MEM = "nvidia.com/gpumem"
GPU_MEM_PERCENT = "nvidia.com/gpumem-percentage"
GPU_CORES = "nvidia.com/gpucores"
HAMI_RESOURCES = frozenset({GPU_MEM, GPU_MEM_PERCENT, GPU_CORES})
ANN = "kubesim.trainyard.io/"


def parse_quantity(value: Any) -> float:
    """Parse a Kubernetes quantity ("500m", "64Gi", "1e3", 8) into a float."""
    if isinstance(value, (int, float)):
        return float(value)
    s = str(value).strip()
    hit = _QCACHE.get(s)
    if hit is not None:
        return hit
    num, suf = s, ""
    for cand in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"):
        if s.endswith(cand):
            num, suf = s[:-2], cand
            break
    else:
        if s and s[-1] in "numkMGTPE":
            num, suf = s[:-1], s[-1]
    try:
        out = float(num) * _SUFFIX[suf]
    except (ValueError, KeyError) as exc:
        raise ValueError(f"invalid quantity {value!r}") from exc
    if len(_QCACHE) < 100_000:
        _QCACHE[s] = out
    return out


def to_units(resource: str, value: Any) -> int:
    """Internal integer unit of a resource: millicores for cpu, bytes or counts otherwise."""
    q = parse_quantity(value)
    if resource == "cpu":
        return round(q * 1000)
    return round(q)


def pod_requests(pod: dict) -> dict[str, int]:
    """Effective scheduling requests of a pod, as the scheduler computes them.

    Sum of the app containers (a limit stands in for a missing request, as API
    defaulting does), max'd with each init container, plus spec.overhead.
    """
    spec = pod.get("spec") or {}
    total: dict[str, int] = {}
    for c in spec.get("containers") or []:
        for k, v in _container_req(c).items():
            total[k] = total.get(k, 0) + v
    for c in spec.get("initContainers") or []:
        for k, v in _container_req(c).items():
            if v > total.get(k, 0):
                total[k] = v
    for k, v in (spec.get("overhead") or {}).items():
        total[k] = total.get(k, 0) + to_units(k, v)
    return {k: v for k, v in total.items() if v}


def _container_req(c: dict) -> dict[str, int]:
    res = c.get("resources") or {}
    req = dict(res.get("limits") or {})
    req.update(res.get("requests") or {})
    return {k: to_units(k, v) for k, v in req.items()}


def fmt_time(ts: float) -> str:
    return _dt.datetime.fromtimestamp(int(ts), _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(s: str | None) -> float | None:
    if not s:
        return None
    s = s.replace("Z", "+00:00")
    return _dt.datetime.fromisoformat(s).timestamp()


def stable_hash(*parts: Any) -> int:
    h = hashlib.blake2b("\x1f".join(str(p) for p in parts).encode(), digest_size=8)
    return int.from_bytes(h.digest(), "big")


def stable_uuid(*parts: Any) -> str:
    h = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def key_of(obj: dict) -> tuple[str, str]:
    md = obj.get("metadata") or {}
    return (md.get("namespace") or "", md.get("name") or "")


def object_ref(obj: dict, resource_kind: str | None = None) -> dict:
    md = obj.get("metadata") or {}
    ref = {
        "apiVersion": obj.get("apiVersion", "v1"),
        "kind": obj.get("kind") or resource_kind or "",
        "name": md.get("name", ""),
        "uid": md.get("uid", ""),
    }
    if md.get("namespace"):
        ref["namespace"] = md["namespace"]
    if md.get("resourceVersion"):
        ref["resourceVersion"] = md["resourceVersion"]
    return ref


def ann(obj: dict, name: str) -> str | None:
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(ANN + name)


def ann_float(obj: dict, name: str) -> float | None:
    v = ann(obj, name)
    if v is None:
        return None
    try:
        return float(v)
    except ValueError:
        return None
