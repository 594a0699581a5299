"""Dynamic Resource Allocation, the API server's half: resource.k8s.io/v1 (GA in 1.34)
DeviceClass, ResourceSlice, ResourceClaim and ResourceClaimTemplate.

Sources followed (kubernetes/kubernetes, release-1.34):
* defaults: pkg/apis/resource/v1/defaults.go (SetDefaults_ExactDeviceRequest,
  SetDefaults_DeviceSubRequest: allocationMode ExactCount, count 1 for ExactCount;
  SetDefaults_DeviceTaint/Toleration: operator Equal);
* validation: pkg/apis/resource/validation/validation.go (ValidateResourceClaim,
  validateDeviceRequest, validateExactDeviceRequest, validateSelector (CEL compiled with the
  DRA environment), ValidateDeviceClass, ValidateResourceSlice, validateResourceSliceSpec,
  ValidateResourceClaimStatusUpdate, ValidateResourceClaimTemplate);
* strategies: pkg/registry/resource/resourceclaim/strategy.go (status subresource; spec
  immutable: ValidateResourceClaimUpdate `field is immutable`; a create drops status),
  pkg/registry/resource/resourceclaimtemplate/strategy.go (spec immutable),
  pkg/registry/resource/deviceclass and resourceslice (no status);
* CEL: staging/src/k8s.io/dynamic-resource-allocation/cel/compile.go (the `device`
  variable: `driver`, `attributes[domain][id]`, `capacity[domain][id]` as quantities,
  `allowMultipleAllocations`; unqualified attribute names belong to the driver's domain;
  the `quantity()` library with `compareTo`, `isGreaterThan`, `isLessThan`, and the
  `semver()` library for `version` attributes), evaluated with
  the maintained `cel-python` library (module `celpy`), not by hand;
* quota: pkg/quota/v1/evaluator/core/resource_claims.go (Usage: `count/resourceclaims.
  resource.k8s.io` 1 per claim; `<class>.deviceclass.resource.k8s.io/devices` += count per
  ExactCount request, AllocationResultsMaxSize (32) per `All` request; firstAvailable: the
  worst case per class).
"""
from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache
from typing import Any

from .quantity import parse_quantity
from .validation import cause, invalid_value, required

GROUP = "resource.k8s.io"
DEVICE_CLASSES = "deviceclasses.resource.k8s.io"
RESOURCE_SLICES = "resourceslices.resource.k8s.io"
RESOURCE_CLAIMS = "resourceclaims.resource.k8s.io"
CLAIM_TEMPLATES = "resourceclaimtemplates.resource.k8s.io"
KINDS = {"DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate"}

ALLOCATION_RESULTS_MAX_SIZE = 32     # resourceapi.AllocationResultsMaxSize
DEVICE_REQUESTS_MAX_SIZE = 32        # resourceapi.DeviceRequestsMaxSize
RESOURCE_SLICE_MAX_DEVICES = 128     # resourceapi.ResourceSliceMaxDevices
RESERVED_FOR_MAX_SIZE = 256          # resourceapi.ResourceClaimReservedForMaxSize
PER_CLASS_SUFFIX = ".deviceclass.resource.k8s.io/devices"   # corev1.ResourceClaimsPerClass
CLAIM_COUNT = "count/resourceclaims.resource.k8s.io"

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_C_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# ---- CEL (celpy) ------------------------------------------------------------------------------
class CelError(Exception):
    pass


def _celpy():
    import celpy  # cel-python: imported lazily, only DRA objects need it
    from celpy import celtypes
    return celpy, celtypes


@lru_cache(maxsize=1)
def _quantity_type():
    _, celtypes = _celpy()

    class Quantity(celtypes.StringType):   # type: ignore[misc, valid-type]
        """A resource.Quantity value in CEL (k8s.io/apiserver/pkg/cel/library/quantity.go)."""

    return Quantity


@lru_cache(maxsize=1)
def _semver_type():
    _, celtypes = _celpy()

    class Semver(celtypes.StringType):   # type: ignore[misc, valid-type]
        """A semantic version in CEL (k8s.io/apiserver/pkg/cel/library/semverlib.go)."""

    return Semver


def _version_key(v) -> tuple:
    core = str(v).split("+", 1)[0].split("-", 1)[0]
    parts = core.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"invalid semver {v!r}")
    return tuple(int(p) for p in parts)


def _cmp(a, b) -> int:
    if isinstance(a, _semver_type()) or isinstance(b, _semver_type()):
        x, y = _version_key(a), _version_key(b)
        return (x > y) - (x < y)
    qx, qy = parse_quantity(str(a)), parse_quantity(str(b))
    return (qx > qy) - (qx < qy)


@lru_cache(maxsize=1)
def _functions() -> dict:
    _, celtypes = _celpy()
    q = _quantity_type()

    def quantity(s):
        try:
            parse_quantity(str(s))
        except Exception as exc:
            raise ValueError(f"quantities must match the regular expression: {exc}") from None
        return q(str(s))

    semver = _semver_type()

    def make_semver(v):
        _version_key(v)
        return semver(str(v))

    return {
        "semver": make_semver,
        "major": lambda v: celtypes.IntType(_version_key(v)[0]),
        "minor": lambda v: celtypes.IntType(_version_key(v)[1]),
        "patch": lambda v: celtypes.IntType(_version_key(v)[2]),
        "quantity": quantity,
        "compareTo": lambda a, b: celtypes.IntType(_cmp(a, b)),
        "isGreaterThan": lambda a, b: celtypes.BoolType(_cmp(a, b) > 0),
        "isLessThan": lambda a, b: celtypes.BoolType(_cmp(a, b) < 0),
        "asInteger": lambda a: celtypes.IntType(int(parse_quantity(str(a)))),
    }


@lru_cache(maxsize=512)
def compile_selector(expression: str):
    """The compiled program of a selector, or CelError with the compiler's words."""
    celpy, _ = _celpy()
    env = celpy.Environment()
    try:
        ast = env.compile(expression)
    except Exception as exc:   # CELParseError and friends
        raise CelError(str(exc).strip().splitlines()[0] if str(exc).strip() else
                       type(exc).__name__) from None
    return env.program(ast, functions=_functions())


def _qualify(driver: str, name: str) -> tuple[str, str]:
    """compile.go: an attribute or capacity name without a domain is the driver's."""
    if "/" in name:
        domain, _, ident = name.rpartition("/")
        return domain, ident
    return driver, name


def device_activation(driver: str, device: dict) -> dict:
    """The `device` variable of a selector for one ResourceSlice device."""
    _, celtypes = _celpy()
    q = _quantity_type()
    attrs: dict = {}
    for name, val in (device.get("attributes") or {}).items():
        domain, ident = _qualify(driver, name)
        if "int" in val:
            cv: Any = celtypes.IntType(int(val["int"]))
        elif "bool" in val:
            cv = celtypes.BoolType(bool(val["bool"]))
        elif "version" in val:
            cv = _semver_type()(str(val["version"]))
        else:
            cv = celtypes.StringType(str(val.get("string", "")))
        attrs.setdefault(domain, {})[ident] = cv
    caps: dict = {}
    for name, val in (device.get("capacity") or {}).items():
        domain, ident = _qualify(driver, name)
        caps.setdefault(domain, {})[ident] = q(str((val or {}).get("value", "0")))

    def cmap(d: dict):
        return celtypes.MapType({celtypes.StringType(k): (cmap(v) if isinstance(v, dict) else v)
                                 for k, v in d.items()})
    return {"device": cmap({
        "driver": celtypes.StringType(driver),
        "attributes": cmap(attrs),
        "capacity": cmap(caps),
        "allowMultipleAllocations": celtypes.BoolType(bool(
            device.get("allowMultipleAllocations"))),
    })}


def selector_matches(expression: str, activation: dict) -> bool:
    """True/False, or CelError for a runtime error or a non-boolean result (the allocator
    fails the claim then: structured/allocator.go selectorsMatch `CEL runtime error`)."""
    _, celtypes = _celpy()
    try:
        result = compile_selector(expression).evaluate(activation)
    except CelError:
        raise
    except Exception as exc:
        raise CelError(str(exc)) from None
    if not isinstance(result, celtypes.BoolType):
        raise CelError(f"expression evaluated to {result!r}, not a boolean")
    return bool(result)


# ---- defaults ---------------------------------------------------------------------------------
def _default_request(exact: dict) -> None:
    exact.setdefault("allocationMode", "ExactCount")
    if exact["allocationMode"] == "ExactCount" and not exact.get("count"):
        exact["count"] = 1
    for t in exact.get("tolerations") or []:
        t.setdefault("operator", "Equal")


def _default_claim_spec(spec: dict) -> None:
    for r in ((spec.get("devices") or {}).get("requests") or []):
        if isinstance(r.get("exactly"), dict):
            _default_request(r["exactly"])
        for sub in r.get("firstAvailable") or []:
            if isinstance(sub, dict):
                _default_request(sub)


def prepare_create(kind: str, obj: dict) -> None:
    if kind == "ResourceClaim":
        obj.pop("status", None)
        _default_claim_spec(obj.setdefault("spec", {}))
    elif kind == "ResourceClaimTemplate":
        _default_claim_spec((obj.setdefault("spec", {})).setdefault("spec", {}))
    elif kind == "ResourceSlice":
        for d in (obj.get("spec") or {}).get("devices") or []:
            for t in d.get("taints") or []:
                t.setdefault("effect", t.get("effect"))


def prepare_update(kind: str, new: dict) -> None:
    if kind == "ResourceClaim":
        _default_claim_spec(new.setdefault("spec", {}))
    elif kind == "ResourceClaimTemplate":
        _default_claim_spec((new.setdefault("spec", {})).setdefault("spec", {}))


# ---- validation -------------------------------------------------------------------------------
def _selectors_errors(path: str, selectors) -> list[dict]:
    errs: list[dict] = []
    for i, s in enumerate(selectors or []):
        f = f"{path}[{i}]"
        cel = (s or {}).get("cel")
        if cel is None:
            errs.append(required(f"{f}.cel"))
            continue
        expr = cel.get("expression") or ""
        if not expr:
            errs.append(required(f"{f}.cel.expression"))
            continue
        try:
            compile_selector(expr)
        except CelError as exc:
            errs.append(invalid_value(f"{f}.cel.expression", expr, f"compilation failed: {exc}"))
    return errs


def _exact_errors(f: str, exact: dict, class_required: bool = True) -> list[dict]:
    errs: list[dict] = []
    dc = exact.get("deviceClassName")
    if not dc:
        if class_required:
            errs.append(required(f"{f}.deviceClassName"))
    elif not _DNS_SUBDOMAIN.match(dc) or len(dc) > 253:
        errs.append(invalid_value(f"{f}.deviceClassName", dc,
                                  "a lowercase RFC 1123 subdomain must consist of lower case "
                                  "alphanumeric characters, '-' or '.', and must start and end "
                                  "with an alphanumeric character"))
    errs += _selectors_errors(f"{f}.selectors", exact.get("selectors"))
    mode, count = exact.get("allocationMode"), exact.get("count") or 0
    if mode == "ExactCount":
        if count <= 0:
            errs.append(invalid_value(f"{f}.count", count, "must be greater than zero"))
    elif mode == "All":
        if count:
            errs.append(invalid_value(f"{f}.count", count,
                                      "must not be specified when allocationMode is 'All'"))
    elif mode:
        errs.append(cause(f"{f}.allocationMode", f'Unsupported value: "{mode}": supported '
                          'values: "All", "ExactCount"', "FieldValueNotSupported"))
    return errs


def _request_name_errors(f: str, name, seen: set) -> list[dict]:
    if not name:
        return [required(f)]
    if not isinstance(name, str) or not _DNS_LABEL.match(name) or len(name) > 63:
        return [invalid_value(f, name, "a lowercase RFC 1123 label must consist of lower case "
                                       "alphanumeric characters or '-', and must start and end "
                                       "with an alphanumeric character")]
    if name in seen:
        return [cause(f, f'Duplicate value: "{name}"', "FieldValueDuplicate")]
    seen.add(name)
    return []


def claim_spec_errors(path: str, spec: dict) -> list[dict]:
    devices = (spec or {}).get("devices") or {}
    requests = devices.get("requests") or []
    errs: list[dict] = []
    if len(requests) > DEVICE_REQUESTS_MAX_SIZE:
        errs.append(cause(f"{path}.devices.requests", f"Too many: {len(requests)}: must have at "
                          f"most {DEVICE_REQUESTS_MAX_SIZE} items", "FieldValueTooMany"))
    seen: set = set()
    for i, r in enumerate(requests):
        f = f"{path}.devices.requests[{i}]"
        errs += _request_name_errors(f"{f}.name", r.get("name"), seen)
        exact, first = r.get("exactly"), r.get("firstAvailable") or []
        if exact is None and not first:
            errs.append(cause(f, "Required value: exactly one of `exactly` or "
                                 "`firstAvailable` is required", "FieldValueRequired"))
        elif exact is not None and first:
            errs.append(cause(f, "Invalid value: \"\": exactly one of `exactly` or "
                                 "`firstAvailable` is required"))
        elif exact is not None:
            errs += _exact_errors(f"{f}.exactly", exact)
        else:
            subseen: set = set()
            for j, sub in enumerate(first):
                sf = f"{f}.firstAvailable[{j}]"
                errs += _request_name_errors(f"{sf}.name", sub.get("name"), subseen)
                errs += _exact_errors(sf, sub)
    names = {r.get("name") for r in requests}
    for i, c in enumerate(devices.get("constraints") or []):
        for j, rn in enumerate(c.get("requests") or []):
            if rn.split("/")[0] not in names:
                errs.append(invalid_value(f"{path}.devices.constraints[{i}].requests[{j}]", rn,
                                          "must be the name of a request in the claim or the "
                                          "name of a request and a subrequest separated by '/'"))
    return errs


def _status_errors(old: dict | None, obj: dict) -> list[dict]:
    status = obj.get("status") or {}
    errs: list[dict] = []
    alloc = status.get("allocation")
    reserved = status.get("reservedFor") or []
    names = {r.get("name") for r in ((obj.get("spec") or {}).get("devices") or {}).get(
        "requests") or []}
    if alloc is not None:
        results = (alloc.get("devices") or {}).get("results") or []
        if len(results) > ALLOCATION_RESULTS_MAX_SIZE:
            errs.append(cause("status.allocation.devices.results",
                              f"Too many: {len(results)}: must have at most "
                              f"{ALLOCATION_RESULTS_MAX_SIZE} items", "FieldValueTooMany"))
        for i, res in enumerate(results):
            f = f"status.allocation.devices.results[{i}]"
            if (res.get("request") or "").split("/")[0] not in names:
                errs.append(invalid_value(f"{f}.request", res.get("request"),
                                          "must be the name of a request in the claim or the "
                                          "name of a request and a subrequest separated by '/'"))
            for key in ("driver", "pool", "device"):
                if not res.get(key):
                    errs.append(required(f"{f}.{key}"))
    if reserved and alloc is None:
        errs.append(cause("status.reservedFor", "Forbidden: may not be specified when "
                          "`allocated` is not set", "FieldValueForbidden"))
    uids: set = set()
    for i, ref in enumerate(reserved):
        f = f"status.reservedFor[{i}]"
        for key in ("resource", "name", "uid"):
            if not ref.get(key):
                errs.append(required(f"{f}.{key}"))
        if ref.get("uid") in uids:
            errs.append(cause(f"{f}.uid", f'Duplicate value: "{ref.get("uid")}"',
                              "FieldValueDuplicate"))
        uids.add(ref.get("uid"))
    if len(reserved) > RESERVED_FOR_MAX_SIZE:
        errs.append(cause("status.reservedFor", f"Too many: {len(reserved)}: must have at most "
                          f"{RESERVED_FOR_MAX_SIZE} items", "FieldValueTooMany"))
    if old is not None:
        oalloc = (old.get("status") or {}).get("allocation")
        if oalloc is not None and alloc is not None and oalloc != alloc:
            errs.append(cause("status.allocation", "Invalid value: \"object\": field is "
                              "immutable"))
    return errs


def _slice_errors(obj: dict) -> list[dict]:
    spec = obj.get("spec") or {}
    errs: list[dict] = []
    driver = spec.get("driver")
    if not driver:
        errs.append(required("spec.driver"))
    elif not _DNS_SUBDOMAIN.match(driver) or len(driver) > 63:
        errs.append(invalid_value("spec.driver", driver, "a lowercase RFC 1123 subdomain must "
                                  "consist of lower case alphanumeric characters, '-' or '.'"))
    pool = spec.get("pool") or {}
    if not pool.get("name"):
        errs.append(required("spec.pool.name"))
    if (pool.get("resourceSliceCount") or 0) <= 0:
        errs.append(invalid_value("spec.pool.resourceSliceCount", pool.get(
            "resourceSliceCount") or 0, "must be greater than zero"))
    if (pool.get("generation") or 0) < 0:
        errs.append(invalid_value("spec.pool.generation", pool.get("generation"),
                                  "must be greater than or equal to 0"))
    chosen = [k for k in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")
              if spec.get(k)]
    if len(chosen) != 1:
        errs.append(cause("spec", "Required value: exactly one of `nodeName`, `nodeSelector`, "
                          "`allNodes`, `perDeviceNodeSelection` is required" if not chosen else
                          "Invalid value: {" + ", ".join(f"`{c}`" for c in chosen) + "}: "
                          "exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                          "`perDeviceNodeSelection` is required",
                          "FieldValueRequired" if not chosen else "FieldValueInvalid"))
    devices = spec.get("devices") or []
    if len(devices) > RESOURCE_SLICE_MAX_DEVICES:
        errs.append(cause("spec.devices", f"Too many: {len(devices)}: must have at most "
                          f"{RESOURCE_SLICE_MAX_DEVICES} items", "FieldValueTooMany"))
    seen: set = set()
    for i, d in enumerate(devices):
        f = f"spec.devices[{i}]"
        errs += _request_name_errors(f"{f}.name", d.get("name"), seen)
        for name, val in (d.get("attributes") or {}).items():
            af = f"{f}.attributes[{name}]"
            ident = name.rpartition("/")[2]
            if not _C_IDENT.match(ident) or len(ident) > 32:
                errs.append(invalid_value(af, name, "a valid C identifier must start with "
                                          "alphabetic character or '_', followed by a string of "
                                          "alphanumeric characters or '_'"))
            set_ = [k for k in ("int", "bool", "string", "version") if k in (val or {})]
            if len(set_) != 1:
                errs.append(cause(af, "Invalid value: exactly one value must be specified"))
            elif set_[0] == "string" and len(val["string"]) > 64:
                errs.append(cause(f"{af}.string", "Too long: may not be more than 64 bytes",
                                  "FieldValueTooLong"))
        for name, val in (d.get("capacity") or {}).items():
            try:
                parse_quantity((val or {}).get("value"))
            except Exception:
                errs.append(required(f"{f}.capacity[{name}].value"))
    return errs


def validate(kind: str, obj: dict, old: dict | None, status_only: bool = False) -> list[dict]:
    errs: list[dict] = []
    if kind == "DeviceClass":
        errs += _selectors_errors("spec.selectors", (obj.get("spec") or {}).get("selectors"))
    elif kind == "ResourceSlice":
        errs += _slice_errors(obj)
    elif kind == "ResourceClaim":
        if old is not None and old.get("spec") != obj.get("spec"):
            errs.append(cause("spec", f"Invalid value: {_go_struct(obj.get('spec'))}: field is "
                                      "immutable"))
        elif not status_only:
            errs += claim_spec_errors("spec", obj.get("spec") or {})
        errs += _status_errors(old, obj)
    elif kind == "ResourceClaimTemplate":
        if old is not None and old.get("spec") != obj.get("spec"):
            errs.append(cause("spec", f"Invalid value: {_go_struct(obj.get('spec'))}: field is "
                                      "immutable"))
        else:
            errs += claim_spec_errors("spec.spec", (obj.get("spec") or {}).get("spec") or {})
    return errs


def _go_struct(value) -> str:
    """field.Invalid with a struct value: kubesim prints `"object"` in its place (the API
    server prints the Go struct; clients match on `field is immutable`)."""
    return '"object"'


# ---- pods (pkg/apis/core/validation/validation.go) ---------------------------------------------
def _go_claim(pc: dict) -> str:
    def ptr(v):
        return "(*string)(nil)" if v is None else f'(*string)("{v}")'
    return (f'core.PodResourceClaim{{Name:"{pc.get("name") or ""}", ResourceClaimName:'
            f'{ptr(pc.get("resourceClaimName"))}, ResourceClaimTemplateName:'
            f'{ptr(pc.get("resourceClaimTemplateName"))}}}')


def pod_claim_errors(obj: dict) -> list[dict]:
    """validatePodResourceClaims and validateResourceClaimNames: pod claim names are unique
    DNS labels naming exactly one of a claim or a template (and `<pod>-<name>` is a valid
    claim name); a container's `resources.claims` name pod claims."""
    spec = obj.get("spec") or {}
    pod_name = (obj.get("metadata") or {}).get("name") or ""
    errs: list[dict] = []
    names: set = set()
    for i, pc in enumerate(spec.get("resourceClaims") or []):
        f = f"spec.resourceClaims[{i}]"
        name = pc.get("name")
        if not name:
            errs.append(required(f"{f}.name"))
        elif name in names:
            errs.append(cause(f"{f}.name", f'Duplicate value: "{name}"', "FieldValueDuplicate"))
        elif not _DNS_LABEL.match(name) or len(name) > 63:
            errs.append(invalid_value(f"{f}.name", name, "a lowercase RFC 1123 label must "
                                      "consist of lower case alphanumeric characters or '-', "
                                      "and must start and end with an alphanumeric character"))
        else:
            names.add(name)
            full = f"{pod_name}-{name}"
            if pc.get("resourceClaimTemplateName") and (len(full) > 253 or
                                                         not _DNS_SUBDOMAIN.match(full)):
                errs.append(invalid_value(f"{f}.name", full, "final ResourceClaim name: a "
                                          "lowercase RFC 1123 subdomain"))
        has_claim, has_tmpl = (pc.get("resourceClaimName") is not None,
                               pc.get("resourceClaimTemplateName") is not None)
        if has_claim and has_tmpl:
            errs.append(cause(f, f"Invalid value: {_go_claim(pc)}: at most one of "
                                 "`resourceClaimName` or `resourceClaimTemplateName` may be "
                                 "specified"))
        elif not has_claim and not has_tmpl:
            errs.append(cause(f, f"Invalid value: {_go_claim(pc)}: must specify one of: "
                                 "`resourceClaimName`, `resourceClaimTemplateName`"))
    listed = ", ".join(sorted(names))
    for key in ("initContainers", "containers"):
        for ci, c in enumerate(spec.get(key) or []):
            seen: set = set()
            for j, rc in enumerate(((c.get("resources") or {}).get("claims")) or []):
                f = f"spec.{key}[{ci}].resources.claims[{j}]"
                name = rc.get("name")
                if not name:
                    errs.append(required(f))
                    continue
                k = name + ("/" + rc["request"] if rc.get("request") else "")
                if k in seen:
                    errs.append(cause(f, f'Duplicate value: "{name}"', "FieldValueDuplicate"))
                seen.add(k)
                if name not in names:
                    errs.append(cause(f, f'Not found: "{name}": must be one of the names in '
                                         "pod.spec.resourceClaims" +
                                         (f": {listed}" if listed else " which is empty"),
                                      "FieldValueNotFound"))
    return errs


# ---- quota ------------------------------------------------------------------------------------
def _request_devices(exact: dict) -> int:
    mode = exact.get("allocationMode", "ExactCount")
    if mode == "ExactCount":
        return int(exact.get("count") or 1)
    if mode == "All":
        return ALLOCATION_RESULTS_MAX_SIZE
    return 0


def claim_usage(claim: dict) -> dict[str, Fraction]:
    """resource_claims.go Usage: what one claim counts against ResourceQuota."""
    out: dict[str, Fraction] = {CLAIM_COUNT: Fraction(1)}
    for r in (((claim.get("spec") or {}).get("devices") or {}).get("requests") or []):
        if r.get("firstAvailable"):
            worst: dict[str, int] = {}
            for sub in r["firstAvailable"]:
                key = (sub.get("deviceClassName") or "") + PER_CLASS_SUFFIX
                worst[key] = max(worst.get(key, 0), _request_devices(sub))
            for key, n in worst.items():
                out[key] = out.get(key, Fraction(0)) + n
        elif r.get("exactly"):
            key = (r["exactly"].get("deviceClassName") or "") + PER_CLASS_SUFFIX
            out[key] = out.get(key, Fraction(0)) + _request_devices(r["exactly"])
    return out


def is_claim_quota_key(key: str) -> bool:
    return key == CLAIM_COUNT or key.endswith(PER_CLASS_SUFFIX)
