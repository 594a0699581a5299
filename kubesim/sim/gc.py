"""Garbage collection by ownerReferences, and the node lifecycle (failure injection).

GC: when an owner is deleted, its dependents are deleted (background
propagation); a dependent whose owner does not exist (by uid) is deleted too.
"""

from __future__ import annotations

import logging

from kubesim.sim.nodes import node_conditions
from kubesim.sim.state import TERMINAL, ClusterState
from kubesim.sim.util import fmt_time

log = logging.getLogger("kubesim.sim.gc")

KIND_RESOURCE = {
    ("v1", "Pod"): "pods",
    ("v1", "Service"): "services",
    ("v1", "ConfigMap"): "configmaps",
    ("v1", "Secret"): "secrets",
    ("v1", "Node"): "nodes",
    ("v1", "Namespace"): "namespaces",
    ("v1", "PersistentVolumeClaim"): "persistentvolumeclaims",
    ("kubeflow.org/v1", "PyTorchJob"): "pytorchjobs.kubeflow.org",
}
CLUSTER_SCOPED = {
    "nodes",
    "namespaces",
    "priorityclasses.scheduling.k8s.io",
    "storageclasses.storage.k8s.io",
}
UNREACHABLE = "node.kubernetes.io/unreachable"


def resource_for(api_version: str, kind: str) -> str:
    hit = KIND_RESOURCE.get((api_version, kind))
    if hit:
        return hit
    plural = kind.lower() + ("es" if kind.lower().endswith("s") else "s")
    group = api_version.split("/")[0] if "/" in api_version else ""
    return f"{plural}.{group}" if group else plural


class GarbageCollector:
    def __init__(self, store, state: ClusterState):
        self.store = store
        self.state = state
        self.deleted = 0

    def tick(self) -> None:
        st = self.state
        if not st.gc_dirty:
            return
        todo = sorted(st.gc_dirty)
        st.gc_dirty.clear()
        for owner_uid in todo:
            if owner_uid in st.uids:
                continue  # owner is alive
            deps = sorted(st.owners.get(owner_uid, ()))
            for resource, ns, name in deps:
                if not self._owner_missing(resource, ns, name):
                    continue
                try:
                    self.store.delete(
                        resource, name, namespace=ns or None, propagation_policy="Background"
                    )
                    self.deleted += 1
                except Exception as exc:
                    log.debug("gc delete %s %s/%s: %s", resource, ns, name, exc)

    def _owner_missing(self, resource: str, ns: str, name: str) -> bool:
        """True when every owner of the dependent is gone (checked against the store by uid)."""
        try:
            obj = self.store.get(resource, name, namespace=ns or None)
        except Exception:
            return False
        md = obj.get("metadata") or {}
        if md.get("deletionTimestamp"):
            return False
        refs = md.get("ownerReferences") or []
        for ref in refs:
            if ref.get("uid") in self.state.uids:
                return False
            ores = resource_for(ref.get("apiVersion", "v1"), ref.get("kind", ""))
            try:
                owner = self.store.get(
                    ores, ref.get("name"), namespace=None if ores in CLUSTER_SCOPED else ns
                )
            except Exception as exc:
                if getattr(exc, "code", None) == 404:
                    continue
                return False  # unknown resource kind: never delete on a guess
            if (owner.get("metadata") or {}).get("uid") == ref.get("uid"):
                return False
        return bool(refs)


class NodeController:
    """Failure injection through the node annotation kubesim.trainyard.io/fail."""

    def __init__(self, store, state: ClusterState, kubelet, events, now_fn):
        self.store = store
        self.state = state
        self.kubelet = kubelet
        self.events = events
        self.now_fn = now_fn
        self._failed: dict[str, bool] = {}

    def tick(self) -> None:
        st = self.state
        if not st.node_dirty:
            return
        now = self.now_fn()
        for name in sorted(st.node_dirty):
            node = st.nodes.get(name)
            if node is None:
                self._failed.pop(name, None)
                continue
            was = self._failed.get(name, False)
            if node.failed == was and self._consistent(node):
                continue
            self._failed[name] = node.failed
            self._set_ready(node, not node.failed, now)
            if node.failed:
                self.events.record(
                    node.obj,
                    "Normal",
                    "NodeNotReady",
                    f"Node {name} status is now: NodeNotReady",
                    component="node-controller",
                    kind="Node",
                )
                for key in sorted(node.pods):
                    info = st.pods.get(key)
                    if (
                        info is not None
                        and (info.obj.get("status") or {}).get("phase") not in TERMINAL
                    ):
                        self.kubelet.fail_for_node(info, now)
            elif was:
                self.events.record(
                    node.obj,
                    "Normal",
                    "NodeReady",
                    f"Node {name} status is now: NodeReady",
                    component="node-controller",
                    kind="Node",
                )
        st.node_dirty.clear()

    @staticmethod
    def _consistent(node) -> bool:
        has_taint = any(t.get("key") == UNREACHABLE for t in node.taints)
        return has_taint == node.failed

    def _set_ready(self, node, ready: bool, now: float) -> None:
        ts = fmt_time(now)
        taints = [
            t
            for t in ((node.obj.get("spec") or {}).get("taints") or [])
            if t.get("key") != UNREACHABLE
        ]
        if not ready:
            taints += [
                {"key": UNREACHABLE, "effect": "NoSchedule", "timeAdded": ts},
                {"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": ts},
            ]
        conds = node_conditions(
            ts,
            ready=ready,
            reason="NodeStatusUnknown",
            message="Kubelet stopped posting node status.",
        )
        if not ready:
            for c in conds:
                if c["type"] == "Ready":
                    c["status"] = "Unknown"
        try:
            self.store.patch(
                "nodes", node.name, {"spec": {"taints": taints or None}}, patch_type="merge"
            )
            self.store.patch(
                "nodes",
                node.name,
                {"status": {"conditions": conds}},
                patch_type="merge",
                subresource="status",
            )
        except Exception as exc:
            log.warning("node %s: %s", node.name, exc)
