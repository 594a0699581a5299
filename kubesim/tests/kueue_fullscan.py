"""The Kueue controller's old full scan, kept only to check the incremental one
(``test_sim_kueue_incremental.py``): every admission pass lists every Workload, rebuilds
the quota tree from the admitted ones and tries every pending workload, and the
LocalQueues' status is recomputed from every Workload. Copied from ``kubesim/sim/kueue.py``
before it was made incremental; preemption searches are not memoised either."""

from __future__ import annotations

from kubesim.sim.kueue import (
    CLUSTERQUEUES,
    FR,
    LOCALQUEUES,
    WORKLOADS,
    KueueController,
    WlInfo,
    _accumulate,
    cond_of,
    fmt_units,
    set_cond,
)


class FullScanKueueController(KueueController):
    """``KueueController`` deciding by a full re-check of every Workload on each pass."""

    def _schedule(self, now: float, ts: str) -> None:
        cqs, groups, _cohorts = self._tree()
        infos: dict[tuple, WlInfo] = {}
        admitted: dict[str, list[WlInfo]] = {n: [] for n in cqs}
        pending: dict[str, list[WlInfo]] = {n: [] for n in cqs}
        lqs = self.objs[LOCALQUEUES]
        for key, wl in self.objs[WORKLOADS].items():
            info = WlInfo(key, wl)
            infos[key] = info
            fin = cond_of(wl, "Finished")
            if fin and fin.get("status") == "True":
                continue
            if info.reserved:
                if info.cq in cqs:
                    admitted[info.cq].append(info)
                    for fr, v in info.usage.items():
                        cqs[info.cq].usage[fr] = cqs[info.cq].usage.get(fr, 0) + v
                continue
            if (wl.get("spec") or {}).get("active", True) is False:
                self._pend(info, "Deactivated", "The workload is deactivated", ts)
                continue
            lq = lqs.get((key[0], info.lq))
            if lq is None:
                self._pend(info, "Misconfigured", f"LocalQueue {info.lq} doesn't exist", ts)
                continue
            cq_name = (lq.get("spec") or {}).get("clusterQueue", "")
            if cq_name not in cqs:
                self._pend(info, "Misconfigured", f"ClusterQueue {cq_name} doesn't exist", ts)
                continue
            if self._inactive_reason(cq_name, groups[cq_name]):
                self._pend(info, "Suspended", f"ClusterQueue {cq_name} is inactive", ts)
                continue
            if not self._ns_selected(cq_name, key[0]):
                self._pend(info, "Misconfigured",
                           "workload namespace doesn't match ClusterQueue selector", ts)
                continue
            info.cq = cq_name
            pending[cq_name].append(info)
        for root in {n.root().name: n.root() for n in cqs.values()}.values():
            _accumulate(root)
        for lst in pending.values():
            lst.sort(key=lambda i: (-i.priority, i.order_ts, i.key))
        self.pending = pending
        self._tas_used = {}
        if not any(pending.values()):
            self._cq_status(cqs, admitted, pending, ts)
            return
        # rounds of heads, one per ClusterQueue, in Kueue's cycle order
        blocked: set[str] = set()
        searched: set[str] = set()  # one preemption search per ClusterQueue and pass
        self._pass_ctx = (cqs, admitted)
        idx = dict.fromkeys(pending, 0)
        while True:
            heads = []
            for cq_name, lst in pending.items():
                if cq_name in blocked or idx[cq_name] >= len(lst):
                    continue
                heads.append(lst[idx[cq_name]])
                idx[cq_name] += 1
            if not heads:
                break
            entries = [(h, self._assign(h, cqs[h.cq], groups[h.cq], dry=True)) for h in heads]
            entries.sort(key=lambda e: (e[1].borrows, -e[0].priority, e[0].order_ts))
            held: list = []
            for info, asg in entries:
                node = cqs[info.cq]
                if asg.mode != "NoFit":  # recompute: earlier entries changed the usage
                    asg = self._assign(info, node, groups[info.cq])
                strict = ((self.objs[CLUSTERQUEUES].get(("", info.cq)) or {}).get("spec") or {}
                          ).get("queueingStrategy") == "StrictFIFO"
                if asg.mode == "Fit":
                    self._admit(info, asg, node, ts)
                    admitted[info.cq].append(info)
                    pending[info.cq] = [p for p in pending[info.cq] if p is not info]
                    idx[info.cq] -= 1
                    continue
                if asg.mode == "Preempt" and info.cq not in searched:
                    self._searched = False
                    targets = self._search_targets(info, asg, node, cqs, admitted)
                    if self._searched:  # a full search ran (not a cached or quick no)
                        searched.add(info.cq)
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
                        if strict:
                            blocked.add(info.cq)
                        continue
                    self._pend(info, asg.reason or "WaitingForQuota", asg.message, ts)
                else:
                    self._pend(info, asg.reason or "WaitingForQuota", asg.message, ts)
                if asg.mode == "Preempt":
                    self._reserve(info, asg, node, [] if strict else held)
                if strict:
                    blocked.add(info.cq)
            self._release(held)
        self._pass_ctx = None
        self.pending = pending
        self._cq_status(cqs, admitted, pending, ts)

    def _queue_status(self, ts: str) -> None:
        if not self.objs[LOCALQUEUES]:
            return
        counts: dict[tuple, list[int]] = {}
        usage: dict[tuple, dict[FR, int]] = {}
        for key, wl in self.objs[WORKLOADS].items():
            info = WlInfo(key, wl)
            lq_key = (key[0], info.lq)
            c = counts.setdefault(lq_key, [0, 0, 0])
            fin = cond_of(wl, "Finished")
            if fin and fin.get("status") == "True":
                continue
            if info.reserved:
                c[1] += 1
                if self._is_admitted(info):
                    c[2] += 1
                u = usage.setdefault(lq_key, {})
                for fr, v in info.usage.items():
                    u[fr] = u.get(fr, 0) + v
            elif (wl.get("spec") or {}).get("active", True) is not False:
                c[0] += 1
        for key, lq in self.objs[LOCALQUEUES].items():
            pend, resv, adm = counts.get(key, [0, 0, 0])
            fl: dict[str, list] = {}
            for (f, r), v in sorted(usage.get(key, {}).items()):
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
