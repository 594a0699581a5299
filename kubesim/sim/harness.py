"""In-process harness: Store + Simulation on a deterministic clock, for tests and benchmarks.

h = SimHarness("small", seed=1)
h.namespace("team-a")
h.store.create("pods", {...}, namespace="team-a")
h.advance(30, step=1)
"""

from __future__ import annotations

from datetime import UTC, datetime

from kubesim.clock import Clock
from kubesim.sim import Simulation, load_profile
from kubesim.store import Store

START = datetime(2026, 1, 5, 8, 0, 0, tzinfo=UTC)


class SimHarness:
    def __init__(self, profile: str | dict = "small", *, seed: int = 0, start: datetime = START):
        self.clock = Clock(deterministic=True, start=start)
        self.store = Store(self.clock, seed=seed)
        prof = (
            profile
            if isinstance(profile, dict) and "simulation" in profile
            else load_profile(profile)
        )
        self.sim = Simulation(self.store, profile=prof, seed=seed)
        self.sim.bootstrap()
        self.sim.tick()

    def namespace(self, name: str) -> None:
        self.store.create(
            "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )

    def advance(self, seconds: float, step: float = 1.0) -> None:
        done = 0.0
        while done < seconds - 1e-9:
            d = min(step, seconds - done)
            self.clock.advance(d)
            self.sim.tick()
            done += d

    def pod(self, ns: str, name: str) -> dict:
        return self.store.get("pods", name, namespace=ns)

    def pods(self, ns: str | None = None, **kw) -> list[dict]:
        return self.store.list("pods", namespace=ns, **kw)

    def events(self, ns: str | None = None, reason: str | None = None) -> list[dict]:
        evs = self.store.list("events", namespace=ns)
        return [e for e in evs if reason is None or e.get("reason") == reason]


def make_pod(
    name: str,
    *,
    gpus: int | str | None = None,
    resources: dict | None = None,
    node_selector: dict | None = None,
    affinity: dict | None = None,
    tolerations: list | None = None,
    priority_class: str | None = None,
    annotations: dict | None = None,
    restart_policy: str = "Never",
    grace: int | None = None,
    env: list | None = None,
    labels: dict | None = None,
    image: str = "busybox:1.36",
) -> dict:
    limits: dict = {}
    if gpus is not None:
        limits["nvidia.com/gpu"] = str(gpus)
    limits.update(resources or {})
    spec: dict = {
        "restartPolicy": restart_policy,
        "containers": [
            {"name": "main", "image": image, "resources": {"limits": limits} if limits else {}}
        ],
    }
    if env:
        spec["containers"][0]["env"] = env
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = affinity
    if tolerations:
        spec["tolerations"] = tolerations
    if priority_class:
        spec["priorityClassName"] = priority_class
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    md: dict = {"name": name}
    if annotations:
        md["annotations"] = {
            k if "/" in k else f"kubesim.trainyard.io/{k}": str(v) for k, v in annotations.items()
        }
    if labels:
        md["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}


def make_job(
    name: str,
    *,
    workers: int = 1,
    gpus: int = 1,
    product: str | None = None,
    suspend: bool = False,
    run_seconds: float | None = None,
    restart_policy: str = "OnFailure",
    annotations: dict | None = None,
    run_policy: dict | None = None,
    master: bool = True,
    priority_class: str | None = None,
    grace: int | None = None,
) -> dict:
    ann = {"kubesim.trainyard.io/run-seconds": str(run_seconds)} if run_seconds is not None else {}
    ann.update(
        {
            k if "/" in k else f"kubesim.trainyard.io/{k}": str(v)
            for k, v in (annotations or {}).items()
        }
    )
    pspec: dict = {
        "containers": [
            {
                "name": "pytorch",
                "image": "registry.example/train:1.0",
                "command": ["torchrun", "train.py"],
                "resources": {"limits": {"nvidia.com/gpu": gpus, "cpu": "4", "memory": "32Gi"}},
            }
        ]
    }
    if product:
        pspec["nodeSelector"] = {"nvidia.com/gpu.product": product}
    if priority_class:
        pspec["priorityClassName"] = priority_class
    if grace is not None:
        pspec["terminationGracePeriodSeconds"] = grace
    tmpl = {"metadata": {"labels": {"app": name}, "annotations": ann}, "spec": pspec}
    replicas: dict = {}
    if master:
        replicas["Master"] = {"replicas": 1, "restartPolicy": restart_policy, "template": tmpl}
    if workers:
        replicas["Worker"] = {
            "replicas": workers,
            "restartPolicy": restart_policy,
            "template": tmpl,
        }
    rp = {"suspend": suspend}
    rp.update(run_policy or {})
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"nprocPerNode": "auto", "runPolicy": rp, "pytorchReplicaSpecs": replicas},
    }


def condition(obj: dict, ctype: str) -> dict | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return None
