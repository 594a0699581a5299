"""Subresources and create-only review APIs that clients and kubectl use:
pods/binding, pods/eviction (policy.py), the `scale` subresource (apps/v1 and CRDs that
declare it), serviceaccounts/token, and the self reviews behind `kubectl auth can-i` and
`kubectl auth whoami`.

kubesim does not authenticate or authorize: every request acts as one user who may do
everything, as the pre-1.20 insecure port did (user `system:unsecured`, group
`system:masters`; staging/src/k8s.io/apiserver/pkg/server/deprecated_insecure_serving.go).
The reviews say so instead of inventing RBAC decisions. Impersonation headers
(`kubectl --as`) name the user the reviews report.
"""
from __future__ import annotations

import base64
import json
from datetime import timedelta
from typing import TYPE_CHECKING

from aiohttp import web

from . import policy
from .errors import ApiError, bad_request, conflict, invalid
from .jsonutil import dumps, jcopy, loads
from .patch import json_patch, merge_patch, strategic_merge

if TYPE_CHECKING:
    from .resources import ResourceType
    from .server import Server, Target

USER = "system:unsecured"
GROUPS = ["system:masters", "system:authenticated"]
ALLOW_REASON = "kubesim authorizes every request (no RBAC enforcement)"
DEFAULT_AUDIENCES = ["https://kubernetes.default.svc.cluster.local"]


def _json(obj, status: int = 200) -> web.Response:
    return web.Response(body=dumps(obj), status=status, content_type="application/json")


def _user(request: web.Request) -> dict:
    name = request.headers.get("Impersonate-User")
    if name:
        groups = request.headers.getall("Impersonate-Group", [])
        return {"username": name, "groups": [*groups, "system:authenticated"]}
    return {"username": USER, "groups": list(GROUPS)}


async def _body(request: web.Request) -> dict:
    raw = await request.read()
    try:
        body = loads(raw) if raw.strip() else {}
    except ValueError as e:
        raise bad_request(f"the body of the request could not be decoded: {e}") from None
    if not isinstance(body, dict):
        raise bad_request("the body of the request was in an unknown format")
    return body


async def review(server: Server, request: web.Request, t: Target) -> web.Response:
    """POST of a create-only review; never stored (GET/LIST are 405 as on a real server)."""
    if request.method != "POST" or t.name is not None:
        raise ApiError(405, "MethodNotAllowed",
                       "the server does not allow this method on the requested resource")
    body = await _body(request)
    spec = body.get("spec") or {}
    out = {"kind": t.rt.kind, "apiVersion": t.rt.api_version,
           "metadata": {"creationTimestamp": None}}
    user = _user(request)
    kind = t.rt.kind
    if kind == "SelfSubjectAccessReview":
        # pkg/registry/authorization/selfsubjectaccessreview/rest.go: exactly one of
        # resourceAttributes and nonResourceAttributes (422 otherwise)
        ra, nra = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        if bool(ra) == bool(nra):
            raise invalid(kind, "authorization.k8s.io", "", [{
                "field": "spec.resourceAttributes", "reason": "FieldValueRequired",
                "message": "Required value: exactly one of nonResourceAttributes or "
                           "resourceAttributes must be specified"}])
        out["spec"] = spec
        out["status"] = {"allowed": True, "reason": ALLOW_REASON}
    elif kind == "SelfSubjectRulesReview":
        if not spec.get("namespace"):
            raise invalid(kind, "authorization.k8s.io", "", [{
                "field": "spec.namespace", "reason": "FieldValueRequired",
                "message": "Required value"}])
        out["spec"] = spec
        out["status"] = {"resourceRules": [{"verbs": ["*"], "apiGroups": ["*"],
                                            "resources": ["*"]}],
                         "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                         "incomplete": False}
    else:   # SelfSubjectReview (authentication.k8s.io/v1, GA in 1.28)
        out["status"] = {"userInfo": user}
    return _json(out, 201)


def token(server: Server, t: Target, body: dict, dry_run: bool) -> web.Response:
    """serviceaccounts/NAME/token (TokenRequest), as pkg/registry/core/serviceaccount/
    storage/token.go: the account must exist, expirationSeconds defaults to 3600 and may
    not be under 600 (validation: "may not specify a duration less than 10 minutes"), the
    audiences default to the API server's. The token is an unsigned JWT-shaped string:
    kubesim does not authenticate, so nothing verifies it."""
    store = server.store
    assert t.name is not None  # the server routes only named token requests here
    sa = store.get("serviceaccounts", t.name, namespace=t.ns)
    spec = dict(body.get("spec") or {})
    exp = spec.get("expirationSeconds", 3600)
    if not isinstance(exp, int) or exp < 600:
        raise invalid("TokenRequest", "authentication.k8s.io", t.name, [{
            "field": "spec.expirationSeconds", "reason": "FieldValueInvalid",
            "message": f"Invalid value: {exp}: may not specify a duration less than 10 "
                       "minutes"}])
    if exp > 2**32:
        raise invalid("TokenRequest", "authentication.k8s.io", t.name, [{
            "field": "spec.expirationSeconds", "reason": "FieldValueInvalid",
            "message": f"Invalid value: {exp}: may not specify a duration larger than 2^32 "
                       "seconds"}])
    spec["expirationSeconds"] = exp
    spec["audiences"] = spec.get("audiences") or list(DEFAULT_AUDIENCES)
    spec.setdefault("boundObjectRef", None)
    now = store.clock.now()
    expires = now + timedelta(seconds=exp)
    claims = {"aud": spec["audiences"], "exp": int(expires.timestamp()),
              "iat": int(now.timestamp()), "iss": DEFAULT_AUDIENCES[0],
              "kubernetes.io": {"namespace": t.ns, "serviceaccount": {
                  "name": t.name, "uid": sa["metadata"]["uid"]}},
              "sub": f"system:serviceaccount:{t.ns}:{t.name}"}

    def b64(obj) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    jwt = f"{b64({'alg': 'none', 'kid': 'kubesim'})}.{b64(claims)}."
    return _json({"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
                  "metadata": {"name": t.name, "namespace": t.ns,
                               "creationTimestamp": store.clock.timestamp()},
                  "spec": spec,
                  "status": {"token": jwt,
                             "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}},
                 201)


def binding(server: Server, rt: ResourceType, ns: str, name: str, body: dict) -> web.Response:
    """pods/binding, as pkg/registry/core/pod/storage/storage.go BindingREST: target.name
    required; a pod being deleted or already bound is a 409 on pods/binding; binding sets
    spec.nodeName, merges the Binding's annotations and sets PodScheduled=True."""
    store = server.store
    node = ((body or {}).get("target") or {}).get("name")
    if not node:
        raise invalid("Binding", "", name, [{"field": "target.name",
                                            "reason": "FieldValueRequired",
                                            "message": "Required value"}])
    pod = store._get_or_404(rt, name, ns)
    if pod["metadata"].get("deletionTimestamp"):
        raise conflict("pods/binding", "", name,
                       f"pod {name} is being deleted, cannot be assigned to a host")
    if (pod.get("spec") or {}).get("nodeName"):
        raise conflict("pods/binding", "", name, f'pod {name} is already assigned to node '
                                                 f'"{pod["spec"]["nodeName"]}"')
    annotations = ((body.get("metadata") or {}).get("annotations")) or {}
    patch: dict = {"spec": {"nodeName": node}}
    if annotations:
        patch["metadata"] = {"annotations": annotations}
    store.patch(rt.key, name, patch, patch_type="merge", namespace=ns)
    bound = store._get_or_404(rt, name, ns)
    conds = [c for c in (bound.get("status") or {}).get("conditions") or []
             if c.get("type") != "PodScheduled"]
    conds.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                  "lastTransitionTime": store.clock.timestamp()})
    store.patch(rt.key, name, {"status": {"conditions": conds}}, patch_type="merge",
                namespace=ns, subresource="status")
    return _json({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                  "code": 201}, 201)


# ---- scale ------------------------------------------------------------------------------
_APPS_SCALE = (".spec.replicas", ".status.replicas", "")


def _get_path(obj, path: str):
    cur = obj
    for part in [p for p in path.split(".") if p]:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def _selector_string(sel: dict | None) -> str:
    """metav1.LabelSelectorAsSelector(...).String(): sorted requirements."""
    if not sel:
        return ""
    reqs = [f"{k}={v}" for k, v in (sel.get("matchLabels") or {}).items()]
    for e in sel.get("matchExpressions") or []:
        op, key, vals = e.get("operator"), e.get("key"), sorted(e.get("values") or [])
        if op == "In":
            reqs.append(f"{key} in ({','.join(vals)})")
        elif op == "NotIn":
            reqs.append(f"{key} notin ({','.join(vals)})")
        elif op == "Exists":
            reqs.append(key)
        elif op == "DoesNotExist":
            reqs.append(f"!{key}")
    return ",".join(sorted(reqs))


def to_scale(rt: ResourceType, obj: dict) -> dict:
    """autoscaling/v1 Scale of an object (pkg/registry/apps/deployment/storage/storage.go
    scaleFromDeployment; apiextensions-apiserver pkg/registry/customresource/etcd.go
    scaleFromCustomResource: replicas from specReplicasPath/statusReplicasPath, 0 when
    absent; status.selector from labelSelectorPath)."""
    spec_p, status_p, sel_p = rt.scale_paths or _APPS_SCALE
    meta = obj["metadata"]
    if rt.crd_name:
        selector = _get_path(obj, sel_p) if sel_p else None
        status: dict = {"replicas": int(_get_path(obj, status_p) or 0)}
        if selector:
            status["selector"] = selector
    else:
        status = {"replicas": int((obj.get("status") or {}).get("replicas") or 0),
                  "selector": _selector_string((obj.get("spec") or {}).get("selector"))}
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                              "creationTimestamp") if k in meta},
            "spec": {"replicas": int(_get_path(obj, spec_p) or 0)}, "status": status}


async def scale(server: Server, request: web.Request, t: Target) -> web.Response:
    store, rt = server.store, t.rt
    assert t.name is not None  # scale is a subresource of a named object
    obj = store._get_or_404(rt, t.name, store._ns_of(rt, t.ns))
    current = to_scale(rt, obj)
    if request.method == "GET":
        return _json(current)
    if request.method == "PUT":
        new = await _body(request)
    elif request.method == "PATCH":
        raw = await request.read()
        ctype = request.content_type
        try:
            body = loads(raw)
        except ValueError as e:
            raise bad_request(f"error decoding patch: {e}") from None
        if ctype == "application/json-patch+json":
            new = json_patch(jcopy(current), body)
        elif ctype == "application/merge-patch+json":
            new = merge_patch(jcopy(current), body)
        elif ctype == "application/strategic-merge-patch+json":
            new = strategic_merge(jcopy(current), body)
        else:
            raise ApiError(415, "UnsupportedMediaType",
                           "the body of the request was in an unknown format - accepted "
                           "media types include: application/json-patch+json, "
                           "application/merge-patch+json, "
                           "application/strategic-merge-patch+json")
    else:
        raise ApiError(405, "MethodNotAllowed", f"{request.method} is not supported on scale")
    replicas = (new.get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or replicas < 0:
        raise invalid("Scale", "autoscaling", t.name, [{
            "field": "spec.replicas", "reason": "FieldValueInvalid",
            "message": f"Invalid value: {replicas}: must be greater than or equal to 0"}])
    rv = (new.get("metadata") or {}).get("resourceVersion")
    if rv and rv != obj["metadata"]["resourceVersion"]:
        raise conflict(rt.plural, rt.group, t.name, "the object has been modified; please "
                       "apply your changes to the latest version and try again")
    spec_path = (rt.scale_paths or _APPS_SCALE)[0]
    patch: dict = {}
    cur = patch
    parts = [p for p in spec_path.split(".") if p]
    for p in parts[:-1]:
        cur = cur.setdefault(p, {})
    cur[parts[-1]] = replicas
    updated = store.patch(rt.key, t.name, patch, patch_type="merge", namespace=t.ns,
                          dry_run="All" in request.query.getall("dryRun", []))
    return _json(to_scale(rt, updated))


async def evict(server: Server, request: web.Request, t: Target, body: dict) -> web.Response:
    out = policy.evict(server.store, t.ns or "", t.name or "", body,
                       "All" in request.query.getall("dryRun", []))
    return _json(out, out.get("code", 201))
