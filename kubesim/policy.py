"""policy/v1: the PodDisruptionBudget status the disruption controller keeps, and the
`pods/eviction` subresource that consults it.

Sources (kubernetes/kubernetes):
* pkg/controller/disruption/disruption.go: getExpectedPodCount (maxUnavailable and a
  percentage minAvailable scale the pods' controllers; an integer minAvailable counts the
  matching pods), countHealthyPods (ready pods not being deleted and not in disruptedPods),
  updatePdbStatus (disruptionsAllowed = currentHealthy - desiredHealthy, 0 when negative
  or when no pods are expected), buildDisruptedPodMap (entries expire after
  DeletionTimeout, 2 minutes, and leave once the pod is gone or being deleted).
* staging/src/k8s.io/component-helpers/apps/poddisruptionbudget/helpers.go:
  UpdateDisruptionAllowedCondition (DisruptionAllowed, SufficientPods/InsufficientPods).
* pkg/registry/core/pod/storage/eviction.go: canIgnorePDB (Pending, Succeeded, Failed or
  already deleting pods are deleted without asking a budget), "This pod has more than one
  PodDisruptionBudget..." (500), checkAndDecrement (observedGeneration behind: 429 "is
  still being processed"; disruptionsAllowed 0: 429 "Cannot evict pod as it would violate
  the pod's disruption budget." with a DisruptionBudget cause), the budget's
  disruptedPods entry, and addConditionAndDeletePod (the pod gets the DisruptionTarget
  condition, reason EvictionByEvictionAPI, before it is deleted).
"""
from __future__ import annotations

import math
from datetime import timedelta
from typing import TYPE_CHECKING

from .clock import parse_rfc3339
from .errors import ApiError, bad_request
from .jsonutil import jcopy

if TYPE_CHECKING:
    from .store import Store

PDB_KEY = "poddisruptionbudgets.policy"
DELETION_TIMEOUT = timedelta(minutes=2)
BUDGET_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."


def selector_matches(selector: dict | None, labels: dict | None) -> bool:
    """metav1.LabelSelector semantics; a nil or empty selector matches nothing here (the
    eviction and disruption code both treat an empty PDB selector so)."""
    if not selector or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return False
    labels = labels or {}
    for k, val in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != val:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def pod_ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _scaled(value, total: int, round_up: bool = True) -> int:
    """intstr.GetScaledValueFromIntOrPercent."""
    if isinstance(value, int):
        return value
    s = str(value)
    if s.endswith("%"):
        pct = int(s[:-1])
        return math.ceil(pct * total / 100) if round_up else math.floor(pct * total / 100)
    return int(s)


def _controller_ref(obj: dict) -> dict | None:
    return next((r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")),
                None)


def _expected_scale(store: Store, ns: str, pods: list[dict]) -> int:
    """getExpectedScale: the summed replicas of the pods' controllers (a ReplicaSet owned
    by a Deployment counts the Deployment's). Pods without a controller do not count."""
    seen: dict[str, int] = {}
    for pod in pods:
        ref = _controller_ref(pod)
        if ref is None:
            continue
        kind, name = str(ref.get("kind") or ""), str(ref.get("name") or "")
        key = {"ReplicaSet": "replicasets.apps", "StatefulSet": "statefulsets.apps",
               "ReplicationController": "replicationcontrollers"}.get(kind or "")
        owner = store._data.get(key, {}).get(ns, {}).get(name) if key else None
        if owner is None:
            continue
        if kind == "ReplicaSet":
            dep_ref = _controller_ref(owner)
            dep = None
            if dep_ref and dep_ref.get("kind") == "Deployment":
                dep = store._data.get("deployments.apps", {}).get(ns, {}).get(
                    str(dep_ref.get("name") or ""))
            if dep is not None:
                owner = dep
        uid = str(owner["metadata"].get("uid") or name)
        seen[uid] = int((owner.get("spec") or {}).get("replicas", 1))
    return sum(seen.values())


def compute_status(store: Store, pdb: dict) -> dict:
    ns = pdb["metadata"]["namespace"]
    spec = pdb.get("spec") or {}
    sel = spec.get("selector")
    pods = [p for p in store._data.get("pods", {}).get(ns, {}).values()
            if selector_matches(sel, p["metadata"].get("labels"))]
    if spec.get("maxUnavailable") is not None:
        expected = _expected_scale(store, ns, pods)
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
    elif isinstance(spec.get("minAvailable"), str):
        expected = _expected_scale(store, ns, pods)
        desired = _scaled(spec["minAvailable"], expected)
    else:
        expected = len(pods)
        desired = int(spec.get("minAvailable") or 0)
    old = pdb.get("status") or {}
    now = store.clock.now()
    disrupted = {}
    by_name = {p["metadata"]["name"]: p for p in pods}
    for name, ts in (old.get("disruptedPods") or {}).items():
        pod = by_name.get(name)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            continue
        try:
            if parse_rfc3339(ts) + DELETION_TIMEOUT > now:
                disrupted[name] = ts
        except ValueError:
            continue
    healthy = sum(1 for p in pods if not p["metadata"].get("deletionTimestamp")
                  and p["metadata"]["name"] not in disrupted and pod_ready(p))
    allowed = healthy - desired
    if expected <= 0 or allowed <= 0:
        allowed = 0
    status = {"observedGeneration": pdb["metadata"].get("generation", 1),
              "disruptionsAllowed": allowed, "currentHealthy": healthy,
              "desiredHealthy": desired, "expectedPods": expected}
    if disrupted:
        status["disruptedPods"] = disrupted
    status["conditions"] = _conditions(old.get("conditions"), allowed, store.clock.timestamp(),
                                       status["observedGeneration"])
    return status


def _conditions(old: list | None, allowed: int, now: str, generation: int) -> list:
    want = ({"type": "DisruptionAllowed", "status": "True", "reason": "SufficientPods"}
            if allowed > 0 else
            {"type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods"})
    prev = next((c for c in old or [] if c.get("type") == "DisruptionAllowed"), None)
    since = prev.get("lastTransitionTime") if prev and prev.get("status") == want["status"] \
        else now
    return [{**want, "message": "", "observedGeneration": generation,
             "lastTransitionTime": since}]


def refresh(store: Store, ns: str, only: dict | None = None) -> None:
    """The disruption controller's sync for the budgets of a namespace (or one budget)."""
    rt = store.registry.find(PDB_KEY)
    if rt is None:
        return
    budgets = [only] if only is not None else list(
        store._data.get(PDB_KEY, {}).get(ns, {}).values())
    for pdb in budgets:
        status = compute_status(store, pdb)
        if status != pdb.get("status"):
            updated = jcopy(pdb)
            updated["status"] = status
            store._commit(rt, "MODIFIED", updated, pdb)


def _too_many(message: str, cause: str, retry_after: int) -> ApiError:
    return ApiError(429, "TooManyRequests", message, {
        "causes": [{"reason": "DisruptionBudget", "message": cause}],
        **({"retryAfterSeconds": retry_after} if retry_after else {})})


def evict(store: Store, ns: str, name: str, body: dict, dry_run: bool) -> dict:
    """POST pods/NAME/eviction (policy/v1 or v1beta1 Eviction)."""
    if not isinstance(body, dict):
        raise bad_request("the body of the request was in an unknown format")
    if (body.get("metadata") or {}).get("name") not in (None, name):
        raise bad_request("name in URL does not match name in Eviction object")
    opts = body.get("deleteOptions") or {}
    dry_run = dry_run or "All" in (opts.get("dryRun") or [])
    pod = store._get_or_404(store.rt("pods"), name, ns)
    phase = (pod.get("status") or {}).get("phase")

    def delete() -> dict:
        return store.delete("pods", name, namespace=ns, dry_run=dry_run,
                            grace_period_seconds=opts.get("gracePeriodSeconds"),
                            preconditions=opts.get("preconditions"))

    success = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
               "code": 201}
    if phase in ("Pending", "Succeeded", "Failed") or pod["metadata"].get("deletionTimestamp"):
        delete()       # canIgnorePDB
        return success
    budgets = [b for b in store._data.get(PDB_KEY, {}).get(ns, {}).values()
               if selector_matches((b.get("spec") or {}).get("selector"),
                                   pod["metadata"].get("labels"))]
    if len(budgets) > 1:
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "This pod has more than one PodDisruptionBudget, which the "
                           "eviction subresource does not support.", "code": 500}
    if budgets:
        pdb = budgets[0]
        st = pdb.get("status") or {}
        pname = pdb["metadata"]["name"]
        unready_ok = (not pod_ready(pod) and st.get("currentHealthy", 0)
                      >= st.get("desiredHealthy", 0) and st.get("desiredHealthy", 0) > 0)
        if not unready_ok:
            if st.get("observedGeneration", 0) < pdb["metadata"].get("generation", 1):
                raise _too_many(BUDGET_MESSAGE, f"The disruption budget {pname} is still "
                                "being processed by the server.", 10)
            if st.get("disruptionsAllowed", 0) <= 0:
                raise _too_many(BUDGET_MESSAGE, f"The disruption budget {pname} needs "
                                f"{st.get('desiredHealthy', 0)} healthy pods and has "
                                f"{st.get('currentHealthy', 0)} currently", 0)
            if not dry_run:
                updated = jcopy(pdb)
                new_st = updated.setdefault("status", {})
                new_st["disruptionsAllowed"] = st["disruptionsAllowed"] - 1
                new_st.setdefault("disruptedPods", {})[name] = store.clock.timestamp()
                if new_st["disruptionsAllowed"] == 0:
                    new_st["conditions"] = _conditions(
                        st.get("conditions"), 0, store.clock.timestamp(),
                        st.get("observedGeneration", 1))
                store._commit(store.rt(PDB_KEY), "MODIFIED", updated, pdb)
    if not dry_run:
        _mark_disruption_target(store, ns, name)
    delete()
    return success


def _mark_disruption_target(store: Store, ns: str, name: str) -> None:
    pod = store._data["pods"][ns][name]
    conds = [c for c in (pod.get("status") or {}).get("conditions") or []
             if c.get("type") != "DisruptionTarget"]
    conds.append({"type": "DisruptionTarget", "status": "True",
                  "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting",
                  "lastProbeTime": None, "lastTransitionTime": store.clock.timestamp()})
    new = jcopy(pod)
    new.setdefault("status", {})["conditions"] = conds
    store._commit(store.rt("pods"), "MODIFIED", new, pod)
