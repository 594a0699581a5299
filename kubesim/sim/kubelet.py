"""The simulated kubelet: container lifecycle on the clock, restarts, graceful deletion.

Bound pod -> (startup_seconds) Running -> (run time) Succeeded / Failed, or an
in-place container restart when the pod's restartPolicy asks for it.  A pod
marked for deletion keeps running for its grace period and is then removed with
grace 0, as the real kubelet does after SIGKILL.

Times: every stamp is the clock's (the wall clock). What the simulated *workload* takes
(start-up, run time, ``fail-after-seconds``, the training script's checkpoint on SIGTERM,
which uses its grace period) is simulated time, divided by the clock's ``speed``; the
kubelet's own waits (back-offs) are wall time, as in a real kubelet.

An image that cannot be pulled (pod annotation ``kubesim.trainyard.io/image-pull`` =
``not-found``, ``unauthorized``, ``no-such-host``, or the transient ``timeout``,
``unavailable`` (a 503) and ``toomanyrequests`` (a 429), or an image whose registry host
ends in ``.invalid``, the TLD that never resolves, RFC 2606) does not start: the pod
stays Pending with its container waiting ``ErrImagePull`` (the message containerd's
error as the CRI returns it), then ``ImagePullBackOff``, with the kubelet's events
(``Pulling``, ``Failed`` "Failed to pull image ...", ``Failed`` "Error: ErrImagePull",
``BackOff`` "Back-off pulling image ...", ``Failed`` "Error: ImagePullBackOff"), retried
after 10 s doubling to 300 s, as pkg/kubelet/images/image_manager.go and
kuberuntime_container.go do (backOffPeriod 10 s, MaxContainerBackOff 300 s);
``kubesim.trainyard.io/image-pull-failures: N`` lets the pull succeed after N failures.
``image-pull: invalid`` is a reference the kubelet cannot parse: the container waits
``InvalidImageName`` ("Failed to apply default image tag ...", event ``InspectFailed``)
and nothing is pulled. Such a pod ran no container, so a deletion removes it at once.
"""

from __future__ import annotations

import hashlib
import heapq
import logging
import random

from kubesim.sim import image_pulls
from kubesim.sim.state import TERMINAL, ClusterState, PodInfo
from kubesim.sim.util import ann, ann_float, fmt_time, parse_time, stable_hash

log = logging.getLogger("kubesim.sim.kubelet")
NODE_LOST_EXIT = 137


class PodRun:
    __slots__ = (
        "deleting_since",
        "finished",
        "gen",
        "ip",
        "last_term",
        "phase",
        "prev_term",
        "pull_failures",
        "restarts",
        "run_started",
        "started",
        "uid",
    )

    def __init__(self, uid: str):
        self.uid = uid
        self.gen = 0
        self.restarts = 0
        self.started = 0.0  # pod startTime (Running)
        self.run_started = 0.0  # current container run
        self.ip = ""
        self.last_term: dict | None = None
        self.prev_term: dict | None = None  # the previous container's end (kept for logs)
        self.finished = 0.0
        self.deleting_since: float | None = None
        self.phase = "Pending"
        self.pull_failures = 0  # failed image pulls in a row (the container never started)


def _hex(*parts) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()


class Kubelet:
    def __init__(self, store, state: ClusterState, events, now_fn, profile: dict, seed: int,
                 speed: float = 1.0):
        self.store = store
        self.speed = float(speed)  # simulated seconds of the workload per second of the clock
        self.state = state
        self.events = events
        self.now_fn = now_fn
        self.sim = profile["simulation"]
        self.seed = seed
        self.runs: dict[tuple, PodRun] = {}
        self.timers: list = []
        self._seq = 0
        self._ip_next: dict[str, int] = {}
        self.kubelet_events = bool(self.sim.get("kubelet_events", True))

    # ---- scheduling of timed work ---------------------------------------------------------
    def _at(self, when: float, key: tuple, gen: int, action: str) -> None:
        self._seq += 1
        heapq.heappush(self.timers, (when, self._seq, key, gen, action))

    def next_due(self) -> float | None:
        return self.timers[0][0] if self.timers else None

    def tick(self) -> None:
        st = self.state
        now = self.now_fn()
        if st.kubelet_dirty:
            dirty = sorted(st.kubelet_dirty)
            st.kubelet_dirty.clear()
            for key in dirty:
                self._observe(key, now)
        while self.timers and self.timers[0][0] <= now:
            _, _, key, gen, action = heapq.heappop(self.timers)
            run = self.runs.get(key)
            info = st.pods.get(key)
            if run is None or info is None or run.gen != gen or info.uid != run.uid:
                continue
            getattr(self, "_do_" + action)(info, run, now)

    # ---- observe changes ------------------------------------------------------------------
    def _observe(self, key: tuple, now: float) -> None:
        info = self.state.pods.get(key)
        if info is None:
            self.runs.pop(key, None)
            return
        pod = info.obj
        md = pod["metadata"]
        spec = pod.get("spec") or {}
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        run = self.runs.get(key)
        if run is not None and run.uid != info.uid:
            run = None
        if md.get("deletionTimestamp"):
            if (
                phase in TERMINAL
                or not spec.get("nodeName")
                or (run is not None and run.phase in TERMINAL)
                or (run is not None and run.pull_failures and run.phase == "Pending")
            ):
                self._remove(info)
                return
            if run is None:
                run = self.runs[key] = PodRun(info.uid)
            if run.deleting_since is None:
                run.deleting_since = now
                grace = md.get("deletionGracePeriodSeconds")
                if grace is None:
                    grace = spec.get("terminationGracePeriodSeconds", 30)
                run.gen += 1
                # the training script checkpoints and exits within its grace period
                # (simulated time); the kubelet would kill it at the grace (wall time)
                grace = float(grace or 0)
                self._at(now + min(grace, self._wall(grace)), key, run.gen, "kill")
                if self.kubelet_events:
                    self.events.record(
                        pod,
                        "Normal",
                        "Killing",
                        f"Stopping container {self._main(pod)}",
                        component="kubelet",
                        host=spec.get("nodeName"),
                        kind="Pod",
                        field_path=f"spec.containers{{{self._main(pod)}}}",
                    )
            return
        node_name = spec.get("nodeName")
        if node_name and node_name not in self.state.nodes:
            # the pod garbage collector force-deletes pods bound to a node that does not exist
            self._remove(info)
            return
        if not node_name or phase in TERMINAL:
            if run is not None and phase in TERMINAL:
                run.phase = phase
            return
        if run is None:
            run = self.runs[key] = PodRun(info.uid)
            node = self.state.nodes.get(node_name)
            if node is None or node.failed:
                self._fail_node_lost(info, run, now)
                return
            if phase == "Running":
                self._adopt(info, run, now)
                return
            self._at(now + self._wall(float(self.sim["startup_seconds"])), key, run.gen,
                     "start")

    def _wall(self, simulated: float) -> float:
        """How long simulated work of the workload takes on the clock."""
        return simulated / self.speed

    def _adopt(self, info: PodInfo, run: PodRun, now: float) -> None:
        """A pod already Running when this kubelet first sees it (a restored state file):
        carry on from its recorded start instead of starting it again."""
        status = info.obj.get("status") or {}
        run.phase = "Running"
        run.started = parse_time(status.get("startTime")) or now
        run.ip = status.get("podIP", "")
        cs = (status.get("containerStatuses") or [{}])[0]
        run.restarts = int(cs.get("restartCount") or 0)
        run.prev_term = (cs.get("lastState") or {}).get("terminated") or None
        running = (cs.get("state") or {}).get("running") or {}
        run.run_started = parse_time(running.get("startedAt")) or run.started
        secs, _ = self._plan(info, run)
        run.gen += 1
        self._at(max(now, run.run_started + self._wall(secs)), info.key, run.gen, "finish")

    # ---- actions --------------------------------------------------------------------------
    def _do_start(self, info: PodInfo, run: PodRun, now: float) -> None:
        pod = info.obj
        node = self.state.nodes.get(pod["spec"].get("nodeName"))
        if node is None or node.failed:
            self._fail_node_lost(info, run, now)
            return
        if not run.ip:
            n = self._ip_next.get(node.name, 2)
            self._ip_next[node.name] = n + 1
            cidr = (node.obj.get("spec") or {}).get("podCIDR", "10.244.0.0/24")
            base = cidr.split("/")[0].rsplit(".", 1)[0]
            run.ip = f"{base}.{n % 254 + 1}"
        if self._pull_image(info, run, now, node.name):
            return
        run.started = run.run_started = now
        run.phase = "Running"
        self._write_running(info, run, now)
        self._schedule_finish(info, run, now)
        if self.kubelet_events:
            c = self._main(pod)
            ref = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("image") or ""
            took = self._wall(float(self.sim["startup_seconds"]))
            for reason, note in (("Pulling", f'Pulling image "{ref}"'),
                                 ("Pulled", f'Successfully pulled image "{ref}" in '
                                            f"{took:.3f}s ({took:.3f}s including waiting)"),
                                 ("Created", f"Created container: {c}"),
                                 ("Started", f"Started container {c}")):
                self.events.record(pod, "Normal", reason, note, component="kubelet",
                                   host=node.name, kind="Pod",
                                   field_path=f"spec.containers{{{c}}}")

    def _do_finish(
        self, info: PodInfo, run: PodRun, now: float, exit_code: int | None = None
    ) -> None:
        pod = info.obj
        code = self._planned_exit(info, run) if exit_code is None else exit_code
        policy = (pod.get("spec") or {}).get("restartPolicy") or "Always"
        term = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": fmt_time(run.run_started),
            "finishedAt": fmt_time(now),
            "containerID": self._cid(info, run),
        }
        run.last_term = term
        if policy == "Always" or (policy == "OnFailure" and code != 0):
            backoff = min(300.0, float(self.sim["restart_backoff_seconds"]) * (2**run.restarts))
            run.restarts += 1
            self._write_waiting(info, run, now, backoff)
            run.gen += 1
            self._at(now + backoff, info.key, run.gen, "restart")
            if self.kubelet_events:
                self.events.record(
                    pod,
                    "Warning",
                    "BackOff",
                    "Back-off restarting failed container "
                    f"{self._main(pod)} in pod {info.key[1]}_{info.key[0]}({info.uid})",
                    component="kubelet",
                    host=pod["spec"].get("nodeName"),
                    kind="Pod",
                    field_path=f"spec.containers{{{self._main(pod)}}}",
                )
            return
        run.phase = "Succeeded" if code == 0 else "Failed"
        run.finished = now
        self._write_terminated(info, run, now, term)

    # ---- image pulls (kubesim.sim.image_pulls) ----------------------------------------
    def _pull_image(self, info: PodInfo, run: PodRun, now: float, host: str) -> bool:
        return image_pulls.pull(self, info, run, now, host)

    def _do_pull_backoff(self, info: PodInfo, run: PodRun, now: float) -> None:
        image_pulls.back_off(self, info, run, now)

    def _do_restart(self, info: PodInfo, run: PodRun, now: float) -> None:
        run.prev_term = run.last_term
        run.run_started = now
        self._write_running(info, run, now)
        self._schedule_finish(info, run, now)

    def _do_kill(self, info: PodInfo, run: PodRun, now: float) -> None:
        self._remove(info)

    def _remove(self, info: PodInfo) -> None:
        ns, name = info.key
        try:
            self.store.delete("pods", name, namespace=ns, grace_period_seconds=0)
        except Exception as exc:
            log.debug("final delete of %s/%s: %s", ns, name, exc)
        self.runs.pop(info.key, None)

    def fail_for_node(self, info: PodInfo, now: float) -> None:
        run = self.runs.get(info.key)
        if run is None or run.uid != info.uid:
            run = self.runs[info.key] = PodRun(info.uid)
        if run.phase in TERMINAL or run.deleting_since is not None:
            return
        self._fail_node_lost(info, run, now)

    def _fail_node_lost(self, info: PodInfo, run: PodRun, now: float) -> None:
        run.gen += 1
        run.phase = "Failed"
        run.finished = now
        node = (info.obj.get("spec") or {}).get("nodeName")
        term = {
            "exitCode": NODE_LOST_EXIT,
            "reason": "Error",
            "message": f"node {node} failed",
            "startedAt": fmt_time(run.run_started or now),
            "finishedAt": fmt_time(now),
            "containerID": self._cid(info, run),
        }
        self._write_terminated(
            info,
            run,
            now,
            term,
            reason="NodeLost",
            message=f"Node {node} which was running pod {info.key[1]} is unresponsive",
        )

    # ---- run time and failures ------------------------------------------------------------
    def run_seconds(self, pod: dict) -> float:
        v = ann_float(pod, "run-seconds")
        if v is not None:
            return max(0.0, v)
        for c in (pod.get("spec") or {}).get("containers") or []:
            for e in c.get("env") or []:
                if e.get("name") == "KUBESIM_RUN_SECONDS":
                    try:
                        return max(0.0, float(e.get("value")))
                    except (TypeError, ValueError):
                        pass
        return float(self.sim["run_seconds"])

    def _plan(self, info: PodInfo, run: PodRun) -> tuple[float, int]:
        pod = info.obj
        total = self.run_seconds(pod)
        fail_after = ann_float(pod, "fail-after-seconds")
        code_s = ann(pod, "exit-code")
        code = (
            int(code_s)
            if code_s and code_s.lstrip("-").isdigit()
            else int(self.sim["failure_exit_code"])
        )
        if fail_after is not None and fail_after < total:
            return fail_after, code or 1
        rate = float(self.sim.get("failure_rate") or 0.0)
        if rate > 0:
            rng = random.Random(stable_hash(self.seed, info.uid or info.key, run.restarts))
            if rng.random() < rate:
                return total * rng.uniform(0.05, 0.95), code or 1
        return total, 0 if not code_s else code

    def _schedule_finish(self, info: PodInfo, run: PodRun, now: float) -> None:
        secs, _ = self._plan(info, run)
        run.gen += 1
        self._at(now + self._wall(secs), info.key, run.gen, "finish")

    def _planned_exit(self, info: PodInfo, run: PodRun) -> int:
        return self._plan(info, run)[1]

    # ---- status documents -----------------------------------------------------------------
    def _main(self, pod: dict) -> str:
        cs = (pod.get("spec") or {}).get("containers") or [{}]
        return cs[0].get("name", "main")

    def _cid(self, info: PodInfo, run: PodRun, cname: str = "") -> str:
        return "containerd://" + _hex(info.uid, cname or "c", run.restarts)[:64]

    def _container_statuses(
        self, info: PodInfo, run: PodRun, state: dict, ready: bool, main_state: dict | None = None
    ) -> list[dict]:
        out = []
        for i, c in enumerate((info.obj.get("spec") or {}).get("containers") or []):
            image = c.get("image") or "unknown"
            repo = image if "/" in image else f"docker.io/library/{image}"
            repo = repo.split("@")[0].rsplit(":", 1)[0] if ":" in repo.split("/")[-1] else repo
            s = main_state if (i == 0 and main_state is not None) else state
            cs = {
                "name": c.get("name", f"c{i}"),
                "image": image,
                "imageID": f"{repo}@sha256:{_hex(image)}",
                "containerID": self._cid(info, run, c.get("name", "")),
                "ready": ready,
                "restartCount": run.restarts if i == 0 else 0,
                "started": "running" in s,
                "state": s,
            }
            if i == 0 and run.last_term is not None:
                cs["lastState"] = {"terminated": run.last_term}
            out.append(cs)
        return out

    def _base_status(
        self, info: PodInfo, run: PodRun, now: float, ready: bool, reason: str = ""
    ) -> dict:
        node = self.state.nodes.get(info.obj["spec"].get("nodeName") or "")
        host_ip = ""
        if node is not None:
            for a in (node.obj.get("status") or {}).get("addresses") or []:
                if a.get("type") == "InternalIP":
                    host_ip = a["address"]
        ts = fmt_time(run.started or now)
        nowt = fmt_time(now)
        rd = "True" if ready else "False"
        conds = [
            {
                "type": "PodReadyToStartContainers",
                "status": "True" if run.phase == "Running" else "False",
                "lastProbeTime": None,
                "lastTransitionTime": ts,
            },
            {
                "type": "Initialized",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": ts,
            },
            {"type": "Ready", "status": rd, "lastProbeTime": None, "lastTransitionTime": nowt},
            {
                "type": "ContainersReady",
                "status": rd,
                "lastProbeTime": None,
                "lastTransitionTime": nowt,
            },
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": ts,
            },
        ]
        if reason:
            for c in conds[2:4]:
                c["reason"] = reason
        for c in (info.obj.get("status") or {}).get("conditions") or []:
            if c.get("type") == "DisruptionTarget":
                conds.append(c)
        st = {
            "phase": run.phase,
            "conditions": conds,
            "hostIP": host_ip,
            "startTime": ts,
            "qosClass": _qos(info.obj),
        }
        if host_ip:
            st["hostIPs"] = [{"ip": host_ip}]
        if run.ip:
            st["podIP"] = run.ip
            st["podIPs"] = [{"ip": run.ip}]
        if info.obj["spec"].get("initContainers"):
            st["initContainerStatuses"] = [
                {
                    "name": c.get("name", "init"),
                    "image": c.get("image", "unknown"),
                    "imageID": f"sha256:{_hex(c.get('image'))}",
                    "containerID": self._cid(info, run, "init" + str(i)),
                    "ready": True,
                    "restartCount": 0,
                    "started": False,
                    "state": {
                        "terminated": {
                            "exitCode": 0,
                            "reason": "Completed",
                            "startedAt": ts,
                            "finishedAt": ts,
                        }
                    },
                }
                for i, c in enumerate(info.obj["spec"]["initContainers"])
            ]
        return st

    def _patch_status(self, info: PodInfo, status: dict) -> None:
        ns, name = info.key
        try:
            self.store.patch(
                "pods",
                name,
                {"status": status},
                patch_type="merge",
                namespace=ns,
                subresource="status",
                copy=False,
            )
        except Exception as exc:
            log.debug("status of %s/%s: %s", ns, name, exc)

    def _write_running(self, info: PodInfo, run: PodRun, now: float) -> None:
        st = self._base_status(info, run, now, ready=True)
        st["containerStatuses"] = self._container_statuses(
            info, run, {"running": {"startedAt": fmt_time(run.run_started)}}, True
        )
        self._patch_status(info, st)

    def _write_waiting(self, info: PodInfo, run: PodRun, now: float, backoff: float) -> None:
        st = self._base_status(info, run, now, ready=False, reason="ContainersNotReady")
        main = self._main(info.obj)
        waiting = {
            "waiting": {
                "reason": "CrashLoopBackOff",
                "message": f"back-off {int(backoff)}s restarting failed container={main} "
                f"pod={info.key[1]}_{info.key[0]}({info.uid})",
            }
        }
        st["containerStatuses"] = self._container_statuses(
            info,
            run,
            {"running": {"startedAt": fmt_time(run.run_started)}},
            False,
            main_state=waiting,
        )
        self._patch_status(info, st)

    def _write_terminated(
        self,
        info: PodInfo,
        run: PodRun,
        now: float,
        term: dict,
        reason: str = "",
        message: str = "",
    ) -> None:
        st = self._base_status(
            info,
            run,
            now,
            ready=False,
            reason="PodCompleted" if run.phase == "Succeeded" else "PodFailed",
        )
        others = {
            "terminated": {
                "exitCode": 0 if term["exitCode"] == 0 or not reason else term["exitCode"],
                "reason": "Completed" if term["exitCode"] == 0 or not reason else "Error",
                "startedAt": term["startedAt"],
                "finishedAt": term["finishedAt"],
            }
        }
        st["containerStatuses"] = self._container_statuses(
            info, run, others, False, main_state={"terminated": term}
        )
        run.last_term = None
        for cs in st["containerStatuses"]:
            cs.pop("lastState", None)
        if reason:
            st["reason"] = reason
            st["message"] = message
        self._patch_status(info, st)


def _qos(pod: dict) -> str:
    cs = (pod.get("spec") or {}).get("containers") or []
    any_set = False
    guaranteed = True
    for c in cs:
        r = c.get("resources") or {}
        req, lim = r.get("requests") or {}, r.get("limits") or {}
        if req or lim:
            any_set = True
        for k in ("cpu", "memory"):
            if k not in lim or (k in req and str(req[k]) != str(lim[k])):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"
