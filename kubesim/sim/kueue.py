"""A Kueue look-alike (kueue.x-k8s.io/v1beta2, Kueue v0.19): Workloads for queue-labelled
jobs, quota admission by ClusterQueue and cohort, preemption, requeue, topology-aware
placement and the pending-workloads visibility API.

What it follows and what it leaves out, with sources in Kueue's code: ``kubesim/KUEUE.md``.
It costs nothing while no Kueue object and no queue-labelled job exists: ``tick`` returns at
once unless an event it cares about arrived.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubesim.sim import kueue_config, kueue_dra, kueue_podsready
from kubesim.sim import kueue_fungibility as kf
from kubesim.sim.kueue_queue_name import queue_name_change
from kubesim.sim.kueue_tas_taints import untolerated
from kubesim.sim.state import PYTORCHJOBS, TERMINAL, ClusterState
from kubesim.sim.util import fmt_time, parse_time, pod_requests, to_units

log = logging.getLogger("kubesim.sim.kueue")

GROUP = "kueue.x-k8s.io"
API = f"{GROUP}/v1beta2"
WORKLOADS = f"workloads.{GROUP}"
CLUSTERQUEUES = f"clusterqueues.{GROUP}"
LOCALQUEUES = f"localqueues.{GROUP}"
FLAVORS = f"resourceflavors.{GROUP}"
COHORTS = f"cohorts.{GROUP}"
WPCS = f"workloadpriorityclasses.{GROUP}"
TOPOLOGIES = f"topologies.{GROUP}"
TRAINJOBS = "trainjobs.trainer.kubeflow.org"
QUEUE_LABEL = f"{GROUP}/queue-name"
PRIORITY_LABEL = f"{GROUP}/priority-class"
JOB_UID_LABEL = f"{GROUP}/job-uid"
REQUIRED_TOPOLOGY = f"{GROUP}/podset-required-topology"
PREFERRED_TOPOLOGY = f"{GROUP}/podset-preferred-topology"
PODSET_LABEL = f"{GROUP}/podset"
MANAGER = f"{GROUP}/manager"
KUEUE_RESOURCES = frozenset({WORKLOADS, CLUSTERQUEUES, LOCALQUEUES, FLAVORS, COHORTS, WPCS,
                             TOPOLOGIES})
JOB_RESOURCES = frozenset({PYTORCHJOBS, TRAINJOBS})
HUMAN_REASONS = {  # pkg/scheduler/preemption/preemption.go HumanReadablePreemptionReasons
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
}


# ---- jobs -------------------------------------------------------------------------------------
class PyTorchJobAdapter:
    """Kueue's kubeflow jobs integration: a podset per replica type (lower-cased), the
    suspend flag in ``runPolicy.suspend``, flavors injected into replica templates."""
    resource, kind, group = PYTORCHJOBS, "PyTorchJob", "kubeflow.org"

    @staticmethod
    def podsets(job: dict) -> list[dict]:
        rs = (job.get("spec") or {}).get("pytorchReplicaSpecs") or {}
        order = [r for r in ("Master", "Worker") if r in rs] + sorted(
            r for r in rs if r not in ("Master", "Worker"))
        return [{"name": r.lower(), "count": int((rs[r] or {}).get("replicas", 1)),
                 "template": copy.deepcopy((rs[r] or {}).get("template") or {})} for r in order]

    @staticmethod
    def suspended(job: dict) -> bool:
        return bool(((job.get("spec") or {}).get("runPolicy") or {}).get("suspend"))

    @staticmethod
    def finished(job: dict) -> tuple[bool, bool, str]:
        for c in (job.get("status") or {}).get("conditions") or []:
            if c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True":
                return True, c["type"] == "Succeeded", c.get("message", "")
        return False, False, ""

    @staticmethod
    def _templates_patch(job: dict, per_podset: dict[str, dict], change: Callable[
            [dict, dict], None], suspend: bool) -> dict:
        """(Un)suspend with ``change(template, per_podset[podset])`` applied to each replica
        template (a podset is the replica type in lower case)."""
        rs = copy.deepcopy((job.get("spec") or {}).get("pytorchReplicaSpecs") or {})
        for rtype, r in rs.items():
            data = per_podset.get(rtype.lower())
            if data is not None:
                change(r.setdefault("template", {}), data)
        return {"spec": {"runPolicy": {"suspend": suspend}, "pytorchReplicaSpecs": rs}}

    @classmethod
    def run_patch(cls, job: dict, infos: dict[str, dict]) -> dict:
        return cls._templates_patch(job, infos, _apply_info, suspend=False)

    @classmethod
    def stop_patch(cls, job: dict, originals: dict[str, dict]) -> dict:
        return cls._templates_patch(job, originals, _restore_info, suspend=True)

    @staticmethod
    def active(state: ClusterState, job: dict) -> bool:
        key = (job["metadata"].get("namespace", ""), job["metadata"]["name"])
        for pk in state.job_pods.get(key, ()):
            p = state.pods.get(pk)
            if p is not None and (p.obj.get("status") or {}).get("phase") not in TERMINAL:
                return True
        return False

    @staticmethod
    def pods_ready(state: ClusterState, job: dict, total: int) -> bool:
        key = (job["metadata"].get("namespace", ""), job["metadata"]["name"])
        n = 0
        for pk in state.job_pods.get(key, ()):
            p = state.pods.get(pk)
            if p is not None and (p.obj.get("status") or {}).get("phase") in ("Running",
                                                                            "Succeeded"):
                n += 1
        return n >= total > 0


class TrainJobAdapter:
    """Kubeflow Trainer v2 TrainJob: one podset ``node`` of ``trainer.numNodes`` pods with
    ``resourcesPerNode``; flavors go in a ``runtimePatches`` entry of manager
    ``kueue.x-k8s.io/manager`` (pkg/controller/jobs/trainjob/trainjob_controller.go)."""
    resource, kind, group = TRAINJOBS, "TrainJob", "trainer.kubeflow.org"
    JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"

    @staticmethod
    def podsets(job: dict) -> list[dict]:
        tr = (job.get("spec") or {}).get("trainer") or {}
        md = (job.get("metadata") or {})
        tmpl: dict = {"spec": {"containers": [{"name": "node",
                                                "resources": tr.get("resourcesPerNode") or {}}]}}
        ann = {k: v for k, v in (md.get("annotations") or {}).items()
               if k in (REQUIRED_TOPOLOGY, PREFERRED_TOPOLOGY)}
        if ann:
            tmpl["metadata"] = {"annotations": ann}
        # the runtime patches of other managers apply to the pods (Kueue builds the podsets
        # from the JobSet with them applied): their node selector and tolerations count
        # for flavor assignment; Kueue's own entry is its admission, not the job's
        for patch in (job.get("spec") or {}).get("runtimePatches") or []:
            if patch.get("manager") == MANAGER:
                continue
            for rj in ((((patch.get("trainingRuntimeSpec") or {}).get("template") or {})
                        .get("spec") or {}).get("replicatedJobs") or []):
                if rj.get("name") != "node":
                    continue
                pod = ((((rj.get("template") or {}).get("spec") or {}).get("template") or {})
                       .get("spec") or {})
                for key in ("nodeSelector", "tolerations"):
                    if pod.get(key):
                        tmpl["spec"][key] = copy.deepcopy(pod[key])
        return [{"name": "node", "count": int(tr.get("numNodes") or 1), "template": tmpl}]

    @staticmethod
    def suspended(job: dict) -> bool:
        return bool((job.get("spec") or {}).get("suspend"))

    @staticmethod
    def finished(job: dict) -> tuple[bool, bool, str]:
        for c in (job.get("status") or {}).get("conditions") or []:
            if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
                return True, c["type"] == "Complete", c.get("message", "")
        return False, False, ""

    @staticmethod
    def _patches(job: dict, infos: dict[str, dict] | None) -> list:
        out = [p for p in (job.get("spec") or {}).get("runtimePatches") or []
               if p.get("manager") != MANAGER]
        if infos:
            rjs = []
            for name, info in infos.items():
                spec = {k: v for k, v in (("nodeSelector", info.get("nodeSelector")),
                                          ("tolerations", info.get("tolerations"))) if v}
                rjs.append({"name": name, "template": {"spec": {"template": {"spec": spec}}}})
            out.append({"manager": MANAGER, "trainingRuntimeSpec": {
                "template": {"spec": {"replicatedJobs": rjs}}}})
        return out

    def run_patch(self, job: dict, infos: dict[str, dict]) -> dict:
        return {"spec": {"suspend": False, "runtimePatches": self._patches(job, infos)}}

    def stop_patch(self, job: dict, originals: dict[str, dict]) -> dict:
        return {"spec": {"suspend": True, "runtimePatches": self._patches(job, None)}}

    def active(self, state: ClusterState, job: dict) -> bool:
        return self._count(state, job, ("Pending", "Running", "Unknown", None)) > 0

    def pods_ready(self, state: ClusterState, job: dict, total: int) -> bool:
        return self._count(state, job, ("Running", "Succeeded")) >= total > 0

    def _count(self, state: ClusterState, job: dict, phases: tuple) -> int:
        ns, name = job["metadata"].get("namespace", ""), job["metadata"]["name"]
        n = 0
        for (pns, _), p in state.pods.items():
            if pns == ns and (p.obj["metadata"].get("labels") or {}).get(
                    self.JOBSET_LABEL) == name and (p.obj.get("status") or {}).get(
                    "phase") in phases:
                n += 1
        return n


ADAPTERS: dict[str, Any] = {PYTORCHJOBS: PyTorchJobAdapter(), TRAINJOBS: TrainJobAdapter()}


def _apply_info(tmpl: dict, info: dict) -> None:
    spec = tmpl.setdefault("spec", {})
    if info.get("nodeSelector"):
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **info["nodeSelector"]}
    if info.get("tolerations"):
        spec["tolerations"] = list(spec.get("tolerations") or []) + [
            t for t in info["tolerations"] if t not in (spec.get("tolerations") or [])]
    md = tmpl.setdefault("metadata", {})
    md["labels"] = {**(md.get("labels") or {}), PODSET_LABEL: info["name"]}


def _restore_info(tmpl: dict, orig: dict) -> None:
    spec = tmpl.setdefault("spec", {})
    ospec = orig.get("spec") or {}
    for k in ("nodeSelector", "tolerations"):
        if ospec.get(k):
            spec[k] = copy.deepcopy(ospec[k])
        else:
            spec.pop(k, None)
    labels = dict(((tmpl.get("metadata") or {}).get("labels")) or {})
    labels.pop(PODSET_LABEL, None)
    tmpl.setdefault("metadata", {})["labels"] = labels


def _shape(podsets: list[dict]) -> list:
    """What admission depends on in podsets: names, counts, requests, node selection and
    the TAS annotations (the injected podset label apart)."""
    out = []
    for ps in podsets:
        tmpl = ps.get("template") or {}
        spec = tmpl.get("spec") or {}
        ann = (tmpl.get("metadata") or {}).get("annotations") or {}
        out.append((ps.get("name"), int(ps.get("count", 1)), sorted(pod_requests(tmpl).items()),
                    sorted((spec.get("nodeSelector") or {}).items()),
                    repr(spec.get("tolerations") or []),
                    ann.get(REQUIRED_TOPOLOGY), ann.get(PREFERRED_TOPOLOGY)))
    return out


def workload_name(kind: str, group: str, name: str, uid: str) -> str:
    """jobframework.GetWorkloadNameForOwnerWithGVK (long names: prefix up to 247)."""
    h = hashlib.sha1(f"{kind}\n{group}\n{name}\n{uid}".encode()).hexdigest()[:5]  # noqa: S324
    return f"{(kind.lower() + '-' + name)[:247]}-{h}"


# ---- quantities -------------------------------------------------------------------------------
def fmt_units(resource: str, v: int) -> str:
    if resource == "cpu":
        return str(v // 1000) if v % 1000 == 0 else f"{v}m"
    for suffix, mult in (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if v and v % mult == 0 and v >= mult:
            return f"{v // mult}{suffix}"
    return str(v)


FR = tuple[str, str]  # (flavor, resource)


# ---- the quota tree (pkg/cache/scheduler/resource_node.go) ---------------------------------------
@dataclass
class QNode:
    name: str
    is_cq: bool
    quotas: dict = field(default_factory=dict)     # fr -> (nominal, borrowingLimit, lendingLimit)
    subtree: dict = field(default_factory=dict)    # fr -> int
    usage: dict = field(default_factory=dict)      # fr -> int
    parent: QNode | None = None
    children: list = field(default_factory=list)

    def local_quota(self, fr: FR) -> int:
        lend = self.quotas.get(fr, (0, None, None))[2]
        if lend is None:
            return 0
        return max(0, self.subtree.get(fr, 0) - lend)

    def local_available(self, fr: FR) -> int:
        return max(0, self.local_quota(fr) - self.usage.get(fr, 0))

    def available(self, fr: FR) -> int:
        if self.parent is None:
            return self.subtree.get(fr, 0) - self.usage.get(fr, 0)
        parent_avail = self.parent.available(fr)
        borrow = self.quotas.get(fr, (0, None, None))[1]
        if borrow is not None:
            lq = self.local_quota(fr)
            stored = self.subtree.get(fr, 0) - lq
            used_in_parent = max(0, self.usage.get(fr, 0) - lq)
            parent_avail = min(stored - used_in_parent + borrow, parent_avail)
        return self.local_available(fr) + parent_avail

    def potential_available(self, fr: FR) -> int:
        if self.parent is None:
            return self.subtree.get(fr, 0)
        avail = self.local_quota(fr) + self.parent.potential_available(fr)
        borrow = self.quotas.get(fr, (0, None, None))[1]
        if borrow is not None:
            avail = min(self.subtree.get(fr, 0) + borrow, avail)
        return avail

    def add_usage(self, fr: FR, val: int) -> None:
        la = self.local_available(fr)
        self.usage[fr] = self.usage.get(fr, 0) + val
        if self.parent is not None and val > la:
            self.parent.add_usage(fr, val - la)

    def remove_usage(self, fr: FR, val: int) -> None:
        stored_in_parent = self.usage.get(fr, 0) - self.local_quota(fr)
        self.usage[fr] = self.usage.get(fr, 0) - val
        if stored_in_parent <= 0 or self.parent is None:
            return
        self.parent.remove_usage(fr, min(val, stored_in_parent))

    def nominal(self, fr: FR) -> int:
        return self.quotas.get(fr, (0, None, None))[0]

    def root(self) -> QNode:
        n = self
        while n.parent is not None:
            n = n.parent
        return n


def _accumulate(node: QNode) -> None:
    node.subtree = {fr: q[0] for fr, q in node.quotas.items()}
    if node.is_cq:
        return
    node.usage = {}
    for child in node.children:
        _accumulate(child)
        for fr, q in child.subtree.items():
            node.subtree[fr] = node.subtree.get(fr, 0) + q - child.local_quota(fr)
        for fr, u in child.usage.items():
            node.usage[fr] = node.usage.get(fr, 0) + max(0, u - child.local_quota(fr))


def _quotas(resource_groups: list) -> tuple[dict, list]:
    quotas: dict = {}
    groups = []
    for rg in resource_groups or []:
        covered = list(rg.get("coveredResources") or [])
        flavors = []
        for fl in rg.get("flavors") or []:
            flavors.append(fl["name"])
            for r in fl.get("resources") or []:
                res = r["name"]
                bl, ll = r.get("borrowingLimit"), r.get("lendingLimit")
                quotas[(fl["name"], res)] = (
                    to_units(res, r.get("nominalQuota", 0)),
                    None if bl is None else to_units(res, bl),
                    None if ll is None else to_units(res, ll))
        groups.append((covered, flavors))
    return quotas, groups


# ---- workloads --------------------------------------------------------------------------------
class WlInfo:
    """A Workload as the scheduler sees it."""
    __slots__ = ("_shape", "cq", "evicted", "key", "lq", "obj", "order_ts", "priority",
                 "reserved", "reserved_at", "uid", "usage")

    def __init__(self, key: tuple, obj: dict):
        self.key = key
        self.obj = obj
        self.uid = obj["metadata"].get("uid", "")
        spec = obj.get("spec") or {}
        self.priority = int(spec.get("priority") or 0)
        self.lq = spec.get("queueName") or ""
        self.cq = ""
        conds = {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}
        qr = conds.get("QuotaReserved")
        self.reserved = bool(qr and qr.get("status") == "True") and not _true(conds, "Finished")
        self.reserved_at = parse_time((qr or {}).get("lastTransitionTime")) or 0.0
        self.evicted = _true(conds, "Evicted")
        ev = conds.get("Evicted") or conds.get("Requeued")
        # requeuingStrategy.timestamp: Eviction (the default): an evicted workload queues
        # from its eviction time (pkg/workload/workload.go GetQueueOrderTimestamp)
        self.order_ts = (parse_time(ev.get("lastTransitionTime")) if ev else None) or \
            parse_time(obj["metadata"].get("creationTimestamp")) or 0.0
        self.usage: dict[FR, int] = {}
        self._shape: tuple | None = None
        adm = (obj.get("status") or {}).get("admission") or {}
        if self.reserved:
            self.cq = adm.get("clusterQueue", "")
            for psa in adm.get("podSetAssignments") or []:
                for res, q in (psa.get("resourceUsage") or {}).items():
                    fl = (psa.get("flavors") or {}).get(res)
                    if fl:
                        fr = (fl, res)
                        self.usage[fr] = self.usage.get(fr, 0) + to_units(res, q)


    @property
    def shape(self) -> tuple:
        """What flavor assignment reads of the podsets (``_shape``), hashable."""
        if self._shape is None:
            self._shape = tuple(tuple(tuple(x) if isinstance(x, list) else x for x in t)
                                for t in _shape((self.obj.get("spec") or {}).get("podSets")
                                                or []))
        return self._shape

    def facts(self, place: tuple) -> tuple:
        """What the admission pass and the queues' status read of it."""
        adm = cond_of(self.obj, "Admitted")
        return (place, self.priority, self.order_ts, self.evicted, self.reserved_at, self.uid,
                tuple(sorted(self.usage.items())), self.shape,
                bool(adm and adm.get("status") == "True"))


def _true(conds: dict, ctype: str) -> bool:
    c = conds.get(ctype)
    return bool(c and c.get("status") == "True")


def set_cond(conds: list[dict], ctype: str, status: str, reason: str, message: str,
             now: str, generation: int | None = None) -> list[dict]:
    """apimeta.SetStatusCondition: the transition time moves only with the status."""
    out = []
    found = False
    for c in conds:
        if c.get("type") == ctype:
            found = True
            new = dict(c, status=status, reason=reason, message=message[:32768])
            if c.get("status") != status:
                new["lastTransitionTime"] = now
            if generation is not None:
                new["observedGeneration"] = generation
            out.append(new)
        else:
            out.append(c)
    if not found:
        c = {"type": ctype, "status": status, "reason": reason, "message": message[:32768],
             "lastTransitionTime": now}
        if generation is not None:
            c["observedGeneration"] = generation
        out.append(c)
    return out


def cond_of(obj: dict, ctype: str) -> dict | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return None


@dataclass
class Assignment:
    """The flavors of a workload's podsets, or why there are none."""
    mode: str                                   # "Fit", "Preempt", "NoFit"
    flavors: list[dict]                         # per podset: resource -> flavor
    usage: dict                                 # fr -> total
    per_podset: list[dict]                      # per podset: resource -> total units
    message: str = ""
    reason: str = ""
    borrows: int = 0  # the borrowing level (flavorassigner.go Assignment.Borrowing)
    topology: list = field(default_factory=list)  # per podset: (level, value) or None


class KueueController:
    def __init__(self, store, state: ClusterState, events, now_fn):
        self.store = store
        self.state = state
        self.events = events
        self.now_fn = now_fn
        self.objs: dict[str, dict[tuple, dict]] = {r: {} for r in KUEUE_RESOURCES}
        self.jobs: dict[tuple, dict] = {}       # (resource, ns, name) -> labelled job
        self.sched_dirty = False  # a Kueue object changed: run an admission pass
        self.job_dirty: set[tuple] = set()  # (resource, ns, name) of jobs to sync
        self.all_jobs_dirty = False
        self.wl_by_owner: dict[str, tuple] = {}  # job uid -> workload key
        self.pending: dict[str, list[WlInfo]] = {}  # cq -> pending workloads in queue order
        self._tas_used: dict[str, dict[str, int]] = {}  # node -> room taken in this pass
        self._no_targets: dict[str, tuple] = {}  # workload uid -> state of a fruitless search
        self._searched = False
        self._tas_next: dict[str, dict[str, int]] = {}
        self.reconciles = 0
        # the incremental state, kept across passes (Kueue's cache and queue manager)
        self.infos: dict[tuple, WlInfo] = {}      # workload key -> its facts
        self.place: dict[tuple, tuple] = {}       # key -> ("fin",) | ("res", cq) | ("q", cq)
        #                                           | ("pend", reason, message)
        self.cqs: dict[str, QNode] = {}           # the quota tree, usage kept up to date
        self.groups: dict[str, list] = {}
        self.admitted: dict[str, dict[tuple, WlInfo]] = {}  # cq -> workloads holding quota
        self.queued: dict[str, dict[tuple, WlInfo]] = {}    # cq -> pending workloads
        self._order: dict[str, list[WlInfo]] = {}  # cq -> queued in queue order (a cache)
        self.by_lq: dict[tuple, set[tuple]] = {}  # (ns, lq) -> workload keys
        self._config_dirty = True   # a queue, cohort, flavor or topology changed: rebuild
        self._dirty_roots: set[tuple] = set()  # quota trees whose pass is not a fixpoint
        self._dirty_lqs: set[tuple] = set()
        self._to_pend: set[tuple] = set()   # workloads with a fixed pending reason to write
        self._rver: dict[tuple, int] = {}   # root -> version, moved by any usage change
        self._sig: dict[str, tuple] = {}    # cq -> (root version, what its quota offers)
        self._asg_memo: dict[tuple, tuple] = {}  # (cq, shape) -> (sig, Assignment)
        self._pre_memo: dict[str, tuple] = {}    # uid -> inputs of a search that found none
        self._phantom: list[tuple[QNode, FR, int]] = []  # usage kept for preemptors
        self._wrote = False  # the current pass wrote, or its searches' cache moved
        self._in_pass = False
        self._deferred: dict[tuple, None] = {}  # workload events during a pass
        self._podsets_cache: dict[str, tuple] = {}   # job uid -> (inputs, podsets, shape)
        self._wl_shape_cache: dict[tuple, tuple] = {}  # workload key -> (inputs, shape)
        self._pass_ctx: tuple | None = None  # (quota tree, admitted) of the current pass
        self._oracle_used = False
        self.cfg = kueue_config.KueueConfig()  # Kueue's Configuration (kueue_config.py)
        self.timers = kueue_podsready.Timers()  # PodsReady timeouts, backoffs' ends
        self._pr_blocked = False  # waitForPodsReady.blockAdmission stopped the last pass

    # ---- events -------------------------------------------------------------------------------
    @property
    def dirty(self) -> bool:
        return self.sched_dirty or self.all_jobs_dirty or bool(self.job_dirty)

    def on_event(self, etype: str, resource: str, obj: dict) -> None:
        md = obj["metadata"]
        if resource == "configmaps":
            if kueue_config.is_config(resource, obj):
                self.cfg = kueue_config.from_configmap(None if etype == "DELETED" else obj)
                self._config_dirty = self.sched_dirty = self.all_jobs_dirty = True
            return
        if resource == "pods":
            labels = md.get("labels") or {}
            if not self.jobs or not labels.get(PODSET_LABEL):
                return
            ns = md.get("namespace", "")
            for jres, lab in ((PYTORCHJOBS, "training.kubeflow.org/job-name"),
                              (TRAINJOBS, TrainJobAdapter.JOBSET_LABEL)):
                if labels.get(lab) and (jres, ns, labels[lab]) in self.jobs:
                    self.job_dirty.add((jres, ns, labels[lab]))
            if self.objs[TOPOLOGIES] and (etype == "DELETED" or (obj.get("status") or {}).get(
                    "phase") in TERMINAL):
                self.sched_dirty = True  # room under a topology domain freed (with a
                # Topology every tree is passed: _schedule ignores the dirty roots then)
            return
        if resource in KUEUE_RESOURCES:
            key = (md.get("namespace", ""), md["name"])
            old = self.objs[resource].get(key)
            if etype == "DELETED":
                self.objs[resource].pop(key, None)
                self._wl_shape_cache.pop(key, None)
            else:
                self.objs[resource][key] = obj
            if resource in (CLUSTERQUEUES, LOCALQUEUES) and old is not None and \
                    etype != "DELETED" and old.get("spec") == obj.get("spec"):
                return  # only our status write
            self.sched_dirty = True
            if resource == WORKLOADS:
                if self._in_pass:
                    self._deferred[key] = None
                elif not self._config_dirty:
                    self._refresh(key, own=False)
                for ref in md.get("ownerReferences") or []:
                    if ref.get("controller"):
                        if etype == "DELETED":
                            self.wl_by_owner.pop(ref.get("uid", ""), None)
                        else:
                            self.wl_by_owner[ref.get("uid", "")] = key
                        for jres, ad in ADAPTERS.items():
                            if ad.kind == ref.get("kind"):
                                self.job_dirty.add((jres, key[0], ref.get("name")))
            elif resource == WPCS:
                self.all_jobs_dirty = True
            else:
                self._config_dirty = True
        elif resource in JOB_RESOURCES:
            jkey = (resource, md.get("namespace", ""), md["name"])
            if etype != "DELETED" and (md.get("labels") or {}).get(QUEUE_LABEL):
                self.jobs[jkey] = obj
                self.job_dirty.add(jkey)
            elif self.jobs.pop(jkey, None) is not None:
                self.sched_dirty = True
                self._podsets_cache.pop(md.get("uid", ""), None)

    def tick(self) -> None:
        if self.timers.next_due <= self.now_fn():
            for key in self.timers.pop_due(self.now_fn()):
                if key in self.objs[WORKLOADS]:
                    self._owner_dirty(self.objs[WORKLOADS][key])
                    self.sched_dirty = True
        if not (self.sched_dirty or self.all_jobs_dirty or self.job_dirty):
            return
        self.reconciles += 1
        try:
            self.reconcile(self.now_fn())
        except Exception:
            log.exception("kueue reconcile")

    # ---- helpers ------------------------------------------------------------------------------
    def _patch_status(self, resource: str, key: tuple, status: dict) -> None:
        with contextlib.suppress(Exception):
            self.store.patch(resource, key[1], {"status": status}, patch_type="merge",
                             namespace=key[0] or None, subresource="status")

    def _patch_job(self, resource: str, job: dict, body: dict) -> None:
        md = job["metadata"]
        try:
            self.store.patch(resource, md["name"], body, patch_type="merge",
                             namespace=md.get("namespace"))
        except Exception as exc:
            log.debug("patch job %s: %s", md["name"], exc)

    def _patch_wl_spec(self, key: tuple, spec: dict) -> None:
        try:
            self.objs[WORKLOADS][key] = self.store.patch(
                WORKLOADS, key[1], {"spec": spec}, patch_type="merge", namespace=key[0])
        except Exception as exc:
            log.debug("update workload %s: %s", key, exc)

    def _priority(self, job: dict, podsets: list[dict]) -> tuple[int, dict | None]:
        name = (job["metadata"].get("labels") or {}).get(PRIORITY_LABEL)
        if name:
            wpc = self.objs[WPCS].get(("", name))
            ref = {"group": GROUP, "kind": "WorkloadPriorityClass", "name": name}
            return int((wpc or {}).get("value") or 0), ref
        for ps in podsets:
            pcn = ((ps["template"].get("spec") or {}).get("priorityClassName"))
            if pcn:
                pc = self.state.priority_classes.get(pcn) or {}
                return int(pc.get("value") or 0), {"group": "scheduling.k8s.io",
                                                   "kind": "PriorityClass", "name": pcn}
        return 0, None

    # ---- the reconcile pass -------------------------------------------------------------------
    def reconcile(self, now: float) -> None:
        ts = fmt_time(now)
        todo = sorted(self.jobs) if self.all_jobs_dirty else sorted(
            k for k in self.job_dirty if k in self.jobs)
        sched = self.sched_dirty
        self.job_dirty = set()
        self.all_jobs_dirty = self.sched_dirty = False
        # 1. jobs -> workloads; finished jobs; jobs running without admission
        for jkey in todo:
            job = self.jobs.get(jkey)
            if job is None or job["metadata"].get("deletionTimestamp"):
                continue
            self._sync_job(jkey[0], job, self.wl_by_owner.get(job["metadata"].get("uid", "")),
                           ts)
        if sched:
            # 2. admission
            self._schedule(now, ts)
            # 3. queue status
            self._queue_status(ts)

    def _sync_job(self, resource: str, job: dict, wl_key: tuple | None, ts: str) -> None:
        ad = ADAPTERS[resource]
        md = job["metadata"]
        ns = md.get("namespace", "")
        if wl_key is None:
            podsets = ad.podsets(job)
            prio, ref = self._priority(job, podsets)
            spec: dict = {"queueName": md["labels"][QUEUE_LABEL], "active": True,
                          "podSets": podsets, "priority": prio}
            if ref is not None:
                spec["priorityClassRef"] = ref
            new_wl: dict[str, Any] = {"apiVersion": API, "kind": "Workload",
                  "metadata": {"name": workload_name(ad.kind, ad.group, md["name"],
                                                     md.get("uid", "")),
                               "namespace": ns,
                               "labels": {JOB_UID_LABEL: md.get("uid", "")},
                               "ownerReferences": [{
                                   "apiVersion": job.get("apiVersion", ""), "kind": ad.kind,
                                   "name": md["name"], "uid": md.get("uid", ""),
                                   "controller": True, "blockOwnerDeletion": True}]},
                  "spec": spec}
            if not ad.suspended(job):  # the webhook suspends queue-labelled jobs on create
                self._patch_job(resource, job, {"spec": {"runPolicy": {"suspend": True}}}
                                if resource == PYTORCHJOBS else {"spec": {"suspend": True}})
            try:
                created = self.store.create(WORKLOADS, new_wl, namespace=ns)
            except Exception as exc:
                log.debug("create workload for %s: %s", md["name"], exc)
                return
            self.objs[WORKLOADS][(ns, created["metadata"]["name"])] = created
            self.wl_by_owner[md.get("uid", "")] = (ns, created["metadata"]["name"])
            self.events.record(job, "Normal", "CreatedWorkload",
                               f"Created Workload: {ns}/{created['metadata']['name']}",
                               component="kueue-admission")
            return
        wl: dict[str, Any] | None = self.objs[WORKLOADS].get(wl_key)
        if wl is None:
            return
        status = dict(wl.get("status") or {})  # set_cond copies what it changes
        conds = list(status.get("conditions") or [])
        gen = wl["metadata"].get("generation")
        done, ok, msg = ad.finished(job)
        fin = cond_of(wl, "Finished")
        if done:
            if not (fin and fin.get("status") == "True"):
                conds = set_cond(conds, "Finished", "True", "Succeeded" if ok else "Failed",
                                 msg or ("Job finished successfully" if ok else "Job failed"),
                                 ts, gen)
                status["conditions"] = conds
                self._write_wl(wl_key, wl, status)
            return
        reserved = _true({c["type"]: c for c in conds}, "QuotaReserved")
        if queue_name_change(self.store, WORKLOADS, job, wl, reserved, ad.suspended(job)):
            return  # the Workload's update brings it back here, in its new queue
        evicted = _true({c["type"]: c for c in conds}, "Evicted")
        active_spec = (wl.get("spec") or {}).get("active", True)
        if active_spec is not False and _true({c["type"]: c for c in conds},
                                              "DeactivationTarget"):
            self._patch_wl_spec(wl_key, {"active": False})  # workload_controller.go
            return
        if reserved and active_spec is False and not evicted:
            conds, why, msg, _cause = kueue_podsready.deactivation(status, conds)
            conds = set_cond(conds, "Evicted", "True", why, msg, ts, gen)
            evicted = True
        elif active_spec is False and status.get("requeueState"):
            status["requeueState"] = None
        if reserved and evicted:
            # stop the job; once its pods are gone, release the quota and requeue
            if not ad.suspended(job):
                originals = {ps["name"]: ps.get("template") or {}
                             for ps in (wl.get("spec") or {}).get("podSets") or []}
                self._patch_job(resource, job, ad.stop_patch(job, originals))
            elif not ad.active(self.state, job):
                ev = cond_of({"status": {"conditions": conds}}, "Evicted") or {}
                requeue = ev.get("reason") == "Preempted"
                conds = set_cond(conds, "Requeued", "True" if requeue else "False",
                                 ev.get("reason", ""), ev.get("message", ""), ts, gen)
                conds = set_cond(conds, "QuotaReserved", "False", "PendingEvaluation",
                                 ev.get("message", ""), ts, gen)
                conds = set_cond(conds, "Admitted", "False", "NoReservation",
                                 "The workload has no reservation", ts, gen)
                if any(c["type"] == "PodsReady" for c in conds):
                    conds = set_cond(conds, "PodsReady", "False", "WaitForStart",
                                     "Not all pods are ready or succeeded", ts, gen)
                status["admission"] = None  # (the eviction was counted when it was made)
                self.events.record(wl, "Normal", "Pending", ev.get("message", ""),
                                   component="kueue-admission")
            status["conditions"] = conds
            self._write_wl(wl_key, wl, status)
            return
        if reserved and _true({c["type"]: c for c in conds}, "Admitted"):
            if ad.suspended(job):
                infos = self._podset_infos(wl)
                self._patch_job(resource, job, ad.run_patch(job, infos))
                cq_name = status["admission"]["clusterQueue"]
                self.events.record(job, "Normal", "Started",
                                   f"Admitted by clusterQueue {cq_name}",
                                   component="kueue-admission")
            total = sum(int(ps.get("count", 1)) for ps in (wl["spec"].get("podSets") or []))
            conds, due = kueue_podsready.on_admitted(
                self.cfg.pods_ready, wl_key, status, conds,
                ad.pods_ready(self.state, job, total), parse_time(ts) or 0.0, set_cond, gen)
            self.timers.set(wl_key, due)
            if _true({c["type"]: c for c in conds}, "Evicted"):  # PodsReadyTimeout: stop it
                self._owner_dirty(wl)
            status["conditions"] = conds
            self._write_wl(wl_key, wl, status)
            return
        rq = cond_of({"status": {"conditions": conds}}, "Requeued")
        if not reserved and active_spec is not False:
            now = parse_time(ts) or 0.0
            self.timers.set(wl_key, kueue_podsready.backoff_state(status, conds, now))
            done_conds = kueue_podsready.finish_backoff(status, conds, now, set_cond, gen)
            if done_conds is not None:
                status["conditions"] = conds = done_conds
                self._write_wl(wl_key, wl, status)
        if not reserved and active_spec is not False and rq and rq.get("status") == "False" \
                and rq.get("reason") == "Deactivated":
            conds = set_cond(conds, "Requeued", "True", "Reactivated",
                             "The workload was reactivated", ts, gen)
            status["conditions"] = conds
            self._write_wl(wl_key, wl, status)
        if not reserved and not ad.suspended(job):
            # running without a reservation: suspend it (jobframework: stop the job)
            self._patch_job(resource, job, {"spec": {"runPolicy": {"suspend": True}}}
                            if resource == PYTORCHJOBS else {"spec": {"suspend": True}})
        podsets, job_shape = self._job_podsets(ad, job)
        prio, ref = self._priority(job, podsets)
        spec_patch: dict = {}
        if job_shape != self._wl_shape(wl_key, wl):
            # the job changed while it waits: the Workload follows it
            # (jobframework reconciler: updateWorkloadToMatchJob)
            spec_patch["podSets"] = copy.deepcopy(podsets)
        if prio != int((wl.get("spec") or {}).get("priority") or 0):
            spec_patch["priority"] = prio
            if ref is not None:
                spec_patch["priorityClassRef"] = ref
        if spec_patch:
            try:
                out = self.store.patch(WORKLOADS, wl_key[1], {"spec": spec_patch},
                                       patch_type="merge", namespace=wl_key[0])
                self.objs[WORKLOADS][wl_key] = out
            except Exception as exc:
                log.debug("update workload %s: %s", wl_key, exc)

    def _job_podsets(self, ad: Any, job: dict) -> tuple[list[dict], list]:
        """The job's podsets and their ``_shape``, computed again only when its spec (its
        generation) or its topology annotations changed, not on each pod event."""
        md = job["metadata"]
        ann = md.get("annotations") or {}
        key = (md.get("uid", ""), md.get("generation"), ann.get(REQUIRED_TOPOLOGY),
               ann.get(PREFERRED_TOPOLOGY))
        got = self._podsets_cache.get(md.get("uid", ""))
        if key[1] is not None and got is not None and got[0] == key:
            return got[1], got[2]
        podsets = ad.podsets(job)
        out = (key, podsets, _shape(podsets))
        self._podsets_cache[md.get("uid", "")] = out
        return out[1], out[2]

    def _wl_shape(self, key: tuple, wl: dict) -> list:
        """``_shape`` of the Workload's podSets, again only when its spec changed."""
        ck = (wl["metadata"].get("uid", ""), wl["metadata"].get("generation"))
        got = self._wl_shape_cache.get(key)
        if ck[1] is not None and got is not None and got[0] == ck:
            return got[1]
        shape = _shape((wl.get("spec") or {}).get("podSets") or [])
        self._wl_shape_cache[key] = (ck, shape)
        return shape

    def _podset_infos(self, wl: dict) -> dict[str, dict]:
        adm = (wl.get("status") or {}).get("admission") or {}
        infos = {}
        for psa in adm.get("podSetAssignments") or []:
            sel: dict = {}
            tols: list = []
            for fl in sorted(set((psa.get("flavors") or {}).values())):
                rf = (self.objs[FLAVORS].get(("", fl)) or {}).get("spec") or {}
                sel.update(rf.get("nodeLabels") or {})
                tols.extend(rf.get("tolerations") or [])
            ta = psa.get("topologyAssignment") or {}
            for sl in ta.get("slices") or []:
                for level, v in zip(ta.get("levels") or [], sl.get("valuesPerLevel") or [],
                                    strict=False):
                    if v.get("universal"):
                        sel[level] = v["universal"]
            infos[psa["name"]] = {"name": psa["name"], "nodeSelector": sel,
                                  "tolerations": tols}
        return infos

    def _write_wl(self, key: tuple, wl: dict, status: dict) -> bool:
        old = wl.get("status") or {}
        new = {k: v for k, v in status.items() if v is not None}
        if {k: v for k, v in old.items() if v is not None} == new:
            return False
        patch = dict(status)
        for k in old:
            if k not in patch:
                patch[k] = None
        try:
            out = self.store.patch(WORKLOADS, key[1], {"status": patch}, patch_type="merge",
                                   namespace=key[0], subresource="status")
            self.objs[WORKLOADS][key] = out
        except Exception as exc:
            log.debug("workload status %s: %s", key, exc)
        return True

    # ---- the queues and the quota tree --------------------------------------------------------
    def _tree(self) -> tuple[dict[str, QNode], dict[str, list], dict[str, QNode]]:
        cqs: dict[str, QNode] = {}
        groups: dict[str, list] = {}
        cohorts: dict[str, QNode] = {}

        def cohort(name: str, seen: tuple = ()) -> QNode:
            node = cohorts.get(name)
            if node is None:
                node = cohorts[name] = QNode(name, False)
                spec = (self.objs[COHORTS].get(("", name)) or {}).get("spec") or {}
                node.quotas, _ = _quotas(spec.get("resourceGroups") or [])
                parent = spec.get("parentName")
                if parent and parent not in seen and parent != name:
                    p = cohort(parent, (*seen, name))
                    node.parent = p
                    p.children.append(node)
            return node

        for (_, name), cq in sorted(self.objs[CLUSTERQUEUES].items()):
            spec = cq.get("spec") or {}
            node = QNode(name, True)
            node.quotas, groups[name] = _quotas(spec.get("resourceGroups") or [])
            cohort_name = spec.get("cohortName")
            if cohort_name:
                p = cohort(cohort_name)
                node.parent = p
                p.children.append(node)
            cqs[name] = node
        for _, name in sorted(self.objs[COHORTS]):
            cohort(name)  # a Cohort without ClusterQueues still lends its quota to its tree
            # (pkg/cache/scheduler: every Cohort object is a node of the hierarchy)
        for node in cqs.values():
            node.subtree = {fr: q[0] for fr, q in node.quotas.items()}
        return cqs, groups, cohorts

    # ---- the incremental state ----------------------------------------------------------------
    def _roots(self) -> set[tuple]:
        return {self._root_id(n) for n in self.cqs.values()}

    @staticmethod
    def _root_id(node: QNode) -> tuple:
        r = node.root()
        return (r.is_cq, r.name)

    def _bump(self, cq: str) -> None:
        node = self.cqs.get(cq)
        if node is not None:
            rid = self._root_id(node)
            self._rver[rid] = self._rver.get(rid, 0) + 1

    def _classify(self, info: WlInfo) -> tuple:
        """Where a workload stands, as the old full scan sorted it at the start of a pass."""
        wl, key = info.obj, info.key
        fin = cond_of(wl, "Finished")
        if fin and fin.get("status") == "True":
            return ("fin",)
        if info.reserved:
            return ("res", info.cq)
        if (wl.get("spec") or {}).get("active", True) is False:
            return ("pend", "Deactivated", "The workload is deactivated")
        status = wl.get("status") or {}
        if kueue_podsready.backoff_state(status, (status.get("conditions") or []),
                                         self.now_fn()) is not None:
            return ("backoff",)  # out of its queue until requeueAt (workload_controller.go)
        ev = cond_of(wl, "Evicted")
        if self.cfg.pods_ready.timestamp == "Creation" and ev and ev.get(
                "reason") == "PodsReadyTimeout" and ev.get("status") == "True":
            info.order_ts = parse_time(wl["metadata"].get("creationTimestamp")) or 0.0
        lq = self.objs[LOCALQUEUES].get((key[0], info.lq))
        if lq is None:
            return ("pend", "Misconfigured", f"LocalQueue {info.lq} doesn't exist")
        cq_name = (lq.get("spec") or {}).get("clusterQueue", "")
        if cq_name not in self.cqs:
            return ("pend", "Misconfigured", f"ClusterQueue {cq_name} doesn't exist")
        if self._inactive_reason(cq_name, self.groups[cq_name]):
            return ("pend", "Suspended", f"ClusterQueue {cq_name} is inactive")
        if not self._ns_selected(cq_name, key[0]):
            return ("pend", "Misconfigured",
                    "workload namespace doesn't match ClusterQueue selector")
        info.cq = cq_name
        return ("q", cq_name)

    def _unplace(self, info: WlInfo, place: tuple) -> None:
        if place[0] == "res" and place[1] in self.cqs:
            self.admitted[place[1]].pop(info.key, None)
            node = self.cqs[place[1]]
            for fr, v in info.usage.items():
                node.remove_usage(fr, v)
            self._bump(place[1])
        elif place[0] == "q" and place[1] in self.queued:
            self.queued[place[1]].pop(info.key, None)
            self._order.pop(place[1], None)
            self._bump(place[1])
        self.by_lq.get((info.key[0], info.lq), set()).discard(info.key)

    def _put(self, info: WlInfo, place: tuple) -> None:
        self.infos[info.key] = info
        self.place[info.key] = place
        self.by_lq.setdefault((info.key[0], info.lq), set()).add(info.key)
        if place[0] == "res" and place[1] in self.cqs:
            self.admitted[place[1]][info.key] = info
            node = self.cqs[place[1]]
            for fr, v in info.usage.items():
                node.add_usage(fr, v)
            self._bump(place[1])
        elif place[0] == "q":
            self.queued[place[1]][info.key] = info
            self._order.pop(place[1], None)
            self._bump(place[1])
        elif place[0] == "pend":
            self._to_pend.add(info.key)

    def _refresh(self, key: tuple, own: bool) -> None:
        """A Workload changed: move it between the queues and the usage. ``own``: the
        admission pass wrote it, so only a change of what the pass reads makes its quota
        tree worth another pass."""
        old, old_place = self.infos.pop(key, None), self.place.pop(key, None)
        obj = self.objs[WORKLOADS].get(key)
        info = WlInfo(key, obj) if obj is not None else None
        place = self._classify(info) if info is not None else None
        same = own and old is not None and info is not None and place is not None and \
            old_place is not None and old.facts(old_place) == info.facts(place)
        if old is not None and old_place is not None:
            self._unplace(old, old_place)
            if not same:
                self._dirty_lqs.add((key[0], old.lq))
                if old_place[0] in ("res", "q") and old_place[1] in self.cqs:
                    self._dirty_roots.add(self._root_id(self.cqs[old_place[1]]))
        if info is not None and place is not None:
            self._put(info, place)
            if not same:
                self._dirty_lqs.add((key[0], info.lq))
                if place[0] in ("res", "q") and place[1] in self.cqs:
                    self._dirty_roots.add(self._root_id(self.cqs[place[1]]))

    def _rebuild(self) -> None:
        """The queues, cohorts or flavors changed: the tree again, every workload placed
        again, every tree and LocalQueue due for a pass (Kueue's cache rebuilt)."""
        self._config_dirty = False
        self.cqs, self.groups, _cohorts = self._tree()
        for root in {n.root().name: n.root() for n in self.cqs.values()}.values():
            _accumulate(root)
        self.admitted = {n: {} for n in self.cqs}
        self.queued = {n: {} for n in self.cqs}
        self._order, self.by_lq, self.infos, self.place = {}, {}, {}, {}
        self._asg_memo, self._pre_memo, self._sig = {}, {}, {}
        self._to_pend = set()
        for key, wl in self.objs[WORKLOADS].items():
            info = WlInfo(key, wl)
            self._put(info, self._classify(info))
        self._dirty_roots = self._roots()
        self._dirty_lqs = set(self.objs[LOCALQUEUES])

    def _queue_order(self, cq: str) -> list[WlInfo]:
        lst = self._order.get(cq)
        if lst is None:
            lst = self._order[cq] = sorted(self.queued[cq].values(),
                                           key=lambda i: (-i.priority, i.order_ts, i.key))
        return lst

    def _offer(self, cq: str) -> tuple:
        """What the ClusterQueue's quota offers now: all that flavor assignment reads."""
        node = self.cqs[cq]
        ver = self._rver.get(self._root_id(node), 0)
        got = self._sig.get(cq)
        if got is not None and got[0] == ver:
            return got[1]
        sig = tuple((fr, node.available(fr), node.potential_available(fr),
                     node.usage.get(fr, 0)) for fr in sorted(node.quotas))
        self._sig[cq] = (ver, sig)
        return sig

    def _assign_memo(self, info: WlInfo, node: QNode, groups: list, dry: bool = False
                     ) -> Assignment:
        """``_assign``, reused for a workload of the same podsets in the same queue while
        what the queue's quota offers is unchanged (identical blocked workloads decided
        once; not with topologies, whose room is the nodes')."""
        if self.objs[TOPOLOGIES]:
            return self._assign(info, node, groups, dry=dry)
        mkey = (info.cq, info.shape)
        sig = self._offer(info.cq)
        got = self._asg_memo.get(mkey)
        if got is not None and got[0] == sig:
            return got[1]
        self._oracle_used = False
        asg = self._assign(info, node, groups, dry=dry)
        if not self._oracle_used:  # the oracle's answer depends on the workload
            self._asg_memo[mkey] = (sig, asg)
        return asg

    def _schedule(self, now: float, ts: str) -> None:
        if self._config_dirty:
            self._rebuild()
        cqs = self.cqs
        for key in sorted(self._to_pend):
            info, place = self.infos.get(key), self.place.get(key)
            if info is not None and place is not None and place[0] == "pend":
                self._pend(info, place[1], place[2], ts)
        self._to_pend = set()
        every = bool(self.objs[TOPOLOGIES]) or self._pr_blocked  # blockAdmission: all trees
        self._pr_blocked = False
        roots = self._roots() if every else self._dirty_roots & self._roots()
        self._dirty_roots = set()
        sel = [n for n, node in cqs.items() if self._root_id(node) in roots]
        if not sel:
            return
        self._in_pass = True
        try:
            dirty_again = self._pass(sel, ts)
        finally:
            self._in_pass = False
            for fr_node, fr, v in reversed(self._phantom):
                fr_node.remove_usage(fr, v)
                self._rver[self._root_id(fr_node)] = self._rver.get(
                    self._root_id(fr_node), 0) + 1
            self._phantom = []
            deferred, self._deferred = self._deferred, {}
            for key in deferred:
                self._refresh(key, own=True)
        self._dirty_roots |= dirty_again

    def _pass(self, sel: list[str], ts: str) -> set[tuple]:
        """The old full scan's pass over the ClusterQueues ``sel`` (whole quota trees):
        returns the trees where it wrote (another pass may decide more there)."""
        cqs, groups = self.cqs, self.groups
        admitted: dict[str, list[WlInfo]] = {n: list(self.admitted[n].values()) for n in sel}
        pending: dict[str, list[WlInfo]] = {n: list(self._queue_order(n)) for n in sel}
        wrote: set[tuple] = set()
        self._tas_used = {}
        self._pass_ctx = (cqs, admitted)
        blocked: set[str] = set()
        searched: set[str] = set()  # one preemption search per ClusterQueue and pass
        idx = dict.fromkeys(pending, 0)
        while any(pending.values()):
            heads = []
            for cq_name, lst in pending.items():
                if cq_name in blocked or idx[cq_name] >= len(lst):
                    continue
                heads.append(lst[idx[cq_name]])
                idx[cq_name] += 1
            if not heads:
                break
            entries = [(h, self._assign_memo(h, cqs[h.cq], groups[h.cq], dry=True))
                       for h in heads]
            entries.sort(key=lambda e: (e[1].borrows, -e[0].priority, e[0].order_ts))
            held: list = []  # quota reserved by heads that cannot reclaim, this round only
            for info, asg in entries:
                node = cqs[info.cq]
                self._wrote = False
                if asg.mode != "NoFit":  # recompute: earlier entries changed the usage
                    asg = self._assign_memo(info, node, groups[info.cq])
                strict = ((self.objs[CLUSTERQUEUES].get(("", info.cq)) or {}).get("spec") or {}
                          ).get("queueingStrategy") == "StrictFIFO"
                if asg.mode == "Fit":
                    if kueue_podsready.blocks(self.cfg.pods_ready, self.admitted):
                        self._pend(info, "WaitingForPodsReady", kueue_podsready.BLOCKED, ts)
                        self._pr_blocked = True  # the scheduler waits: no more this pass
                        blocked.update(pending)
                        break
                    self._admit(info, asg, node, ts)
                    admitted[info.cq].append(info)
                    pending[info.cq] = [p for p in pending[info.cq] if p is not info]
                    idx[info.cq] -= 1
                    wrote.add(self._root_id(node))
                    continue
                if asg.mode == "Preempt" and info.cq not in searched:
                    self._searched = False
                    targets = self._preemption_targets(info, asg, node, cqs, admitted)
                    if self._searched:  # a full search ran (not a cached or quick no)
                        searched.add(info.cq)
                        self._wrote = True  # its cache moved: the next pass differs
                    if targets:
                        fresh = [t for t in targets if not t[0].evicted]
                        for t, reason in fresh:
                            self._evict(t, info, reason, ts)
                        n = len(fresh) or len(targets)
                        self._pend(info, "WaitingForPreemptedWorkloads",
                                   f"{asg.message}. Pending the preemption of {n} workload(s)",
                                   ts)
                        for fr, v in asg.usage.items():  # keep it for the preemptor
                            node.add_usage(fr, v)
                            self._phantom.append((node, fr, v))
                        self._bump(info.cq)
                        if strict:
                            blocked.add(info.cq)
                        wrote.add(self._root_id(node))
                        continue
                    self._pend(info, asg.reason or "WaitingForQuota", asg.message, ts)
                else:
                    self._pend(info, asg.reason or "WaitingForQuota", asg.message, ts)
                if asg.mode == "Preempt":  # StrictFIFO: the head again in every cycle
                    self._reserve(info, asg, node, self._phantom if strict else held)
                if self._wrote:
                    wrote.add(self._root_id(node))
                if strict:
                    blocked.add(info.cq)
            self._release(held)
        self._pass_ctx = None
        for name in sel:
            self.pending[name] = pending[name]
        for name in list(self.pending):
            if name not in cqs:
                del self.pending[name]
        self._cq_status({name: cqs[name] for name in sel}, admitted, pending, ts)
        return wrote

    def _oracle(self, info: WlInfo, node: QNode) -> tuple[Callable[[dict], list], dict]:
        self._oracle_used = True  # its answer depends on the workload: not memoised
        return kf.oracle(self, info, node, Assignment)  # the preemption oracle, one flavor

    def _reserve(self, info: WlInfo, asg: Assignment, node: QNode, held: list) -> None:
        spec = (self.objs[CLUSTERQUEUES].get(("", info.cq)) or {}).get("spec") or {}
        kf.reserve(self, spec, asg, node, held)  # reserveCapacityForUnreclaimablePreempt

    def _release(self, held: list) -> None:
        kf.release(self, held)

    def _inactive_reason(self, cq_name: str, groups: list) -> str:
        missing = sorted({f for _, fls in groups for f in fls
                          if ("", f) not in self.objs[FLAVORS]})
        stop = ((self.objs[CLUSTERQUEUES].get(("", cq_name)) or {}).get("spec") or {}).get(
            "stopPolicy") or "None"
        if missing:
            return "FlavorNotFound"
        if stop != "None":
            return "Stopped"
        return ""

    def _ns_selected(self, cq_name: str, ns: str) -> bool:
        sel = ((self.objs[CLUSTERQUEUES].get(("", cq_name)) or {}).get("spec") or {}).get(
            "namespaceSelector")
        if sel is None:
            return True
        if not sel:
            return True
        try:
            labels = (self.store.get("namespaces", ns)["metadata"].get("labels")) or {}
        except Exception:
            return False
        for k, v in (sel.get("matchLabels") or {}).items():
            if labels.get(k) != v:
                return False
        for e in sel.get("matchExpressions") or []:
            k, op, vals = e.get("key"), e.get("operator"), e.get("values") or []
            if (op == "In" and labels.get(k) not in vals) or \
                    (op == "NotIn" and labels.get(k) in vals) or \
                    (op == "Exists" and k not in labels) or \
                    (op == "DoesNotExist" and k in labels):
                return False
        return True

    def _pend(self, info: WlInfo, reason: str, message: str, ts: str) -> None:
        wl = self.objs[WORKLOADS].get(info.key, info.obj)
        gen = wl["metadata"].get("generation")
        qr = cond_of(wl, "QuotaReserved")
        if qr is not None and qr.get("status") == "False" and qr.get("reason") == reason and \
                qr.get("message") == message[:32768] and (
                    gen is None or qr.get("observedGeneration") == gen):
            return  # already says so (set_cond would change nothing)
        status = copy.deepcopy(wl.get("status") or {})
        status["conditions"] = set_cond(list(status.get("conditions") or []), "QuotaReserved",
                                        "False", reason, message, ts, gen)
        if self._write_wl(info.key, wl, status):
            self._wrote = True

    # ---- flavor assignment (pkg/scheduler/flavorassigner/flavorassigner.go) -------------------
    def _assign(self, info: WlInfo, node: QNode, groups: list, dry: bool = False
                ) -> Assignment:
        """``dry``: only to order the cycle's heads (TAS room is not taken)."""
        podsets = (info.obj.get("spec") or {}).get("podSets") or []
        overlay = {n: dict(u) for n, u in self._tas_used.items()}
        flavors_out: list[dict] = []
        per_podset: list[dict] = []
        usage: dict[FR, int] = {}
        topo: list = []
        levels: list[int] = []  # borrowing level per resource group (Assignment.Borrowing)
        cq_spec = (self.objs[CLUSTERQUEUES].get(("", info.cq)) or {}).get("spec") or {}
        worst = "Fit"
        msgs: list[str] = []
        reason = ""
        for i, ps in enumerate(podsets):
            tmpl = ps.get("template") or {}
            count = int(ps.get("count", 1))
            per_pod = self.cfg.requests(pod_requests(tmpl))  # resources.transformations
            per_pod, dra_err = kueue_dra.with_devices(  # deviceClassMappings (kueue_dra.py)
                self.store, info.key[0], ps, i, self.cfg.device_class_mappings, per_pod)
            if dra_err:  # markDRAInadmissible: the field error is the condition's message
                return Assignment("NoFit", [], {}, [], dra_err, kueue_dra.MISCONFIGURED)
            req = {r: v * count for r, v in per_pod.items()}
            per_podset.append(req)
            chosen: dict[str, str] = {}
            reasons: list[str] = []
            mode = "Fit"
            placement = None
            for res in sorted(req):
                if not any(res in cov for cov, _ in groups):
                    reasons.append(f"resource {res} unavailable in ClusterQueue")
                    mode = "NoFit"
                    reason = reason or "NoMatchingFlavor"
            if mode == "Fit":
                for covered, flavors in groups:
                    want = {r: v for r, v in req.items() if r in covered}
                    if not want:
                        continue
                    # flavorFungibility and the preemption oracle: kueue_fungibility.choose
                    best, freasons, tried, level = kf.choose(
                        flavors, self._try_flavor, (want, per_pod, count, tmpl, node, usage,
                                                    overlay), node, cq_spec, want, usage,
                        functools.partial(self._oracle, info, node))
                    reasons.extend(freasons)
                    levels.append(level)
                    # the group's reason (KEP-10852 tiers): the nominated flavor's;
                    # NoMatchingFlavor only when every flavor failed to match
                    further = [r for r in tried if r and r != "NoMatchingFlavor"]
                    greason = ("WaitingForQuota" if best is not None and best[0] == "Preempt"
                               and "TopologyPlacementFailed" not in further
                               else "TopologyPlacementFailed"
                               if "TopologyPlacementFailed" in further
                               else further[0] if further
                               else "NoMatchingFlavor" if tried else "")
                    if greason and (not reason or greason == "TopologyPlacementFailed"):
                        reason = greason
                    if best is None:
                        mode = "NoFit"
                        break
                    for r in want:
                        chosen[r] = best[1]
                    if best[3] is not None:
                        placement = best[3][:2]
                        for n, k in best[3][2].items():  # later podsets see this room taken
                            u = overlay.setdefault(n, {})
                            for r, v in per_pod.items():
                                u[r] = u.get(r, 0) + v * k
                    if best[0] == "Preempt":
                        mode = "Preempt"
            if mode != "Fit":
                msgs.append(f"couldn't assign flavors to pod set {ps.get('name', 'main')}: "
                            + ", ".join(sorted(set(reasons))))
            if mode == "NoFit":
                worst = "NoFit"
            elif mode == "Preempt" and worst == "Fit":
                worst = "Preempt"
            flavors_out.append(chosen)
            topo.append(placement)
            for r, fl in chosen.items():
                usage[(fl, r)] = usage.get((fl, r), 0) + req[r]
        borrows = max(levels, default=0)  # a level, 0 when within nominal quota
        if worst == "Fit" and not dry:
            self._tas_next = overlay
        return Assignment(worst, flavors_out, usage, per_podset, "; ".join(msgs),
                          reason if worst != "Fit" else "", borrows, topo)

    def _try_flavor(self, fl: str, want: dict, per_pod: dict, count: int, tmpl: dict,
                    node: QNode, assumed: dict, overlay: dict):
        rf = self.objs[FLAVORS].get(("", fl))
        if rf is None:
            return "NoFit", [f"flavor {fl} not found"], "NoMatchingFlavor", False, None
        spec = rf.get("spec") or {}
        labels = spec.get("nodeLabels") or {}
        pspec = tmpl.get("spec") or {}
        for k, v in (pspec.get("nodeSelector") or {}).items():
            if k in labels and labels[k] != v:
                return ("NoFit", [f"flavor {fl} doesn't match node affinity"],
                        "NoMatchingFlavor", False, None)
        tols = list(pspec.get("tolerations") or []) + list(spec.get("tolerations") or [])
        for t in spec.get("nodeTaints") or []:
            if t.get("effect") in ("NoSchedule", "NoExecute") and not _tolerated(t, tols):
                taint = f"{t.get('key')}={t.get('value', '')}:{t.get('effect')}"
                return ("NoFit", [f"untolerated taint {taint} in flavor {fl}"],
                        "NoMatchingFlavor", False, None)
        mode = "Fit"
        reasons: list[str] = []
        reason = ""
        for res, v in sorted(want.items()):
            fr = (fl, res)
            if fr not in node.quotas:
                reasons.append(f"resource {res} unavailable in ClusterQueue")
                return "NoFit", reasons, "NoMatchingFlavor", False, None
            val = assumed.get(fr, 0) + v
            maxcap = node.potential_available(fr)
            if val > maxcap:
                reasons.append(
                    f"insufficient quota for {res} in flavor {fl}, previously considered "
                    f"podsets requests ({fmt_units(res, assumed.get(fr, 0))}) + current podset "
                    f"request ({fmt_units(res, v)}) > maximum capacity ({fmt_units(res, maxcap)})")
                return "NoFit", reasons, "ExceedsMaxQuota", False, None
            avail = node.available(fr)
            if val > avail:
                reasons.append(f"insufficient unused quota for {res} in flavor {fl}, "
                               f"{fmt_units(res, val - avail)} more needed")
                mode = "Preempt"
                reason = "WaitingForQuota"
        borrow = any(node.usage.get((fl, r), 0) + assumed.get((fl, r), 0) + v
                     > node.nominal((fl, r)) for r, v in want.items())
        place = None
        ann = (tmpl.get("metadata") or {}).get("annotations") or {}
        level = ann.get(REQUIRED_TOPOLOGY) or ann.get(PREFERRED_TOPOLOGY)
        if level and spec.get("topologyName"):
            place = self._place(spec, labels, level, per_pod, count, tmpl, overlay)
            if place is None and ann.get(REQUIRED_TOPOLOGY):
                topo = spec.get("topologyName")
                return ("NoFit", [*reasons, f"topology \"{topo}\" doesn't allow to fit any of "
                                            f"{count} pod(s)"],
                        "TopologyPlacementFailed", borrow, None)
        return mode, reasons, reason, borrow, place

    # ---- topology-aware scheduling ------------------------------------------------------------
    def _place(self, rf_spec: dict, labels: dict, level: str, per_pod: dict, count: int,
               tmpl: dict, overlay: dict) -> tuple[str, str, dict] | None:
        """The domain of ``level`` with the least free room that holds all ``count`` pods
        (the BestFit profile of pkg/cache/scheduler/tas_flavor_snapshot.go), and the pods
        per node there. ``overlay``: room already taken by podsets placed in this pass."""
        topo = self.objs[TOPOLOGIES].get(("", rf_spec.get("topologyName", "")))
        if topo is None or level not in [lv.get("nodeLabel") for lv in
                                         (topo.get("spec") or {}).get("levels") or []]:
            return None
        sel = {**((tmpl.get("spec") or {}).get("nodeSelector") or {}), **labels}
        tols = [*((tmpl.get("spec") or {}).get("tolerations") or []),
                *(rf_spec.get("tolerations") or [])]
        room: dict[str, int] = {}
        per_node: dict[str, list[tuple[str, int]]] = {}
        for ns in sorted(self.state.nodes.values(), key=lambda n: n.name):
            if ns.failed or ns.unschedulable or level not in ns.labels or untolerated(
                    ns.taints, tols, _tolerated):
                continue
            if any(ns.labels.get(k) != v for k, v in sel.items()):
                continue
            taken = overlay.get(ns.name) or {}
            fit = ns.max_pods - ns.npods
            for r, v in per_pod.items():
                if v > 0:
                    free = ns.alloc.get(r, 0) - ns.used.get(r, 0) - taken.get(r, 0)
                    fit = min(fit, free // v)
            if fit > 0:
                dom = ns.labels[level]
                room[dom] = room.get(dom, 0) + fit
                per_node.setdefault(dom, []).append((ns.name, fit))
        fitting = sorted((n, dom) for dom, n in room.items() if n >= count)
        if not fitting:
            return None
        dom = fitting[0][1]
        alloc: dict[str, int] = {}
        left = count
        for name, fit in per_node[dom]:
            k = min(fit, left)
            alloc[name] = k
            left -= k
            if not left:
                break
        return level, dom, alloc

    # ---- admission, preemption ----------------------------------------------------------------
    def _admit(self, info: WlInfo, asg: Assignment, node: QNode, ts: str) -> None:
        wl = info.obj
        gen = wl["metadata"].get("generation")
        psas = []
        for ps, fls, req, place in zip((wl.get("spec") or {}).get("podSets") or [],
                                       asg.flavors, asg.per_podset, asg.topology, strict=False):
            psa: dict = {"name": ps.get("name", "main"), "flavors": dict(fls),
                         "resourceUsage": {r: fmt_units(r, v) for r, v in sorted(req.items())
                                           if r in fls},
                         "count": int(ps.get("count", 1))}
            if place is not None:
                psa["topologyAssignment"] = {"levels": [place[0]], "slices": [{
                    "domainCount": 1, "podCounts": {"universal": int(ps.get("count", 1))},
                    "valuesPerLevel": [{"universal": place[1]}]}]}
            psas.append(psa)
        for fr, v in asg.usage.items():
            node.add_usage(fr, v)
        if any(p is not None for p in asg.topology):
            self._tas_used = self._tas_next
        status = copy.deepcopy(wl.get("status") or {})
        conds = list(status.get("conditions") or [])
        conds = set_cond(conds, "QuotaReserved", "True", "QuotaReserved",
                         f"Quota reserved in ClusterQueue {info.cq}", ts, gen)
        for ctype in ("Evicted", "Preempted"):
            prev = cond_of({"status": {"conditions": conds}}, ctype)
            if prev and prev.get("status") == "True":
                conds = set_cond(conds, ctype, "False", "QuotaReserved",
                                 "Previously: " + prev.get("message", ""), ts, gen)
        conds = set_cond(conds, "Admitted", "True", "Admitted", "The workload is admitted",
                         ts, gen)
        status["conditions"] = conds
        status["admission"] = {"clusterQueue": info.cq, "podSetAssignments": psas}
        info.reserved = True
        info.usage = dict(asg.usage)
        if self.place.get(info.key) == ("q", info.cq):  # the pass's own bookkeeping
            self.queued[info.cq].pop(info.key, None)
            self._order.pop(info.cq, None)
            self.place[info.key] = ("res", info.cq)
            self.admitted[info.cq][info.key] = info
            # reserved_at stays as read at the start of the pass, as the full scan had it
            # (a preemption search later in the pass orders candidates by it)
        self._bump(info.cq)
        self._write_wl(info.key, wl, status)
        self.events.record(wl, "Normal", "QuotaReserved",
                           f"Quota reserved in ClusterQueue {info.cq}, wait time since queued "
                           f"was {max(0, int(parse_time(ts) or 0) - int(info.order_ts))}s",
                           component="kueue-admission")
        self.events.record(wl, "Normal", "Admitted",
                           f"Admitted by ClusterQueue {info.cq}", component="kueue-admission")
        self._owner_dirty(wl)  # the job is un-suspended on the next pass

    def _preemption_targets(self, info: WlInfo, asg: Assignment, node: QNode,
                            cqs: dict[str, QNode], admitted: dict[str, list[WlInfo]]
                            ) -> list[tuple[WlInfo, str]]:
        """``_search_targets``, not repeated while nothing moved in the quota tree since
        it found none for this workload (the answer would be the same: none, and no full
        search, as its cache then says)."""
        inputs = (self._rver.get(self._root_id(node), 0), info.key, info.cq, info.priority,
                  info.order_ts, tuple(sorted(asg.usage.items())))
        if self._pre_memo.get(info.uid) == inputs:
            return []
        targets = self._search_targets(info, asg, node, cqs, admitted)
        if targets:
            self._pre_memo.pop(info.uid, None)
        else:
            self._pre_memo[info.uid] = inputs
        return targets

    def _search_targets(self, info: WlInfo, asg: Assignment, node: QNode,
                        cqs: dict[str, QNode], admitted: dict[str, list[WlInfo]]
                        ) -> list[tuple[WlInfo, str]]:
        """Classical preemption (pkg/scheduler/preemption/preemption.go
        ``classicalPreemptions`` and ``classical/hierarchical_preemption.go``,
        ``candidate_generator.go``): candidates in the preemptor's ClusterQueue by
        ``withinClusterQueue``, and in the cohort's queues above their nominal quota by
        ``reclaimWithinCohort``, each with its variant. A candidate over which the
        preemptor has a hierarchical advantage (its requests fit in its own queue's
        nominal quota, or in a cohort on its path) is reclaimed whatever
        ``borrowWithinCohort`` says, reason ``InCohortReclamation``; otherwise it is
        ``ReclaimWithoutBorrowing`` (``InCohortReclamation``, only if the preemptor
        then stays within its nominal quota) or, with ``borrowWithinCohort:
        LowerPriority`` and a lower priority at most ``maxPriorityThreshold``,
        ``ReclaimWhileBorrowing`` (``InCohortReclaimWhileBorrowing``)."""
        spec = ((self.objs[CLUSTERQUEUES].get(("", info.cq)) or {}).get("spec") or {})
        pre = spec.get("preemption") or {}
        within = pre.get("withinClusterQueue") or "Never"
        reclaim = pre.get("reclaimWithinCohort") or "Never"
        bwc = pre.get("borrowWithinCohort") or {}
        bwc_ok = bwc.get("policy") == "LowerPriority"
        threshold = bwc.get("maxPriorityThreshold")
        if within == "Never" and reclaim == "Never":
            return []  # Kueue's defaults: no preemption at all
        need = {fr for fr, v in asg.usage.items() if v > node.available(fr)} or set(asg.usage)

        def within_nominal(n: QNode) -> bool:  # IsWithinNominalInResources
            return all(n.usage.get(fr, 0) <= n.subtree.get(fr, 0) for fr in need)

        def satisfies(w: WlInfo, policy: str) -> bool:  # SatisfiesPreemptionPolicy
            lower = w.priority < info.priority
            if policy == "LowerPriority":
                return lower
            if policy == "LowerOrNewerEqualPriority":
                return lower or (w.priority == info.priority and info.order_ts < w.order_ts)
            return policy == "Any"

        def variant(w: WlInfo, advantage: bool) -> str:  # classifyPreemptionVariant
            if not any(fr in need for fr in w.usage) or w.key == info.key:
                return ""
            if not satisfies(w, within if w.cq == info.cq else reclaim):
                return ""
            if w.cq == info.cq:
                return "InClusterQueue"
            if advantage:
                return "HierarchicalReclaim"
            if not bwc_ok or w.priority >= info.priority or (
                    threshold is not None and w.priority > int(threshold)):
                return "ReclaimWithoutBorrowing"
            return "ReclaimWhileBorrowing"

        # (workload, variant, lowest common ancestor cohort)
        same: list[tuple[WlInfo, str, QNode | None]] = []
        hier: list[tuple[WlInfo, str, QNode | None]] = []
        prio: list[tuple[WlInfo, str, QNode | None]] = []
        if within != "Never":
            for w in admitted.get(info.cq, []):
                if variant(w, False):
                    same.append((w, "InClusterQueue", None))

        def collect(current: QNode, lca: QNode, skip: QNode | None, advantage: bool,
                    out: list) -> None:  # collectCandidatesInSubtree
            for child in current.children:
                if child.is_cq or child is skip or within_nominal(child):
                    continue
                collect(child, lca, skip, advantage, out)
            for child in current.children:
                if not child.is_cq or child is node or within_nominal(child):
                    continue
                for w in admitted.get(child.name, []):
                    v = variant(w, advantage)
                    if v:
                        out.append((w, v, lca))

        if node.parent is not None and reclaim != "Never":
            # collectCandidatesForHierarchicalReclaim, with QuantitiesFitInQuota
            advantage = all(node.subtree.get(fr, 0) >= node.usage.get(fr, 0) + v
                            for fr, v in asg.usage.items())
            remaining = {fr: max(0, v - node.local_available(fr))
                         for fr, v in asg.usage.items()}
            prev: QNode | None = None
            cur: QNode | None = node.parent
            while cur is not None:
                collect(cur, cur, prev, advantage, hier if advantage else prio)
                subtree_fits = all(cur.subtree.get(fr, 0) >= cur.usage.get(fr, 0) + v
                                   for fr, v in remaining.items())
                remaining = {fr: max(0, v - cur.local_available(fr))
                             for fr, v in remaining.items()}
                advantage = advantage or subtree_fits
                prev, cur = cur, cur.parent

        def order(t: tuple[WlInfo, str, QNode | None]):  # common.CandidatesOrdering
            w = t[0]
            return (w.cq == info.cq, w.priority, -w.reserved_at, w.uid)

        groups = [sorted(g, key=order) for g in (hier, prio, same)]
        cands = [c for g in groups for c in g if c[0].evicted] + \
            [c for g in groups for c in g if not c[0].evicted]

        def valid(c: tuple[WlInfo, str, QNode | None], borrow: bool) -> bool:
            w, var, lca = c  # candidateIterator.candidateIsValid, on the current usage
            if w.cq == info.cq:
                return True
            if borrow and var == "ReclaimWithoutBorrowing":
                return False
            n: QNode | None = cqs[w.cq]
            while n is not None and n is not lca:
                if within_nominal(n):
                    return False
                n = n.parent
            return True

        def take(w: WlInfo) -> None:
            for fr, v in w.usage.items():
                cqs[w.cq].remove_usage(fr, v)

        def give(w: WlInfo) -> None:
            for fr, v in w.usage.items():
                cqs[w.cq].add_usage(fr, v)

        def fits(allow_borrow: bool) -> bool:  # workloadFits
            for fr, v in asg.usage.items():
                if v > node.available(fr):
                    return False
                if not allow_borrow and node.usage.get(fr, 0) + v > node.nominal(fr):
                    return False
            return True

        # a bound first: even every candidate gone would not make room (O(n), no tree work)
        lacking = {fr: asg.usage[fr] - node.available(fr) for fr in need}
        freeable: dict[FR, int] = {}
        for w, _v, _l in cands:
            for fr in need:
                freeable[fr] = freeable.get(fr, 0) + w.usage.get(fr, 0)
        if any(freeable.get(fr, 0) < n for fr, n in lacking.items()):
            return []
        no_other = not hier and not prio
        under_nominal = all(node.nominal(fr) > node.usage.get(fr, 0) for fr in need)
        if no_other or (not bwc_ok and not under_nominal):
            attempts = [True]
        elif not bwc_ok and not hier:
            attempts = [False, True]
        else:
            attempts = [True, False]
        if attempts == [True] and not any(
                c[0].cq == info.cq or c[1] != "ReclaimWithoutBorrowing" for c in cands):
            return []  # reclaiming without borrowing needs the preemptor within nominal
        # nothing moved in this cohort since the last search found nothing: skip it (Kueue
        # retries an inadmissible workload only when its cohort changes)
        root = node.root()
        sig = (info.priority, tuple(sorted(asg.usage.items())), tuple(
            (n, tuple(sorted(q.usage.items()))) for n, q in sorted(cqs.items())
            if q.root() is root), len(cands))
        if self._no_targets.get(info.uid) == sig:
            return []
        self._searched = True
        for allow_borrow in attempts:
            # remove candidates one by one from the tree until the preemptor fits, as
            # classicalPreemptions does on its snapshot; then fill back (fillBackWorkloads)
            targets: list[tuple[WlInfo, str]] = []
            for c in cands:
                if not valid(c, allow_borrow):
                    continue
                take(c[0])
                reason = {"InClusterQueue": "InClusterQueue",
                          "ReclaimWhileBorrowing": "InCohortReclaimWhileBorrowing"
                          }.get(c[1], "InCohortReclamation")
                targets.append((c[0], reason))
                if fits(allow_borrow):
                    for i in range(len(targets) - 2, -1, -1):
                        give(targets[i][0])
                        if fits(allow_borrow):
                            targets[i] = targets[-1]
                            targets.pop()
                        else:
                            take(targets[i][0])
                    for t in targets:
                        give(t[0])
                    return targets
            for t in targets:
                give(t[0])
        self._no_targets[info.uid] = sig
        return []

    def _evict(self, target: WlInfo, preemptor: WlInfo, reason: str, ts: str) -> None:
        wl = target.obj
        gen = wl["metadata"].get("generation")
        job_uid = (preemptor.obj["metadata"].get("labels") or {}).get(JOB_UID_LABEL) or \
            "UNKNOWN"
        msg = (f"Preempted to accommodate a workload (UID: {preemptor.uid or 'UNKNOWN'}, "
               f"JobUID: {job_uid}) due to {HUMAN_REASONS[reason]}; preemptor path: "
               f"{self._cohort_path(preemptor.cq)}; preemptee path: "
               f"{self._cohort_path(target.cq)}")
        status = copy.deepcopy(wl.get("status") or {})
        conds = list(status.get("conditions") or [])
        conds = set_cond(conds, "Evicted", "True", "Preempted", msg, ts, gen)
        conds = set_cond(conds, "Preempted", "True", reason, msg, ts, None)
        status["conditions"] = conds
        kueue_podsready.count_eviction(status, "Preempted")  # evict.go, at the eviction
        target.evicted = True
        self._bump(target.cq)
        self._write_wl(target.key, wl, status)
        self.events.record(wl, "Normal", "Preempted", msg, component="kueue-admission")
        self._owner_dirty(wl)

    def _owner_dirty(self, wl: dict) -> None:
        ns = wl["metadata"].get("namespace", "")
        for ref in wl["metadata"].get("ownerReferences") or []:
            for jres, ad in ADAPTERS.items():
                if ad.kind == ref.get("kind"):
                    self.job_dirty.add((jres, ns, ref.get("name")))

    def _cohort_path(self, cq_name: str) -> str:
        parts = [cq_name]
        seen = set()
        cq = self.objs[CLUSTERQUEUES].get(("", cq_name)) or {}
        c = (cq.get("spec") or {}).get("cohortName")
        while c and c not in seen:
            seen.add(c)
            parts.append(c)
            c = ((self.objs[COHORTS].get(("", c)) or {}).get("spec") or {}).get("parentName")
        return "/" + "/".join(reversed(parts))

    # ---- status of the queues -----------------------------------------------------------------
    def _cq_status(self, cqs: dict[str, QNode], admitted: dict, pending: dict, ts: str) -> None:
        for name, node in cqs.items():
            cq = self.objs[CLUSTERQUEUES].get(("", name))
            if cq is None:
                continue
            spec = cq.get("spec") or {}
            usage_list = []
            for rg in spec.get("resourceGroups") or []:
                for fl in rg.get("flavors") or []:
                    res = []
                    for r in fl.get("resources") or []:
                        fr = (fl["name"], r["name"])
                        used = sum(w.usage.get(fr, 0) for w in admitted.get(name, []))
                        res.append({"name": r["name"], "total": fmt_units(r["name"], used),
                                    "borrowed": fmt_units(r["name"],
                                                          max(0, used - node.nominal(fr)))})
                    usage_list.append({"name": fl["name"], "resources": res})
            n_adm = sum(1 for w in admitted.get(name, []) if self._is_admitted(w))
            old = cq.get("status") or {}
            reason = self._inactive_reason(name, [([], [f.get("name") for rg in
                                                         spec.get("resourceGroups") or []
                                                         for f in rg.get("flavors") or []])])
            conds = list(old.get("conditions") or [])
            if reason == "FlavorNotFound":
                missing = sorted({f.get("name") for rg in spec.get("resourceGroups") or []
                                  for f in rg.get("flavors") or []
                                  if ("", f.get("name")) not in self.objs[FLAVORS]})
                conds = set_cond(conds, "Active", "False", "FlavorNotFound",
                                 "Can't admit new workloads: references missing "
                                 f"ResourceFlavor(s): {missing}.", ts,
                                 cq["metadata"].get("generation"))
            elif reason == "Stopped":
                conds = set_cond(conds, "Active", "False", "Stopped",
                                 "Can't admit new workloads: is stopped.", ts,
                                 cq["metadata"].get("generation"))
            else:
                conds = set_cond(conds, "Active", "True", "Ready", "Can admit new workloads",
                                 ts, cq["metadata"].get("generation"))
            status = {"conditions": conds, "flavorsUsage": usage_list,
                      "flavorsReservation": usage_list,
                      "pendingWorkloads": len(pending.get(name, [])),
                      "reservingWorkloads": len(admitted.get(name, [])),
                      "admittedWorkloads": n_adm}
            if {k: old.get(k) for k in status} != status:
                self._patch_status(CLUSTERQUEUES, ("", name), status)

    @staticmethod
    def _is_admitted(w: WlInfo) -> bool:
        c = cond_of(w.obj, "Admitted")
        return bool(c and c.get("status") == "True")

    def _queue_status(self, ts: str) -> None:
        """LocalQueue status, for the LocalQueues whose workloads changed since."""
        dirty, self._dirty_lqs = self._dirty_lqs, set()
        for key in sorted(dirty):
            lq = self.objs[LOCALQUEUES].get(key)
            if lq is None:
                continue
            pend = resv = adm = 0
            usage: dict[FR, int] = {}
            for wkey in self.by_lq.get(key, ()):
                info, place = self.infos[wkey], self.place[wkey]
                if place[0] == "fin":
                    continue
                if info.reserved:
                    resv += 1
                    if self._is_admitted(info):
                        adm += 1
                    for fr, v in info.usage.items():
                        usage[fr] = usage.get(fr, 0) + v
                elif (info.obj.get("spec") or {}).get("active", True) is not False:
                    pend += 1
            fl: dict[str, list] = {}
            for (f, r), v in sorted(usage.items()):
                fl.setdefault(f, []).append({"name": r, "total": fmt_units(r, v)})
            fu = [{"name": f, "resources": rs} for f, rs in fl.items()]
            cq = (lq.get("spec") or {}).get("clusterQueue", "")
            old = lq.get("status") or {}
            conds = list(old.get("conditions") or [])
            if ("", cq) in self.objs[CLUSTERQUEUES]:
                conds = set_cond(conds, "Active", "True", "Ready", "Can submit new workloads to "
                                 "localQueue", ts, lq["metadata"].get("generation"))
            else:
                conds = set_cond(conds, "Active", "False", "ClusterQueueDoesNotExist",
                                 "Can't submit new workloads to clusterQueue", ts,
                                 lq["metadata"].get("generation"))
            status = {"conditions": conds, "pendingWorkloads": pend, "reservingWorkloads": resv,
                      "admittedWorkloads": adm, "flavorsUsage": fu, "flavorsReservation": fu}
            if {k: old.get(k) for k in status} != status:
                self._patch_status(LOCALQUEUES, key, status)

    # ---- visibility API -----------------------------------------------------------------------
    def pending_workloads(self, cq: str | None = None, namespace: str | None = None,
                          lq: str | None = None, limit: int = 1000, offset: int = 0) -> dict:
        """visibility.kueue.x-k8s.io/v1beta2 PendingWorkloadsSummary (pkg/visibility)."""
        if lq is not None:
            lqo = self.objs[LOCALQUEUES].get((namespace or "", lq))
            if lqo is None:
                raise LookupError(f'localqueues.kueue.x-k8s.io "{lq}" not found')
            cq = (lqo.get("spec") or {}).get("clusterQueue", "")
        elif ("", cq or "") not in self.objs[CLUSTERQUEUES]:
            raise LookupError(f'clusterqueues.kueue.x-k8s.io "{cq}" not found')
        items = []
        per_lq: dict[tuple, int] = {}
        for pos, info in enumerate(self.pending.get(cq or "", [])):
            lq_key = (info.key[0], info.lq)
            lpos = per_lq.get(lq_key, 0)
            per_lq[lq_key] = lpos + 1
            if lq is not None and lq_key != (namespace, lq):
                continue
            md = info.obj["metadata"]
            items.append({"metadata": {"name": md["name"], "namespace": md.get("namespace"),
                                       "creationTimestamp": md.get("creationTimestamp"),
                                       "ownerReferences": md.get("ownerReferences") or []},
                          "priority": info.priority, "localQueueName": info.lq,
                          "positionInClusterQueue": pos, "positionInLocalQueue": lpos})
        return {"kind": "PendingWorkloadsSummary",
                "apiVersion": "visibility.kueue.x-k8s.io/v1beta2", "metadata": {},
                "items": items[offset:offset + limit]}


def _tolerated(taint: dict, tolerations: list) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator") == "Exists":
            if not t.get("key") or t.get("key") == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and t.get("value", "") == taint.get("value", ""):
            return True
    return False
