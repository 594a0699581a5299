"""In-memory view of the cluster kept current through Store.subscribe.

Controllers never list the store on a tick: they read these caches and the dirty
sets the subscription fills.  The subscription callback only records; all writes
happen on the next tick.
"""

from __future__ import annotations

from typing import Any

from kubesim.sim.nodes import GpuInventory, node_failed_flag
from kubesim.sim.profile import SWITCH_LABEL
from kubesim.sim.util import key_of, parse_time, pod_requests, to_units

PYTORCHJOBS = "pytorchjobs.kubeflow.org"
TRAINJOBS = "trainjobs.trainer.kubeflow.org"
CLUSTER_RUNTIMES = "clustertrainingruntimes.trainer.kubeflow.org"
PRIORITYCLASSES = "priorityclasses.scheduling.k8s.io"
STORAGECLASSES = "storageclasses.storage.k8s.io"
VOLUMEATTRIBUTESCLASSES = "volumeattributesclasses.storage.k8s.io"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"  # a TrainJob's pods (its JobSet's name)
#: The pod label naming a pod's job, and the caches its controller reads: PyTorchJob pods
#: (kubesim.sim.operator) and TrainJob pods (kubesim.sim.trainjob).
JOB_POD_LABELS = ((JOB_NAME_LABEL, "job_pods", "job_dirty"),
                  (JOBSET_NAME_LABEL, "trainjob_pods", "trainjob_dirty"))
TERMINAL = ("Succeeded", "Failed")


class NodeState:
    __slots__ = (
        "alloc",
        "failed",
        "inv",
        "labels",
        "max_pods",
        "name",
        "npods",
        "obj",
        "order",
        "pods",
        "static_sig",
        "switch",
        "taints",
        "unschedulable",
        "used",
    )

    def __init__(self, name: str, order: int):
        self.name = name
        self.order = order
        self.obj: dict = {}
        self.labels: dict = {}
        self.taints: list = []
        self.unschedulable = False
        self.failed = False
        self.alloc: dict[str, int] = {}
        self.used: dict[str, int] = {}
        self.npods = 0
        self.max_pods = 110
        self.pods: set = set()
        self.inv: GpuInventory | None = None
        self.switch = ""
        self.static_sig: tuple = ()

    def update(self, obj: dict) -> bool:
        """Refresh from a Node object; True when something scheduling-relevant changed."""
        self.obj = obj
        md = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        self.labels = md.get("labels") or {}
        self.taints = [
            t for t in (spec.get("taints") or []) if t.get("effect") in ("NoSchedule", "NoExecute")
        ]
        self.unschedulable = bool(spec.get("unschedulable"))
        self.failed = node_failed_flag(obj)
        alloc = status.get("allocatable") or status.get("capacity") or {}
        self.alloc = {k: to_units(k, v) for k, v in alloc.items() if k != "pods"}
        self.max_pods = int(to_units("pods", alloc.get("pods", "110")))
        self.switch = self.labels.get(SWITCH_LABEL, "")
        sig = (
            tuple(sorted(self.labels.items())),
            repr(self.taints),
            self.unschedulable,
            self.failed,
            tuple(sorted(self.alloc.items())),
            self.max_pods,
        )
        changed = sig != self.static_sig
        self.static_sig = sig
        return changed


class PodInfo:
    __slots__ = ("fkey", "job", "job_caches", "key", "node", "obj", "priority", "req", "sig",
                 "start", "uid")

    def __init__(self, key: tuple, obj: dict):
        self.key = key
        self.uid = ""
        self.obj = obj
        self.req: dict[str, int] = {}
        self.priority = 0
        self.node: str | None = None  # node whose resources this pod holds
        self.start = 0.0
        self.job: tuple | None = None
        self.job_caches = ("job_pods", "job_dirty")  # its controller's (pods, dirty) caches
        self.sig: tuple | None = None  # scheduling signature, cached by the scheduler
        self.fkey: tuple | None = None


class ClusterState:
    def __init__(self, profile: dict):
        self.profile = profile
        self.nodes: dict[str, NodeState] = {}
        self.pods: dict[tuple, PodInfo] = {}
        self.jobs: dict[tuple, dict] = {}
        self.job_pods: dict[tuple, set] = {}
        self.trainjobs: dict[tuple, dict] = {}
        self.trainjob_pods: dict[tuple, set] = {}
        self.runtimes: dict[str, dict] = {}  # ClusterTrainingRuntimes by name
        self.priority_classes: dict[str, dict] = {}
        self.inventories: dict[str, GpuInventory] = {}
        self.node_gen = 0
        # dirty sets / flags consumed by controllers
        self.sched_active: dict[tuple, PodInfo] = {}
        self.sched_parked: dict[tuple, PodInfo] = {}
        self.sched_gated: set = set()
        self.capacity_freed = False
        self.kubelet_dirty: set = set()
        self.node_dirty: set = set()
        self.job_dirty: set = set()
        self.trainjob_dirty: set = set()
        self.ns_changed: set = set()  # namespaces where pods were deleted / quotas changed
        self.owners: dict[str, set] = {}  # owner uid -> {(resource, ns, name)}
        self.uids: dict[str, tuple] = {}  # uid -> (resource, ns, name) of every watched object
        self.gc_dirty: set = set()  # owner uids deleted, or (resource, ns, name) to verify
        self.bound_priorities: dict[int, int] = {}  # priority -> number of pods holding resources
        self.free: dict[str, set] = {}  # extended resource -> names of nodes with some of it free
        # volumes
        self.pvcs: dict[tuple, dict] = {}
        self.pvc_dirty: set = set()
        self.pvc_consumers: dict[tuple, set] = {}  # (ns, claim) -> nodes of bound pods using it
        self.storage_classes: dict[str, dict] = {}
        self.volume_attributes_classes: dict[str, dict] = {}
        self.released_pvs: set = set()  # (pv name, reclaim policy)
        self.pvs: dict[str, dict] = {}

    # ---- subscription -------------------------------------------------
    def on_event(self, etype: str, resource: str, obj: dict) -> None:
        if resource == "pods":
            self._on_pod(etype, obj)
        elif resource == "nodes":
            self._on_node(etype, obj)
        elif resource == PYTORCHJOBS:
            key = key_of(obj)
            if etype == "DELETED":
                self.jobs.pop(key, None)
            else:
                self.jobs[key] = obj
            self.job_dirty.add(key)
        elif resource == TRAINJOBS:
            key = key_of(obj)
            if etype == "DELETED":
                self.trainjobs.pop(key, None)
            else:
                self.trainjobs[key] = obj
            self.trainjob_dirty.add(key)
        elif resource == CLUSTER_RUNTIMES:
            if etype == "DELETED":
                self.runtimes.pop(obj["metadata"]["name"], None)
            else:
                self.runtimes[obj["metadata"]["name"]] = obj
            self.trainjob_dirty.update(self.trainjobs)  # waiting for it, or now changed
        elif resource == PRIORITYCLASSES:
            name = obj["metadata"]["name"]
            if etype == "DELETED":
                self.priority_classes.pop(name, None)
            else:
                self.priority_classes[name] = obj
        elif resource == "resourcequotas":
            self.ns_changed.add(obj["metadata"].get("namespace", ""))
        elif resource == "persistentvolumeclaims":
            self._on_pvc(etype, obj)
        elif resource == "persistentvolumes":
            if etype == "DELETED":
                self.pvs.pop(obj["metadata"]["name"], None)
            else:
                self.pvs[obj["metadata"]["name"]] = obj
        elif resource in (STORAGECLASSES, VOLUMEATTRIBUTESCLASSES):
            known = (self.storage_classes if resource == STORAGECLASSES
                     else self.volume_attributes_classes)
            if etype == "DELETED":
                known.pop(obj["metadata"]["name"], None)
            else:
                known[obj["metadata"]["name"]] = obj
                self.pvc_dirty.update(self.pvcs)  # a claim may have waited for it
        elif resource == "events":
            return
        self._track_owner(etype, resource, obj)

    def _track_owner(self, etype: str, resource: str, obj: dict) -> None:
        md = obj.get("metadata") or {}
        uid = md.get("uid")
        ident = (resource, md.get("namespace") or "", md.get("name"))
        if uid:
            if etype == "DELETED":
                self.uids.pop(uid, None)
                if uid in self.owners:
                    self.gc_dirty.add(uid)
            else:
                self.uids[uid] = ident
        refs = md.get("ownerReferences") or ()
        for ref in refs:
            ouid = ref.get("uid")
            if not ouid:
                continue
            deps = self.owners.setdefault(ouid, set())
            if etype == "DELETED":
                deps.discard(ident)
                if not deps:
                    self.owners.pop(ouid, None)
            elif ident not in deps:
                deps.add(ident)
                if ouid not in self.uids:
                    self.gc_dirty.add(ouid)  # owner unknown: verify on the next GC pass

    def _on_pvc(self, etype: str, obj: dict) -> None:
        key = key_of(obj)
        if etype == "DELETED":
            self.pvcs.pop(key, None)
            self.pvc_consumers.pop(key, None)
            uid = obj["metadata"].get("uid")
            vol = (obj.get("spec") or {}).get("volumeName")
            for name, pv in self.pvs.items():
                ref = (pv.get("spec") or {}).get("claimRef") or {}
                if name == vol or (uid and ref.get("uid") == uid):
                    policy = (pv.get("spec") or {}).get("persistentVolumeReclaimPolicy", "Delete")
                    self.released_pvs.add((name, policy))
            return
        self.pvcs[key] = obj
        self.pvc_dirty.add(key)
        if etype == "ADDED":
            self.capacity_freed = True  # pods waiting for this claim can be retried

    def _on_node(self, etype: str, obj: dict) -> None:
        name = obj["metadata"]["name"]
        if etype == "DELETED":
            ns = self.nodes.pop(name, None)
            self.node_gen += 1
            for free in self.free.values():
                free.discard(name)
            if ns:
                for k in list(ns.pods):
                    self.kubelet_dirty.add(k)
            return
        ns = self.nodes.get(name)
        if ns is None:
            ns = self.nodes[name] = NodeState(name, len(self.nodes))
            ns.inv = self.inventories.get(name) or GpuInventory(name, None, None)
            for info in self.pods.values():  # pods bound to this name before the node existed
                if info.node == name:
                    for r, v in info.req.items():
                        ns.used[r] = ns.used.get(r, 0) + v
                    ns.npods += 1
                    ns.pods.add(info.key)
        if ns.update(obj):
            self.node_gen += 1
            self.capacity_freed = True
            self._refresh_free(ns, ns.alloc)
        self.node_dirty.add(name)

    def _on_pod(self, etype: str, obj: dict) -> None:
        md = obj["metadata"]
        key = (md.get("namespace", ""), md["name"])
        info = self.pods.get(key)
        if etype == "DELETED":
            if info is None:
                return
            self._account(info, None)
            del self.pods[key]
            self.sched_active.pop(key, None)
            self.sched_parked.pop(key, None)
            if info.job:
                pods, dirty = info.job_caches
                getattr(self, pods).get(info.job, set()).discard(key)
                getattr(self, dirty).add(info.job)
            self.ns_changed.add(key[0])
            self.kubelet_dirty.add(key)
            return
        if info is None or info.uid != md.get("uid"):
            if info is not None:
                self._account(info, None)
            info = PodInfo(key, obj)
            info.uid = md.get("uid", "")
            info.req = pod_requests(obj)
            info.priority = self.resolve_priority(obj)
            info.start = parse_time(md.get("creationTimestamp")) or 0.0
            labels = md.get("labels") or {}
            for label, pods, dirty in JOB_POD_LABELS:
                job = labels.get(label)
                if job:
                    info.job, info.job_caches = (key[0], job), (pods, dirty)
                    getattr(self, pods).setdefault(info.job, set()).add(key)
                    break
            self.pods[key] = info
        info.obj = obj
        spec = obj.get("spec") or {}
        phase = (obj.get("status") or {}).get("phase") or "Pending"
        node = spec.get("nodeName")
        self._account(info, node if node and phase not in TERMINAL else None)
        if not node:
            if (
                phase == "Pending"
                and not md.get("deletionTimestamp")
                and spec.get("schedulerName", "default-scheduler") == "default-scheduler"
            ):
                if key in self.sched_gated and not spec.get("schedulingGates"):
                    self.sched_gated.discard(key)  # gates removed: schedule it now
                    self.sched_parked.pop(key, None)
                    self.sched_active[key] = info
                elif key in self.sched_parked:
                    self.sched_parked[key] = info
                else:
                    self.sched_active[key] = info
            else:
                self.sched_active.pop(key, None)
                self.sched_parked.pop(key, None)
        else:
            self.sched_active.pop(key, None)
            self.sched_parked.pop(key, None)
        if node or md.get("deletionTimestamp"):
            self.kubelet_dirty.add(key)
        if node:
            for vol in spec.get("volumes") or ():
                claim = (vol.get("persistentVolumeClaim") or {}).get("claimName")
                if claim:
                    consumers = self.pvc_consumers.setdefault((key[0], claim), set())
                    if node not in consumers:
                        consumers.add(node)
                        self.pvc_dirty.add((key[0], claim))
        if info.job:
            getattr(self, info.job_caches[1]).add(info.job)

    def _refresh_free(self, ns: NodeState, resources) -> None:
        for r in resources:
            if "/" not in r:
                continue
            free = self.free.setdefault(r, set())
            if ns.used.get(r, 0) < ns.alloc.get(r, 0) and ns.name in self.nodes:
                free.add(ns.name)
            else:
                free.discard(ns.name)

    def _account(self, info: PodInfo, node: str | None) -> None:
        if info.node == node:
            return
        if info.node is not None:
            old = self.nodes.get(info.node)
            if old is not None:
                for r, v in info.req.items():
                    old.used[r] = old.used.get(r, 0) - v
                old.npods -= 1
                old.pods.discard(info.key)
                if old.inv is not None:
                    old.inv.release(info.key)
                self._refresh_free(old, info.req)
            bp = self.bound_priorities
            bp[info.priority] -= 1
            if not bp[info.priority]:
                del bp[info.priority]
            self.capacity_freed = True
        info.node = node
        if node is not None:
            self.bound_priorities[info.priority] = self.bound_priorities.get(info.priority, 0) + 1
            new = self.nodes.get(node)
            if new is not None:
                for r, v in info.req.items():
                    new.used[r] = new.used.get(r, 0) + v
                new.npods += 1
                new.pods.add(info.key)
                if new.inv is not None:
                    new.inv.allocate(info.key, info.req)
                self._refresh_free(new, info.req)

    def resolve_priority(self, pod: dict) -> int:
        spec = pod.get("spec") or {}
        if spec.get("priority") is not None:
            return int(spec["priority"])
        name = spec.get("priorityClassName")
        if name:
            pc = self.priority_classes.get(name)
            if pc is not None:
                return int(pc.get("value", 0))
            if name == "system-node-critical":
                return 2000001000
            if name == "system-cluster-critical":
                return 2000000000
            return 0
        for pc in self.priority_classes.values():
            if pc.get("globalDefault"):
                return int(pc.get("value", 0))
        return 0

    def preemption_policy(self, pod: dict) -> str:
        spec = pod.get("spec") or {}
        if spec.get("preemptionPolicy"):
            return spec["preemptionPolicy"]
        pc = self.priority_classes.get(spec.get("priorityClassName") or "")
        return (pc or {}).get("preemptionPolicy") or "PreemptLowerPriority"


def snapshot_keys(d: Any) -> list:
    return sorted(d)
