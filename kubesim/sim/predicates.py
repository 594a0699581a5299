"""Pure scheduling predicates and kube-scheduler's wording of why a pod does not fit."""

from __future__ import annotations

from kubesim.sim.state import NodeState
from kubesim.sim.util import GPU, GPU_CORES, HAMI_RESOURCES

R_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
R_UNSCHEDULABLE = "node(s) were unschedulable"
R_NOT_HELPFUL = "Preemption is not helpful for scheduling"
R_NO_VICTIMS = "No preemption victims found for incoming pod"
# HAMi's scheduler extender filters out nodes without its vGPU cards, and cards without
# enough free memory or cores (its NodeInsufficientDevice / CardInsufficient* reasons).
R_NO_HAMI = "node(s) had no HAMi vGPU devices"
R_HAMI_MEMORY = "Insufficient nvidia.com/gpumem"
R_HAMI_CORES = "Insufficient nvidia.com/gpucores"


def hami_reason(req: dict[str, int], node: NodeState) -> str | None:
    """HAMi's per-card filter (kubesim plays its scheduler extender): None = fits.

    A pod asking for gpumem/gpucores needs a HAMi node; on a HAMi node every
    ``nvidia.com/gpu`` request is a set of vGPUs on distinct cards (no gpumem = the whole
    card's memory), checked card by card."""
    wants = any(req.get(r) for r in HAMI_RESOURCES)
    inv = node.inv
    if inv is None or not inv.hami:
        return R_NO_HAMI if wants else None
    if req.get(GPU, 0) <= 0:
        return R_NO_HAMI if wants else None
    if inv.hami_pick(req) is not None:
        return None
    if req.get(GPU_CORES) and inv.hami_pick({**req, GPU_CORES: 0}) is not None:
        return R_HAMI_CORES
    return R_HAMI_MEMORY


def tolerates(tolerations: list[dict], taint: dict) -> bool:
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        op = t.get("operator") or "Equal"
        if not t.get("key"):
            if op == "Exists":
                return True
            continue
        if t["key"] != taint.get("key"):
            continue
        if op == "Exists" or (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def match_expression(labels: dict, expr: dict) -> bool:
    key, op = expr.get("key"), expr.get("operator")
    vals = expr.get("values") or []
    has = key in labels
    v = labels.get(key)
    if op == "In":
        return has and v in vals
    if op == "NotIn":
        return not has or v not in vals
    if op == "Exists":
        return has
    if op == "DoesNotExist":
        return not has
    if op in ("Gt", "Lt"):
        if not has or v is None or len(vals) != 1:
            return False
        try:
            a, b = int(v), int(vals[0])
        except (TypeError, ValueError):
            return False
        return a > b if op == "Gt" else a < b
    return False


def match_node_selector_terms(labels: dict, fields: dict, terms: list[dict]) -> bool:
    """NodeSelectorTerms are ORed; expressions inside one term are ANDed."""
    for term in terms:
        exprs = term.get("matchExpressions") or []
        fexprs = term.get("matchFields") or []
        if not exprs and not fexprs:
            continue
        if all(match_expression(labels, e) for e in exprs) and all(
            match_expression(fields, e) for e in fexprs
        ):
            return True
    return False


def node_matches_pod(pod_spec: dict, labels: dict, node_name: str) -> bool:
    sel = pod_spec.get("nodeSelector") or {}
    for k, v in sel.items():
        if labels.get(k) != v:
            return False
    req = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if req and req.get("nodeSelectorTerms") is not None:
        return match_node_selector_terms(
            labels, {"metadata.name": node_name}, req["nodeSelectorTerms"]
        )
    return True


def static_filter(pod_spec: dict, node: NodeState) -> str | None:
    """Filters that do not depend on allocations, in kube-scheduler plugin order. None = passes."""
    tolerations = pod_spec.get("tolerations") or []
    if node.unschedulable and not tolerates(
        tolerations, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    ):
        return R_UNSCHEDULABLE
    if pod_spec.get("nodeName") and pod_spec["nodeName"] != node.name:
        return "node(s) didn't match the requested node name"
    for taint in node.taints:
        if not tolerates(tolerations, taint):
            return (
                f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}"
            )
    if not node_matches_pod(pod_spec, node.labels, node.name):
        return R_AFFINITY
    return None


def fit_reasons(
    req: dict[str, int],
    node: NodeState,
    extra: dict[str, int] | None = None,
    minus: dict[str, int] | None = None,
    minus_pods: int = 0,
) -> list[str]:
    out = []
    if node.npods - minus_pods + 1 > node.max_pods:
        out.append("Too many pods")
    for r, v in req.items():
        if r in HAMI_RESOURCES:
            continue  # ignoredByScheduler: HAMi's extender checks them per card
        used = node.used.get(r, 0)
        if extra:
            used += extra.get(r, 0)
        if minus:
            used -= minus.get(r, 0)
        if used + v > node.alloc.get(r, 0):
            out.append(f"Insufficient {r}")
    if not out and minus is None:
        # per card, on the cards' current holders (a preemption trial counts victims as
        # node totals only, so HAMi's per-card memory is then re-checked at the next bind)
        hami = hami_reason(req, node)
        if hami:
            out.append(hami)
    return out


def fit_error_message(n_nodes: int, reasons: dict[str, int], post: str = "") -> str:
    parts = sorted(f"{n} {r}" for r, n in reasons.items())
    msg = f"0/{n_nodes} nodes are available: " + ", ".join(parts) + "."
    if post:
        msg += " " + post
    return msg


def preferred_weight(terms: list[dict], labels: dict, node_name: str) -> int:
    """Sum of the weights of the matching preferredDuringScheduling node-affinity terms."""
    total = 0
    for t in terms:
        pref = t.get("preference") or {}
        if match_node_selector_terms(labels, {"metadata.name": node_name}, [pref]):
            total += int(t.get("weight", 0))
    return total
