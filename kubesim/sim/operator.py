"""A Kubeflow training-operator look-alike for kubeflow.org/v1 PyTorchJob.

Follows trainer v1.9 (``pkg/controller.v1/pytorch`` and ``pkg/controller.v1/common``):
pod names and labels, env (MASTER_ADDR/PORT, WORLD_SIZE, RANK, PET_*), conditions
with ``PyTorchJob<Condition>`` reasons, replicaStatuses, suspend/resume,
restartPolicy/backoffLimit/activeDeadlineSeconds, cleanPodPolicy, TTL, and
FailedCreatePod events when a create is refused (e.g. by quota), retried later.
"""

from __future__ import annotations

import contextlib
import copy
import heapq
import logging
from typing import Any, TypedDict

from kubesim.sim.state import PYTORCHJOBS, TERMINAL, ClusterState, PodInfo
from kubesim.sim.util import fmt_time, parse_time

log = logging.getLogger("kubesim.sim.operator")

KIND = "PyTorchJob"
API_VERSION = "kubeflow.org/v1"
OPERATOR = "pytorchjob-controller"
MANAGED_BY = "kubeflow.org/training-operator"
L_JOB = "training.kubeflow.org/job-name"
L_TYPE = "training.kubeflow.org/replica-type"
L_INDEX = "training.kubeflow.org/replica-index"
L_ROLE = "training.kubeflow.org/job-role"
L_OPERATOR = "training.kubeflow.org/operator-name"
DEFAULT_PORT = 23456
PORT_NAME = "pytorchjob-port"
RETRY_SECONDS = 5.0
ORDER = ("Master", "Worker")


class ReplicaStatus(TypedDict):
    """One entry of status.replicaStatuses."""
    active: int
    succeeded: int
    failed: int
    selector: str


def owner_reference(md: dict) -> dict:
    """The controller reference a PyTorchJob's pods and Service carry (GC deletes them
    with the job; ``blockOwnerDeletion`` as the operator sets it)."""
    return {"apiVersion": API_VERSION, "kind": KIND, "name": md["name"],
            "uid": md.get("uid", ""), "controller": True, "blockOwnerDeletion": True}


def set_condition(
    conds: list[dict], ctype: str, status: str, reason: str, message: str, now: str
) -> list[dict]:
    """The operator's setCondition/filterOutCondition, returning a new list."""
    if any(c.get("type") == "Failed" and c.get("status") == "True" for c in conds):
        return conds
    cur = next((c for c in conds if c.get("type") == ctype), None)
    if cur is not None and cur.get("status") == status and cur.get("reason") == reason:
        return conds
    new = {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "lastUpdateTime": now,
        "lastTransitionTime": now,
    }
    if cur is not None and cur.get("status") == status:
        new["lastTransitionTime"] = cur.get("lastTransitionTime", now)
    out = []
    for c in conds:
        t = c.get("type")
        if (
            t == ctype
            or (ctype == "Restarting" and t == "Running")
            or (ctype == "Running" and t == "Restarting")
        ):
            continue
        if ctype in ("Failed", "Succeeded") and t == "Running" and c.get("status") != "False":
            c = dict(c, status="False")
        out.append(c)
    out.append(new)
    return out


def has_condition(status: dict, ctype: str) -> bool:
    return any(
        c.get("type") == ctype and c.get("status") == "True" for c in status.get("conditions") or []
    )


def total_replicas(spec: dict) -> int:
    return sum(
        int((r or {}).get("replicas", 1)) for r in (spec.get("pytorchReplicaSpecs") or {}).values()
    )


def nproc_int(spec: dict) -> int:
    v = spec.get("nprocPerNode")
    if v is None:
        return 1
    try:
        return int(v)
    except (TypeError, ValueError):
        return 1


def master_port(spec: dict) -> int:
    m = (spec.get("pytorchReplicaSpecs") or {}).get("Master") or {}
    for c in ((m.get("template") or {}).get("spec") or {}).get("containers") or []:
        if c.get("name") == "pytorch":
            for p in c.get("ports") or []:
                if p.get("name") == PORT_NAME:
                    return int(p.get("containerPort", DEFAULT_PORT))
    return DEFAULT_PORT


def build_pod(job: dict, rtype: str, index: int) -> dict:
    """The Pod the operator creates for one replica."""
    md = job["metadata"]
    spec = job["spec"]
    rspec = spec["pytorchReplicaSpecs"][rtype]
    tmpl = copy.deepcopy(rspec.get("template") or {})
    tmd = tmpl.get("metadata") or {}
    pspec = tmpl.get("spec") or {}
    name = f"{md['name']}-{rtype.lower()}-{index}"
    labels = dict(tmd.get("labels") or {})
    labels.update(
        {L_JOB: md["name"], L_OPERATOR: OPERATOR, L_TYPE: rtype.lower(), L_INDEX: str(index)}
    )
    if rtype == "Master":
        labels[L_ROLE] = "master"
    rp = rspec.get("restartPolicy") or "OnFailure"
    pspec["restartPolicy"] = "Never" if rp == "ExitCode" else rp
    has_master = "Master" in spec["pytorchReplicaSpecs"]
    port = master_port(spec)
    nnodes = total_replicas(spec)
    rank = index + (1 if rtype == "Worker" and has_master else 0)
    nproc = spec.get("nprocPerNode") or "auto"
    for c in pspec.get("containers") or []:
        if c.get("name") != "pytorch":
            continue
        env = list(c.get("env") or [])
        have = {e.get("name") for e in env}

        def add(n: str, v: str, env=env, have=have) -> None:
            if n not in have:
                env.append({"name": n, "value": v})
                have.add(n)

        add("PYTHONUNBUFFERED", "1")
        add("PET_NPROC_PER_NODE", str(nproc))
        if has_master:
            add("MASTER_PORT", str(port))
            add("PET_MASTER_PORT", str(port))
            add("MASTER_ADDR", f"{md['name']}-master-0")
            add("PET_MASTER_ADDR", f"{md['name']}-master-0")
            add("WORLD_SIZE", str(nnodes * nproc_int(spec)))
            add("RANK", str(rank))
            add("PET_NNODES", str(nnodes))
            add("PET_NODE_RANK", str(rank))
        c["env"] = env
        if rtype == "Master" and not any(p.get("name") == PORT_NAME for p in c.get("ports") or []):
            port_spec = {"name": PORT_NAME, "containerPort": port, "protocol": "TCP"}
            c["ports"] = [*list(c.get("ports") or []), port_spec]
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": md.get("namespace", "default"),
            "labels": labels,
            "ownerReferences": [owner_reference(md)],
        },
        "spec": pspec,
    }
    if tmd.get("annotations"):
        pod["metadata"]["annotations"] = dict(tmd["annotations"])
    return pod


def selector(job_name: str, rtype: str) -> str:
    return f"{L_JOB}={job_name},{L_OPERATOR}={OPERATOR},{L_TYPE}={rtype.lower()}"


class Operator:
    """The PyTorchJob controller. The TrainJob controller (``kubesim.sim.trainjob``) is a
    subclass: the class attributes name the resource, the state's caches it reads and the
    event component; it shares the tick loop, timers, pod create/delete and status writes."""

    RESOURCE = PYTORCHJOBS
    JOBS, PODS, DIRTY = "jobs", "job_pods", "job_dirty"  # ClusterState attributes
    COMPONENT = OPERATOR
    CREATED, FAILED_CREATE = "SuccessfulCreatePod", "FailedCreatePod"  # event reasons
    DELETED = "SuccessfulDeletePod"
    STAMPS_RECONCILE = True  # status.lastReconcileTime (the PyTorchJob status has it)

    def __init__(self, store, state: ClusterState, events, now_fn):
        self.store = store
        self.state = state
        self.events = events
        self.now_fn = now_fn
        self.timers: list = []
        self._pending_create: set = (
            set()
        )  # jobs with a refused create, retried on quota/pod changes
        self.restarts: dict[str, int] = {}  # job uid -> pods recreated after failures
        self.created = 0
        self.refused = 0
        self._timer_set: set = set()
        self.max_per_tick = 200

    def _at(self, when: float, key: tuple) -> None:
        if (when, key) in self._timer_set:
            return
        self._timer_set.add((when, key))
        heapq.heappush(self.timers, (when, key))

    def tick(self) -> None:
        st = self.state
        now = self.now_fn()
        dirty = getattr(st, self.DIRTY)
        setattr(st, self.DIRTY, set())
        jobs = getattr(st, self.JOBS)
        if st.ns_changed:
            if self._pending_create:
                dirty |= {k for k in self._pending_create if k[0] in st.ns_changed}
            st.ns_changed.clear()
        while self.timers and self.timers[0][0] <= now:
            item = heapq.heappop(self.timers)
            self._timer_set.discard(item)
            dirty.add(item[1])
        todo = sorted(dirty)
        if len(todo) > self.max_per_tick:  # bounded work per tick; the rest on the next one
            getattr(st, self.DIRTY).update(todo[self.max_per_tick :])
            todo = todo[: self.max_per_tick]
        for key in todo:
            job = jobs.get(key)
            if job is None:
                self._pending_create.discard(key)
                continue
            try:
                self.reconcile(key, job, now)
            except Exception:
                log.exception("reconcile %s/%s", *key)

    # ---- reconcile --------------------------------------------------------------------------
    def reconcile(self, key: tuple, job: dict, now: float) -> None:
        md = job["metadata"]
        if md.get("deletionTimestamp"):
            return
        spec = job.get("spec") or {}
        rspecs = spec.get("pytorchReplicaSpecs") or {}
        run_policy = spec.get("runPolicy") or {}
        if run_policy.get("managedBy") not in (None, "", MANAGED_BY):
            return  # another controller (e.g. MultiKueue) owns this job
        old = job.get("status") or {}
        status = copy.deepcopy(old)
        conds = list(status.get("conditions") or [])
        ts = fmt_time(now)
        name = md["name"]
        if not any(c.get("type") == "Created" for c in conds):
            conds = set_condition(
                conds, "Created", "True", "PyTorchJobCreated", f"PyTorchJob {name} is created.", ts
            )
        pods = self._pods(key, md.get("uid", ""))
        status["conditions"] = conds

        if has_condition(status, "Succeeded") or has_condition(status, "Failed"):
            self._clean_finished(job, pods, run_policy)
            status["replicaStatuses"] = self._replica_statuses(name, rspecs, pods)
            ttl = run_policy.get("ttlSecondsAfterFinished")
            done = parse_time(status.get("completionTime"))
            if ttl is not None and done is not None:
                if now >= done + int(ttl):
                    self._delete_job(key)
                    return
                self._at(done + int(ttl), key)
            self._write(key, old, status)
            return

        if run_policy.get("suspend"):
            for p in pods:
                self._delete_pod(job, p)
            rs = self._replica_statuses(name, rspecs, [])
            status["replicaStatuses"] = rs
            msg = f"PyTorchJob {name} is suspended."
            if has_condition(status, "Running"):
                status["conditions"] = set_condition(
                    status["conditions"], "Running", "False", "PyTorchJobSuspended", msg, ts
                )
            if not has_condition(status, "Suspended"):
                status["conditions"] = set_condition(
                    status["conditions"], "Suspended", "True", "PyTorchJobSuspended", msg, ts
                )
            # The operator records the event on every reconcile of a suspended job, not only
            # when it adds the condition (common/job.go ReconcileJobs); the recorder
            # aggregates the repeats into one Event's count. A job created suspended (as
            # an admission gate creates it) therefore has this event from its first pass.
            self.events.record(job, "Normal", "PyTorchJobSuspended", msg, component=OPERATOR)
            status["startTime"] = None
            self._pending_create.discard(key)
            self._write(key, old, status)
            return

        if has_condition(status, "Suspended"):
            msg = f"PyTorchJob {name} is resumed."
            status["conditions"] = set_condition(
                status["conditions"], "Suspended", "False", "PyTorchJobResumed", msg, ts
            )
            status["startTime"] = ts
            self.events.record(job, "Normal", "PyTorchJobResumed", msg, component=OPERATOR)
        if not status.get("startTime"):
            status["startTime"] = ts

        # limits: activeDeadlineSeconds and backoffLimit
        fail_msg = ""
        ads = run_policy.get("activeDeadlineSeconds")
        if ads is not None:
            start = parse_time(status["startTime"]) or now
            if now >= start + int(ads):
                fail_msg = (
                    f"PyTorchJob {name} has failed because it was active longer than "
                    "specified deadline"
                )
            else:
                self._at(start + int(ads), key)
        bl = run_policy.get("backoffLimit")
        if not fail_msg and bl is not None:
            restarts = self.restarts.get(md.get("uid", ""), 0)
            for p in pods:
                if (p.obj.get("spec") or {}).get("restartPolicy") in ("OnFailure", "Always"):
                    for cs in (p.obj.get("status") or {}).get("containerStatuses") or []:
                        restarts += int(cs.get("restartCount") or 0)
            if (int(bl) == 0 and restarts > 0) or (int(bl) > 0 and restarts >= int(bl)):
                fail_msg = (
                    f"PyTorchJob {name} has failed because it has reached the specified "
                    "backoff limit"
                )
        if fail_msg:
            for p in pods:
                if (p.obj.get("status") or {}).get("phase") not in TERMINAL:
                    self._delete_pod(job, p)
            status["replicaStatuses"] = self._replica_statuses(name, rspecs, pods)
            if not status.get("completionTime"):
                status["completionTime"] = ts
            status["conditions"] = set_condition(
                status["conditions"], "Failed", "True", "PyTorchJobFailed", fail_msg, ts
            )
            self.events.record(job, "Normal", "PyTorchJobFailed", fail_msg, component=OPERATOR)
            self._pending_create.discard(key)
            self._write(key, old, status)
            return

        # pods: create missing ones, restart failed ones, remove surplus
        by_slot: dict[tuple, list[PodInfo]] = {}
        for p in pods:
            lab = p.obj["metadata"].get("labels") or {}
            try:
                slot = (lab.get(L_TYPE, ""), int(lab.get(L_INDEX, "-1")))
            except ValueError:
                continue
            by_slot.setdefault(slot, []).append(p)
        refused = False
        restarting: dict[str, int] = {}
        counted = []
        for rtype in [r for r in ORDER if r in rspecs] + sorted(
            r for r in rspecs if r not in ORDER
        ):
            rspec = rspecs[rtype] or {}
            n = int(rspec.get("replicas", 1))
            rp = rspec.get("restartPolicy") or "OnFailure"
            for (t, idx), plist in by_slot.items():
                if t == rtype.lower() and idx >= n:
                    for p in plist:
                        self._delete_pod(job, p)
            for idx in range(n):
                plist = by_slot.get((rtype.lower(), idx), [])
                live = [p for p in plist if not p.obj["metadata"].get("deletionTimestamp")]
                if not plist:
                    if not refused and not self._create_pod(job, rtype, idx):
                        refused = True
                    continue
                for p in live:
                    phase = (p.obj.get("status") or {}).get("phase")
                    if phase == "Failed" and self._retryable(p, rp):
                        self._delete_pod(job, p)
                        uid = md.get("uid", "")
                        self.restarts[uid] = self.restarts.get(uid, 0) + 1
                        restarting[rtype] = restarting.get(rtype, 0) + 1
                    else:
                        counted.append(p)
        if refused:
            self._pending_create.add(key)
            self._at(now + RETRY_SECONDS, key)
        else:
            self._pending_create.discard(key)

        rs = self._replica_statuses(name, rspecs, counted)
        status["replicaStatuses"] = rs
        self._update_conditions(job, status, rspecs, rs, restarting, ts)
        self._write(key, old, status)

    def _update_conditions(
        self, job: dict, status: dict, rspecs: dict, rs: dict, restarting: dict, ts: str
    ) -> None:
        name = job["metadata"]["name"]
        conds = status["conditions"]
        has_master = "Master" in rspecs
        for rtype in [r for r in ORDER if r in rspecs]:
            s = rs.get(rtype, {})
            n = int((rspecs[rtype] or {}).get("replicas", 1))
            if rtype == "Master" or not has_master:
                if s.get("active", 0) > 0:
                    conds = set_condition(
                        conds,
                        "Running",
                        "True",
                        "PyTorchJobRunning",
                        f"PyTorchJob {name} is running.",
                        ts,
                    )
                if n - s.get("succeeded", 0) == 0:
                    msg = f"PyTorchJob {name} is successfully completed."
                    if not status.get("completionTime"):
                        status["completionTime"] = ts
                    if not has_condition({"conditions": conds}, "Succeeded"):
                        self.events.record(
                            job, "Normal", "PyTorchJobSucceeded", msg, component=OPERATOR
                        )
                    conds = set_condition(
                        conds, "Succeeded", "True", "PyTorchJobSucceeded", msg, ts
                    )
                    status["conditions"] = conds
                    return
            if restarting.get(rtype):
                msg = (
                    f"PyTorchJob {name} is restarting because {restarting[rtype]} {rtype} "
                    "replica(s) failed."
                )
                conds = set_condition(conds, "Restarting", "True", "PyTorchJobRestarting", msg, ts)
                self.events.record(job, "Warning", "PyTorchJobRestarting", msg, component=OPERATOR)
            elif s.get("failed", 0) > 0:
                msg = (
                    f"PyTorchJob {name} is failed because {s['failed']} {rtype} replica(s) failed."
                )
                if not status.get("completionTime"):
                    status["completionTime"] = ts
                conds = set_condition(conds, "Failed", "True", "PyTorchJobFailed", msg, ts)
                self.events.record(job, "Normal", "PyTorchJobFailed", msg, component=OPERATOR)
        status["conditions"] = conds

    @staticmethod
    def _retryable(p: PodInfo, rp: str) -> bool:
        if rp in ("OnFailure", "Always"):
            return True  # a pod-level failure (node lost, eviction): recreate it
        if rp == "ExitCode":
            for cs in (p.obj.get("status") or {}).get("containerStatuses") or []:
                if cs.get("name") == "pytorch":
                    code = ((cs.get("state") or {}).get("terminated") or {}).get("exitCode", 0)
                    return 128 <= int(code) <= 255
        return False

    def _replica_statuses(self, name: str, rspecs: dict, pods: list[PodInfo]
                          ) -> dict[str, ReplicaStatus]:
        out: dict[str, ReplicaStatus] = {}
        for rtype in rspecs:
            s: ReplicaStatus = {"active": 0, "succeeded": 0, "failed": 0,
                                "selector": selector(name, rtype)}
            for p in pods:
                if (p.obj["metadata"].get("labels") or {}).get(L_TYPE) != rtype.lower():
                    continue
                phase = (p.obj.get("status") or {}).get("phase")
                if phase == "Running" and not p.obj["metadata"].get("deletionTimestamp"):
                    s["active"] += 1
                elif phase == "Succeeded":
                    s["succeeded"] += 1
                elif phase == "Failed":
                    s["failed"] += 1
            out[rtype] = s
        return out

    def _pods(self, key: tuple, uid: str) -> list[PodInfo]:
        out = []
        for pk in sorted(getattr(self.state, self.PODS).get(key, ())):
            p = self.state.pods.get(pk)
            if p is None:
                continue
            refs = p.obj["metadata"].get("ownerReferences") or []
            if any(r.get("uid") == uid and r.get("controller") for r in refs):
                out.append(p)
        return out

    def _clean_finished(self, job: dict, pods: list[PodInfo], run_policy: dict) -> None:
        policy = run_policy.get("cleanPodPolicy") or "None"
        if policy == "None":
            return
        for p in pods:
            phase = (p.obj.get("status") or {}).get("phase")
            if policy == "All" or (policy == "Running" and phase in ("Running", "Pending")):
                self._delete_pod(job, p)

    # ---- writes -----------------------------------------------------------------------------
    def _build_pod(self, job: dict, rtype: str, idx: int) -> dict:
        return build_pod(job, rtype, idx)

    def _pod_created(self, job: dict, rtype: str) -> None:
        if rtype == "Master":
            self._ensure_service(job)

    def _create_pod(self, job: dict, rtype: str, idx: int) -> bool:
        pod = self._build_pod(job, rtype, idx)
        ns = pod["metadata"]["namespace"]
        try:
            self.store.create("pods", pod, namespace=ns)
        except Exception as exc:
            code = getattr(exc, "code", None)
            if code == 409:
                return True
            msg = getattr(exc, "message", str(exc))
            self.refused += 1
            self.events.record(
                job, "Warning", self.FAILED_CREATE, f"Error creating: {msg}",
                component=self.COMPONENT
            )
            return False
        self.created += 1
        self.events.record(
            job,
            "Normal",
            self.CREATED,
            f"Created pod: {pod['metadata']['name']}",
            component=self.COMPONENT,
        )
        self._pod_created(job, rtype)
        return True

    def _ensure_service(self, job: dict) -> None:
        md = job["metadata"]
        name = f"{md['name']}-master-0"
        svc = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": name,
                "namespace": md["namespace"],
                "labels": {
                    L_JOB: md["name"],
                    L_OPERATOR: OPERATOR,
                    L_TYPE: "master",
                    L_INDEX: "0",
                    L_ROLE: "master",
                },
                "ownerReferences": [owner_reference(md)],
            },
            "spec": {
                "clusterIP": "None",
                "selector": {
                    L_JOB: md["name"],
                    L_OPERATOR: OPERATOR,
                    L_TYPE: "master",
                    L_INDEX: "0",
                },
                "ports": [
                    {
                        "name": PORT_NAME,
                        "port": master_port(job["spec"]),
                        "targetPort": master_port(job["spec"]),
                        "protocol": "TCP",
                    }
                ],
            },
        }
        try:
            self.store.create("services", svc, namespace=md["namespace"])
        except Exception as exc:  # exists already, or services not served: optional
            log.debug("service %s: %s", name, exc)

    def _delete_pod(self, job: dict, p: PodInfo) -> None:
        if p.obj["metadata"].get("deletionTimestamp"):
            return
        ns, name = p.key
        try:
            self.store.delete("pods", name, namespace=ns)
        except Exception as exc:
            log.debug("delete %s/%s: %s", ns, name, exc)
            return
        self.events.record(
            job, "Normal", self.DELETED, f"Deleted pod: {name}", component=self.COMPONENT
        )

    def _delete_job(self, key: tuple) -> None:
        with contextlib.suppress(Exception):
            self.store.delete(self.RESOURCE, key[1], namespace=key[0])

    def _write(self, key: tuple, old: dict, status: dict) -> None:
        cmp_old = {k: v for k, v in old.items() if k != "lastReconcileTime"}
        cmp_new = {k: v for k, v in status.items() if k != "lastReconcileTime" and v is not None}
        if cmp_old == cmp_new:
            return
        if self.STAMPS_RECONCILE:
            status["lastReconcileTime"] = fmt_time(self.now_fn())
        try:
            self.store.patch(
                self.RESOURCE,
                key[1],
                {"status": status},
                patch_type="merge",
                namespace=key[0],
                subresource="status",
                copy=False,
            )
        except Exception as exc:
            log.debug("status of job %s/%s: %s", key[0], key[1], exc)
