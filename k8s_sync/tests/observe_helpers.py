"""Objects to create in kubesim for the observer tests (through Trainyard's own client)."""

from __future__ import annotations

from typing import Any

from k8s_sync.client import KubeClient

NS = "ty-obs-prod"


def namespace(client: KubeClient, name: str = NS) -> str:
    client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def pod(name: str, *, gpus: int = 0, resource: str = "nvidia.com/gpu",
        labels: dict[str, str] | None = None, cpu: str = "1", namespace: str = NS,
        node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    limits = {resource: str(gpus)} if gpus else {}
    spec: dict[str, Any] = {"containers": [{
        "name": "main", "image": "busybox:1",
        "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}, "limits": limits}}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": spec}


def quota(name: str, hard: dict[str, str], namespace: str = NS) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"hard": hard}}


def pytorchjob(name: str, *, gpus: int, worker_replicas: int = 0, namespace: str = NS,
               labels: dict[str, str] | None = None, run_seconds: float | None = None,
               suspend: bool = False) -> dict[str, Any]:
    annotations = ({"kubesim.trainyard.io/run-seconds": str(run_seconds)}
                   if run_seconds is not None else {})

    def replica(n: int) -> dict[str, Any]:
        return {"replicas": n, "restartPolicy": "OnFailure", "template": {
            "metadata": {"annotations": annotations}, "spec": {
                "containers": [{"name": "pytorch", "image": "pytorch:2",
                                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}}
    specs = {"Master": replica(1)}
    if worker_replicas:
        specs["Worker"] = replica(worker_replicas)
    spec: dict[str, Any] = {"pytorchReplicaSpecs": specs}
    if suspend:
        spec["runPolicy"] = {"suspend": True}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": spec}
