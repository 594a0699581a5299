"""OpenAPI documents for the kinds kubesim serves: `/openapi/v3` (the root listing one
document per group-version), `/openapi/v3/<api|apis/group>/<version>`, and `/openapi/v2`.

What clients read from them (kubernetes/kubernetes, staging/src/k8s.io):
* `kubectl explain` (kubectl/pkg/explain/v2/explain.go, templates/plaintext.tmpl) fetches
  the group-version document, finds the resource's GVK in the
  `x-kubernetes-group-version-kind` of an operation on `/.../<resource>` or
  `/.../namespaces/{namespace}/<resource>`, then the schema in `components.schemas` whose
  `x-kubernetes-group-version-kind` list contains it, and follows `$ref`s.
* `kubectl apply`/`create` (cli-runtime/pkg/resource/query_param_verifier_v3.go) validate on
  the server when the PATCH operation of the kind lists the `fieldValidation` parameter;
  kubesim implements it, so every PATCH operation lists it.
* client-side apply computes strategic merge patches from the schemas'
  `x-kubernetes-patch-merge-key`/`-strategy` (kubectl/pkg/cmd/apply/patcher.go).

Schemas: custom resources from their CRD's structural schema, with `apiVersion`, `kind` and
`metadata` added as apiextensions-apiserver/pkg/controller/openapi/builder/builder.go does
(named by the reversed group, e.g. `org.kubeflow.v1.PyTorchJob`). Built-in kinds are the
Kubernetes 1.31 definitions shipped by the `kubernetes-validate` package (converted back from
JSON Schema to OpenAPI: `#/components/schemas/` references, single types, int-or-string and
quantity as strings). Without that package (it is a test dependency) built-in kinds are
served without schemas, and `kubectl explain` says so for them.
"""
from __future__ import annotations

import hashlib
import json
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .resources import Registry, ResourceType

K8S_SCHEMA_VERSION = "v1.31.0"
K8S_NEWER_SCHEMA_VERSION = "v1.34.0"
_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_LIST_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"
_AV_DOC = ("APIVersion defines the versioned schema of this representation of an object. "
           "Servers should convert recognized schemas to the latest internal value, and may "
           "reject unrecognized values. More info: https://git.k8s.io/community/contributors/"
           "devel/sig-architecture/api-conventions.md#resources")
_KIND_DOC = ("Kind is a string value representing the REST resource this object represents. "
             "Servers may infer this from the endpoint the client submits requests to. Cannot "
             "be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/"
             "devel/sig-architecture/api-conventions.md#types-kinds")
_META_DOC = ("Standard object's metadata. More info: https://git.k8s.io/community/contributors/"
             "devel/sig-architecture/api-conventions.md#metadata")

_defs_lock = threading.Lock()
_defs: dict | None = None
_cache: dict[tuple, tuple[str, bytes]] = {}


def _builtin_defs() -> dict:
    """name -> OpenAPI v3 schema (refs as #/components/schemas/NAME), or {} when the
    kubernetes-validate package is missing."""
    global _defs
    with _defs_lock:
        if _defs is not None:
            return _defs
        try:
            from importlib import resources
            base = resources.files("kubernetes_validate").joinpath("kubernetes-json-schema")
            raw = json.loads(base.joinpath(f"{K8S_SCHEMA_VERSION}-local/_definitions.json")
                             .read_text())["$defs"]
            # kinds GA after 1.31 (resource.k8s.io/v1 DRA, storage.k8s.io/v1
            # VolumeAttributesClass, in 1.34): their definitions from 1.34, added only
            # where 1.31 has no definition of that name
            newer = json.loads(base.joinpath(f"{K8S_NEWER_SCHEMA_VERSION}-local/"
                                             "_definitions.json").read_text())["$defs"]
            for name, d in newer.items():
                raw.setdefault(name, d)
        except (ImportError, FileNotFoundError, KeyError, ValueError):
            raw = {}
        _defs = {name: _from_json_schema(s, top=True) for name, s in raw.items()}
        return _defs


def _from_json_schema(s, top: bool = False):
    """Undo the JSON-Schema conversion kubernetes-validate applied to the OpenAPI
    definitions."""
    if isinstance(s, list):
        return [_from_json_schema(x) for x in s]
    if not isinstance(s, dict):
        return s
    out: dict = {}
    one_of = s.get("oneOf")
    if one_of and len(one_of) == 2 and all(isinstance(x, dict) for x in one_of):
        kinds = {(x.get("type") or [None])[0] if isinstance(x.get("type"), list) else
                 x.get("type") for x in one_of}
        if kinds == {"string", "integer"}:
            return {**({"description": s["description"]} if "description" in s else {}),
                    "type": "string", "format": "int-or-string",
                    "x-kubernetes-int-or-string": True}
        if kinds == {"string", "number"}:
            return {**({"description": s["description"]} if "description" in s else {}),
                    "type": "string"}
    for k, v in s.items():
        if k == "$ref" and isinstance(v, str):
            out[k] = v.replace("#/$defs/", "#/components/schemas/")
        elif k == "type" and isinstance(v, list):
            types = [t for t in v if t != "null"]
            if types:
                out[k] = types[0]
        elif k == "properties" and isinstance(v, dict):
            props: dict = {}
            for name, sub in v.items():
                sub = _from_json_schema(sub)
                if top and name in ("apiVersion", "kind") and isinstance(sub, dict):
                    sub.pop("enum", None)
                props[name] = sub
            out[k] = props
        else:
            out[k] = _from_json_schema(v)
    return out


def _refs(obj, acc: set[str]) -> None:
    if isinstance(obj, dict):
        ref = obj.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            acc.add(ref.rsplit("/", 1)[1])
        for v in obj.values():
            _refs(v, acc)
    elif isinstance(obj, list):
        for v in obj:
            _refs(v, acc)


def _closure(defs: dict, names: list[str]) -> dict:
    out: dict = {}
    todo = [n for n in names if n in defs]
    while todo:
        n = todo.pop()
        if n in out:
            continue
        out[n] = defs[n]
        found: set[str] = set()
        _refs(defs[n], found)
        todo.extend(f for f in found if f in defs and f not in out)
    return out


def _gvk(rt: ResourceType, version: str, kind: str | None = None) -> dict:
    return {"group": rt.group, "version": version, "kind": kind or rt.kind}


def crd_schema_name(group: str, version: str, kind: str) -> str:
    return ".".join([*reversed(group.split(".")), version, kind])


def _crd_components(rt: ResourceType, version: str, defs: dict) -> dict:
    schema = json.loads(json.dumps(rt.schema or {"type": "object",
                                                 "x-kubernetes-preserve-unknown-fields": True}))
    props = schema.setdefault("properties", {})
    props["apiVersion"] = {"type": "string", "description": _AV_DOC}
    props["kind"] = {"type": "string", "description": _KIND_DOC}
    props["metadata"] = ({"allOf": [{"$ref": f"#/components/schemas/{_OBJECT_META}"}],
                          "description": _META_DOC} if _OBJECT_META in defs
                         else {"type": "object", "description": _META_DOC})
    schema["type"] = "object"
    schema["x-kubernetes-group-version-kind"] = [_gvk(rt, version)]
    name = crd_schema_name(rt.group, version, rt.kind)
    listing = {"type": "object", "required": ["items"],
               "description": f"{rt.kind}List is a list of {rt.kind}",
               "x-kubernetes-group-version-kind": [_gvk(rt, version, rt.list_kind)],
               "properties": {
                   "apiVersion": {"type": "string", "description": _AV_DOC},
                   "kind": {"type": "string", "description": _KIND_DOC},
                   "items": {"type": "array", "description": f"List of {rt.plural}.",
                             "items": {"$ref": f"#/components/schemas/{name}"}},
                   "metadata": ({"allOf": [{"$ref": f"#/components/schemas/{_LIST_META}"}]}
                                if _LIST_META in defs else {"type": "object"})}}
    return {name: schema, crd_schema_name(rt.group, version, rt.list_kind): listing}


def _builtin_name(defs: dict, rt: ResourceType, version: str, kind: str | None = None):
    want = _gvk(rt, version, kind)
    for name, s in defs.items():
        for g in s.get("x-kubernetes-group-version-kind") or ():
            if g == want:
                return name
    return None


_PARAMS = {
    "namespace": {"name": "namespace", "in": "path", "required": True,
                  "description": "object name and auth scope, such as for teams and projects",
                  "schema": {"type": "string", "uniqueItems": True}},
    "name": {"name": "name", "in": "path", "required": True,
             "description": "name of the object", "schema": {"type": "string",
                                                             "uniqueItems": True}},
}


def _q(name: str, description: str, type_: str = "string") -> dict:
    return {"name": name, "in": "query", "description": description,
            "schema": {"type": type_, "uniqueItems": True}}


_WRITE_PARAMS = [
    _q("dryRun", "When present, indicates that modifications should not be persisted."),
    _q("fieldManager", "fieldManager is a name associated with the actor or entity that is "
                       "making these changes."),
    _q("fieldValidation", "fieldValidation instructs the server on how to handle objects in "
                          "the request (POST/PUT/PATCH) containing unknown or duplicate "
                          "fields. Valid values are: Ignore, Warn (the default), Strict."),
]
_LIST_PARAMS = [_q("labelSelector", "A selector to restrict the list of returned objects by "
                                    "their labels."),
                _q("fieldSelector", "A selector to restrict the list of returned objects by "
                                    "their fields."),
                _q("limit", "limit is a maximum number of responses to return for a list "
                            "call.", "integer"),
                _q("continue", "The continue option should be set when retrieving more "
                               "results from the server."),
                _q("resourceVersion", "resourceVersion sets a constraint on what resource "
                                      "versions a request may be served from."),
                _q("watch", "Watch for changes to the described resources.", "boolean")]


def _op(rt: ResourceType, version: str, action: str, verb: str, ref: str | None,
        params: list, code: str = "200") -> dict:
    scope = "Namespaced" if rt.namespaced else ""
    content = {"application/json": {"schema": {"$ref": ref}}} if ref else {}
    return {"tags": [f"{rt.group or 'core'}_{version}"],
            "description": f"{action} {rt.kind}",
            "operationId": f"{verb}{scope}{rt.kind}",
            "parameters": params,
            "responses": {code: {"description": "OK", **({"content": content}
                                                         if content else {})}},
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": _gvk(rt, version)}


def _paths(rt: ResourceType, version: str, item_ref: str | None, list_ref: str | None) -> dict:
    prefix = f"/apis/{rt.group}/{version}" if rt.group else f"/api/{version}"
    base = f"{prefix}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced \
        else f"{prefix}/{rt.plural}"
    scope = [_PARAMS["namespace"]] if rt.namespaced else []
    verbs = set(rt.verbs or ("create", "delete", "deletecollection", "get", "list", "patch",
                             "update", "watch"))
    paths: dict = {}
    coll: dict = {"parameters": scope}
    if "list" in verbs:
        coll["get"] = _op(rt, version, "list", "list", list_ref, _LIST_PARAMS)
    if "create" in verbs:
        coll["post"] = _op(rt, version, "post", "create", item_ref, _WRITE_PARAMS, "201")
    if "deletecollection" in verbs:
        coll["delete"] = _op(rt, version, "deletecollection", "deleteCollection", None,
                             _LIST_PARAMS)
    paths[base] = coll
    if "get" in verbs:
        patch = _op(rt, version, "patch", "patch", item_ref,
                    [*_WRITE_PARAMS, _q("force", "Force is going to \"force\" Apply requests.",
                                        "boolean")])
        patch["requestBody"] = {"content": {t: {"schema": {"type": "object"}} for t in (
            "application/apply-patch+yaml", "application/json-patch+json",
            "application/merge-patch+json", "application/strategic-merge-patch+json")},
            "required": True}
        paths[f"{base}/{{name}}"] = {
            "parameters": [_PARAMS["name"], *scope],
            "get": _op(rt, version, "get", "read", item_ref, []),
            "put": _op(rt, version, "put", "replace", item_ref, _WRITE_PARAMS),
            "patch": patch,
            "delete": _op(rt, version, "delete", "delete", None, [])}
        for sub in rt.subresources:
            if sub in ("status", "scale"):
                paths[f"{base}/{{name}}/{sub}"] = {
                    "parameters": [_PARAMS["name"], *scope],
                    "get": {**_op(rt, version, "get", f"read{sub.title()}", item_ref, [])}}
    if rt.namespaced and "list" in verbs:
        paths[f"{prefix}/{rt.plural}"] = {
            "get": _op(rt, version, "list", "listForAllNamespaces", list_ref, _LIST_PARAMS)}
    return paths


def gv_document(registry: Registry, group: str, version: str) -> dict | None:
    rts = [rt for (g, v, _), rt in sorted(registry._by_gvr.items()) if g == group
           and v == version]
    if not rts:
        return None
    defs = _builtin_defs()
    components: dict = {}
    paths: dict = {}
    wanted: list[str] = []
    for rt in rts:
        if rt.crd_name:
            comps = _crd_components(rt, version, defs)
            components.update(comps)
            item, lst = list(comps)
            wanted += [_OBJECT_META, _LIST_META]
        else:
            item = _builtin_name(defs, rt, version)
            lst = _builtin_name(defs, rt, version, rt.list_kind) if item else None
            wanted += [n for n in (item, lst) if n]
        paths.update(_paths(rt, version, item and f"#/components/schemas/{item}",
                            lst and f"#/components/schemas/{lst}"))
    components.update(_closure(defs, wanted))
    return {"openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": "v1.31.0-kubesim"},
            "paths": paths,
            "components": {"schemas": components}}


def _gv_key(registry: Registry, group: str, version: str) -> tuple:
    return (group, version, tuple(
        (rt.key, rt.kind, rt.namespaced, rt.verbs, rt.subresources,
         json.dumps(rt.schema, sort_keys=True) if rt.crd_name else None)
        for (g, v, _), rt in sorted(registry._by_gvr.items()) if g == group and v == version))


def gv_bytes(registry: Registry, group: str, version: str) -> tuple[str, bytes] | None:
    """(hash, JSON) of a group-version document, cached until its kinds change."""
    key = _gv_key(registry, group, version)
    hit = _cache.get(key)
    if hit is not None:
        return hit
    doc = gv_document(registry, group, version)
    if doc is None:
        return None
    body = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
    out = (hashlib.sha512(body).hexdigest().upper()[:128], body)
    if len(_cache) > 256:
        _cache.clear()
    _cache[key] = out
    return out


def root(registry: Registry) -> dict:
    """GET /openapi/v3: one entry per group-version (OpenAPIV3Discovery in
    k8s.io/kube-openapi/pkg/handler3)."""
    paths = {}
    for group, versions in sorted(registry.groups().items()):
        for version in versions:
            hit = gv_bytes(registry, group, version)
            if hit is None:
                continue
            key = f"apis/{group}/{version}" if group else f"api/{version}"
            paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={hit[0]}"}
    return {"paths": paths}


def v2_document(registry: Registry) -> dict:
    """A swagger 2.0 document with the same schemas (refs as #/definitions/)."""
    definitions: dict = {}
    for group, versions in sorted(registry.groups().items()):
        for version in versions:
            doc = gv_document(registry, group, version)
            if doc:
                definitions.update(doc["components"]["schemas"])
    text = json.dumps(definitions).replace("#/components/schemas/", "#/definitions/")
    return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.31.0-kubesim"},
            "paths": {}, "definitions": json.loads(text)}
