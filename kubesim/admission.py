"""Admission as the API server's plugins do it: LimitRanger, Priority, DefaultStorageClass and
ResourceQuota (with the quota controller's status bookkeeping, done incrementally)."""
from __future__ import annotations

import contextlib
from fractions import Fraction

from . import dra
from .errors import ApiError, forbidden
from .quantity import _parse, format_quantity, parse_quantity
from .validation import is_overcommittable

LEGACY_COUNT = {"services": "services", "secrets": "secrets", "configmaps": "configmaps",
                "replicationcontrollers": "replicationcontrollers",
                "persistentvolumeclaims": "persistentvolumeclaims", "pods": "pods",
                "resourcequotas": "resourcequotas"}
COMPUTE = ("cpu", "memory", "ephemeral-storage")
SC_SUFFIX = ".storageclass.storage.k8s.io/"


def q(v) -> Fraction:
    return parse_quantity(v)


def _containers(spec: dict):
    return spec.get("containers") or [], spec.get("initContainers") or []


def pod_resources(spec: dict, which: str) -> dict[str, Fraction]:
    """Effective pod requests/limits: max(sum(containers), max(initContainers)) + overhead."""
    containers, inits = _containers(spec)
    total: dict[str, Fraction] = {}
    for c in containers:
        for k, v in ((c.get("resources") or {}).get(which) or {}).items():
            total[k] = total.get(k, Fraction(0)) + q(v)
    for c in inits:
        for k, v in ((c.get("resources") or {}).get(which) or {}).items():
            total[k] = max(total.get(k, Fraction(0)), q(v))
    for k, v in (spec.get("overhead") or {}).items():
        total[k] = total.get(k, Fraction(0)) + q(v)
    return total


def is_terminal(pod: dict) -> bool:
    return ((pod.get("status") or {}).get("phase")) in ("Succeeded", "Failed")


def usage(key: str, obj: dict | None) -> dict[str, Fraction]:
    """Everything an object counts against quota, under every key that may track it."""
    if obj is None:
        return {}
    one = Fraction(1)
    if key == "pods":
        if is_terminal(obj):
            return {}
        spec = obj.get("spec") or {}
        out = {"pods": one, "count/pods": one}
        for k, v in pod_resources(spec, "requests").items():
            if k in COMPUTE or k.startswith("hugepages-"):
                out[k] = v
                out[f"requests.{k}"] = v
            elif not is_overcommittable(k):
                out[f"requests.{k}"] = v
        for k, v in pod_resources(spec, "limits").items():
            if k in COMPUTE:
                out[f"limits.{k}"] = v
        return out
    if key == dra.RESOURCE_CLAIMS:   # pkg/quota/v1/evaluator/core/resource_claims.go
        return dra.claim_usage(obj)
    out = {f"count/{key}": one}
    if key in LEGACY_COUNT:
        out[LEGACY_COUNT[key]] = one
    if key == "persistentvolumeclaims":
        spec = obj.get("spec") or {}
        storage = q(((spec.get("resources") or {}).get("requests") or {}).get("storage", "0"))
        out["requests.storage"] = storage
        sc = spec.get("storageClassName")
        if sc:
            out[f"{sc}{SC_SUFFIX}requests.storage"] = storage
            out[f"{sc}{SC_SUFFIX}persistentvolumeclaims"] = one
    return out


def _best_effort(pod: dict) -> bool:
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        for m in (res.get("requests") or {}, res.get("limits") or {}):
            if any(k in ("cpu", "memory") for k in m):
                return False
    return True


def _scope_match(scope: str, op: str, values, pod: dict) -> bool:
    spec = pod.get("spec") or {}
    if scope == "Terminating":
        return spec.get("activeDeadlineSeconds") is not None
    if scope == "NotTerminating":
        return spec.get("activeDeadlineSeconds") is None
    if scope == "BestEffort":
        return _best_effort(pod)
    if scope == "NotBestEffort":
        return not _best_effort(pod)
    if scope == "PriorityClass":
        pc = spec.get("priorityClassName")
        if op == "In":
            return pc in (values or [])
        if op == "NotIn":
            return pc not in (values or [])
        if op == "Exists":
            return bool(pc)
        if op == "DoesNotExist":
            return not pc
    if scope == "CrossNamespacePodAffinity":
        return False
    return False


def quota_matches(quota: dict, key: str, obj: dict) -> bool:
    spec = quota.get("spec") or {}
    scopes = [(s, "Exists", None) for s in spec.get("scopes") or []]
    scopes += [(e.get("scopeName"), e.get("operator"), e.get("values"))
               for e in (spec.get("scopeSelector") or {}).get("matchExpressions") or []]
    if not scopes:
        return True
    if key != "pods":
        return False
    return all(_scope_match(s, op, v, obj) for s, op, v in scopes)


def _fmt_like(value: Fraction, like) -> str:
    fmt = "decimal"
    if like is not None:
        with contextlib.suppress(ValueError):
            fmt = _parse(like)[1]
    return format_quantity(value, fmt)


def quota_usage_for(quota: dict, key: str, obj: dict | None) -> dict[str, Fraction]:
    if obj is None or not quota_matches(quota, key, obj):
        return {}
    hard = (quota.get("spec") or {}).get("hard") or {}
    return {k: v for k, v in usage(key, obj).items() if k in hard}


def compute_status(quota: dict, objects_by_key) -> dict:
    """Full recomputation: objects_by_key(key) yields the namespace's objects of a resource."""
    hard = dict((quota.get("spec") or {}).get("hard") or {})
    keys = {"pods", "persistentvolumeclaims"}
    for k in hard:
        if k.startswith("count/"):
            keys.add(k[6:])
        elif k in LEGACY_COUNT:
            keys.add(LEGACY_COUNT[k])
        if dra.is_claim_quota_key(k):
            keys.add(dra.RESOURCE_CLAIMS)
    used = {k: Fraction(0) for k in hard}
    for key in keys:
        for obj in objects_by_key(key):
            for k, v in quota_usage_for(quota, key, obj).items():
                used[k] += v
    return {"hard": hard, "used": {k: _fmt_like(v, hard.get(k)) for k, v in used.items()}}


def apply_delta(quota: dict, delta: dict[str, Fraction]) -> dict | None:
    """New status with delta added, or None when nothing changes."""
    status = quota.get("status") or {}
    hard = (quota.get("spec") or {}).get("hard") or {}
    used = dict(status.get("used") or {})
    changed = False
    for k, d in delta.items():
        if d == 0 or k not in hard:
            continue
        cur = parse_quantity(used.get(k, "0"))
        used[k] = _fmt_like(max(cur + d, Fraction(0)), hard.get(k))
        changed = True
    if not changed:
        return None
    return {"hard": dict(hard), "used": used}


def check_quotas(quotas: list[dict], key: str, obj: dict, plural: str, name: str,
                 group: str = "") -> None:
    """ResourceQuota admission for a create: 403 with the real messages."""
    for quota in sorted(quotas, key=lambda x: x["metadata"]["name"]):
        if not quota_matches(quota, key, obj):
            continue
        hard = (quota.get("spec") or {}).get("hard") or {}
        qname = quota["metadata"]["name"]
        if key == "pods":
            missing = _missing_compute(hard, obj)
            if missing:
                raise forbidden(plural, group, name, f"failed quota: {qname}: must specify "
                                + "; ".join(missing))
        requested = quota_usage_for(quota, key, obj)
        used_map = (quota.get("status") or {}).get("used")
        if used_map is None:
            if requested:
                raise forbidden(plural, group, name, f"status unknown for quota: {qname}, "
                                                     f"resources: {', '.join(sorted(requested))}")
            continue
        failed = []
        for k, v in sorted(requested.items()):
            if v == 0:
                continue
            used = parse_quantity(used_map.get(k, "0"))
            if used + v > parse_quantity(hard[k]):
                failed.append(k)
        if failed:
            def pp(vals, keys=tuple(failed)):
                return ",".join(f"{k}={vals[k]}" for k in keys)
            req = {k: _fmt_like(requested[k], hard[k]) for k in failed}
            used_str = {k: used_map.get(k, "0") for k in failed}
            lim = {k: hard[k] for k in failed}
            raise forbidden(plural, group, name,
                            f"exceeded quota: {qname}, requested: {pp(req)}, "
                            f"used: {pp(used_str)}, "
                            f"limited: {pp(lim)}")


def _missing_compute(hard: dict, pod: dict) -> list[str]:
    tracked = []
    for res in ("cpu", "memory"):
        if f"limits.{res}" in hard:
            tracked.append(("limits", res))
        if f"requests.{res}" in hard or res in hard:
            tracked.append(("requests", res))
    out = []
    for which, res in sorted(tracked, key=lambda t: (t[0], t[1])):
        names = [c.get("name", "") for c in (pod.get("spec") or {}).get("containers") or []
                 if res not in ((c.get("resources") or {}).get(which) or {})]
        if names:
            out.append(f"{which}.{res} for: {','.join(names)}")
    return out


# ---- LimitRanger -----------------------------------------------------------------------------
def limit_range_pod(limitranges: list[dict], pod: dict, name: str) -> None:
    """Applies Container defaults, then checks Container and Pod min/max/ratio (403)."""
    spec = pod.setdefault("spec", {})
    errors: list[str] = []
    for lr in limitranges:
        # plugin/pkg/admission/limitranger/admission.go mergePodResourceRequirements, run
        # per LimitRange: the annotation lists what this one set ("cpu, memory request for
        # container x; cpu limit for init container y")
        notes: list[str] = []
        for item in (lr.get("spec") or {}).get("limits") or []:
            if item.get("type") != "Container":
                continue
            for what, cs in (("container", spec.get("containers") or []),
                             ("init container", spec.get("initContainers") or [])):
                for c in cs:
                    res = c.setdefault("resources", {})
                    set_req, set_lim = [], []
                    for k, v in (item.get("default") or {}).items():
                        lim = res.setdefault("limits", {})
                        if k not in lim:
                            lim[k] = v
                            set_lim.append(k)
                    for k, v in (item.get("defaultRequest") or {}).items():
                        req = res.setdefault("requests", {})
                        if k not in req:
                            req[k] = v
                            set_req.append(k)
                    if set_req:
                        notes.append(f"{', '.join(sorted(set_req))} request for {what} "
                                     f"{c.get('name')}")
                    if set_lim:
                        notes.append(f"{', '.join(sorted(set_lim))} limit for {what} "
                                     f"{c.get('name')}")
        if notes:
            meta = pod.setdefault("metadata", {})
            meta.setdefault("annotations", {})["kubernetes.io/limit-ranger"] = (
                "LimitRanger plugin set: " + "; ".join(notes))
    for lr in limitranges:
        for item in (lr.get("spec") or {}).get("limits") or []:
            t = item.get("type")
            if t == "Container":
                for c in spec.get("containers") or []:
                    res = c.get("resources") or {}
                    errors += _check_item(item, "Container", res.get("requests") or {},
                                          res.get("limits") or {})
            elif t == "Pod":
                req = {k: format_quantity(v) for k, v in pod_resources(spec, "requests").items()}
                lim = {k: format_quantity(v) for k, v in pod_resources(spec, "limits").items()}
                errors += _check_item(item, "Pod", req, lim)
    if errors:
        raise forbidden("pods", "", name, errors[0] if len(errors) == 1
                        else "[" + ", ".join(errors) + "]")


def _check_item(item: dict, what: str, requests: dict, limits: dict) -> list[str]:
    errs = []
    for k, v in (item.get("min") or {}).items():
        if k not in requests:
            errs.append(f"minimum {k} usage per {what} is {v}.  No request is specified")
        elif q(requests[k]) < q(v):
            errs.append(f"minimum {k} usage per {what} is {v}, but request is {requests[k]}")
    for k, v in (item.get("max") or {}).items():
        if k not in limits:
            errs.append(f"maximum {k} usage per {what} is {v}.  No limit is specified")
        elif q(limits[k]) > q(v):
            errs.append(f"maximum {k} usage per {what} is {v}, but limit is {limits[k]}")
    for k, v in (item.get("maxLimitRequestRatio") or {}).items():
        if k in limits and k in requests and q(requests[k]) > 0:
            ratio = q(limits[k]) / q(requests[k])
            if ratio > q(v):
                errs.append(f"{k} max limit to request ratio per {what} is {v}, but provided "
                            f"ratio is {float(ratio):f}")
    return errs


def limit_range_pvc(limitranges: list[dict], pvc: dict, name: str) -> None:
    req = ((pvc.get("spec") or {}).get("resources") or {}).get("requests") or {}
    errors = []
    for lr in limitranges:
        for item in (lr.get("spec") or {}).get("limits") or []:
            if item.get("type") == "PersistentVolumeClaim":
                for k, v in (item.get("min") or {}).items():
                    if k in req and q(req[k]) < q(v):
                        errors.append(f"minimum {k} usage per PersistentVolumeClaim is {v}, but "
                                      f"request is {req[k]}")
                for k, v in (item.get("max") or {}).items():
                    if k in req and q(req[k]) > q(v):
                        errors.append(f"maximum {k} usage per PersistentVolumeClaim is {v}, but "
                                      f"request is {req[k]}")
    if errors:
        raise forbidden("persistentvolumeclaims", "", name,
                        errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")


def priority_admission(priorityclasses: list[dict], pod: dict, name: str) -> None:
    spec = pod.setdefault("spec", {})
    pcname = spec.get("priorityClassName")
    if pcname:
        pc = next((p for p in priorityclasses if p["metadata"]["name"] == pcname), None)
        if pc is None and pcname in ("system-cluster-critical", "system-node-critical"):
            pc = {"value": 2000000000 if pcname == "system-cluster-critical" else 2000001000}
        if pc is None:
            raise ApiError(403, "Forbidden", f'pods "{name}" is forbidden: no PriorityClass '
                                             f'with name {pcname} was found',
                           {"name": name, "kind": "pods"})
    else:
        pc = next((p for p in priorityclasses if p.get("globalDefault")), None)
        if pc is not None:
            spec["priorityClassName"] = pc["metadata"]["name"]
    if pc is not None:
        if spec.get("priority") is not None and spec["priority"] != pc["value"]:
            raise ApiError(403, "Forbidden", f'pods "{name}" is forbidden: the integer value of '
                                             f'priority ({spec["priority"]}) must not be provided '
                                             'in pod spec; priority admission controller '
                                             f'computed {pc["value"]} from the given PriorityClass '
                                             'name', {"name": name, "kind": "pods"})
        spec["priority"] = pc["value"]
        spec.setdefault("preemptionPolicy", pc.get("preemptionPolicy", "PreemptLowerPriority"))
    else:
        spec.setdefault("priority", 0)


# ---- ServiceAccount admission (plugin/pkg/admission/serviceaccount/admission.go) -----------
SA_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"   # DefaultAPITokenMountPath
SA_VOLUME_PREFIX = "kube-api-access-"
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"


def token_volume(name: str) -> dict:
    """TokenVolumeSource as defaulted: the bound token (3607 s), the cluster CA from
    kube-root-ca.crt and the namespace from the downward API."""
    return {"name": name, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": ROOT_CA_CONFIGMAP, "items": [{"key": "ca.crt",
                                                             "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1",
                                                 "fieldPath": "metadata.namespace"},
                                    "path": "namespace"}]}}]}}


def service_account_admission(sas: dict, pod: dict, name: str, ns: str, suffix) -> None:
    """The pod's ServiceAccount must exist (403 `error looking up service account ns/sa:
    serviceaccount "sa" not found`); unless the pod or the account turns automounting off,
    every container mounts a projected token volume `kube-api-access-xxxxx` read-only at
    /var/run/secrets/kubernetes.io/serviceaccount (containers that mount something there
    already are left alone)."""
    spec = pod["spec"]
    sa_name = spec.get("serviceAccountName") or "default"
    spec["serviceAccountName"] = sa_name
    spec.setdefault("serviceAccount", sa_name)
    sa = sas.get(sa_name)
    if sa is None:
        raise forbidden("pods", "", name, f"error looking up service account {ns}/{sa_name}: "
                                          f'serviceaccount "{sa_name}" not found')
    automount = spec.get("automountServiceAccountToken")
    if automount is None:
        automount = sa.get("automountServiceAccountToken")
    if automount is False:
        return
    volumes = spec.get("volumes") or []
    existing = next((v.get("name") for v in volumes
                     if (v.get("name") or "").startswith(SA_VOLUME_PREFIX)), None)
    vol_name = existing or SA_VOLUME_PREFIX + suffix()
    needed = False
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or []:
            mounts = c.get("volumeMounts") or []
            if any(m.get("mountPath") == SA_MOUNT_PATH for m in mounts):
                continue
            c["volumeMounts"] = [*mounts, {"name": vol_name, "readOnly": True,
                                           "mountPath": SA_MOUNT_PATH}]
            needed = True
    if needed and existing is None:
        spec["volumes"] = [*volumes, token_volume(vol_name)]
