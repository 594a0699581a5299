"""The in-memory object store: the API server's registry, storage and admission chain.

Synchronous; every call happens on the server's event-loop thread (use Cluster.call from
other threads). Stored objects are never mutated in place: each write stores a new dict,
so readers on the loop may hold references; callers outside get deep copies.

Write semantics worth knowing (as the real API server):
- create ignores `status` for kinds with a status subresource (Pod starts Pending,
  custom resources start without status; Node keeps the status it is created with).
  Write status with replace/patch(..., subresource="status").
- main-resource writes of such kinds keep the stored status.
- Pod spec is immutable after create, except images, activeDeadlineSeconds, tolerations,
  terminationGracePeriodSeconds, and spec.nodeName, which may be set once (as /binding does).
"""
from __future__ import annotations

import bisect
import builtins
import logging
import random
from collections import deque
from collections.abc import Callable
from datetime import timedelta

from . import admission as adm
from . import kinds
from .apply import record_update, server_side_apply
from .clock import Clock, rfc3339
from .controllers import CRD_KEY, ControllersMixin
from .crd_rules import run_webhooks
from .errors import (
    ApiError,
    already_exists,
    bad_request,
    conflict,
    forbidden,
    invalid,
    not_found,
)
from .jsonutil import jcopy
from .normalize import chain_path
from .patch import json_patch, merge_patch, strategic_merge
from .reads import HistoryEntry, ReadsMixin, StoreData
from .resources import Registry, ResourceType, default_crds
from .structural import prune_and_default
from .validation import raise_if

log = logging.getLogger("kubesim.store")

PC_KEY = "priorityclasses.scheduling.k8s.io"
SC_KEY = "storageclasses.storage.k8s.io"
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_DEFAULT_CRDS: list[dict] | None = None
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def _default_crds() -> list[dict]:
    global _DEFAULT_CRDS
    if _DEFAULT_CRDS is None:
        _DEFAULT_CRDS = default_crds()
    return _DEFAULT_CRDS


def _content(obj: dict) -> dict:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


_UUID4_MASK = ~((0xF000 << 64) | (0xC000 << 48)) & ((1 << 128) - 1)
_UUID4_BITS = (0x4000 << 64) | (0x8000 << 48)


class _Owned:
    """Marks a body the caller hands over (no defensive copy)."""
    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj


class Store(ReadsMixin, ControllersMixin):
    def __init__(self, clock: Clock | None = None, *, history: int = 20000,
                 default_crds: bool = True, seed: int | None = None):
        self.clock = clock or Clock()
        self.registry = Registry()
        self._data: StoreData = {}
        self._rv = 0
        self._history: deque[HistoryEntry] = deque(maxlen=history)
        self._subs: list[Callable[[str, str, dict], None]] = []
        self._raw_subs: list[Callable[[str, ResourceType, dict], None]] = []
        self._rng = random.Random(seed)
        self._snapshot: tuple[StoreData, dict[str, ResourceType],
                              dict[tuple[str, str, str], ResourceType]] | None = None
        self._sorted: dict[tuple[str, str], list[str]] = {}
        self.warnings: list[str] = []   # from field_validation="Warn"; the server drains it
        if default_crds:
            for crd in _default_crds():
                self.create(CRD_KEY, crd)
        for name in SYSTEM_NAMESPACES:
            self.create("namespaces", {"metadata": {"name": name}})

    # ---- helpers ----------------------------------------------------------------------------
    @property
    def resource_version(self) -> int:
        return self._rv

    def rt(self, resource: str) -> ResourceType:
        rt = self.registry.get(resource)
        if rt.view_of:
            raise ApiError(404, "NotFound", f"{resource} is served over HTTP only; the store "
                                            f"keeps them as {rt.view_of}")
        return rt

    def _bucket(self, rt: ResourceType, ns: str) -> dict[str, dict]:
        return self._data.setdefault(rt.key, {}).setdefault(ns, {})

    def raw(self, rt: ResourceType, name: str, ns: str | None) -> dict | None:
        return self._data.get(rt.key, {}).get((ns or "") if rt.namespaced else "", {}).get(name)

    def _ns_of(self, rt: ResourceType, namespace: str | None, obj: dict | None = None) -> str:
        if not rt.namespaced:
            return ""
        meta_ns = ((obj or {}).get("metadata") or {}).get("namespace")
        if namespace and meta_ns and namespace != meta_ns:
            raise bad_request("the namespace of the provided object does not match the "
                              "namespace sent on the request")
        ns = namespace or meta_ns
        if not ns:
            raise bad_request("an empty namespace may not be set when a resource name is provided"
                              if obj is None else "the namespace of the object is required")
        return ns

    def _get_or_404(self, rt: ResourceType, name: str, ns: str) -> dict:
        obj = self._data.get(rt.key, {}).get(ns, {}).get(name)
        if obj is None:
            raise not_found(rt.plural, rt.group, name)
        return obj

    def _uid(self) -> str:
        """A random (version 4) UUID from the store's seeded generator."""
        h = "%032x" % (self._rng.getrandbits(128) & _UUID4_MASK | _UUID4_BITS)
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def _commit(self, rt: ResourceType, etype: str, new: dict, old: dict | None) -> dict:
        self._rv += 1
        meta = new["metadata"]
        meta["resourceVersion"] = str(self._rv)
        ns = meta.get("namespace", "") if rt.namespaced else ""
        bucket = self._bucket(rt, ns)
        name = meta["name"]
        names = self._sorted.get((rt.key, ns))
        if etype == "DELETED":
            if bucket.pop(name, None) is not None and names is not None:
                del names[bisect.bisect_left(names, name)]
        else:
            if name not in bucket and names is not None:
                bisect.insort(names, name)
            bucket[name] = new
        self._history.append((self._rv, etype, rt, ns, new))
        for raw_cb in list(self._raw_subs):
            raw_cb(etype, rt, new)
        for cb in list(self._subs):
            try:
                cb(etype, rt.key, jcopy(new))
            except Exception:
                log.exception("store subscriber failed")
        self._after_change(rt, ns, old, None if etype == "DELETED" else new)
        return new

    # ---- public API -------------------------------------------------------------------------
    def subscribe(self, callback: Callable[[str, str, dict], None]) -> Callable[[], None]:
        self._subs.append(callback)

        def unsubscribe() -> None:
            if callback in self._subs:
                self._subs.remove(callback)
        return unsubscribe

    def subscribe_raw(self, callback: Callable[[str, ResourceType, dict], None]
                      ) -> Callable[[], None]:
        """callback(event_type, ResourceType, stored_obj) without copying; do not mutate."""
        self._raw_subs.append(callback)

        def unsubscribe() -> None:
            if callback in self._raw_subs:
                self._raw_subs.remove(callback)
        return unsubscribe

    def get(self, resource: str, name: str, *, namespace: str | None = None) -> dict:
        rt = self.rt(resource)
        return jcopy(self._get_or_404(rt, name, self._ns_of(rt, namespace)))

    def list(self, resource: str, *, namespace: str | None = None,
             label_selector: str | None = None, field_selector: str | None = None) -> list[dict]:
        rt = self.rt(resource)
        return [jcopy(o) for o in self.select(rt, namespace, label_selector, field_selector)]

    # ---- create -----------------------------------------------------------------------------
    def create(self, resource: str, obj: dict, *, namespace: str | None = None,
               dry_run: bool = False, field_manager: str | None = None,
               field_validation: str | None = None, copy: bool = True) -> dict:
        """field_validation: None/"Ignore" drop unknown fields silently, "Warn" also records
        them in self.warnings, "Strict" rejects them (400), as the real server does.
        copy=False (the HTTP server): the store takes `obj` over, and the stored object is
        returned as is; the caller must not mutate either."""
        rt = self.rt(resource)
        new = self._prepare_new(rt, obj if copy else _Owned(obj), namespace, field_validation)
        ns = new["metadata"].get("namespace", "")
        name = new["metadata"]["name"]
        if self.raw(rt, name, ns) is not None:
            raise already_exists(rt.plural, rt.group, name)
        self._admit_create(rt, new, ns)
        meta = new["metadata"]
        meta["uid"] = self._uid()
        meta["creationTimestamp"] = self.clock.timestamp()
        if "spec" in new or rt.crd_name:
            meta["generation"] = 1
        if field_manager:
            record_update(None, new, manager=field_manager, api_version=rt.api_version,
                          now=self.clock.timestamp())
        if dry_run:
            return jcopy(new)
        stored = self._commit(rt, "ADDED", new, None)
        return jcopy(stored) if copy else stored

    def _prepare_new(self, rt: ResourceType, obj, namespace: str | None,
                     field_validation: str | None = None) -> dict:
        if isinstance(obj, _Owned):
            obj = new = obj.obj
        else:
            new = jcopy(obj)
        if not isinstance(new, dict):
            raise bad_request("the body of the request was in an unknown format")
        self._check_type(rt, new)
        meta = new.get("metadata")
        if meta is None:
            meta = new["metadata"] = {}
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        ns = self._ns_of(rt, namespace, new)
        if rt.namespaced:
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        for k in ("resourceVersion", "uid", "creationTimestamp", "deletionTimestamp",
                  "deletionGracePeriodSeconds", "generation", "managedFields", "selfLink"):
            meta.pop(k, None)
        if not meta.get("name"):
            if meta.get("generateName"):
                for _ in range(16):
                    cand = meta["generateName"] + "".join(
                        self._rng.choice(_NAME_CHARS) for _ in range(5))
                    if self.raw(rt, cand, ns) is None:
                        break
                meta["name"] = cand
            else:
                    raise invalid(rt.kind, rt.group, "", [{
                    "field": "metadata.name", "reason": "FieldValueRequired",
                    "message": "Required value: name or generateName is required"}])
        self._shape(rt, new, field_validation)
        kinds.prepare_create(rt, new)
        return new

    def _shape(self, rt: ResourceType, obj: dict, field_validation: str | None) -> None:
        """Normalise a built-in object or prune/default a custom one; unknown fields are
        dropped, reported (Warn) or rejected (Strict)."""
        # (`list` here would name Store.list)
        dropped: builtins.list[tuple] | None = (
            [] if field_validation in ("Strict", "Warn") else None)
        if rt.normalize is not None:
            rt.normalize(obj, dropped)
        elif rt.crd_name:
            prune_and_default(rt.schema, obj, dropped)
        if not dropped:
            return
        unknown = [f'unknown field "{p}"' for p in sorted(chain_path(c, k) for c, k in dropped)]
        if field_validation == "Strict":
            raise bad_request("strict decoding error: " + ", ".join(unknown))
        self.warnings.extend(unknown)

    def _check_type(self, rt: ResourceType, obj: dict) -> None:
        kind, av = obj.get("kind"), obj.get("apiVersion")
        if kind and kind != rt.kind:
            raise bad_request(f"the kind in the body ({kind}) does not match the kind of the "
                              f"resource ({rt.kind})")
        if av and av != rt.api_version and (not rt.served_versions or av not in [
                f"{rt.group}/{v}" for v in rt.served_versions]):
            raise bad_request(f"the API version in the data ({av}) does not match the "
                              f"expected API version ({rt.api_version})")
        obj["kind"] = rt.kind
        obj["apiVersion"] = av or rt.api_version

    def _admit_create(self, rt: ResourceType, new: dict, ns: str) -> None:
        name = new["metadata"]["name"]
        if rt.namespaced:
            nso = self._data.get("namespaces", {}).get("", {}).get(ns)
            if nso is None:
                raise not_found("namespaces", "", ns)
            if nso.get("metadata", {}).get("deletionTimestamp") or \
                    (nso.get("status") or {}).get("phase") == "Terminating":
                raise forbidden(rt.plural, rt.group, name,
                                f"unable to create new content in namespace {ns} because it "
                                "is being terminated")
        lrs = list(self._data.get("limitranges", {}).get(ns, {}).values()) if ns else []
        if rt.key == "pods":
            if lrs:
                adm.limit_range_pod(lrs, new, name)
            adm.priority_admission(list(self._data.get(PC_KEY, {}).get("", {}).values()),
                                   new, name)
            new["status"]["qosClass"] = kinds.qos_class(new["spec"])
        elif rt.key == "persistentvolumeclaims":
            spec = new.setdefault("spec", {})
            if not spec.get("storageClassName"):
                default = next((s for s in self._data.get(SC_KEY, {}).get("", {}).values()
                                if (s["metadata"].get("annotations") or {}).get(
                                    "storageclass.kubernetes.io/is-default-class") == "true"),
                               None)
                if default is not None:
                    spec["storageClassName"] = default["metadata"]["name"]
            if lrs:
                adm.limit_range_pvc(lrs, new, name)
        raise_if(kinds.validate(rt, new, None) + self._cross_object_errors(rt, new), rt.kind,
                 rt.group, name)
        run_webhooks(rt.key, new)
        quotas = self._data.get("resourcequotas", {}).get(ns) if ns else None
        if quotas:
            adm.check_quotas(list(quotas.values()), rt.key, new, rt.plural, name, rt.group)

    def _cross_object_errors(self, rt: ResourceType, obj: dict) -> builtins.list[dict]:
        """Checks that need other stored objects: only one default PriorityClass."""
        if rt.key == PC_KEY and obj.get("globalDefault"):
            other = next((p["metadata"]["name"] for p in self._data.get(PC_KEY, {}).get(
                "", {}).values() if p.get("globalDefault")
                and p["metadata"]["name"] != obj["metadata"]["name"]), None)
            if other:
                return [{"field": "globalDefault", "reason": "FieldValueInvalid",
                         "message": f"Invalid value: true: PriorityClass {other} is already "
                                    "marked as default. Only one default can exist"}]
        return []

    # ---- update -----------------------------------------------------------------------------
    def replace(self, resource: str, obj: dict, *, namespace: str | None = None,
                subresource: str | None = None, dry_run: bool = False,
                field_manager: str | None = None, field_validation: str | None = None) -> dict:
        rt = self.rt(resource)
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata") or {}, dict):
            raise bad_request("the body of the request was in an unknown format")
        name = (obj.get("metadata") or {}).get("name")
        if not name:
            raise bad_request("name is required in the body")
        ns = self._ns_of(rt, namespace, obj)
        old = self._get_or_404(rt, name, ns)
        return self._update(rt, old, jcopy(obj), subresource, dry_run, field_manager,
                            field_validation=field_validation)

    def _update(self, rt: ResourceType, old: dict, new: dict, subresource: str | None,
                dry_run: bool = False, field_manager: str | None = None,
                managed: bool = False, field_validation: str | None = None) -> dict:
        meta_in = new.get("metadata") or {}
        name = old["metadata"]["name"]
        rv = meta_in.get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(rt.plural, rt.group, name, "the object has been modified; please "
                           "apply your changes to the latest version and try again")
        self._check_type(rt, new)
        if subresource == "status":
            status = new.get("status")
            new = jcopy(old)
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
        elif subresource not in (None, ""):
            raise ApiError(404, "NotFound", f"subresource {subresource} cannot be updated")
        else:
            meta = new.setdefault("metadata", {})
            if not isinstance(meta, dict):
                raise bad_request("metadata must be an object")
            for k in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                      "deletionGracePeriodSeconds", "generation"):
                if k in old["metadata"]:
                    meta[k] = old["metadata"][k]
                else:
                    meta.pop(k, None)
            if "managedFields" not in meta and "managedFields" in old["metadata"]:
                meta["managedFields"] = old["metadata"]["managedFields"]
            if rt.has_status:
                if "status" in old:
                    new["status"] = jcopy(old["status"])
                else:
                    new.pop("status", None)
        self._shape(rt, new, field_validation)
        kinds.prepare_update(rt, old, new)
        raise_if(kinds.validate(rt, new, old) + self._cross_object_errors(rt, new), rt.kind,
                 rt.group, name)
        if subresource != "status":
            run_webhooks(rt.key, new, old)
        if _content(new) != _content(old) and "generation" in old["metadata"]:
            new["metadata"]["generation"] = old["metadata"]["generation"] + 1
        if field_manager and not managed:
            record_update(old, new, manager=field_manager, api_version=rt.api_version,
                          now=self.clock.timestamp(), subresource=subresource or None)
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if new == old:
            return jcopy(old)
        if dry_run:
            return jcopy(new)
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers") \
                and not self._awaits_kubelet(rt, new):
            return jcopy(self._remove(rt, new))
        return jcopy(self._commit(rt, "MODIFIED", new, old))

    def patch(self, resource: str, name: str, body, *, patch_type: str = "merge",
              namespace: str | None = None, subresource: str | None = None,
              field_manager: str | None = None, force: bool = False,
              dry_run: bool = False, field_validation: str | None = None) -> dict:
        rt = self.rt(resource)
        ns = self._ns_of(rt, namespace)
        old = self.raw(rt, name, ns)
        if patch_type == "apply":
            return self._apply(rt, name, ns, old, body, subresource, field_manager, force,
                               dry_run, field_validation)
        if old is None:
            raise not_found(rt.plural, rt.group, name)
        if patch_type == "json":
            patched = json_patch(old, body)
        elif patch_type == "merge":
            if not isinstance(body, dict):
                raise bad_request("merge patch body must be a JSON object")
            patched = merge_patch(old, body)
        elif patch_type == "strategic":
            if rt.crd_name:
                raise ApiError(415, "UnsupportedMediaType",
                               "the body of the request was in an unknown format - accepted "
                               "media types include: application/json-patch+json, "
                               "application/merge-patch+json, application/apply-patch+yaml")
            if not isinstance(body, dict):
                raise bad_request("strategic merge patch body must be a JSON object")
            patched = strategic_merge(old, body)
        else:
            raise ApiError(415, "UnsupportedMediaType", f"unknown patch type {patch_type!r}")
        if not isinstance(patched, dict):
            raise bad_request("the patch produced something that is not an object")
        patched = jcopy(patched)
        meta = patched.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if meta.get("name") != name:
            raise bad_request(f"the name of the object ({meta.get('name')}) does not match the "
                              f"name on the URL ({name})")
        return self._update(rt, old, patched, subresource, dry_run, field_manager,
                            field_validation=field_validation)

    def _apply(self, rt, name, ns, old, body, subresource, field_manager, force, dry_run,
               field_validation=None):
        if not field_manager:
            raise invalid("PatchOptions", "meta.k8s.io", "", [{
                "field": "fieldManager", "reason": "FieldValueRequired",
                "message": "Required value: is required for apply patch"}])
        if not isinstance(body, dict):
            raise bad_request("apply patch body must be an object")
        body = jcopy(body)
        meta = body.setdefault("metadata", {})
        if meta.get("name") not in (None, name):
            raise bad_request(f"the name of the object ({meta.get('name')}) does not match the "
                              f"name on the URL ({name})")
        meta["name"] = name
        if rt.namespaced:
            if meta.get("namespace") not in (None, ns):
                raise bad_request("the namespace of the provided object does not match the "
                                  "namespace sent on the request")
            meta["namespace"] = ns
        self._check_type(rt, body)
        self._shape(rt, body, field_validation)
        if subresource != "status" and rt.has_status:
            body.pop("status", None)
        now = self.clock.timestamp()
        if old is None:
            if subresource:
                raise not_found(rt.plural, rt.group, name)
            merged = server_side_apply(None, body, manager=field_manager, force=force,
                                       api_version=rt.api_version, now=now)
            managed = merged["metadata"].get("managedFields")
            created = self.create(rt.key, merged, namespace=ns or None, dry_run=True)
            created["metadata"]["managedFields"] = managed
            if dry_run:
                return created
            return jcopy(self._commit(rt, "ADDED", created, None))
        rv = meta.get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(rt.plural, rt.group, name, "the object has been modified; please "
                           "apply your changes to the latest version and try again")
        meta.pop("resourceVersion", None)
        merged = server_side_apply(old, body, manager=field_manager, force=force,
                                   api_version=rt.api_version, now=now)
        return self._update(rt, old, merged, subresource, dry_run, field_manager, managed=True)

    # ---- delete -----------------------------------------------------------------------------
    def _awaits_kubelet(self, rt: ResourceType, obj: dict) -> bool:
        return rt.key == "pods" and bool((obj.get("spec") or {}).get("nodeName")) and \
            (obj["metadata"].get("deletionGracePeriodSeconds") or 0) > 0

    def delete(self, resource: str, name: str, *, namespace: str | None = None,
               grace_period_seconds: int | None = None, propagation_policy: str | None = None,
               dry_run: bool = False, preconditions: dict | None = None) -> dict:
        rt = self.rt(resource)
        ns = self._ns_of(rt, namespace)
        old = self._get_or_404(rt, name, ns)
        if preconditions:
            for k in ("uid", "resourceVersion"):
                if preconditions.get(k) and preconditions[k] != old["metadata"].get(k):
                    raise conflict(rt.plural, rt.group, name,
                                   f"Precondition failed: {k} in precondition: "
                                   f"{preconditions[k]}, {k} in object meta: "
                                   f"{old['metadata'].get(k)}")
        if dry_run:
            return jcopy(old)
        meta = old["metadata"]
        if rt.key == "namespaces":
            return jcopy(self._delete_namespace(rt, old))
        if propagation_policy not in (None, "Background", "Foreground", "Orphan"):
            raise bad_request(f"invalid propagationPolicy {propagation_policy!r}")
        if propagation_policy in ("Foreground", "Orphan"):
            self._propagate(meta["uid"], ns, propagation_policy)
        grace = 0
        if rt.key == "pods" and (old.get("spec") or {}).get("nodeName") and \
                (old.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            grace = grace_period_seconds if grace_period_seconds is not None else \
                (old["spec"].get("terminationGracePeriodSeconds") or 30)
            if grace_period_seconds is None and meta.get("deletionGracePeriodSeconds") \
                    is not None:
                grace = min(grace, meta["deletionGracePeriodSeconds"])
        if grace > 0 or meta.get("finalizers"):
            if meta.get("deletionTimestamp") and (
                    grace >= (meta.get("deletionGracePeriodSeconds") or 0)):
                return jcopy(old)
            new = jcopy(old)
            new["metadata"]["deletionTimestamp"] = rfc3339(
                self.clock.now() + timedelta(seconds=grace))
            new["metadata"]["deletionGracePeriodSeconds"] = grace
            if grace == 0 and not meta.get("finalizers"):
                return jcopy(self._remove(rt, new))
            return jcopy(self._commit(rt, "MODIFIED", new, old))
        return jcopy(self._remove(rt, jcopy(old)))

    def _remove(self, rt: ResourceType, obj: dict) -> dict:
        old = self.raw(rt, obj["metadata"]["name"], obj["metadata"].get("namespace"))
        return self._commit(rt, "DELETED", obj, old)

    # ---- fixtures' fast reset ---------------------------------------------------------------
    def snapshot(self) -> None:
        """Remember the current objects (cheap: objects are immutable once stored)."""
        self._snapshot = ({k: {ns: dict(b) for ns, b in v.items()} for k, v in self._data.items()},
                          dict(self.registry._by_key), dict(self.registry._by_gvr))

    def reset(self) -> None:
        """Back to the last snapshot; the resourceVersion counter keeps increasing and the
        watch history is cleared (old watchers get 410 on resume)."""
        if self._snapshot is None:
            raise RuntimeError("no snapshot taken")
        data, by_key, by_gvr = self._snapshot
        self._data = {k: {ns: dict(b) for ns, b in v.items()} for k, v in data.items()}
        self.registry._by_key = dict(by_key)
        self.registry._by_gvr = dict(by_gvr)
        self._rv += 1
        self._history.clear()
        self._sorted = {}
