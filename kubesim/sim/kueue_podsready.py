"""Kueue's ``waitForPodsReady`` for kubesim's Kueue controller (Kueue v0.19.2).

* ``PodsReady`` condition reasons: ``Started``, ``WaitForStart``, ``WaitForRecovery``,
  ``Recovered`` (``pkg/controller/jobframework/reconciler.go``
  ``generatePodsReadyCondition``).
* The timeout (``pkg/controller/core/workload_controller.go`` ``reconcileNotReadyTimeout``,
  ``admittedNotReadyWorkload``): an admitted Workload whose pods are not ready
  ``timeout`` after its ``Admitted`` transition (``WaitForStart``), or ``recoveryTimeout``
  after ``PodsReady`` went false (``WaitForRecovery``), is evicted: ``Evicted=True``
  reason ``PodsReadyTimeout``, message ``Exceeded the PodsReady timeout <ns>/<name>``,
  ``status.requeueState`` count + 1 and ``requeueAt`` = now + backoff
  (``pkg/workload/workload.go`` ``UpdateRequeueState``), the eviction counted in
  ``schedulingStats.evictions`` by reason and underlying cause
  (``pkg/workload/evict/evict.go`` ``workloadEvictionStateInc``).
* Past ``backoffLimitCount`` (``triggerDeactivation``): the ``DeactivationTarget``
  condition (reason ``RequeuingLimitExceeded``, message ``exceeding the maximum number
  of re-queuing retries``), then ``spec.active: false``, then the eviction with reason
  ``DeactivatedDueToRequeuingLimitExceeded`` and message ``The workload is deactivated
  due to exceeding the maximum number of re-queuing retries``; ``requeueState`` cleared.
* The backoff: the evicted Workload waits out of its queue until ``requeueAt``, then
  ``requeueAt`` is cleared (the count stays) and ``Requeued=True`` reason
  ``BackoffFinished`` (``The workload backoff was finished``).

kubesim's clock is simulated: every time here is the controller's ``now``.
"""

from __future__ import annotations

from typing import Any

from kubesim.sim.kueue_config import PodsReady, backoff_seconds
from kubesim.sim.util import fmt_time, parse_time

NOT_READY = "Not all pods are ready or succeeded"
RECOVERING = "At least one pod has failed, waiting for recovery"
READY = "All pods reached readiness and the workload is running"
LIMIT_REASON = "RequeuingLimitExceeded"
LIMIT_MESSAGE = "exceeding the maximum number of re-queuing retries"
BACKOFF_FINISHED = "The workload backoff was finished"
BLOCKED = "waiting for all admitted workloads to be in PodsReady condition"


class Timers:
    """When to look at a Workload again (its PodsReady timeout, its backoff's end): the
    controller's ``tick`` costs one comparison while none is due."""

    def __init__(self) -> None:
        self.due: dict[tuple, float] = {}
        self.next_due = float("inf")

    def set(self, key: tuple, due: float | None) -> None:
        if due is None:
            if self.due.pop(key, None) is not None and not self.due:
                self.next_due = float("inf")
            return
        self.due[key] = due
        self.next_due = min(self.next_due, due)

    def pop_due(self, now: float) -> list[tuple]:
        keys = sorted(k for k, d in self.due.items() if d <= now)
        for k in keys:
            del self.due[k]
        self.next_due = min(self.due.values(), default=float("inf"))
        return keys


def blocks(cfg: PodsReady, admitted: dict[str, dict[tuple, Any]]) -> bool:
    """``blockAdmission``: a workload that fits waits (``QuotaReserved=False`` reason
    ``WaitingForPodsReady``, :data:`BLOCKED`) while any workload holding quota, in any
    ClusterQueue, has not ``PodsReady=True``; the scheduler stops there
    (``pkg/scheduler/scheduler.go`` ``waitForPodsReadyIfNeeded``,
    ``pkg/cache/scheduler/cache.go`` ``podsReadyForAllAdmittedWorkloads``)."""
    if not (cfg.enabled and cfg.block_admission):
        return False
    for by_key in admitted.values():
        for info in by_key.values():
            pr = _cond((info.obj.get("status") or {}).get("conditions") or [], "PodsReady")
            if pr is None or pr.get("status") != "True":
                return True
    return False


def _cond(conds: list[dict], ctype: str) -> dict | None:
    return next((c for c in conds if c.get("type") == ctype), None)


def pods_ready_condition(conds: list[dict], ready: bool) -> tuple[str, str, str]:
    """(status, reason, message) of ``PodsReady`` for an admitted Workload."""
    cur = _cond(conds, "PodsReady")
    if ready:
        if cur is not None and cur.get("reason") in ("WaitForRecovery", "Recovered"):
            return "True", "Recovered", READY
        return "True", "Started", READY
    if cur is None:
        return "False", "WaitForStart", NOT_READY
    if cur.get("status") == "True" or cur.get("reason") == "WaitForRecovery":
        return "False", "WaitForRecovery", RECOVERING
    return "False", "WaitForStart", NOT_READY


def count_eviction(status: dict, reason: str, cause: str = "") -> None:
    """``schedulingStats.evictions``: one entry per (reason, underlying cause), counted."""
    evs = [dict(e) for e in (status.get("schedulingStats") or {}).get("evictions") or []]
    for e in evs:
        if e.get("reason") == reason and (e.get("underlyingCause") or "") == cause:
            e["count"] = int(e.get("count", 0)) + 1
            break
    else:
        evs.append({"reason": reason, "underlyingCause": cause, "count": 1})
    status["schedulingStats"] = {**(status.get("schedulingStats") or {}), "evictions": evs}


def not_ready_deadline(cfg: PodsReady, conds: list[dict]) -> tuple[str, float | None]:
    """(underlying cause, when the timeout expires) of an admitted Workload whose pods
    are not ready; ("", None) when no timeout applies (``admittedNotReadyWorkload``)."""
    if not cfg.enabled:
        return "", None
    pr = _cond(conds, "PodsReady")
    if pr is not None and pr.get("status") == "True":
        return "", None
    if pr is None or pr.get("reason") in ("WaitForStart", "PodsReady"):
        adm = _cond(conds, "Admitted") or {}
        since = parse_time(adm.get("lastTransitionTime"))
        return ("WaitForStart", None if since is None else since + cfg.timeout)
    if pr.get("reason") == "WaitForRecovery" and cfg.recovery_timeout:
        since = parse_time(pr.get("lastTransitionTime"))
        return ("WaitForRecovery", None if since is None else since + cfg.recovery_timeout)
    return "", None


def on_admitted(cfg: PodsReady, key: tuple, status: dict, conds: list[dict], ready: bool,
                now: float, set_cond: Any, gen: int | None) -> tuple[list[dict], float | None]:
    """An admitted, not evicted Workload: its ``PodsReady`` condition, then the timeout.
    Returns the conditions and when to look again (None: no timer)."""
    st, reason, msg = pods_ready_condition(conds, ready)
    ts = fmt_time(now)
    conds = set_cond(conds, "PodsReady", st, reason, msg, ts, gen)
    cause, due = not_ready_deadline(cfg, conds)
    if not cause or due is None:
        return conds, None
    if now < due:
        return conds, due
    rq = status.get("requeueState") or {}
    count = int(rq.get("count") or 0)
    if cfg.backoff_limit is not None and count + 1 > cfg.backoff_limit:
        # triggerDeactivation: the workload controller deactivates it next
        conds = set_cond(conds, "DeactivationTarget", "True", LIMIT_REASON, LIMIT_MESSAGE,
                         ts, gen)
        return conds, None
    wait = backoff_seconds(count + 1, cfg.backoff_base, cfg.backoff_max)
    old_at = parse_time(rq.get("requeueAt")) or 0.0
    status["requeueState"] = {"count": count + 1,
                              "requeueAt": fmt_time(max(old_at, now + wait))}
    conds = set_cond(conds, "Evicted", "True", "PodsReadyTimeout",
                     f"Exceeded the PodsReady timeout {key[0]}/{key[1]}", ts, gen)
    count_eviction(status, "PodsReadyTimeout", cause)
    return conds, None


def deactivation(status: dict, conds: list[dict]) -> tuple[list[dict], str, str, str]:
    """The eviction of a deactivated Workload (``workload_controller.go``, the inactive
    branch of ``Reconcile``): (conditions without ``DeactivationTarget``, Evicted reason,
    message, underlying cause); ``requeueState`` cleared."""
    dt = _cond(conds, "DeactivationTarget")
    reason, msg, cause = "Deactivated", "The workload is deactivated", ""
    if dt is not None and dt.get("status") == "True":
        cause = str(dt.get("reason") or "")
        msg = f"{msg} due to {dt.get('message', '')}"
    conds = [c for c in conds if c.get("type") != "DeactivationTarget"]
    status["requeueState"] = None
    evicted_reason = f"{reason}DueTo{cause}" if cause else reason  # patching.ReasonWithCause
    count_eviction(status, reason, cause)
    return conds, evicted_reason, msg, cause


def backoff_state(status: dict, conds: list[dict], now: float) -> float | None:
    """A Workload requeued after a PodsReady timeout: when its backoff ends, if later
    than ``now`` (it stays out of its queue until then); None once it is over."""
    rq = _cond(conds, "Requeued")
    if rq is None or rq.get("status") != "False" or rq.get("reason") != "PodsReadyTimeout":
        return None
    at = parse_time((status.get("requeueState") or {}).get("requeueAt"))
    if at is not None and at > now:
        return at
    return None


def finish_backoff(status: dict, conds: list[dict], now: float, set_cond: Any,
                   gen: int | None) -> list[dict] | None:
    """The backoff is over: ``requeueAt`` cleared (the count kept), ``Requeued=True``
    ``BackoffFinished``. None when there is nothing to do."""
    rq = _cond(conds, "Requeued")
    if rq is None or rq.get("status") != "False" or rq.get("reason") != "PodsReadyTimeout":
        return None
    if backoff_state(status, conds, now) is not None:
        return None
    state = dict(status.get("requeueState") or {})
    state["requeueAt"] = None  # a merge patch: null removes the field
    status["requeueState"] = state
    return set_cond(conds, "Requeued", "True", "BackoffFinished", BACKOFF_FINISHED,
                    fmt_time(now), gen)
