"""Per-kind behaviour of the API server's registry strategies: defaults on create,
status initialisation, validation on create and update."""
from __future__ import annotations

import hashlib

from . import dra, workloads
from . import validation as v
from .crd_rules import transition_errors
from .resources import ResourceType


def qos_class(spec: dict) -> str:
    containers = (spec.get("containers") or []) + (spec.get("initContainers") or [])
    any_set, guaranteed = False, True
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        for r in ("cpu", "memory"):
            if r in req or r in lim:
                any_set = True
            if r not in lim or req.get(r, lim.get(r)) != lim.get(r):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _default_pod(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:
            image = c.get("image") or ""
            tag = image.rsplit("/", 1)[-1]
            c.setdefault("imagePullPolicy",
                         "Always" if ":" not in tag or tag.endswith(":latest") else "IfNotPresent")
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            res = c.setdefault("resources", {})
            for k, val in (res.get("limits") or {}).items():
                res.setdefault("requests", {}).setdefault(k, val)
            for p in c.get("ports") or []:
                p.setdefault("protocol", "TCP")
    for t in ("not-ready", "unreachable"):
        key = f"node.kubernetes.io/{t}"
        tols = spec.setdefault("tolerations", [])
        if not any(x.get("key") == key for x in tols):
            tols.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                         "tolerationSeconds": 300})


def _cluster_ip(name: str, namespace: str) -> str:
    h = hashlib.sha1(f"{namespace}/{name}".encode(), usedforsecurity=False).digest()
    return f"10.96.{h[0]}.{max(h[1], 1)}"


def prepare_create(rt: ResourceType, obj: dict) -> None:
    """Defaults and initial status, as each kind's strategy PrepareForCreate + defaulting."""
    kind = rt.kind if not rt.crd_name else None
    meta = obj["metadata"]
    if rt.crd_name:
        if rt.has_status:
            obj.pop("status", None)
        return
    if kind == "Namespace":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj["status"] = {"phase": "Active"}
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
    elif kind == "Pod":
        _default_pod(obj)
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(obj["spec"])}
    elif kind == "PersistentVolumeClaim":
        obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
        obj["status"] = {"phase": "Pending"}
    elif kind == "PersistentVolume":
        obj["status"] = {"phase": "Pending"}
    elif kind == "ResourceQuota":
        obj["status"] = {}
    elif kind == "Service":
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if spec.get("clusterIP") == "None":
            spec.setdefault("clusterIPs", ["None"])
        # a ClusterIP is allocated by the store's admission (Store._allocate_cluster_ip)
        for p in spec.get("ports") or []:
            p.setdefault("protocol", "TCP")
            p.setdefault("targetPort", p.get("port"))
        obj["status"] = {"loadBalancer": {}}
    elif kind == "LimitRange":
        v.default_limit_range(obj)
    elif kind == "PriorityClass":
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")
    elif kind == "StorageClass":
        obj.setdefault("reclaimPolicy", "Delete")
        obj.setdefault("volumeBindingMode", "Immediate")
    elif kind == "Secret":
        obj.setdefault("type", "Opaque")
    elif kind == "Node":
        obj.setdefault("status", {})
    elif rt.group in ("apps", "batch", "policy", "networking.k8s.io") and rt.has_status:
        workloads.prepare_create(rt, obj)
    elif rt.group == dra.GROUP:
        dra.prepare_create(kind or "", obj)
    elif kind == "CustomResourceDefinition":
        names = dict((obj.get("spec") or {}).get("names") or {})
        names.setdefault("singular", names.get("kind", "").lower())
        names.setdefault("listKind", names.get("kind", "") + "List")
        obj["spec"]["names"] = names
        obj["status"] = {
            "acceptedNames": names,
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                 "message": "no conflicts found"},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted"}],
            "storedVersions": [x["name"] for x in obj["spec"].get("versions") or []
                               if x.get("storage")],
        }


def _service_keeps_ips(old: dict, new: dict) -> None:
    """pkg/registry/core/service/storage: an update that omits clusterIP/clusterIPs keeps
    the allocated ones; a changed clusterIP with unchanged clusterIPs moves clusterIPs[0]
    (so validation reports it there)."""
    os_, ns_ = old.get("spec") or {}, new.setdefault("spec", {})
    if "ExternalName" in (os_.get("type"), ns_.get("type")):
        return
    if not ns_.get("clusterIP") and os_.get("clusterIP"):
        ns_["clusterIP"] = os_["clusterIP"]
    if not ns_.get("clusterIPs") and os_.get("clusterIPs"):
        ns_["clusterIPs"] = list(os_["clusterIPs"])
    ips = ns_.get("clusterIPs") or []
    if ns_.get("clusterIP") != os_.get("clusterIP") and ips == os_.get("clusterIPs") and ips:
        ns_["clusterIPs"] = [ns_["clusterIP"], *ips[1:]]


def service_update_errors(old: dict, new: dict) -> list[dict]:
    """validateUpgradeDowngradeClusterIPs (pkg/apis/core/validation/validation.go):
    `spec.clusterIPs[0]: Invalid value: []string{"10.96.0.7"}: may not change once set`."""
    os_, ns_ = old.get("spec") or {}, new.get("spec") or {}
    if "ExternalName" in (os_.get("type"), ns_.get("type")):
        return []
    old_ips, new_ips = os_.get("clusterIPs") or [], ns_.get("clusterIPs") or []
    if old_ips == ["None"] and new_ips == ["None"]:
        return []
    value = "[]string{" + ", ".join(f'"{ip}"' for ip in new_ips) + "}"
    return [v.cause(f"spec.clusterIPs[{i}]", f"Invalid value: {value}: may not change once set")
            for i, ip in enumerate(old_ips) if i < len(new_ips) and new_ips[i] != ip] + (
        [v.cause("spec.clusterIPs", "Required value: primary clusterIP can not be unset",
                 "FieldValueRequired")] if old_ips and not new_ips else [])


def prepare_update(rt: ResourceType, old: dict, new: dict) -> None:
    if rt.kind == "Service" and not rt.crd_name:
        _service_keeps_ips(old, new)
    if rt.kind == "LimitRange" and not rt.crd_name:
        v.default_limit_range(new)
    if rt.kind == "Pod" and not rt.crd_name:
        _default_pod(new)   # defaulting runs on every decode, so a PUT may omit defaults
    if rt.group == dra.GROUP and not rt.crd_name:
        dra.prepare_update(rt.kind, new)


def _only_status_changed(old: dict, new: dict) -> bool:
    keys = (set(old) | set(new)) - {"metadata", "status"}
    return all(old.get(k) == new.get(k) for k in keys)


_STATUS_VALIDATORS: dict[int, tuple[dict, object]] = {}


def _status_validator(rt: ResourceType):
    """A validator of ``{"status": ...}`` against the CRD's status schema (cached per
    schema), or None when the schema has no status."""
    schema = rt.schema or {}
    hit = _STATUS_VALIDATORS.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    status = (schema.get("properties") or {}).get("status")
    val = v.compile_crd_schema({"type": "object", "properties": {"status": status}}) \
        if status else None
    _STATUS_VALIDATORS[id(schema)] = (schema, val)
    return val


def validate(rt: ResourceType, obj: dict, old: dict | None) -> list[dict]:
    """Field causes (422) for a create (old None) or update."""
    meta = obj.get("metadata") or {}
    errs = v.name_errors(rt.kind, meta.get("name")) if old is None else []
    errs += v.check_metadata(rt.kind, meta)
    if rt.crd_name:
        if rt.validator is not None:
            status_only = _status_validator(rt) if old is not None and _only_status_changed(
                old, obj) else None
            # an update that changes only status: the rest was validated already (the
            # Workload schema, with its pod templates, costs ~5 ms per full pass)
            errs += v.crd_object_errors(status_only or rt.validator, obj if status_only is None
                                        else {k: x for k, x in obj.items() if k == "status"})
        if old is not None and rt.immutable_rules:
            errs += transition_errors(rt.immutable_rules, old, obj)
        return errs
    kind = rt.kind
    if kind == "Pod":
        errs += v.validate_pod(obj)
        if (obj.get("spec") or {}).get("resourceClaims") or any(
                (c.get("resources") or {}).get("claims")
                for c in (obj.get("spec") or {}).get("containers") or []):
            errs += dra.pod_claim_errors(obj)
        if old is not None:
            errs += v.pod_update_errors(old, obj)
    elif kind == "ResourceQuota":
        errs += v.validate_resource_quota(obj)
    elif kind == "LimitRange":
        errs += v.validate_limit_range(obj)
    elif kind == "PriorityClass":
        errs += v.validate_priority_class(obj)
    elif kind == "PersistentVolumeClaim":
        errs += v.validate_pvc(obj) if old is None else v.pvc_update_errors(old, obj)
    elif kind == "VolumeAttributesClass":
        errs += v.validate_volume_attributes_class(obj)
    elif kind == "Service" and old is not None:
        errs += service_update_errors(old, obj)
    elif kind == "CustomResourceDefinition":
        errs += v.validate_crd(obj)
    elif rt.group == dra.GROUP:
        errs += dra.validate(kind, obj, old, status_only=old is not None
                             and _only_status_changed(old, obj))
    elif rt.group in ("apps", "batch", "policy"):
        errs += workloads.validate(rt, obj, old)
    elif kind in ("RoleBinding", "ClusterRoleBinding") and not obj.get("roleRef"):
        errs.append(v.required("roleRef"))
    if old is not None and rt.immutable:
        errs += v.immutable_errors(rt.immutable, old, obj)
    return errs
