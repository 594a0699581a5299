"""Per-kind validation as the API server does it (the parts Trainyard and kubectl hit)."""
from __future__ import annotations

import json
import re

import jsonschema

from .errors import invalid
from .quantity import QuantityError, parse_quantity
from .schemacheck import compile_check

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                 "characters, '-' or '.', and must start and end with an alphanumeric character "
                 "(e.g. 'example.com', regex used for validation is "
                 "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
             "'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
             "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
               "start with an alphabetic character, and end with an alphanumeric character "
               "(e.g. 'my-name',  or 'abc-123', regex used for validation is "
               "'[a-z]([-a-z0-9]*[a-z0-9])?')")

LABEL_NAME_KINDS = {"Namespace"}
DNS1035_KINDS = {"Service"}
PATH_SEGMENT_KINDS = {"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}


def cause(field: str, message: str, reason: str = "FieldValueInvalid") -> dict:
    return {"field": field, "message": message, "reason": reason}


def _q(value) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def invalid_value(field: str, value, why: str) -> dict:
    return cause(field, f"Invalid value: {_q(value)}: {why}")


def required(field: str) -> dict:
    return cause(field, "Required value", "FieldValueRequired")


def name_errors(kind: str, name, field: str = "metadata.name") -> list[dict]:
    if not name:
        return [required(field)]
    if not isinstance(name, str):
        return [invalid_value(field, name, "must be a string")]
    if kind in PATH_SEGMENT_KINDS:
        if name in (".", "..") or "/" in name or "%" in name:
            return [invalid_value(field, name, "may not contain '/' or '%' and may not be "
                                               "'.' or '..'")]
        return []
    if kind in LABEL_NAME_KINDS:
        errs = [] if _LABEL.match(name) else [invalid_value(field, name, LABEL_MSG)]
        if len(name) > 63:
            errs.append(invalid_value(field, name, "must be no more than 63 characters"))
        return errs
    if kind in DNS1035_KINDS:
        errs = [] if _DNS1035.match(name) else [invalid_value(field, name, DNS1035_MSG)]
        if len(name) > 63:
            errs.append(invalid_value(field, name, "must be no more than 63 characters"))
        return errs
    errs = [] if _SUBDOMAIN.match(name) else [invalid_value(field, name, SUBDOMAIN_MSG)]
    if len(name) > 253:
        errs.append(invalid_value(field, name, "must be no more than 253 characters"))
    return errs


def label_errors(labels, field: str = "metadata.labels") -> list[dict]:
    errs = []
    if not isinstance(labels, dict):
        return [invalid_value(field, labels, "must be a map")]
    for k, v in labels.items():
        prefix, _, nm = k.rpartition("/")
        if (prefix and not _SUBDOMAIN.match(prefix)) or not nm or len(nm) > 63 \
                or not _QUALIFIED.match(nm):
            errs.append(invalid_value(field, k, "name part must consist of alphanumeric "
                                                "characters, '-', '_' or '.', and must start and "
                                                "end with an alphanumeric character"))
        if not isinstance(v, str) or len(v) > 63 or not _LABEL_VALUE.match(v):
            errs.append(invalid_value(field, v, "a valid label must be an empty string or "
                                                "consist of alphanumeric characters, '-', '_' "
                                                "or '.', and must start and end with an "
                                                "alphanumeric character"))
    return errs


# ---- CRDs ------------------------------------------------------------------------------------
class CrdSchema:
    """A CRD schema compiled twice: ``jsonschema``'s validator (built once), which words
    the errors, and a fast check (kubesim/schemacheck.py) that proves most objects valid
    without it."""
    __slots__ = ("certainly_valid", "validator")

    def __init__(self, schema: dict):
        cls = jsonschema.validators.validator_for(schema,
                                                  default=jsonschema.Draft202012Validator)
        self.validator = cls(schema)
        self.certainly_valid = compile_check(schema)

    def iter_errors(self, instance):
        return self.validator.iter_errors(instance)


def compile_crd_schema(schema: dict) -> CrdSchema:
    return CrdSchema(schema)


def crd_object_errors(validator: CrdSchema, obj: dict) -> list[dict]:
    errs: list[dict] = []
    body = {k: v for k, v in obj.items() if k != "metadata"}
    if validator.certainly_valid is not None and validator.certainly_valid(body):
        return errs
    for e in sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path)):
        path = ".".join(str(p) for p in e.absolute_path)
        if e.validator == "required":
            missing = re.findall(r"'([^']+)' is a required property", e.message)
            f = ".".join(x for x in (path, missing[0] if missing else "") if x)
            errs.append(required(f))
            continue
        field = path or "<root>"
        why = e.message
        if e.validator == "type":
            why = f"{field} in body must be of type {e.validator_value}: {_q(e.instance)}"
        elif e.validator == "enum":
            why = f"supported values: {', '.join(_q(v) for v in e.validator_value)}"
            errs.append(cause(field, f"Unsupported value: {_q(e.instance)}: {why}",
                              "FieldValueNotSupported"))
            continue
        errs.append(invalid_value(field, e.instance if not isinstance(e.instance, dict | list)
                                  else "object", why))
        if len(errs) >= 20:
            break
    return errs


def validate_crd(obj: dict) -> list[dict]:
    spec = obj.get("spec") or {}
    errs = []
    names = spec.get("names") or {}
    group = spec.get("group")
    if not group:
        errs.append(required("spec.group"))
    if not names.get("plural"):
        errs.append(required("spec.names.plural"))
    if not names.get("kind"):
        errs.append(required("spec.names.kind"))
    name = (obj.get("metadata") or {}).get("name")
    if group and names.get("plural") and name != f"{names['plural']}.{group}":
        errs.append(invalid_value("metadata.name", name,
                                  "must be spec.names.plural+\".\"+spec.group"))
    versions = spec.get("versions") or []
    if not versions:
        errs.append(required("spec.versions"))
    elif sum(1 for v in versions if v.get("storage")) != 1:
        errs.append(invalid_value("spec.versions", "array",
                                  "must have exactly one version marked as storage version"))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        errs.append(cause("spec.scope", f"Unsupported value: {_q(spec.get('scope'))}: "
                                        "supported values: \"Cluster\", \"Namespaced\"",
                          "FieldValueNotSupported"))
    return errs


# ---- built-in kinds --------------------------------------------------------------------------
STANDARD_QUOTA_NAMES = {
    "pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
    "persistentvolumeclaims", "services.nodeports", "services.loadbalancers", "cpu", "memory",
    "requests.cpu", "requests.memory", "requests.storage", "requests.ephemeral-storage",
    "limits.cpu", "limits.memory", "limits.ephemeral-storage", "ephemeral-storage", "storage",
}
POD_SCOPE_OK = {"pods", "cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu",
                "limits.memory"}
SCOPES = {"Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass",
          "CrossNamespacePodAffinity", "VolumeAttributesClass"}


def _is_standard_quota_name(k: str) -> bool:
    return "/" not in k or k.startswith("kubernetes.io/")


def validate_resource_quota(obj: dict) -> list[dict]:
    spec = obj.get("spec") or {}
    errs = []
    hard = spec.get("hard") or {}
    for k, v in hard.items():
        f = f"spec.hard[{k}]"
        if "/" not in k and not k.startswith("count/") and k not in STANDARD_QUOTA_NAMES \
                and not k.startswith("hugepages-") and not k.startswith("requests.hugepages-"):
            errs.append(invalid_value(f, k, "must be a standard resource for quota"))
        try:
            if parse_quantity(v) < 0:
                errs.append(invalid_value(f, v, "must be greater than or equal to 0"))
        except QuantityError as e:
            errs.append(invalid_value(f, v, str(e)))
    scopes = list(spec.get("scopes") or [])
    exprs = (spec.get("scopeSelector") or {}).get("matchExpressions") or []
    for i, expr in enumerate(exprs):
        f = f"spec.scopeSelector.matchExpressions[{i}]"
        name, op, values = expr.get("scopeName"), expr.get("operator"), expr.get("values")
        if name not in SCOPES:
            errs.append(cause(f + ".scopeName", f"Unsupported value: {_q(name)}",
                              "FieldValueNotSupported"))
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            errs.append(cause(f + ".operator", f"Unsupported value: {_q(op)}",
                              "FieldValueNotSupported"))
        elif name in ("Terminating", "NotTerminating", "BestEffort", "NotBestEffort") \
                and op != "Exists":
            errs.append(invalid_value(f + ".operator", op,
                                      "must be 'Exists' when scope is any of ResourceQuotaScope"
                                      "Terminating, ResourceQuotaScopeNotTerminating, "
                                      "ResourceQuotaScopeBestEffort or "
                                      "ResourceQuotaScopeNotBestEffort"))
        elif op in ("In", "NotIn") and not values:
            errs.append(required(f + ".values"))
        elif op in ("Exists", "DoesNotExist") and values:
            errs.append(invalid_value(f + ".values", values,
                                      "must be no values for 'Exists' or 'DoesNotExist' "
                                      "operator"))
        scopes.append(name)
    # scoped quotas may only track what their scope can count (standard names only;
    # extended resources such as requests.nvidia.com/gpu are not standard, so allowed)
    scope_field = "spec.scopeSelector.matchExpressions" if exprs else "spec.scopes"
    scope_value = [e.get("scopeName") for e in exprs] if exprs else spec.get("scopes")
    standard = [k for k in hard if _is_standard_quota_name(k) and not k.startswith("hugepages-")]
    for sc in dict.fromkeys(scopes):
        allowed = {"pods"} if sc == "BestEffort" else POD_SCOPE_OK
        if sc in SCOPES and any(k not in allowed for k in standard):
            errs.append(invalid_value(scope_field, scope_value,
                                      "unsupported scope applied to resource"))
            break
    pairs = [("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating")]
    for a, b in pairs:
        if a in scopes and b in scopes:
            errs.append(invalid_value("spec.scopes", scopes, "conflicting scopes"))
    return errs


def is_overcommittable(name: str) -> bool:
    if name.startswith("hugepages-"):
        return False
    return "/" not in name or name.startswith("kubernetes.io/")


def default_limit_range(obj: dict) -> None:
    for item in (obj.get("spec") or {}).get("limits") or []:
        if item.get("type") != "Container":
            continue
        for k, v in (item.get("max") or {}).items():
            item.setdefault("default", {}).setdefault(k, v)
        for k, v in (item.get("default") or {}).items():
            item.setdefault("defaultRequest", {}).setdefault(k, v)
        for k, v in (item.get("min") or {}).items():
            item.setdefault("defaultRequest", {}).setdefault(k, v)


def validate_limit_range(obj: dict) -> list[dict]:
    errs = []
    for i, item in enumerate((obj.get("spec") or {}).get("limits") or []):
        f = f"spec.limits[{i}]"
        t = item.get("type")
        if t not in ("Container", "Pod", "PersistentVolumeClaim"):
            errs.append(cause(f + ".type", f"Unsupported value: {_q(t)}",
                              "FieldValueNotSupported"))
            continue
        maps = {k: item.get(k) or {} for k in ("min", "max", "default", "defaultRequest",
                                               "maxLimitRequestRatio")}
        try:
            q = {k: {r: parse_quantity(v) for r, v in m.items()} for k, m in maps.items()}
        except QuantityError as e:
            errs.append(invalid_value(f, "quantity", str(e)))
            continue
        if t != "Container" and (q["default"] or q["defaultRequest"]):
            errs.append(cause(f + ".default", "Forbidden: may not be specified when `type` is "
                                              f"'{t}'", "FieldValueForbidden"))
        for r in set().union(*(m.keys() for m in q.values())):
            mn, mx = q["min"].get(r), q["max"].get(r)
            d, dr = q["default"].get(r), q["defaultRequest"].get(r)
            if mn is not None and mx is not None and mn > mx:
                errs.append(invalid_value(f"{f}.min[{r}]", maps["min"][r],
                                          f"min value {maps['min'][r]} is greater than max "
                                          f"value {maps['max'][r]}"))
            if dr is not None and mx is not None and dr > mx:
                errs.append(invalid_value(f"{f}.defaultRequest[{r}]", maps["defaultRequest"][r],
                                          f"must be less than or equal to max value "
                                          f"{maps['max'][r]}"))
            if d is not None and mx is not None and d > mx:
                errs.append(invalid_value(f"{f}.default[{r}]", maps["default"][r],
                                          f"must be less than or equal to max value "
                                          f"{maps['max'][r]}"))
            if dr is not None and mn is not None and dr < mn:
                errs.append(invalid_value(f"{f}.defaultRequest[{r}]", maps["defaultRequest"][r],
                                          f"must be greater than or equal to min value "
                                          f"{maps['min'][r]}"))
            if d is not None and dr is not None and dr > d:
                errs.append(invalid_value(f"{f}.defaultRequest[{r}]", maps["defaultRequest"][r],
                                          f"must be less than or equal to default value "
                                          f"{maps['default'][r]}"))
            if not is_overcommittable(r) and d is not None and dr is not None and d != dr:
                errs.append(invalid_value(f"{f}.defaultRequest[{r}]", maps["defaultRequest"][r],
                                          f"default value {maps['default'][r]} must equal to "
                                          f"defaultRequest value {maps['defaultRequest'][r]} "
                                          f"in {r}"))
            ratio = q["maxLimitRequestRatio"].get(r)
            if ratio is not None and ratio < 1:
                errs.append(invalid_value(f"{f}.maxLimitRequestRatio[{r}]",
                                          maps["maxLimitRequestRatio"][r],
                                          "ratio must be greater than or equal to 1"))
    return errs


def _containers(spec: dict):
    for key in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(key) or []):
            yield f"spec.{key}[{i}]", c


def validate_pod(obj: dict) -> list[dict]:
    spec = obj.get("spec") or {}
    errs = []
    if not spec.get("containers"):
        errs.append(required("spec.containers"))
    seen = set()
    for f, c in _containers(spec):
        name = c.get("name")
        if not name:
            errs.append(required(f + ".name"))
        elif not _LABEL.match(name):
            errs.append(invalid_value(f + ".name", name, LABEL_MSG))
        elif name in seen:
            errs.append(cause(f + ".name", f"Duplicate value: {_q(name)}", "FieldValueDuplicate"))
        seen.add(name)
        if not c.get("image"):
            errs.append(required(f + ".image"))
        res = c.get("resources") or {}
        limits, requests = res.get("limits") or {}, res.get("requests") or {}
        for r, v in requests.items():
            try:
                rv = parse_quantity(v)
                lv = parse_quantity(limits[r]) if r in limits else None
            except QuantityError:
                continue
            if not is_overcommittable(r):
                if lv is None:
                    errs.append(cause(f"{f}.resources.limits", "Required value: Limit must be "
                                                               "set for non overcommitable "
                                                               "resources", "FieldValueRequired"))
                elif lv != rv:
                    errs.append(invalid_value(f"{f}.resources.requests", v,
                                              f"must be equal to {r} limit of {limits[r]}"))
            elif lv is not None and rv > lv:
                errs.append(invalid_value(f"{f}.resources.requests", v,
                                          f"must be less than or equal to {r} limit of "
                                          f"{limits[r]}"))
    errs += node_affinity_errors(spec)
    return errs


# Node affinity, as kube-apiserver validates it (pkg/apis/core/validation/validation.go:
# ValidateNodeSelector, ValidateNodeSelectorTerm, ValidateNodeSelectorRequirement,
# ValidateNodeFieldSelectorRequirement, ValidatePreferredSchedulingTerms).
def _requirement_errors(f: str, rq: dict) -> list[dict]:
    op, values = rq.get("operator"), rq.get("values") or []
    errs = []
    if op in ("In", "NotIn"):
        if not values:
            errs.append(cause(f + ".values", "Required value: must be specified when "
                              "`operator` is 'In' or 'NotIn'", "FieldValueRequired"))
    elif op in ("Exists", "DoesNotExist"):
        if values:
            errs.append(cause(f + ".values", "Forbidden: may not be specified when "
                              "`operator` is 'Exists' or 'DoesNotExist'", "FieldValueForbidden"))
    elif op in ("Gt", "Lt"):
        if len(values) != 1:
            errs.append(cause(f + ".values", "Required value: must be specified single value "
                              "when `operator` is 'Lt' or 'Gt'", "FieldValueRequired"))
    else:
        errs.append(invalid_value(f + ".operator", op, "not a valid selector operator"))
    key = rq.get("key")
    if not isinstance(key, str) or label_errors({key: ""}, f + ".key"):
        errs.append(invalid_value(f + ".key", key, "name part must consist of alphanumeric "
                                  "characters, '-', '_' or '.', and must start and end with "
                                  "an alphanumeric character"))
    return errs


def _field_requirement_errors(f: str, rq: dict) -> list[dict]:
    op, values = rq.get("operator"), rq.get("values") or []
    errs = []
    if op in ("In", "NotIn"):
        if len(values) != 1:
            errs.append(cause(f + ".values", "Required value: must be only one value when "
                              "`operator` is 'In' or 'NotIn' for node field selector",
                              "FieldValueRequired"))
    else:
        errs.append(invalid_value(f + ".operator", op, "not a valid selector operator"))
    if rq.get("key") != "metadata.name":
        errs.append(invalid_value(f + ".key", rq.get("key"), "not a valid field selector key"))
    else:
        for i, value in enumerate(values):
            if not isinstance(value, str) or not _SUBDOMAIN.match(value):
                errs.append(invalid_value(f"{f}.values[{i}]", value, SUBDOMAIN_MSG))
    return errs


def _term_errors(f: str, term: dict) -> list[dict]:
    errs = []
    for j, rq in enumerate(term.get("matchExpressions") or []):
        errs += _requirement_errors(f"{f}.matchExpressions[{j}]", rq)
    for j, rq in enumerate(term.get("matchFields") or []):
        errs += _field_requirement_errors(f"{f}.matchFields[{j}]", rq)
    return errs


def node_affinity_errors(spec: dict) -> list[dict]:
    node = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    f = "spec.affinity.nodeAffinity"
    errs = []
    req = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req is not None:
        terms = req.get("nodeSelectorTerms") or []
        rf = f + ".requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        if not terms:
            errs.append(cause(rf, "Required value: must have at least one node selector term",
                              "FieldValueRequired"))
        for i, term in enumerate(terms):
            errs += _term_errors(f"{rf}[{i}]", term)
    for i, pref in enumerate(node.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
        pf = f"{f}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        weight = pref.get("weight")
        if not isinstance(weight, int) or not 1 <= weight <= 100:
            errs.append(invalid_value(pf + ".weight", weight, "must be in the range 1-100"))
        errs += _term_errors(pf + ".preference", pref.get("preference") or {})
    return errs


POD_MUTABLE_SPEC = {"activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds",
                    "schedulingGates"}


def pod_update_errors(old: dict, new: dict) -> list[dict]:
    """Pod spec is immutable except images, activeDeadlineSeconds, tolerations (additions),
    terminationGracePeriodSeconds; spec.nodeName may be set once (what /binding does)."""
    o, n = old.get("spec") or {}, new.get("spec") or {}
    keys = (set(o) | set(n)) - POD_MUTABLE_SPEC - {"containers", "initContainers"}
    changed = [k for k in keys if o.get(k) != n.get(k)
               and not (k == "nodeName" and not o.get(k))]
    for key in ("containers", "initContainers"):
        oc, nc = o.get(key) or [], n.get(key) or []
        if len(oc) != len(nc) or any(
                {**a, "image": None} != {**b, "image": None} for a, b in zip(oc, nc, strict=True)):
            changed.append(key)
    if changed:
        return [cause("spec", "Forbidden: pod updates may not change fields other than "
                              "`spec.containers[*].image`,`spec.initContainers[*].image`,"
                              "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions "
                              "to existing tolerations),`spec.terminationGracePeriodSeconds` "
                              "(allow it to be set to 1 if it was previously negative)",
                      "FieldValueForbidden")]
    return []


def immutable_errors(paths, old: dict, new: dict) -> list[dict]:
    errs = []
    for p in paths:
        ov, nv = old.get(p), new.get(p)
        if ov != nv:
            msg = ("Invalid value: " + _q(str(nv)) + ": cannot change roleRef") \
                if p == "roleRef" else "Forbidden: may not be changed in an update."
            errs.append(cause(p, msg, "FieldValueInvalid" if p == "roleRef"
                              else "FieldValueForbidden"))
    return errs


def validate_priority_class(obj: dict) -> list[dict]:
    v = obj.get("value")
    if not isinstance(v, int) or isinstance(v, bool):
        return [required("value")]
    if v > 1_000_000_000 and not (obj.get("metadata") or {}).get("name", "").startswith(
            "system-"):
        return [invalid_value("value", v, "must be less than or equal to 1000000000 for "
                                          "non-system priority classes")]
    return []


def validate_volume_attributes_class(obj: dict) -> list[dict]:
    """pkg/apis/storage/validation/validation.go ValidateVolumeAttributesClass: a CSI
    driver name (validateCSIDriverName) and at least one parameter (validateParameters,
    allowEmpty false: keys not empty, at most 512, 256 KiB in all)."""
    errs, driver = [], obj.get("driverName")
    if not driver:
        errs.append(required("driverName"))
    elif not isinstance(driver, str) or len(driver) > 63:
        errs.append(cause("driverName", "Too long: may not be more than 63 bytes",
                          "FieldValueTooLong"))
    elif not _SUBDOMAIN.match(driver.lower()):
        errs.append(invalid_value("driverName", driver, SUBDOMAIN_MSG))
    params = obj.get("parameters") or {}
    if not params:
        errs.append(cause("parameters", "Required value: must contain at least one "
                                        "key/value pair", "FieldValueRequired"))
    if len(params) > 512 or sum(len(k) + len(str(x)) for k, x in params.items()) > 256 * 1024:
        errs.append(cause("parameters", "Too long: may not be more than 256K bytes",
                          "FieldValueTooLong"))
    errs += [invalid_value("parameters", k, "field can not be empty.") for k in params if not k]
    return errs


def validate_pvc(obj: dict) -> list[dict]:
    spec = obj.get("spec") or {}
    errs = []
    if not spec.get("accessModes"):
        errs.append(required("spec.accessModes"))
    storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    if storage is None:
        errs.append(required("spec.resources[storage]"))
    return errs


def pvc_update_errors(old: dict, new: dict) -> list[dict]:
    """ValidatePersistentVolumeClaimUpdate (pkg/apis/core/validation/validation.go): the spec
    is immutable except volumeName (set once), and resources.requests and
    volumeAttributesClassName of a bound claim; the storage request may not shrink
    (RecoverVolumeExpansionFailure is off in 1.31). The real message ends with a
    go-cmp diff of the two specs; kubesim writes the changed fields in the same shape."""
    os_, ns_ = dict(old.get("spec") or {}), dict(new.get("spec") or {})
    if not os_.get("volumeName"):
        os_.pop("volumeName", None)
        ns_.pop("volumeName", None)
    if (new.get("status") or {}).get("phase") == "Bound":
        for spec in (os_, ns_):
            res = dict(spec.get("resources") or {})
            res.pop("requests", None)
            spec["resources"] = res
            spec.pop("volumeAttributesClassName", None)
    errs = []
    if os_ != ns_:
        lines = ["  core.PersistentVolumeClaimSpec{"]
        for key in sorted(set(os_) | set(ns_)):
            if os_.get(key) != ns_.get(key):
                go = key[:1].upper() + key[1:]
                lines += [f"- \t{go}: {_go_value(os_.get(key))},",
                          f"+ \t{go}: {_go_value(ns_.get(key))},"]
        lines.append("  }")
        errs.append(cause("spec", "Forbidden: spec is immutable after creation except "
                                  "resources.requests and volumeAttributesClassName for bound "
                                  "claims\n" + "\n".join(lines), "FieldValueForbidden"))

    def storage(obj):
        return ((obj.get("spec") or {}).get("resources") or {}).get("requests", {}).get(
            "storage")
    before, after = storage(old), storage(new)
    try:
        shrinks = before is not None and after is not None and \
            parse_quantity(after) < parse_quantity(before)
    except (QuantityError, ValueError):
        shrinks = False
    if shrinks:
        errs.append(cause("spec.resources.requests.storage", "Forbidden: field can not be "
                          "less than previous value", "FieldValueForbidden"))
    return errs


def _go_value(value) -> str:
    if value is None:
        return "nil"
    if isinstance(value, str):
        return f'"{value}"'
    return json.dumps(value, sort_keys=True)


def raise_if(errs: list[dict], kind: str, group: str, name: str) -> None:
    if errs:
        raise invalid(kind, group, name or "", errs)


def check_metadata(kind: str, meta: dict) -> list[dict]:
    errs = []
    if "labels" in meta and meta["labels"] is not None:
        errs.extend(label_errors(meta["labels"]))
    ann = meta.get("annotations")
    if ann is not None and (not isinstance(ann, dict)
                            or any(not isinstance(v, str) for v in ann.values())):
        errs.append(invalid_value("metadata.annotations", "map", "values must be strings"))
    return errs
