"""The HTTP front: Kubernetes REST paths over aiohttp, on top of Store."""
from __future__ import annotations

import asyncio
import logging
import re
from typing import TYPE_CHECKING, NamedTuple

import multidict
import yaml
from aiohttp import web
from aiohttp.typedefs import LooseHeaders

from . import discovery, events_v1, openapi, subresources
from .deletion import RETURNS_OBJECT, delete_status
from .errors import ApiError, bad_request, invalid, too_large_resource_version
from .jsonutil import dumps, loads
from .patch import json_patch, merge_patch, strategic_merge
from .resources import ResourceType, yaml_load_all
from .tables import table, wants_table
from .validation import raise_if
from .watch import serve_watch

if TYPE_CHECKING:
    from .cluster import Cluster

log = logging.getLogger("kubesim.server")

VERSION = {"major": "1", "minor": "31", "gitVersion": "v1.31.0-kubesim", "gitCommit": "kubesim",
           "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.22",
           "compiler": "gc", "platform": "linux/amd64"}
_TRUE = ("1", "true", "True", "yes")


def _pb_string(field: int, value: bytes) -> bytes:
    assert len(value) < 128
    return bytes([field << 3 | 2, len(value)]) + value


# openapi_v2.Document{swagger: "2.0", info: {title: "kubesim", version: ...}} (gnostic)
_INFO = _pb_string(1, b"kubesim") + _pb_string(2, VERSION["gitVersion"].encode())
OPENAPI_V2_PB = _pb_string(1, b"2.0") + _pb_string(2, _INFO)
PATCH_TYPES = {"application/json-patch+json": "json", "application/merge-patch+json": "merge",
               "application/strategic-merge-patch+json": "strategic",
               "application/apply-patch+yaml": "apply", "application/apply-patch+json": "apply"}


def yaml_load(raw: bytes):
    docs = yaml_load_all(raw)
    if len(docs) != 1:
        raise bad_request("expected exactly one YAML document")
    return docs[0]


class Target(NamedTuple):
    rt: ResourceType
    ns: str | None
    name: str | None
    sub: str | None
    watch: bool


def _not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource")


def jresponse(obj, status: int = 200, headers: LooseHeaders | None = None) -> web.Response:
    return web.Response(body=dumps(obj), status=status, content_type="application/json",
                        headers=headers)


def error_response(e: ApiError, headers: dict | None = None) -> web.Response:
    return jresponse(e.status(), e.code, headers)


def _qp_bool(q, name: str) -> bool:
    return q.get(name, "false") in _TRUE


def _dry_run(q) -> bool:
    return "All" in q.getall("dryRun", [])


def _user_agent_manager(request: web.Request) -> str:
    ua = request.headers.get("User-Agent", "unknown")
    return ua.split("/", 1)[0] or "unknown"


class Server:
    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.store = cluster.store
        self.log_follow_poll = 0.1  # seconds of real time between reads of a followed log
        self.app = web.Application(middlewares=[self._middleware], client_max_size=64 * 2**20)
        r = self.app.router
        r.add_get("/version", self.version)
        r.add_get("/version/", self.version)
        for p in ("/healthz", "/readyz", "/livez"):
            r.add_get(p, self.healthz)
            r.add_get(p + "/{check:.+}", self.healthz)
        r.add_get("/metrics", self.metrics)
        r.add_get("/openapi/v2", self.openapi_v2)
        r.add_get("/openapi/v3", self.openapi_v3)
        r.add_get("/openapi/v3/{path:.+}", self.openapi_v3)
        r.add_route("*", "/kubesim/faults", self.faults)
        r.add_post("/kubesim/watches/drop", self.drop_watches)
        r.add_get("/kubesim/clock", self.clock)
        r.add_post("/kubesim/advance", self.advance)
        r.add_get("/api", self.api_versions)
        vis = "/apis/visibility.kueue.x-k8s.io/v1beta2"
        r.add_get(vis + "/clusterqueues/{cq}/pendingworkloads", self.pending_workloads)
        r.add_get(vis + "/namespaces/{ns}/localqueues/{lq}/pendingworkloads",
                  self.pending_workloads)
        r.add_get("/apis", self.api_groups)
        r.add_route("*", "/api/{path:.*}", self.dispatch)
        r.add_route("*", "/apis/{path:.*}", self.dispatch)

    # ---- middleware: faults, errors ----------------------------------------------------------
    @web.middleware
    async def _middleware(self, request: web.Request, handler):
        if request.path not in ("/kubesim/faults", "/kubesim/watches/drop"):
            rule = self.cluster.faults.match(request.method, request.path_qs)
            if rule is not None:
                if rule.delay:
                    await asyncio.sleep(rule.delay)
                if rule.timeout:
                    await asyncio.sleep(3600)
                if rule.status is not None:
                    headers = {"Retry-After": str(rule.retry_after)} if rule.status == 429 \
                        else None
                    reason = {429: "TooManyRequests", 500: "InternalError",
                              503: "ServiceUnavailable", 504: "Timeout", 409: "Conflict",
                              404: "NotFound", 403: "Forbidden"}.get(rule.status, "Unknown")
                    msg = rule.message or f"injected fault ({rule.status})"
                    return error_response(ApiError(rule.status, reason, msg,
                                                   {"retryAfterSeconds": rule.retry_after}
                                                   if rule.status == 429 else None), headers)
        try:
            if request.path.startswith("/api") and discovery.not_acceptable(
                    request.headers.get("Accept", "")):
                raise discovery.not_acceptable_error()
            return await handler(request)
        except ApiError as e:
            self.store.warnings.clear()
            retry = (e.details or {}).get("retryAfterSeconds") if e.code == 429 else None
            return error_response(e, {"Retry-After": str(retry)} if retry else None)
        except web.HTTPException:
            raise
        except Exception as e:
            log.exception("internal error on %s %s", request.method, request.path_qs)
            return error_response(ApiError(500, "InternalError", f"Internal error: {e}"))

    # ---- simple endpoints --------------------------------------------------------------------
    async def version(self, request):
        return jresponse(VERSION)

    async def healthz(self, request: web.Request):
        kind = request.path.strip("/").split("/", 1)[0]
        return web.Response(text=discovery.health_text(
            kind, request.query, request.match_info.get("check")))

    async def metrics(self, request):
        sim = self.cluster.sim
        if sim is None:
            raise ApiError(404, "NotFound", "no simulation running, so no metrics")
        return web.Response(body=sim.metrics_text().encode(), headers={
            "Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    async def faults(self, request: web.Request):
        f = self.cluster.faults
        if request.method == "GET":
            return jresponse({"rules": [r.to_dict() for r in f.rules()],
                              "requests": f.requests, "faulted": f.faulted})
        if request.method == "DELETE":
            rid = request.query.get("id")
            if rid:
                f.remove(int(rid))
            else:
                f.clear()
            return jresponse({"rules": [r.to_dict() for r in f.rules()]})
        if request.method == "POST":
            try:
                body = await request.json()
                rule = f.add(**{k: body[k] for k in ("method", "path_regex", "status", "delay",
                                                     "times", "timeout", "message",
                                                     "retry_after") if k in body})
            except (ValueError, TypeError, re.error) as e:
                raise bad_request(f"bad fault rule: {e}") from None
            return jresponse(rule.to_dict(), 201)
        raise ApiError(405, "MethodNotAllowed", "use GET, POST or DELETE")

    async def drop_watches(self, request: web.Request):
        """POST: every open watch connection drops now (a lost connection, no clean end)."""
        open_now = self.cluster.faults.drop_watches()
        return jresponse({"dropped": open_now})

    async def clock(self, request):
        clock = self.store.clock
        return jresponse({"now": clock.timestamp(), "speed": clock.speed,
                          "deterministic": clock.deterministic})

    async def advance(self, request: web.Request):
        """POST {"seconds": N, "step": S}: Cluster.advance for out-of-process users."""
        try:
            body = loads(await request.read() or b"{}")
            seconds, step = float(body.get("seconds", 0)), float(body.get("step", 1.0))
            self.cluster.advance(seconds, step)
        except (ValueError, TypeError, AttributeError) as e:
            raise bad_request(f"bad advance request: {e}") from None
        return await self.clock(request)

    async def openapi_v2(self, request):
        """An empty OpenAPI v2 document: kubectl downloads one before client-side validation
        and skips kinds it does not describe, so `kubectl apply` works without
        --validate=false. kubectl asks for gnostic protobuf; JSON for everyone else."""
        accept = request.headers.get("Accept", "")
        if "protobuf" in accept and "json" not in accept:
            return web.Response(body=OPENAPI_V2_PB, content_type="application/octet-stream")
        return jresponse(openapi.v2_document(self.store.registry))

    async def openapi_v3(self, request: web.Request):
        """The OpenAPI v3 root and per group-version documents (openapi.py)."""
        path = request.match_info.get("path")
        if path is None:
            return jresponse(openapi.root(self.store.registry))
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) == 2:
            group, version = "", parts[1]
        elif parts[0] == "apis" and len(parts) == 3:
            group, version = parts[1], parts[2]
        else:
            raise _not_found()
        hit = openapi.gv_bytes(self.store.registry, group, version)
        if hit is None:
            raise _not_found()
        etag, body = hit
        headers = {"Etag": f'"{etag}"'}
        if request.query.get("hash") == etag:   # immutable: clients cache it by hash
            headers["Cache-Control"] = "public, immutable"
        return web.Response(body=body, content_type="application/json", headers=headers)

    async def api_versions(self, request):
        agg = discovery.aggregated_version(request.headers.get("Accept", ""))
        if agg:
            return web.Response(body=dumps(discovery.aggregated(self.store.registry, True, agg)),
                                headers={"Content-Type": discovery.aggregated_content_type(agg)})
        return jresponse({"kind": "APIVersions", "versions": ["v1"],
                          "serverAddressByClientCIDRs": [
                              {"clientCIDR": "0.0.0.0/0", "serverAddress": request.host}]})

    async def pending_workloads(self, request):
        """Kueue's visibility API, answered by the simulation's Kueue controller."""
        sim = self.cluster.sim
        if sim is None:
            raise ApiError(503, "ServiceUnavailable",
                           "the server is currently unable to handle the request")
        q = request.query
        try:
            limit = int(q.get("limit", "1000"))
            offset = int(q.get("offset", "0"))
        except ValueError:
            raise bad_request("limit and offset must be integers") from None
        if limit < 0 or offset < 0:
            raise bad_request("limit and offset must not be negative")
        limit = limit or 1000  # apis/visibility/v1beta2/defaults.go
        m = request.match_info
        try:
            doc = sim.kueue.pending_workloads(cq=m.get("cq"), namespace=m.get("ns"),
                                              lq=m.get("lq"), limit=limit, offset=offset)
        except LookupError as e:
            raise ApiError(404, "NotFound", str(e).strip("'\"")) from None
        return jresponse(doc)

    async def api_groups(self, request):
        agg = discovery.aggregated_version(request.headers.get("Accept", ""))
        if agg:
            return web.Response(body=dumps(discovery.aggregated(self.store.registry, False,
                                                                agg)),
                                headers={"Content-Type": discovery.aggregated_content_type(agg)})
        return jresponse(self.store.registry.api_group_list())
    # ---- resource paths ----------------------------------------------------------------------
    async def dispatch(self, request: web.Request):
        target = self._route(request)
        if isinstance(target, web.Response):
            return target
        if target.rt.view_of:
            return await self._view(request, target)
        if target.rt.verbs == ("create",):
            return await subresources.review(self, request, target)
        if target.sub == "scale":
            return await subresources.scale(self, request, target)
        handler = {"GET": self._get, "POST": self._post, "PUT": self._put,
                   "PATCH": self._patch, "DELETE": self._delete}.get(request.method)
        if handler is None:
            raise ApiError(405, "MethodNotAllowed", f"{request.method} is not supported")
        return await handler(request, target)

    async def _view(self, request: web.Request, t: Target):
        """events.k8s.io/v1 Events: the core Events, converted both ways."""
        assert t.rt.view_of is not None  # dispatch routes only views here
        core = self.store.registry.get(t.rt.view_of)
        q, m, conv = request.query, request.method, events_v1.to_v1
        fsel = events_v1.field_selector(q.get("fieldSelector"))
        manager = q.get("fieldManager") or _user_agent_manager(request)
        if m == "GET" and t.watch:
            if t.name is not None:
                fsel = ",".join(x for x in (fsel, f"metadata.name={t.name}") if x)
            return await serve_watch(self, request, core, t.ns, q.get("labelSelector"), fsel,
                                     convert=conv, shown_as=t.rt)
        if m == "GET" and t.name is None:
            items, rv, token, _remaining = self.store.list_page(
                core, t.ns, q.get("labelSelector"), fsel, int(q.get("limit") or 0) or None,
                q.get("continue"))
            meta = {"resourceVersion": rv, **({"continue": token} if token else {})}
            return jresponse({"kind": "EventList", "apiVersion": t.rt.api_version,
                              "metadata": meta, "items": [conv(o) for o in items]})
        if m == "GET" and t.name is not None:
            return jresponse(conv(self.store.get(core.key, t.name, namespace=t.ns)))
        if m == "POST" and t.name is None:
            body = await self._body(request)
            if not isinstance(body, dict):
                raise bad_request("the body of the request was in an unknown format")
            new_core = events_v1.to_core(body)
            new_core["metadata"].setdefault("namespace", t.ns)
            raise_if(events_v1.validation_errors(new_core), "Event",
                     "events.k8s.io", new_core["metadata"].get("name")
                     or new_core["metadata"].get("generateName") or "")
            obj = self.store.create(core.key, new_core,
                                    namespace=t.ns, dry_run=_dry_run(q), field_manager=manager)
            return jresponse(conv(obj), 201)
        if m in ("PUT", "PATCH") and t.name is not None:
            if m == "PUT":
                new = await self._body(request)
            else:
                current = conv(self.store.get(core.key, t.name, namespace=t.ns))
                new = self._patched_view(request, current, await request.read())
            if not isinstance(new, dict):
                raise bad_request("the body of the request was in an unknown format")
            new.setdefault("metadata", {})["name"] = t.name
            obj = self.store.replace(core.key, events_v1.to_core(new), namespace=t.ns,
                                     dry_run=_dry_run(q), field_manager=manager)
            return jresponse(conv(obj))
        if m == "DELETE":
            names = [t.name] if t.name else [o["metadata"]["name"] for o in self.store.select(
                core, t.ns, q.get("labelSelector"), fsel)]
            out = [self.store.delete(core.key, n, namespace=t.ns, dry_run=_dry_run(q))
                   for n in names]
            if t.name:
                return jresponse(delete_status(t.rt, out[0]))
            return jresponse({"kind": "EventList", "apiVersion": t.rt.api_version,
                              "metadata": {}, "items": [conv(o) for o in out]})
        raise ApiError(405, "MethodNotAllowed", f"{m} is not supported on {request.path}")

    @staticmethod
    def _patched_view(request: web.Request, current: dict, raw: bytes) -> dict:
        ptype = PATCH_TYPES.get(request.content_type)
        try:
            body = yaml_load(raw) if ptype == "apply" else loads(raw)
        except (ValueError, yaml.YAMLError) as e:
            raise bad_request(f"error decoding patch: {e}") from None
        if ptype == "json":
            return json_patch(current, body)
        if ptype in ("merge", "apply") and isinstance(body, dict):
            return merge_patch(current, body)
        if ptype == "strategic" and isinstance(body, dict):
            return strategic_merge(current, body)
        raise ApiError(415, "UnsupportedMediaType", "unsupported patch for events.k8s.io")

    def _route(self, request: web.Request) -> Target | web.Response:
        """Parse /api/v1/... and /apis/GROUP/VERSION/...; discovery documents come back as
        responses, resource paths as a Target."""
        parts = [p for p in request.match_info["path"].split("/") if p]
        if request.path.startswith("/api/"):
            if not parts:
                raise _not_found()
            group, version, rest = "", parts[0], parts[1:]
        else:
            if len(parts) == 1:
                doc = self.store.registry.api_group(parts[0])
                if doc is None:
                    raise _not_found()
                return jresponse(doc)
            if not parts:
                return jresponse(self.store.registry.api_group_list())
            group, version, rest = parts[0], parts[1], parts[2:]
        if not rest:
            doc = self.store.registry.resource_list(group, version)
            if doc is None:
                raise _not_found()
            return jresponse(doc)
        watch_path = rest[0] == "watch"
        if watch_path:
            rest = rest[1:]
        ns = None
        if rest and rest[0] == "namespaces" and len(rest) >= 3 and not (
                len(rest) == 3 and rest[2] in ("status", "finalize")):
            ns, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise _not_found()
        rt = self.store.registry.lookup(group, version, rest[0])
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if rt is None or (sub and sub not in rt.subresources) or \
                (rt.namespaced and ns is None and name is not None) or \
                (not rt.namespaced and ns is not None):
            raise _not_found()
        watch = watch_path or (request.method == "GET" and name is None
                               and _qp_bool(request.query, "watch"))
        return Target(rt, ns, name, sub, watch)

    async def _get(self, request: web.Request, t: Target):
        q = request.query
        if t.watch or t.name is None:
            _validate_list_options(q, t.watch)
        if t.watch:
            field_sel = q.get("fieldSelector")
            if t.name is not None:
                field_sel = ",".join(x for x in (field_sel, f"metadata.name={t.name}") if x)
            return await serve_watch(self, request, t.rt, t.ns, q.get("labelSelector"),
                                     field_sel)
        as_table = wants_table(request.headers.get("Accept", ""))
        if t.name is None:
            return self._list(t.rt, t.ns, q, as_table)
        if t.sub == "log":
            return await self._log(request, t.rt, t.ns, t.name, q)
        obj = self.store.raw(t.rt, t.name, t.ns) or self.store.get(t.rt.key, t.name,
                                                                   namespace=t.ns)
        if as_table and t.sub is None:
            return jresponse(table(t.rt, [obj], self.store.clock.now(),
                                   obj["metadata"]["resourceVersion"], q.get("includeObject")))
        return jresponse(obj)

    async def _post(self, request: web.Request, t: Target):
        q = request.query
        body = await self._body(request)
        if t.name is None:
            _validate_write_options(q, "CreateOptions")
            obj = self.store.create(t.rt.key, body, namespace=t.ns, dry_run=_dry_run(q),
                                    field_manager=q.get("fieldManager")
                                    or _user_agent_manager(request),
                                    field_validation=q.get("fieldValidation") or "Warn",
                                    copy=False)
            return jresponse(obj, 201, self._warnings())
        if not isinstance(body, dict):
            raise bad_request("the body of the request was in an unknown format")
        if t.sub == "binding":
            return subresources.binding(self, t.rt, t.ns or "", t.name, body)
        if t.sub == "eviction":
            return await subresources.evict(self, request, t, body)
        if t.sub == "token":
            return subresources.token(self, t, body, _dry_run(q))
        raise ApiError(405, "MethodNotAllowed", f"POST is not supported on {request.path}")

    async def _put(self, request: web.Request, t: Target):
        q = request.query
        if t.name is None:
            raise ApiError(405, "MethodNotAllowed", "PUT needs a name")
        _validate_write_options(q, "UpdateOptions")
        body = await self._body(request)
        if not isinstance(body, dict):
            raise bad_request("the body of the request was in an unknown format")
        meta = body.get("metadata")
        if not isinstance(meta, dict):
            meta = {}
        if meta.get("name") and meta["name"] != t.name:
            raise bad_request(f"the name of the object ({meta['name']}) does not match the "
                              f"name on the URL ({t.name})")
        body.setdefault("metadata", {})["name"] = t.name
        obj = self.store.replace(t.rt.key, body, namespace=t.ns,
                                 subresource=t.sub,
                                 dry_run=_dry_run(q), field_manager=q.get("fieldManager")
                                 or _user_agent_manager(request),
                                 field_validation=q.get("fieldValidation") or "Warn",
                                 copy=False)  # serialised at once, never changed
        return jresponse(obj, 200, self._warnings())

    async def _patch(self, request: web.Request, t: Target):
        q = request.query
        if t.name is None:
            raise ApiError(405, "MethodNotAllowed", "PATCH needs a name")
        ptype = PATCH_TYPES.get(request.content_type)
        if ptype is None:
            raise ApiError(415, "UnsupportedMediaType",
                           f"the body of the request was in an unknown format - accepted "
                           f"media types include: {', '.join(PATCH_TYPES)}")
        _validate_write_options(q, "PatchOptions", ptype)
        raw = await request.read()
        try:
            body = yaml_load(raw) if ptype == "apply" else loads(raw)
        except (ValueError, yaml.YAMLError) as e:
            raise bad_request(f"error decoding patch: {e}") from None
        manager = q.get("fieldManager")
        created = False
        if ptype != "apply":
            manager = manager or _user_agent_manager(request)
        elif t.sub is None:
            created = self.store.raw(t.rt, t.name, t.ns) is None
        obj = self.store.patch(t.rt.key, t.name, body, patch_type=ptype, namespace=t.ns,
                               subresource=t.sub, field_manager=manager,
                               force=_qp_bool(q, "force"), dry_run=_dry_run(q),
                               field_validation=q.get("fieldValidation") or "Warn", copy=False)
        # an apply that creates answers 201 (endpoints/handlers/patch.go: wasCreated)
        return jresponse(obj, 201 if created else 200, self._warnings())

    async def _delete(self, request: web.Request, t: Target):
        q = request.query
        opts = {}
        if request.can_read_body:
            raw = await request.read()
            if raw.strip():
                try:
                    opts = loads(raw)
                except ValueError:
                    raise bad_request("could not decode DeleteOptions") from None
        if not isinstance(opts, dict):
            raise bad_request("DeleteOptions must be an object")
        grace = opts.get("gracePeriodSeconds", q.get("gracePeriodSeconds"))
        try:
            grace = int(grace) if grace is not None else None
        except ValueError:
            raise bad_request(f"invalid gracePeriodSeconds {grace!r}") from None
        dry = _dry_run(q) or "All" in (opts.get("dryRun") or [])
        if t.name is None:
            return self._delete_collection(t.rt, t.ns, q, grace, dry, policy=opts.get(
                "propagationPolicy") or q.get("propagationPolicy"))
        orphan = opts.get("orphanDependents", q.get("orphanDependents"))
        if isinstance(orphan, str):
            orphan = orphan.lower() == "true"
        obj, deleted = self.store.delete_ex(
            t.rt.key, t.name, namespace=t.ns, grace_period_seconds=grace,
            propagation_policy=opts.get("propagationPolicy") or q.get("propagationPolicy"),
            dry_run=dry, preconditions=opts.get("preconditions"), orphan_dependents=orphan)
        # endpoints/handlers/delete.go: 202 only when kept and orphanDependents=false;
        # registry/store.go finalizeDelete: a Status unless the registry returns the object
        code = 202 if not deleted and orphan is False else 200
        if deleted and t.rt.key not in RETURNS_OBJECT:
            return jresponse(delete_status(t.rt, obj), code)
        return jresponse(obj, code)

    def _warnings(self) -> multidict.CIMultiDict[str] | None:
        """Warning headers for what the last write dropped (fieldValidation=Warn)."""
        warnings, self.store.warnings[:] = list(self.store.warnings), []
        if not warnings:
            return None
        return multidict.CIMultiDict(("Warning", '299 - "' + w.replace('"', '\\"') + '"')
                                     for w in warnings)

    async def _body(self, request: web.Request):
        ctype = request.content_type
        if "protobuf" in ctype:
            raise ApiError(415, "UnsupportedMediaType",
                           "the body of the request was in an unknown format - accepted media "
                           "types include: application/json, application/yaml")
        raw = await request.read()
        try:
            if ctype in ("application/yaml", "application/x-yaml"):
                return yaml_load(raw)
            return loads(raw)
        except (ValueError, yaml.YAMLError) as e:
            raise bad_request(f"the body of the request could not be decoded: {e}") from None

    def _list(self, rt, ns, q, as_table: bool = False) -> web.Response:
        limit = q.get("limit")
        try:
            limit = int(limit) if limit else None
        except ValueError:
            raise bad_request(f"invalid limit {limit!r}") from None
        items, rv, token, remaining = self.store.list_page(
            rt, ns, q.get("labelSelector"), q.get("fieldSelector"), limit, q.get("continue"),
            self._list_at(rt, q, limit))
        if as_table:
            return jresponse(table(rt, items, self.store.clock.now(), rv,
                                   q.get("includeObject"), token))
        meta = {"resourceVersion": rv}
        if token:
            meta["continue"] = token
            meta["remainingItemCount"] = remaining
        body = {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": meta,
                "items": items}
        return jresponse(body)

    def _list_at(self, rt, q, limit: int | None) -> int | None:
        """The resourceVersion a list is served at (None: the latest), per the table in
        docs api-concepts/#semantics-for-get-and-list: "0" and NotOlderThan take the latest
        (kubesim's cache never lags), Exact (and, for compatibility, a non-zero version with
        a limit and no match) the snapshot at that version; a version not reached yet is
        504 Too large resource version (storage.NewTooLargeResourceVersionError)."""
        raw = q.get("resourceVersion") or ""
        match = q.get("resourceVersionMatch") or ""
        if q.get("continue"):
            if raw not in ("", "0"):
                # apiserver/pkg/storage/etcd3/store.go GetList
                raise bad_request("specifying resource version is not allowed when using "
                                  "continue")
            return None
        if raw in ("", "0"):
            return None
        try:
            rv = int(raw)
        except ValueError:
            raise bad_request(f"invalid resource version: {raw!r}") from None
        current = self.store.resource_version
        if rv > current:
            raise too_large_resource_version(rv, current)
        if match == "Exact" or (not match and limit):
            return rv
        return None

    def _delete_collection(self, rt, ns, q, grace, dry, policy=None) -> web.Response:
        items = list(self.store.select(rt, ns, q.get("labelSelector"), q.get("fieldSelector")))
        out = []
        for obj in items:
            m = obj["metadata"]
            out.append(self.store.delete(rt.key, m["name"], namespace=m.get("namespace"),
                                         grace_period_seconds=grace, dry_run=dry,
                                         propagation_policy=policy))
        return jresponse({"kind": rt.list_kind, "apiVersion": rt.api_version,
                          "metadata": {"resourceVersion": str(self.store.resource_version)},
                          "items": out})

    async def _log(self, request: web.Request, rt, ns, name, q) -> web.StreamResponse:
        """pods/log as the API server and kubelet serve it: ``container`` (required when
        the pod has several), ``previous``, ``sinceSeconds``/``sinceTime``, ``tailLines``,
        ``timestamps``, ``limitBytes`` and ``follow`` (the stream stays open and carries
        new lines as simulated time passes, until the container ends or the pod goes)."""
        pod = self.store.get(rt.key, name, namespace=ns)
        opts = _log_options(name, q)
        if opts["since_seconds"]:
            opts["since"] = self.store.clock.now().timestamp() - opts["since_seconds"]
        spec = pod.get("spec") or {}
        names = [c.get("name") for c in (spec.get("containers") or [])
                 + (spec.get("initContainers") or [])]
        container = q.get("container") or ""
        if container and container not in names:
            raise bad_request(f"container {container} is not valid for pod {name}")
        if not container:
            main = [c.get("name") for c in spec.get("containers") or []]
            if len(main) > 1:
                raise bad_request(f"a container name must be specified for pod {name}, "
                                  f"choose one of: [{' '.join(main)}]")
            container = main[0] if main else "main"
        sim = self.cluster.sim
        if sim is None or not hasattr(sim, "container_log"):
            text = ((pod["metadata"].get("annotations") or {}).get(
                "kubesim.trainyard.io/log") or "")
            now = self.store.clock.now().timestamp()
            lines = [(now, line) for line in text.splitlines()]
            return web.Response(body=_log_body(lines, opts)[0], content_type="text/plain")
        if not spec.get("nodeName"):
            raise bad_request(f"pod {name} does not have a host assigned")
        uid = pod["metadata"].get("uid")

        def read():
            from kubesim.sim.logs import LogUnavailable
            try:
                return sim.container_log(ns, name, container, previous=opts["previous"])
            except LogUnavailable as exc:
                raise bad_request(str(exc)) from None

        log_ = read()
        body, left = _log_body(log_.lines, opts)
        if not opts["follow"] or not log_.running or left == 0:
            return web.Response(body=body, content_type="text/plain")
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        if body:
            await resp.write(body)
        last = log_.lines[-1][0] if log_.lines else float("-inf")
        while True:
            await asyncio.sleep(self.log_follow_poll)
            current = sim.state.pods.get((ns, name))
            if current is None or current.uid != uid:
                break
            try:
                log_ = read()
            except ApiError:
                break
            new = [ln for ln in log_.lines if ln[0] > last]  # lines come in time order
            if new:
                chunk, left = _log_body(new, {**opts, "tail": None, "since": None,
                                              "limit": left})
                if chunk:
                    await resp.write(chunk)
                last = new[-1][0]
            if left == 0 or not log_.running:
                break
        await resp.write_eof()
        return resp


def _validate_write_options(q, kind: str, patch_type: str | None = None) -> None:
    """ValidateCreateOptions / ValidateUpdateOptions / ValidatePatchOptions and
    ValidateFieldValidation (apimachinery/pkg/apis/meta/v1/validation/validation.go), as the
    create, update and patch handlers answer them: 422 Invalid on <Kind>.meta.k8s.io."""
    if not ("force" in q or "fieldValidation" in q or "dryRun" in q):
        return      # the common path: nothing to check
    errs = []
    if kind == "PatchOptions" and patch_type != "apply" and "force" in q:
        errs.append({"field": "force", "reason": "FieldValueForbidden",
                     "message": "Forbidden: may not be specified for non-apply patch"})
    dry = q.getall("dryRun", [])
    if any(v != "All" for v in dry):
        shown = ", ".join(f'"{v}"' for v in dry)
        errs.append({"field": "dryRun", "reason": "FieldValueNotSupported",
                     "message": f'Unsupported value: []string{{{shown}}}: supported values: '
                                f'"All"'})
    fv = q.get("fieldValidation")
    if fv is not None and fv not in ("", "Ignore", "Strict", "Warn"):
        errs.append({"field": "fieldValidation", "reason": "FieldValueNotSupported",
                     "message": f'Unsupported value: "{fv}": supported values: "", "Ignore", '
                                '"Strict", "Warn"'})
    if errs:
        raise invalid(kind, "meta.k8s.io", "", errs)


def _validate_list_options(q, watch: bool) -> None:
    """ValidateListOptions (apimachinery/pkg/apis/meta/internalversion/validation/
    validation.go), answered as handlers/get.go ListResource does: 422 Invalid on
    ListOptions.meta.k8s.io. The WatchList feature (sendInitialEvents) counts as enabled,
    as in Kubernetes 1.32+."""
    if not (q.get("resourceVersionMatch") or "sendInitialEvents" in q):
        return      # the common path: nothing to check
    match = q.get("resourceVersionMatch") or ""
    cont = q.get("continue") or ""
    errs: list[tuple[str, str, str]] = []

    def forbidden(fld: str, why: str) -> None:
        errs.append((fld, "FieldValueForbidden", f"Forbidden: {why}"))

    def unsupported(values: list[str]) -> None:
        supported = ", ".join(f'"{v}"' for v in values)
        errs.append(("resourceVersionMatch", "FieldValueNotSupported",
                     f'Unsupported value: "{match}": supported values: {supported}'))
    if watch:
        if "sendInitialEvents" in q and match != "NotOlderThan":
            forbidden("resourceVersionMatch",
                      "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")
        if match:
            if "sendInitialEvents" not in q:
                forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden for watch "
                          "unless sendInitialEvents is provided")
            if match != "NotOlderThan":
                unsupported(["NotOlderThan"])
            if cont:
                forbidden("resourceVersionMatch",
                          "resourceVersionMatch is forbidden when continue is provided")
    else:
        if match:
            if not q.get("resourceVersion"):
                forbidden("resourceVersionMatch",
                          "resourceVersionMatch is forbidden unless resourceVersion is provided")
            if cont:
                forbidden("resourceVersionMatch",
                          "resourceVersionMatch is forbidden when continue is provided")
            if match not in ("Exact", "NotOlderThan"):
                unsupported(["Exact", "NotOlderThan", ""])
            if match == "Exact" and q.get("resourceVersion") == "0":
                forbidden("resourceVersionMatch",
                          'resourceVersionMatch "exact" is forbidden for resourceVersion "0"')
        if "sendInitialEvents" in q:
            forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list")
    if errs:
        raise invalid("ListOptions", "meta.k8s.io", "", [
            {"field": f, "reason": r, "message": m} for f, r, m in errs])


_LOG_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%f"


def _log_options(name: str, q) -> dict:
    """PodLogOptions from the query, validated as the API server does (422 Invalid)."""
    from .errors import invalid

    def integer(key: str):
        raw = q.get(key)
        if raw is None or raw == "":
            return None
        try:
            return int(raw)
        except ValueError:
            raise bad_request(f"invalid {key} {raw!r}") from None

    tail, limit, since_s = integer("tailLines"), integer("limitBytes"), integer("sinceSeconds")
    since_t = q.get("sinceTime") or None
    causes = []
    if tail is not None and tail < 0:
        causes.append({"field": "tailLines",
                       "message": f"Invalid value: {tail}: must be greater than or equal to 0"})
    if limit is not None and limit < 1:
        causes.append({"field": "limitBytes",
                       "message": f"Invalid value: {limit}: must be greater than 0"})
    if since_s is not None and since_s < 1:
        causes.append({"field": "sinceSeconds",
                       "message": f"Invalid value: {since_s}: must be greater than 0"})
    if since_s is not None and since_t:
        causes.append({"field": "",
                       "message": "at most one of `sinceTime` or `sinceSeconds` may be specified"})
    if causes:
        raise invalid("PodLogOptions", "", name, causes)
    since = None
    if since_t:
        from .sim.util import parse_time
        try:
            since = parse_time(since_t)
        except ValueError:
            raise bad_request(f"invalid sinceTime {since_t!r}") from None
    return {"tail": tail, "limit": limit, "since": since, "since_seconds": since_s,
            "timestamps": _qp_bool(q, "timestamps"), "previous": _qp_bool(q, "previous"),
            "follow": _qp_bool(q, "follow")}


def _log_body(lines: list, opts: dict) -> tuple[bytes, int | None]:
    """The bytes of timed lines under the options, and the bytes ``limitBytes`` still allows
    (None: no limit). Order as the kubelet's: since, then tail, then the byte limit."""
    import datetime as _dt

    since = opts.get("since")
    if since is not None:
        lines = [ln for ln in lines if ln[0] >= since]
    tail = opts.get("tail")
    if tail is not None:
        lines = lines[-tail:] if tail else []
    out = []
    for t, text in lines:
        if opts.get("timestamps"):
            stamp = _dt.datetime.fromtimestamp(t, _dt.UTC).strftime(_LOG_TIME_FORMAT)
            out.append(f"{stamp}000Z {text}\n")
        else:
            out.append(text + "\n")
    body = "".join(out).encode()
    limit = opts.get("limit")
    if limit is None:
        return body, None
    body = body[:limit]
    return body, limit - len(body)

