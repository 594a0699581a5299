"""Aggregated discovery, health check texts and content negotiation.

Sources (kubernetes/kubernetes, staging/src/k8s.io):
* apiserver/pkg/endpoints/discovery/aggregated/handler.go and api/apidiscovery/v2/types.go:
  `/api` and `/apis` answer an APIGroupDiscoveryList when the Accept header asks for
  `application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList` (v2beta1 too), with
  that media type as Content-Type; otherwise the legacy APIVersions/APIGroupList.
* apiserver/pkg/server/healthz/healthz.go: `/healthz`, `/livez`, `/readyz` answer `ok`;
  with `?verbose` one `[+]name ok` line per check and `<name> check passed`; `?exclude=x`
  marks a check `[+]x excluded: ok`; `/readyz/<check>` answers that check alone.
* apiserver/pkg/endpoints/handlers/negotiation/negotiate.go: an Accept header that names no
  media type the server can produce gets 406 NotAcceptable, "only the following media types
  are accepted: ...". kubesim encodes no protobuf, so a protobuf-only Accept gets 406, while
  `application/vnd.kubernetes.protobuf,application/json` (what client-go sends) gets JSON.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import ApiError
from .resources import ALL_VERBS, SUB_GVK, SUB_VERBS

if TYPE_CHECKING:
    from .resources import Registry

AGGREGATED = "apidiscovery.k8s.io"
ACCEPTED = ["application/json", "application/yaml", "application/json;stream=watch"]

LIVEZ_CHECKS = ["ping", "log", "etcd", "poststarthook/start-apiextensions-informers",
                "poststarthook/start-apiextensions-controllers",
                "poststarthook/crd-informer-synced", "poststarthook/bootstrap-controller"]
READYZ_CHECKS = ["ping", "log", "etcd", "etcd-readiness", "informer-sync",
                 "poststarthook/start-apiextensions-informers",
                 "poststarthook/start-apiextensions-controllers",
                 "poststarthook/crd-informer-synced", "poststarthook/bootstrap-controller",
                 "shutdown"]


def aggregated_version(accept: str) -> str | None:
    """'v2' or 'v2beta1' when the Accept header asks for aggregated discovery first."""
    for part in accept.split(","):
        params = dict(p.strip().split("=", 1) for p in part.split(";")[1:] if "=" in p)
        if params.get("g") == AGGREGATED and params.get("as") == "APIGroupDiscoveryList" \
                and params.get("v") in ("v2", "v2beta1"):
            return params["v"]
        if part.split(";")[0].strip() in ("application/json", "*/*"):
            return None
    return None


def aggregated(registry: Registry, legacy: bool, version: str) -> dict:
    groups: dict[str, dict[str, list]] = {}
    for (group, ver, _plural), rt in sorted(registry._by_gvr.items()):
        if (group == "") != legacy:
            continue
        entry: dict = {"resource": rt.plural,
                 "responseKind": {"group": group, "version": ver, "kind": rt.kind},
                 "scope": "Namespaced" if rt.namespaced else "Cluster",
                 "singularResource": rt.singular,
                 "verbs": list(rt.verbs or ALL_VERBS)}
        if rt.short_names:
            entry["shortNames"] = rt.short_names
        if rt.categories:
            entry["categories"] = rt.categories
        subs = []
        for sub in rt.subresources:
            sgroup, sversion, skind = SUB_GVK.get(sub, (group, ver, rt.kind))
            subs.append({"subresource": sub,
                         "responseKind": {"group": sgroup, "version": sversion or ver,
                                          "kind": skind},
                         "verbs": SUB_VERBS[sub]})
        if subs:
            entry["subresources"] = subs
        groups.setdefault(group, {}).setdefault(ver, []).append(entry)
    from .resources import _version_priority
    items = []
    for group in sorted(groups):
        versions = [{"version": v, "resources": groups[group][v], "freshness": "Current"}
                    for v in sorted(groups[group], key=_version_priority)]
        meta: dict = {"creationTimestamp": None}
        if group:
            meta["name"] = group
        items.append({"metadata": meta, "versions": versions})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": f"{AGGREGATED}/{version}",
            "metadata": {}, "items": items}


def aggregated_content_type(version: str) -> str:
    return f"application/json;g={AGGREGATED};v={version};as=APIGroupDiscoveryList"


def health_text(kind: str, query, check: str | None = None) -> str:
    """The body of /healthz, /livez, /readyz (and /<kind>/<check>)."""
    checks = READYZ_CHECKS if kind == "readyz" else LIVEZ_CHECKS if kind == "livez" \
        else ["ping", "log", "etcd", "poststarthook/start-apiextensions-informers",
              "poststarthook/crd-informer-synced"]
    if check is not None:
        if check not in checks:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return "ok"
    if "verbose" not in query:
        return "ok"
    excluded: set[str] = set()
    for value in query.getall("exclude", []):
        excluded.update(x for x in value.split(",") if x)
    lines = [f"[+]{c} excluded: ok" if c in excluded else f"[+]{c} ok" for c in checks]
    return "\n".join(lines) + f"\n{kind} check passed\n"


def not_acceptable(accept: str) -> bool:
    """True when the Accept header allows only media types kubesim cannot produce."""
    if not accept or accept == "application/json":   # the official client's, every request
        return False
    for part in accept.split(","):
        media = part.split(";")[0].strip().lower()
        if media in ("application/json", "application/yaml", "*/*", "application/*", ""):
            return False
    return True


def not_acceptable_error() -> ApiError:
    return ApiError(406, "NotAcceptable", "only the following media types are accepted: "
                    + ", ".join(ACCEPTED))
