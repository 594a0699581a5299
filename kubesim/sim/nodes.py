"""Node objects and per-node GPU device inventories built from a cluster profile."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from kubesim.sim.profile import (
    HAMI_HANDSHAKE_ANNOTATION,
    HAMI_NODE_LABEL,
    HAMI_REGISTER_ANNOTATION,
    POOL_LABEL,
    RACK_LABEL,
    REGION_LABEL,
    SHARED_MEMORY_LABEL,
    SWITCH_LABEL,
    ZONE_LABEL,
)
from kubesim.sim.util import (
    GPU,
    GPU_CORES,
    GPU_MEM,
    GPU_MEM_PERCENT,
    GPU_SHARED,
    HAMI_RESOURCES,
    MIG_PREFIX,
    parse_quantity,
    stable_hash,
    stable_uuid,
)

FAIL_ANNOTATION = "kubesim.trainyard.io/fail"


@dataclass
class Device:
    """One schedulable device unit: a whole GPU, a MIG instance or a shared GPU (with replicas)."""

    resource: str
    gpu: int  # physical GPU index on the node
    uuid: str
    memory: int  # MiB available to the device
    capacity: int = 1  # replicas for a shared GPU
    mig_profile: str | None = None
    gi_id: int | None = None
    users: list = field(default_factory=list)  # pod keys (one entry per replica used)
    hami: bool = False  # a HAMi vGPU card: capacity = deviceSplitCount, memory/cores per pod
    held: dict = field(default_factory=dict)  # HAMi: pod key -> (memory MiB, cores %)

    def hami_free(self) -> tuple[int, int]:
        """HAMi: (memory MiB, cores %) not yet held by pods."""
        return (
            self.memory - sum(m for m, _ in self.held.values()),
            100 - sum(c for _, c in self.held.values()),
        )


@dataclass
class PhysicalGPU:
    index: int
    uuid: str
    pci_bus_id: str
    memory: int
    mig: bool = False


class GpuInventory:
    """Devices of one node, and which pod holds which device (tracked at bind time)."""

    def __init__(self, node_name: str, model: dict | None, gpu_cfg: dict | None):
        self.node = node_name
        self.model = model
        self.gpus: list[PhysicalGPU] = []
        self.devices: dict[str, list[Device]] = {}
        self.by_pod: dict[tuple, list[Device]] = {}
        self.hami = bool(gpu_cfg and model and gpu_cfg.get("hami"))  # HAMi vGPU cards
        if not gpu_cfg or not model:
            return
        mig = gpu_cfg.get("mig")
        sharing = gpu_cfg.get("sharing")
        n_mig = mig["gpus"] if mig else 0
        for i in range(gpu_cfg["count"]):
            uuid = "GPU-" + stable_uuid(node_name, "gpu", i)
            bus = f"00000000:{(0x18 + 0x10 * i) % 256:02X}:00.0"
            is_mig = i >= gpu_cfg["count"] - n_mig
            self.gpus.append(PhysicalGPU(i, uuid, bus, model["memory"], is_mig))
            if is_mig:
                assert mig is not None  # is_mig needs n_mig > 0, i.e. a MIG config
                gi = 1
                for prof in sorted(mig["layout"], key=lambda p: (-model["mig"][p][0], p)):
                    for _ in range(mig["layout"][prof]):
                        res = GPU if mig["strategy"] == "single" else MIG_PREFIX + prof
                        self.devices.setdefault(res, []).append(
                            Device(
                                res,
                                i,
                                "MIG-" + stable_uuid(node_name, "mig", i, gi),
                                model["mig"][prof][2],
                                mig_profile=prof,
                                gi_id=gi,
                            )
                        )
                        gi += 1
            elif gpu_cfg.get("hami"):
                h = gpu_cfg["hami"]
                self.devices.setdefault(GPU, []).append(
                    Device(
                        GPU,
                        i,
                        uuid,
                        int(model["memory"] * h["memory_scaling"]),
                        capacity=h["split"],
                        hami=True,
                    )
                )
            elif sharing:
                res = GPU_SHARED if sharing["rename"] else GPU
                self.devices.setdefault(res, []).append(
                    Device(res, i, uuid, model["memory"], capacity=sharing["replicas"])
                )
            else:
                self.devices.setdefault(GPU, []).append(Device(GPU, i, uuid, model["memory"]))

    def capacity(self) -> dict[str, int]:
        return {r: sum(d.capacity for d in devs) for r, devs in self.devices.items()}

    def hami_pick(self, requests: dict[str, int], exclude: tuple | None = None
                  ) -> list[tuple[Device, int, int]] | None:
        """HAMi's per-card fit (pkg/device/nvidia Fit): ``nvidia.com/gpu`` vGPUs on as many
        *distinct* cards, each with a free vGPU slot, ``nvidia.com/gpumem`` MiB (or
        ``gpumem-percentage`` of the card; neither = the whole card's memory) and
        ``nvidia.com/gpucores`` % free. None when the node cannot hold the request."""
        n = requests.get(GPU, 0)
        if n <= 0:
            return [] if not any(requests.get(r) for r in HAMI_RESOURCES) else None
        cores = requests.get(GPU_CORES, 0)
        picked: list[tuple[Device, int, int]] = []
        for d in self.devices.get(GPU, ()):
            if not d.hami:
                continue
            held = {k: v for k, v in d.held.items() if k != exclude}
            users = [u for u in d.users if u != exclude]
            mem = requests.get(GPU_MEM) or (
                d.memory * requests[GPU_MEM_PERCENT] // 100
                if requests.get(GPU_MEM_PERCENT)
                else d.memory
            )
            free_mem = d.memory - sum(m for m, _ in held.values())
            free_cores = 100 - sum(c for _, c in held.values())
            if len(users) < d.capacity and mem <= free_mem and cores <= free_cores:
                picked.append((d, mem, cores))
        if len(picked) < n:
            return None
        # binpack on cards: the fullest fitting cards first (HAMi's gpuSchedulerPolicy binpack)
        picked.sort(key=lambda t: (t[0].hami_free()[0], t[0].gpu))
        return picked[:n]

    def allocate(self, pod_key: tuple, requests: dict[str, int]) -> list[Device]:
        """Pick devices for a bound pod (lowest index first; shared replicas spread)."""
        self.release(pod_key)
        got: list[Device] = []
        if self.hami and requests.get(GPU, 0) > 0:
            for d, mem, cores in self.hami_pick(requests, exclude=pod_key) or ():
                d.users.append(pod_key)
                d.held[pod_key] = (mem, cores)
                got.append(d)
            if got:
                self.by_pod[pod_key] = got
            return got
        for res, n in requests.items():
            devs = self.devices.get(res)
            if not devs or n <= 0:
                continue
            if res == GPU_SHARED or any(d.capacity > 1 for d in devs):
                for _ in range(n):
                    free = [d for d in devs if len(d.users) < d.capacity]
                    if not free:
                        break
                    d = min(free, key=lambda d: (len(d.users), d.gpu))
                    d.users.append(pod_key)
                    got.append(d)
            else:
                for d in devs:
                    if n <= 0:
                        break
                    if not d.users:
                        d.users.append(pod_key)
                        got.append(d)
                        n -= 1
        if got:
            self.by_pod[pod_key] = got
        return got

    def release(self, pod_key: tuple) -> None:
        for d in self.by_pod.pop(pod_key, []):
            d.held.pop(pod_key, None)
            with contextlib.suppress(ValueError):
                d.users.remove(pod_key)


def _quantity_str(units: float) -> str:
    return str(int(units))


def _ki(q: str) -> str:
    return f"{int(parse_quantity(q) // 1024)}Ki"


def build_nodes(profile: dict, now: str) -> list[tuple[dict, GpuInventory]]:
    """All Node objects of a profile (deterministic names, IPs and UUIDs)."""
    out = []
    sim = profile["simulation"]
    seq = 0
    for pool in profile["pools"]:
        for i in range(pool["count"]):
            name = f"{pool['prefix']}{i}"
            out.append(build_node(profile, pool, i, seq, name, now, sim))
            seq += 1
    return out


def build_node(
    profile: dict, pool: dict, i: int, seq: int, name: str, now: str, sim: dict
) -> tuple[dict, GpuInventory]:
    model = profile["gpu_models"][pool["gpu"]["model"]] if pool["gpu"] else None
    inv = GpuInventory(name, model, pool["gpu"])
    per_rack = pool["nodes_per_rack"] or max(1, -(-pool["count"] // len(pool["racks"])))
    rack = pool["racks"][min(i // per_rack, len(pool["racks"]) - 1)]
    switch = (
        pool["switches"][i % len(pool["switches"])]
        if not pool["nodes_per_rack"]
        else pool["switches"][min(i // per_rack, len(pool["switches"]) - 1)]
    )
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": pool["instance_type"],
        ZONE_LABEL: pool["zone"],
        REGION_LABEL: profile["cluster"]["region"],
        RACK_LABEL: rack,
        SWITCH_LABEL: switch,
        POOL_LABEL: pool["name"],
    }
    cap = {
        "cpu": pool["cpu"],
        "memory": _ki(pool["memory"]),
        "pods": pool["pods"],
        "ephemeral-storage": _ki(pool["ephemeral_storage"]),
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
    }
    alloc = dict(cap)
    alloc["cpu"] = _fmt_cpu(parse_quantity(pool["cpu"]) - parse_quantity(pool["reserved"]["cpu"]))
    mem = parse_quantity(pool["memory"]) - parse_quantity(pool["reserved"]["memory"])
    alloc["memory"] = f"{int(mem // 1024)}Ki"
    alloc["ephemeral-storage"] = str(int(parse_quantity(pool["ephemeral_storage"]) * 0.9))
    for res, n in pool.get("extended_resources", {}).items():  # a device plugin advertises
        cap[res] = alloc[res] = n                                 # capacity == allocatable
    if model:
        g = pool["gpu"]
        labels.update(_gfd_labels(profile, model, g, sim))
        for res, n in ({} if g.get("dra") else inv.capacity()).items():
            cap[res] = alloc[res] = str(n)
        if g["sharing"] and g["sharing"]["rename"]:
            cap.setdefault(GPU, "0")
            alloc.setdefault(GPU, "0")
        labels["nvidia.com/gpu.present"] = "true"
        if g.get("hami"):
            labels[HAMI_NODE_LABEL[0]] = HAMI_NODE_LABEL[1]
    labels.update(pool["labels"])
    hx = stable_hash(name)
    ip = f"10.{(seq // 250) % 250}.{seq % 250 + 1}.{10 + (seq // 62500) % 200}"
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "kubesim.trainyard.io/pool": pool["name"],
                **(_hami_annotations(model, inv, now) if model and pool["gpu"].get("hami") else {}),
                **pool["annotations"],
            },
        },
        "spec": {
            "podCIDR": f"10.{100 + seq // 256}.{seq % 256}.0/24",
            "podCIDRs": [f"10.{100 + seq // 256}.{seq % 256}.0/24"],
            "providerID": f"kubesim://{pool['name']}/{name}",
        },
        "status": {
            "capacity": cap,
            "allocatable": alloc,
            "conditions": node_conditions(now, ready=True),
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": stable_uuid(name, "boot"),
                "containerRuntimeVersion": "containerd://1.7.22",
                "kernelVersion": "5.15.0-124-generic",
                "kubeProxyVersion": sim["kubelet_version"],
                "kubeletVersion": sim["kubelet_version"],
                "machineID": f"{hx:016x}{hx:016x}",
                "operatingSystem": "linux",
                "osImage": "Ubuntu 22.04.5 LTS",
                "systemUUID": stable_uuid(name, "system"),
            },
            "phase": "Running",
        },
    }
    if pool["taints"]:
        node["spec"]["taints"] = [dict(t) for t in pool["taints"]]
    if pool["unschedulable"]:
        node["spec"]["unschedulable"] = True
    return node, inv


def _hami_annotations(model: dict, inv: GpuInventory, now: str) -> dict[str, str]:
    """What HAMi's device plugin writes on its node: the cards it registered, as
    ``UUID,count,devmem,devcore,type,numa,health,index,mode`` per card, each followed by
    ``:`` (pkg/util EncodeNodeDevices), and the handshake (``Reported <time>``)."""
    cards = "".join(
        f"{d.uuid},{d.capacity},{d.memory},100,NVIDIA-{model['name']},0,true,{d.gpu},hami-core:"
        for d in inv.devices.get(GPU, ())
        if d.hami
    )
    return {HAMI_REGISTER_ANNOTATION: cards, HAMI_HANDSHAKE_ANNOTATION: f"Reported {now}"}


def _fmt_cpu(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{round(v * 1000)}m"


def _gfd_labels(profile: dict, model: dict, g: dict, sim: dict) -> dict[str, str]:
    drv = sim["driver_version"].split(".")
    cuda = str(sim["cuda_version"]).split(".")
    product = model["product"]
    labels = {
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.count": str(g["count"]),
        "nvidia.com/gpu.memory": str(model["memory"]),
        "nvidia.com/gpu.family": model["family"],
        "nvidia.com/gpu.compute.major": str(model["compute"][0]),
        "nvidia.com/gpu.compute.minor": str(model["compute"][1]),
        "nvidia.com/gpu.machine": g["machine"],
        "nvidia.com/gpu.mode": "compute",
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig.capable": "true" if model["mig"] else "false",
        "nvidia.com/mps.capable": "false",
        "nvidia.com/vgpu.present": "false",
        "nvidia.com/cuda.driver-version.major": drv[0],
        "nvidia.com/cuda.driver-version.minor": drv[1] if len(drv) > 1 else "0",
        "nvidia.com/cuda.driver-version.revision": drv[2] if len(drv) > 2 else "0",
        "nvidia.com/cuda.driver-version.full": sim["driver_version"],
        "nvidia.com/cuda.runtime-version.major": cuda[0],
        "nvidia.com/cuda.runtime-version.minor": cuda[1] if len(cuda) > 1 else "0",
        "nvidia.com/cuda.runtime-version.full": str(sim["cuda_version"]),
        "nvidia.com/gfd.timestamp": "1764460800",
    }
    mig = g.get("mig")
    if mig:
        labels["nvidia.com/mig.strategy"] = mig["strategy"]
        labels["nvidia.com/mig.config"] = "custom-" + "-".join(
            f"{n}x{p}" for p, n in sorted(mig["layout"].items())
        )
        labels["nvidia.com/mig.config.state"] = "success"
        if mig["strategy"] == "single":
            (prof,) = mig["layout"]
            cs, _ms, mem, sms = model["mig"][prof]
            labels["nvidia.com/gpu.product"] = f"{product}-MIG-{prof}"
            labels["nvidia.com/gpu.count"] = str(mig["layout"][prof] * g["count"])
            labels["nvidia.com/gpu.memory"] = str(mem)
            labels["nvidia.com/gpu.multiprocessors"] = str(sms)
            labels["nvidia.com/gpu.slices.gi"] = str(cs)
            labels["nvidia.com/gpu.slices.ci"] = str(cs)
        else:
            for prof, n in sorted(mig["layout"].items()):
                cs, _ms, mem, sms = model["mig"][prof]
                p = f"nvidia.com/mig-{prof}"
                labels[f"{p}.count"] = str(n * mig["gpus"])
                labels[f"{p}.memory"] = str(mem)
                labels[f"{p}.multiprocessors"] = str(sms)
                labels[f"{p}.slices.gi"] = str(cs)
                labels[f"{p}.slices.ci"] = str(cs)
    elif model["mig"]:
        labels["nvidia.com/mig.strategy"] = "none"
    sharing = g.get("sharing")
    if sharing:
        labels["nvidia.com/gpu.replicas"] = str(sharing["replicas"])
        labels["nvidia.com/gpu.sharing-strategy"] = sharing["strategy"]
        labels["nvidia.com/gpu.product"] = f"{product}-SHARED"
        labels[SHARED_MEMORY_LABEL] = str(model["memory"] // sharing["replicas"])
        if sharing["strategy"] == "mps":
            labels["nvidia.com/mps.capable"] = "true"
    return labels


def node_conditions(now: str, *, ready: bool, reason: str = "", message: str = "") -> list[dict]:
    conds = []
    for typ, r, m in (
        ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ):
        conds.append(
            {
                "type": typ,
                "status": "False",
                "reason": r,
                "message": m,
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
        )
    conds.append(
        {
            "type": "Ready",
            "status": "True" if ready else "False",
            "reason": "KubeletReady" if ready else (reason or "KubeletNotReady"),
            "message": "kubelet is posting ready status"
            if ready
            else (message or "kubelet stopped posting node status"),
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
    )
    return conds


def node_failed_flag(node: dict) -> bool:
    v = ((node.get("metadata") or {}).get("annotations") or {}).get(FAIL_ANNOTATION, "")
    return str(v).lower() in ("true", "1", "yes")


def storage_class_objects(profile: dict) -> list[dict[str, Any]]:
    out = []
    for sc in profile.get("storage_classes") or []:
        obj = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": sc["name"], "labels": dict(sc.get("labels") or {})},
            "provisioner": sc.get("provisioner", "local.csi.kubesim.trainyard.io"),
            "reclaimPolicy": sc.get("reclaimPolicy", "Delete"),
            "volumeBindingMode": sc.get("volumeBindingMode", "WaitForFirstConsumer"),
            "allowVolumeExpansion": bool(sc.get("allowVolumeExpansion", True)),
        }
        if sc.get("parameters"):
            obj["parameters"] = {str(k): str(v) for k, v in sc["parameters"].items()}
        if sc.get("default"):
            obj["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
        out.append(obj)
    return out


def priority_class_objects(profile: dict) -> list[dict[str, Any]]:
    out = []
    for pc in profile.get("priority_classes") or []:
        obj = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": pc["name"]},
            "value": int(pc["value"]),
            "preemptionPolicy": pc.get("preemptionPolicy", "PreemptLowerPriority"),
            "globalDefault": bool(pc.get("globalDefault", False)),
        }
        if pc.get("description"):
            obj["description"] = pc["description"]
        out.append(obj)
    return out
