"""A kube-scheduler look-alike: filters, GPU-aware scoring, priority order and preemption.

Per tick it only looks at pods in the active queue (new or changed pending pods).
Pods that did not fit are parked until capacity is freed or a node changes (or
``RETRY_SECONDS`` pass), like the scheduler's unschedulable queue.
"""

from __future__ import annotations

import logging
from typing import Any

from kubesim.sim.predicates import (
    R_NO_VICTIMS,
    R_NOT_HELPFUL,
    fit_error_message,
    fit_reasons,
    hami_reason,
    preferred_weight,
    static_filter,
)
from kubesim.sim.state import ClusterState, NodeState, PodInfo
from kubesim.sim.util import GPU, GPU_SHARED, HAMI_RESOURCES, MIG_PREFIX, fmt_time

log = logging.getLogger("kubesim.sim.scheduler")

SCHEDULER = "default-scheduler"
RETRY_SECONDS = 300.0  # podMaxInUnschedulablePodsDuration
GPU_RESOURCES_PREFIX = "nvidia.com/"


# ---- the scheduler -----------------------------------------------------------------------

def with_condition(pod: dict, cond: dict) -> list[dict]:
    """The pod's conditions with ``cond`` in place of any of its type."""
    conds = [c for c in ((pod.get("status") or {}).get("conditions") or [])
             if c.get("type") != cond["type"]]
    return [*conds, cond]


class Scheduler:
    def __init__(self, store, state: ClusterState, events, now_fn):
        self.store = store
        self.state = state
        self.events = events
        self.now_fn = now_fn
        self._static_cache: dict[Any, tuple[list[NodeState], dict[str, int], set]] = {}
        self._static_gen = -1
        self.nominated: dict[tuple, tuple[str, int, dict[str, int]]] = {}
        self._last_msg: dict[tuple, str] = {}
        self._last_flush = 0.0
        self._groups: dict[Any, dict[tuple, PodInfo]] = {}
        self.binds = 0
        self.attempts = 0
        self.max_per_tick = 1000
        self.dra: Any = None  # sim/dra.py DraController: pods with spec.resourceClaims

    # public
    def tick(self) -> None:
        st = self.state
        now = self.now_fn()
        for key in [k for k in self.nominated if k not in st.pods]:
            self.nominated.pop(key, None)
        if self._static_gen != st.node_gen:
            self._static_cache.clear()
            self._static_gen = st.node_gen
        fail_cache: dict[Any, Any] = {}
        if st.sched_parked and now - self._last_flush >= RETRY_SECONDS:
            # periodic full retry (refreshes every pending pod's message)
            st.sched_active.update(st.sched_parked)
            st.sched_parked.clear()
            self._groups.clear()
            self._last_flush = now
            self._last_msg = {k: v for k, v in self._last_msg.items() if k in st.pods}
        elif st.sched_parked and st.capacity_freed:
            self._retry_groups(fail_cache)
        st.capacity_freed = False
        if not st.sched_active:
            return
        queue = sorted(st.sched_active.values(), key=lambda p: (-p.priority, p.start, p.key))
        st.sched_active.clear()
        if len(queue) > self.max_per_tick:  # bounded work per tick; the rest on the next one
            for info in queue[self.max_per_tick :]:
                st.sched_active[info.key] = info
            queue = queue[: self.max_per_tick]
        for info in queue:
            self._attempt(info, fail_cache)

    def _attempt(self, info: PodInfo, fail_cache: dict) -> bool:
        st = self.state
        cur = st.pods.get(info.key)
        if cur is None or cur.uid != info.uid or (cur.obj.get("spec") or {}).get("nodeName"):
            return False
        self.attempts += 1
        return self._schedule_one(cur, fail_cache)

    def _retry_groups(self, fail_cache: dict) -> None:
        """Capacity was freed: retry each group of identical pending pods head-first, and
        stop a group at its first pod that still does not fit (the rest would not either)."""
        st = self.state
        heads = []
        for gkey, members in list(self._groups.items()):
            live = [p for k, p in members.items() if st.sched_parked.get(k) is p]
            if not live:
                del self._groups[gkey]
                continue
            live.sort(key=lambda p: (-p.priority, p.start, p.key))
            heads.append(((-live[0].priority, live[0].start, live[0].key), gkey, live))
        heads.sort(key=lambda h: h[0])
        for _, gkey, live in heads:
            head = live[0]
            if not self.nominated and head.fkey is not None:
                ok_nodes, _r, ok_names = self._static(
                    head.obj.get("spec") or {}, self.signature(head)
                )
                if not self._fitting(head, ok_nodes, ok_names, head.fkey[1]):
                    continue  # still nowhere to go: leave the group parked, message unchanged
            for info in live:
                st.sched_parked.pop(info.key, None)
                self._groups.get(gkey, {}).pop(info.key, None)
                if not self._attempt(info, fail_cache):
                    break

    # internals
    @staticmethod
    def signature(info: PodInfo) -> tuple:
        if info.sig is None:
            spec = info.obj.get("spec") or {}
            info.sig = (
                repr(spec.get("nodeSelector")),
                repr(spec.get("affinity")),
                repr(spec.get("tolerations")),
                spec.get("nodeName"),
            )
        return info.sig

    def _static(self, spec: dict, sig: tuple) -> tuple[list[NodeState], dict[str, int], set]:
        hit = self._static_cache.get(sig)
        if hit is None:
            ok: list[NodeState] = []
            reasons: dict[str, int] = {}
            for n in sorted(self.state.nodes.values(), key=lambda n: n.order):
                r = static_filter(spec, n)
                if r is None:
                    ok.append(n)
                else:
                    reasons[r] = reasons.get(r, 0) + 1
            hit = self._static_cache[sig] = (ok, reasons, {n.name for n in ok})
        return hit

    def _reserved(self, node: str, prio: int, exclude: tuple) -> dict[str, int] | None:
        if not self.nominated:
            return None
        out: dict[str, int] = {}
        for k, (n, p, req) in self.nominated.items():
            if n == node and p >= prio and k != exclude:
                for r, v in req.items():
                    out[r] = out.get(r, 0) + v
                out["__pods"] = out.get("__pods", 0) + 1
        return out or None

    def _missing_claim(self, info: PodInfo) -> str | None:
        for vol in (info.obj.get("spec") or {}).get("volumes") or ():
            claim = (vol.get("persistentVolumeClaim") or {}).get("claimName")
            if claim:
                pvc = self.state.pvcs.get((info.key[0], claim))
                if pvc is None or pvc["metadata"].get("deletionTimestamp"):
                    return claim
        return None

    def _schedule_one(self, info: PodInfo, fail_cache: dict) -> bool:
        pod = info.obj
        spec = pod.get("spec") or {}
        if spec.get("schedulingGates"):
            self.state.sched_gated.add(info.key)
            self._unschedulable(
                info,
                "Scheduling is blocked due to non-empty scheduling gates",
                ("gated", info.key),
                reason="SchedulingGated",
                event=False,
            )
            return False
        claim = self._missing_claim(info) if spec.get("volumes") else None
        if claim:
            n = len(self.state.nodes)
            msg = (
                f'0/{n} nodes are available: persistentvolumeclaim "{claim}" not found. '
                f"preemption: 0/{n} nodes are available: {n} {R_NOT_HELPFUL}."
            )
            self._unschedulable(info, msg, ("pvc", info.key))
            return False
        if spec.get("resourceClaims") and self.dra is not None:
            return bool(self.dra.schedule(self, info))   # DynamicResources (sim/dra.py)
        sig = self.signature(info)
        ok_nodes, static_reasons, ok_names = self._static(spec, sig)
        fkey = info.fkey
        if fkey is None:
            fkey = info.fkey = (sig, tuple(sorted(info.req.items())), info.priority)
        best: NodeState | None = None
        cached = fail_cache.get(fkey) if not self.nominated else None
        if cached is None:
            fitting = self._fitting(info, ok_nodes, ok_names, fkey[1])
            if fitting:
                best = self._pick(info, fitting)
            else:
                res_reasons: dict[str, int] = {}
                for node in ok_nodes:
                    for r in fit_reasons(
                        info.req, node, self._reserved(node.name, info.priority, info.key)
                    ):
                        res_reasons[r] = res_reasons.get(r, 0) + 1
                reasons = dict(static_reasons)
                for r, c in res_reasons.items():
                    reasons[r] = reasons.get(r, 0) + c
                cached = (fit_error_message(len(self.state.nodes), reasons), reasons, ok_nodes)
                fail_cache[fkey] = cached
        if best is not None:
            return self._bind(info, best)
        assert cached is not None  # computed above unless a fitting node was bound
        msg, _reasons, cand = cached
        pkey = ("preempt", fkey)
        post = fail_cache.get(pkey) if not self.nominated else None
        if post is None:
            post = self._preempt(info, cand)
            if post:
                fail_cache[pkey] = post
        if post:
            msg = msg + " " + post
        self._unschedulable(info, msg, fkey)
        return False

    def _fitting(
        self, info: PodInfo, ok_nodes: list[NodeState], ok_names: set, req_items: tuple
    ) -> list[NodeState]:
        """Nodes where the pod fits (the hot loop: no reasons, no allocations)."""
        fitting = []
        ext = [r for r, _ in req_items if "/" in r and r not in HAMI_RESOURCES]
        if ext and not self.nominated:
            # only nodes with some of the scarcest requested device free
            free = min((self.state.free.get(r, set()) for r in ext), key=len)
            nodes = self.state.nodes
            ok_nodes = sorted(
                (nodes[n] for n in free if n in ok_names and n in nodes), key=lambda n: n.order
            )
        if self.nominated:
            for n in ok_nodes:
                if not fit_reasons(info.req, n, self._reserved(n.name, info.priority, info.key)):
                    fitting.append(n)
            return fitting
        hami = any(r in HAMI_RESOURCES for r, _ in req_items) or GPU in info.req
        plain = [(r, v) for r, v in req_items if r not in HAMI_RESOURCES]
        for n in ok_nodes:
            if n.npods >= n.max_pods:
                continue
            used, alloc = n.used, n.alloc
            for r, v in plain:
                if used.get(r, 0) + v > alloc.get(r, 0):
                    break
            else:
                if hami and hami_reason(info.req, n):
                    continue
                fitting.append(n)
        return fitting

    def _pick(self, info: PodInfo, nodes: list[NodeState]) -> NodeState:
        nominated = (info.obj.get("status") or {}).get("nominatedNodeName")
        if nominated:
            for n in nodes:
                if n.name == nominated:
                    return n
        gpu_req = sum(
            v
            for r, v in info.req.items()
            if r.startswith(GPU_RESOURCES_PREFIX) and r not in HAMI_RESOURCES
        )
        switches: set = set()
        if info.job:
            for k in getattr(self.state, info.job_caches[0]).get(info.job, ()):
                p = self.state.pods.get(k)
                if p is not None and p.node:
                    pnode = self.state.nodes.get(p.node)
                    if pnode is not None:
                        switches.add(pnode.switch)
        preferred = (
            ((info.obj.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
        ).get("preferredDuringSchedulingIgnoredDuringExecution") or []
        best, best_score = None, None
        for n in nodes:
            pref = -preferred_weight(preferred, n.labels, n.name) if preferred else 0
            if gpu_req:
                # bin-pack GPUs: the fullest node that fits, on the leaf switch of the job's pods
                free = sum(
                    n.alloc.get(r, 0) - n.used.get(r, 0)
                    for r in info.req
                    if r.startswith(GPU_RESOURCES_PREFIX) and r not in HAMI_RESOURCES
                )
                score = (pref, 0 if n.switch in switches else 1, free, n.order)
            else:
                # keep GPU nodes for GPU pods; spread CPU pods (least allocated cpu)
                has_gpu = (
                    1
                    if any(n.alloc.get(r, 0) for r in (GPU, GPU_SHARED))
                    or any(r.startswith(MIG_PREFIX) for r in n.alloc)
                    or (n.inv is not None and n.inv.gpus)  # DRA nodes: cards as slices
                    else 0
                )
                cpu_alloc = n.alloc.get("cpu", 1) or 1
                score = (pref, has_gpu, n.used.get("cpu", 0) * 1000 // cpu_alloc, n.order)
            if best_score is None or score < best_score:
                best, best_score = n, score
                if gpu_req and not preferred and score[1] == 0 and score[2] == gpu_req:
                    break  # perfect fit on the job's switch
        assert best is not None
        return best

    def _bind(self, info: PodInfo, node: NodeState) -> bool:
        ns, name = info.key
        try:
            # spec.nodeName may be set once, as the pods/binding subresource does
            self.store.patch(
                "pods", name, {"spec": {"nodeName": node.name}}, patch_type="merge", namespace=ns,
                copy=False,
            )
        except Exception as exc:
            log.info("bind %s/%s -> %s failed: %s", ns, name, node.name, exc)
            return False
        self.binds += 1
        self.nominated.pop(info.key, None)
        if self._last_msg.pop(info.key, None) is not None:
            # it was reported Unschedulable: the binding flips PodScheduled to True right away
            self._patch_status(info, {"conditions": with_condition(info.obj, {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": fmt_time(self.now_fn()),
            })})
        self.events.record(
            info.obj,
            "Normal",
            "Scheduled",
            f"Successfully assigned {ns}/{name} to {node.name}",
            component=SCHEDULER,
            kind="Pod",
        )
        return True

    def _patch_status(self, info: PodInfo, status: dict) -> None:
        """Merge-patch the pod's status subresource; a pod gone meanwhile is no error."""
        ns, name = info.key
        try:
            self.store.patch(
                "pods", name, {"status": status}, patch_type="merge", namespace=ns,
                subresource="status", copy=False,
            )
        except Exception as exc:
            log.debug("status of %s/%s: %s", ns, name, exc)

    def _unschedulable(
        self, info: PodInfo, msg: str, gkey: Any, reason: str = "Unschedulable", event: bool = True
    ) -> None:
        self.state.sched_parked[info.key] = info
        self._groups.setdefault(gkey, {})[info.key] = info
        if self._last_msg.get(info.key) == msg:
            return
        self._last_msg[info.key] = msg
        now = fmt_time(self.now_fn())
        cond = {
            "type": "PodScheduled",
            "status": "False",
            "reason": reason,
            "message": msg,
            "lastProbeTime": None,
            "lastTransitionTime": now,
        }
        status: dict = {"phase": "Pending", "conditions": with_condition(info.obj, cond)}
        if info.key in self.nominated:
            status["nominatedNodeName"] = self.nominated[info.key][0]
        self._patch_status(info, status)
        if event:
            self.events.record(
                info.obj, "Warning", "FailedScheduling", msg, component=SCHEDULER, kind="Pod"
            )

    # ---- preemption ----------------------------------------------------------------------
    def _preempt(self, info: PodInfo, candidates: list[NodeState]) -> str:
        st = self.state
        pod = info.obj
        if st.preemption_policy(pod) == "Never":
            return "preemption: not eligible due to preemptionPolicy=Never."
        nominated = (pod.get("status") or {}).get("nominatedNodeName") or (
            self.nominated.get(info.key) or [None]
        )[0]
        if nominated and nominated in st.nodes:
            for k in st.nodes[nominated].pods:
                p = st.pods.get(k)
                if (
                    p is not None
                    and p.priority < info.priority
                    and (p.obj.get("metadata") or {}).get("deletionTimestamp")
                ):
                    return ""  # victims still terminating on the nominated node: wait for them
        n_total = len(st.nodes)
        not_helpful = n_total - len(candidates)
        no_victims = 0
        best = None
        if not st.bound_priorities or min(st.bound_priorities) >= info.priority:
            candidates, no_victims = [], len(candidates)  # nothing of lower priority runs anywhere
        for n in candidates:
            victims = self._victims(info, n)
            if victims is None:
                no_victims += 1
                continue
            prios = [v.priority for v in victims]
            score = (max(prios), sum(prios), len(victims), -max(v.start for v in victims), n.order)
            if best is None or score < best[0]:
                best = (score, n, victims)
        if best is None:
            reasons = {}
            if no_victims:
                reasons[R_NO_VICTIMS] = no_victims
            if not_helpful:
                reasons[R_NOT_HELPFUL] = not_helpful
            return "preemption: " + fit_error_message(n_total, reasons)
        _, node, victims = best
        self._evict(info, node, victims)
        return ""

    def _victims(self, info: PodInfo, node: NodeState) -> list[PodInfo] | None:
        st = self.state
        lower: list[PodInfo] = []
        for k in node.pods:
            p = st.pods.get(k)
            if p is None or p.priority >= info.priority:
                continue
            if (p.obj.get("metadata") or {}).get("deletionTimestamp"):
                continue
            lower.append(p)
        if not lower:
            return None
        minus: dict[str, int] = {}
        for p in lower:
            for r, v in p.req.items():
                minus[r] = minus.get(r, 0) + v
        extra = self._reserved(node.name, info.priority, info.key)
        if fit_reasons(info.req, node, extra, minus, minus_pods=len(lower)):
            return None
        # reprieve as many as possible, most important first
        lower.sort(key=lambda p: (-p.priority, p.start, p.key))
        victims = []
        removed_pods = len(lower)
        for p in lower:
            trial = {r: minus.get(r, 0) - p.req.get(r, 0) for r in set(minus) | set(p.req)}
            if not fit_reasons(info.req, node, extra, trial, minus_pods=removed_pods - 1):
                minus = trial
                removed_pods -= 1
            else:
                victims.append(p)
        return victims or None

    def _evict(self, info: PodInfo, node: NodeState, victims: list[PodInfo]) -> None:
        now = fmt_time(self.now_fn())
        for v in victims:
            ns, name = v.key
            vspec = v.obj.get("spec") or {}
            grace = vspec.get("terminationGracePeriodSeconds")
            grace = 30 if grace is None else int(grace)
            self._patch_status(v, {"conditions": with_condition(v.obj, {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "PreemptionByScheduler",
                "message": f"{SCHEDULER}: preempting to accommodate a higher priority pod",
                "lastProbeTime": None,
                "lastTransitionTime": now,
            })})
            self.events.record(
                v.obj,
                "Normal",
                "Preempted",
                f"Preempted by pod {info.uid} on node {node.name}",
                component=SCHEDULER,
                kind="Pod",
            )
            try:
                self.store.delete("pods", name, namespace=ns, grace_period_seconds=grace)
            except Exception as exc:
                log.debug("preemption delete %s/%s: %s", ns, name, exc)
        self.nominated[info.key] = (node.name, info.priority, dict(info.req))
        self._patch_status(info, {"nominatedNodeName": node.name})
