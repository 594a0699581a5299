"""apps/v1 (Deployment, ReplicaSet, DaemonSet, StatefulSet), batch/v1 Job and
policy/v1 PodDisruptionBudget: the defaults and validation a real API server applies.
No controller runs the workloads (kubesim schedules pods, not ReplicaSets); their status
starts empty, as the strategies' PrepareForCreate leave it, and is written through
`/status` by whoever plays the controller.

Sources (kubernetes/kubernetes): pkg/apis/apps/v1/defaults.go, pkg/apis/batch/v1/defaults.go,
pkg/apis/core/v1/defaults.go (pod template), pkg/apis/apps/validation/validation.go
(ValidateDeploymentSpec, ValidateReplicaSetSpec, ValidateDaemonSetSpec,
ValidateStatefulSetSpec: selector required and non-empty, template labels must match it,
replicas >= 0, selector immutable in apps/v1), pkg/apis/policy/validation/validation.go
(ValidatePodDisruptionBudgetSpec: "minAvailable and maxUnavailable cannot be both set").
"""
from __future__ import annotations

from .resources import ResourceType

_SELECTED = ("Deployment", "ReplicaSet", "DaemonSet", "StatefulSet")


def _go_map(m: dict) -> str:
    return "map[string]string{" + ", ".join(f'"{k}":"{v}"' for k, v in sorted(m.items())) + "}"


def _default_template(spec: dict) -> None:
    tpl = spec.get("template")
    if not isinstance(tpl, dict):
        return
    ps = tpl.setdefault("spec", {})
    if not isinstance(ps, dict):
        return
    ps.setdefault("restartPolicy", "Always")
    ps.setdefault("terminationGracePeriodSeconds", 30)
    ps.setdefault("dnsPolicy", "ClusterFirst")
    ps.setdefault("schedulerName", "default-scheduler")
    ps.setdefault("securityContext", {})
    for key in ("containers", "initContainers"):
        for c in ps.get(key) or []:
            if not isinstance(c, dict):
                continue
            tag = (c.get("image") or "").rsplit("/", 1)[-1]
            c.setdefault("imagePullPolicy",
                         "Always" if ":" not in tag or tag.endswith(":latest") else "IfNotPresent")
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            c.setdefault("resources", {})
            for p in c.get("ports") or []:
                if isinstance(p, dict):
                    p.setdefault("protocol", "TCP")


def prepare_create(rt: ResourceType, obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    kind = rt.kind
    if kind == "Deployment":
        spec.setdefault("replicas", 1)
        spec.setdefault("strategy", {"type": "RollingUpdate", "rollingUpdate": {
            "maxUnavailable": "25%", "maxSurge": "25%"}})
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
    elif kind == "ReplicaSet":
        spec.setdefault("replicas", 1)
    elif kind == "DaemonSet":
        spec.setdefault("updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {
            "maxUnavailable": 1, "maxSurge": 0}})
        spec.setdefault("revisionHistoryLimit", 10)
    elif kind == "StatefulSet":
        spec.setdefault("replicas", 1)
        spec.setdefault("podManagementPolicy", "OrderedReady")
        spec.setdefault("updateStrategy", {"type": "RollingUpdate",
                                           "rollingUpdate": {"partition": 0}})
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("persistentVolumeClaimRetentionPolicy",
                        {"whenDeleted": "Retain", "whenScaled": "Retain"})
    elif kind == "Job":
        if spec.get("completions") is None and spec.get("parallelism") is None:
            spec["completions"] = 1
            spec["parallelism"] = 1
        spec.setdefault("parallelism", 1)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
        tpl = spec.get("template")
        if isinstance(tpl, dict):
            (tpl.setdefault("spec", {}) or {}).setdefault("restartPolicy", "Never")
    if kind in _SELECTED or kind == "Job":
        _default_template(spec)
    if kind == "PodDisruptionBudget":
        obj["status"] = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                         "expectedPods": 0}
    else:   # the Go structs' fields without omitempty serialise as 0
        obj["status"] = {"ReplicaSet": {"replicas": 0},
                         "StatefulSet": {"replicas": 0, "availableReplicas": 0},
                         "DaemonSet": {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                                       "desiredNumberScheduled": 0, "numberReady": 0},
                         }.get(kind, {})


def validate(rt: ResourceType, obj: dict, old: dict | None) -> list[dict]:
    spec = obj.get("spec") or {}
    errs: list[dict] = []
    kind = rt.kind
    if kind == "PodDisruptionBudget":
        if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
            errs.append({"field": "spec", "reason": "FieldValueInvalid",
                         "message": "Invalid value: policy.PodDisruptionBudgetSpec{...}: "
                                    "minAvailable and maxUnavailable cannot be both set"})
        return errs
    if kind not in _SELECTED and kind != "Job":
        return errs
    if "replicas" in spec and isinstance(spec["replicas"], int) and spec["replicas"] < 0:
        errs.append({"field": "spec.replicas", "reason": "FieldValueInvalid",
                     "message": f"Invalid value: {spec['replicas']}: must be greater than or "
                                "equal to 0"})
    tpl = spec.get("template") or {}
    labels = (tpl.get("metadata") or {}).get("labels") or {}
    if kind in _SELECTED:
        sel = spec.get("selector")
        if not sel:
            errs.append({"field": "spec.selector", "reason": "FieldValueRequired",
                         "message": "Required value"})
        elif not (sel.get("matchLabels") or sel.get("matchExpressions")):
            errs.append({"field": "spec.selector", "reason": "FieldValueInvalid",
                         "message": "Invalid value: v1.LabelSelector{MatchLabels:"
                                    "map[string]string(nil), MatchExpressions:[]v1."
                                    "LabelSelectorRequirement(nil)}: empty selector is invalid "
                                    f"for {kind.lower()}"})
        else:
            from .policy import selector_matches
            if not selector_matches(sel, labels):
                errs.append({"field": "spec.template.metadata.labels",
                             "reason": "FieldValueInvalid",
                             "message": f"Invalid value: {_go_map(labels)}: `selector` does not "
                                        "match template `labels`"})
        if old is not None and sel != (old.get("spec") or {}).get("selector"):
            errs.append({"field": "spec.selector", "reason": "FieldValueInvalid",
                         "message": "Invalid value: field is immutable"})
    containers = (tpl.get("spec") or {}).get("containers")
    if not containers:
        errs.append({"field": "spec.template.spec.containers", "reason": "FieldValueRequired",
                     "message": "Required value"})
    return errs
