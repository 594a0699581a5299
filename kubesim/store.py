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
import ipaddress
import logging
import random
from collections.abc import Callable

from . import admission as adm
from . import kinds
from .apply import record_update, server_side_apply
from .clock import Clock
from .controllers import CRD_KEY, ControllersMixin
from .crd_rules import run_webhooks
from .deletion import DeletionMixin
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
from .reads import ReadsMixin, StoreData
from .resources import Registry, ResourceType, default_crds
from .structural import declares, prune_and_default, prune_and_default_key
from .validation import raise_if
from .watchcache import HistoryEntry, WatchCache

log = logging.getLogger("kubesim.store")

PC_KEY = "priorityclasses.scheduling.k8s.io"
SC_KEY = "storageclasses.storage.k8s.io"
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_DEFAULT_CRDS: list[dict] | None = None
SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/12")   # kubeadm's default --service-cluster-ip-range
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def _default_crds() -> list[dict]:
    global _DEFAULT_CRDS
    if _DEFAULT_CRDS is None:
        _DEFAULT_CRDS = default_crds()
    return _DEFAULT_CRDS


def _content(obj: dict) -> dict:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _no_new_finalizers(old: dict, new: dict) -> list[dict]:
    """ValidateObjectMetaUpdate -> ValidateNoNewFinalizers (apimachinery
    pkg/api/validation/objectmeta.go): finalizers cannot be added once deleting."""
    if not old["metadata"].get("deletionTimestamp"):
        return []
    extra = sorted(set(new["metadata"].get("finalizers") or ())
                   - set(old["metadata"].get("finalizers") or ()))
    if not extra:
        return []
    listed = ", ".join(f'"{f}"' for f in extra)
    return [{"field": "metadata.finalizers", "reason": "FieldValueForbidden",
             "message": "Forbidden: no new finalizers can be added if the object is being "
                        f"deleted, found new finalizers []string{{{listed}}}"}]


_UUID4_MASK = ~((0xF000 << 64) | (0xC000 << 48)) & ((1 << 128) - 1)
_UUID4_BITS = (0x4000 << 64) | (0x8000 << 48)


def _same(obj: dict) -> dict:
    return obj


class _Owned:
    """Marks a body the caller hands over (no defensive copy)."""
    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj


class Store(DeletionMixin, ReadsMixin, ControllersMixin):
    #: the root CA publisher's ConfigMap kube-root-ca.crt in every namespace (controllers.py)
    publish_root_ca = True

    def __init__(self, clock: Clock | None = None, *, watch_cache_size: int | None = None,
                 default_crds: bool = True, seed: int | None = None):
        """watch_cache_size: the events kept per resource for watches to resume from and
        for lists at an older resourceVersion; None sizes it as the API server's watch cache
        does (100, growing to 102,400 while events are fresh: kubesim/watchcache.py)."""
        self.clock = clock or Clock()
        self.registry = Registry()
        self._data: StoreData = {}
        self._rv = 0
        self.watch_cache_size = watch_cache_size
        self._caches: dict[str, WatchCache] = {}   # resource key -> its event history
        self._base_rv = 0     # the floor of a resource without evictions since the last reset
        self._event_subs: list[Callable[[HistoryEntry], None]] = []
        self._subs: list[Callable[[str, str, dict], None]] = []
        self._raw_subs: list[Callable[[str, ResourceType, dict], None]] = []
        self._rng = random.Random(seed)
        self._snapshot: tuple[StoreData, dict[str, ResourceType],
                              dict[tuple[str, str, str], ResourceType]] | None = None
        self._sorted: dict[tuple[str, str], list[str]] = {}
        self.warnings: list[str] = []   # from field_validation="Warn"; the server drains it
        self._owned: dict[str, set[tuple[str, str, str]]] | None = None  # owner uid -> deps
        self._gc_busy: set[str] = set()
        self._ns_sweeping: set[str] = set()   # namespaces whose content is being deleted
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

    def _suffix5(self) -> str:
        """Five characters of utilrand's alphabet from one draw (27**5 < 2**24)."""
        n = self._rng.getrandbits(24) % 14348907
        out = []
        for _ in range(5):
            n, i = divmod(n, 27)
            out.append(_NAME_CHARS[i])
        return "".join(out)

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
        entry = (self._rv, etype, rt, ns, new, old)
        cache = self._caches.get(rt.key)
        if cache is None:
            cache = self._caches[rt.key] = WatchCache(self._base_rv, self.watch_cache_size)
        cache.append(entry)
        for ev_cb in self._event_subs:
            ev_cb(entry)
        refs_old = old["metadata"].get("ownerReferences") if old is not None else None
        refs_new = None if etype == "DELETED" else meta.get("ownerReferences")
        if (refs_old or refs_new) and refs_old != refs_new:
            self._index_owners(rt.key, ns, name, refs_old, refs_new)
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

    def subscribe_events(self, callback: Callable[[HistoryEntry], None]) -> Callable[[], None]:
        """callback(history entry) for every commit, with the previous object (watches)."""
        self._event_subs.append(callback)

        def unsubscribe() -> None:
            if callback in self._event_subs:
                self._event_subs.remove(callback)
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

    def _shape(self, rt: ResourceType, obj: dict, field_validation: str | None,
               status_only: bool = False) -> None:
        """Normalise a built-in object or prune/default a custom one; unknown fields are
        dropped, reported (Warn) or rejected (Strict). status_only: the rest of `obj` is
        the stored object's (see _status_shares_old)."""
        # (`list` here would name Store.list)
        dropped: builtins.list[tuple] | None = (
            [] if field_validation in ("Strict", "Warn") else None)
        if rt.normalize is not None:
            rt.normalize(obj, dropped, ("status",) if status_only else None)
        elif rt.crd_name and status_only:
            prune_and_default_key(rt.schema or {}, obj, "status", dropped)
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
            adm.service_account_admission(
                self._data.get("serviceaccounts", {}).get(ns, {}), new, name, ns,
                self._suffix5)
            new["status"]["qosClass"] = kinds.qos_class(new["spec"])
        elif rt.key == "services":
            self._allocate_cluster_ip(new)
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

    def _allocate_cluster_ip(self, svc: dict) -> None:
        """ClusterIP allocation from the service CIDR (pkg/registry/core/service/storage/
        alloc.go, ipallocator): a requested IP must be in range and free (else 422
        `spec.clusterIPs: Invalid value: []string{...}: failed to allocate IP ...`);
        10.96.0.1 belongs to the `kubernetes` Service."""
        spec = svc.setdefault("spec", {})
        if spec.get("type") == "ExternalName":
            return
        want = spec.get("clusterIP") or (spec.get("clusterIPs") or [""])[0]
        if want == "None":
            return
        used = {o["spec"].get("clusterIP") for b in self._data.get("services", {}).values()
                for o in b.values()} | {SERVICE_CIDR[1]}
        if want:
            try:
                addr = ipaddress.ip_address(want)
            except ValueError:
                raise_if([{"field": "spec.clusterIPs[0]", "reason": "FieldValueInvalid",
                           "message": f'Invalid value: "{want}": must be a valid IP address, '
                                      '(e.g. 10.9.8.7 or 2001:db8::ffff)'}],
                         "Service", "", svc["metadata"]["name"])
            why = None
            if addr not in SERVICE_CIDR:
                why = (f"the provided IP ({want}) is not in the valid range. The range of "
                       f"valid IPs is {SERVICE_CIDR}")
            elif addr in used or want in used:
                why = "provided IP is already allocated"
            if why:
                raise_if([{"field": "spec.clusterIPs", "reason": "FieldValueInvalid",
                           "message": f'Invalid value: []string{{"{want}"}}: failed to '
                                      f"allocate IP {want}: {why}"}],
                         "Service", "", svc["metadata"]["name"])
            ip = want
        else:
            start = int(ipaddress.ip_address(kinds._cluster_ip(
                svc["metadata"]["name"], svc["metadata"].get("namespace", ""))))
            base, size = int(SERVICE_CIDR.network_address), SERVICE_CIDR.num_addresses
            ip = ""
            for step in range(size - 2):
                cand = ipaddress.ip_address(base + 1 + (start - base - 1 + step) % (size - 2))
                if str(cand) not in used and cand not in used:
                    ip = str(cand)
                    break
        spec["clusterIP"] = ip
        spec["clusterIPs"] = [ip]
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("internalTrafficPolicy", "Cluster")

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
                field_manager: str | None = None, field_validation: str | None = None,
                copy: bool = True) -> dict:
        """copy=False: the stored object is returned as is (the caller must not mutate it)."""
        rt = self.rt(resource)
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata") or {}, dict):
            raise bad_request("the body of the request was in an unknown format")
        name = (obj.get("metadata") or {}).get("name")
        if not name:
            raise bad_request("name is required in the body")
        ns = self._ns_of(rt, namespace, obj)
        old = self._get_or_404(rt, name, ns)
        return self._update(rt, old, jcopy(obj), subresource, dry_run, field_manager,
                            field_validation=field_validation, copy=copy)

    def _status_shares_old(self, rt: ResourceType, status) -> bool:
        """Whether a status write may share the rest of the stored object instead of copying
        it: only its status needs shaping, and nothing later mutates the rest in place."""
        return type(status) is dict and rt.key != "namespaces" and (
            rt.normalize is not None or not rt.crd_name or declares(rt.schema, "status"))

    def _update(self, rt: ResourceType, old: dict, new: dict, subresource: str | None,
                dry_run: bool = False, field_manager: str | None = None,
                managed: bool = False, field_validation: str | None = None,
                copy: bool = True) -> dict:
        out = jcopy if copy else _same
        meta_in = new.get("metadata") or {}
        name = old["metadata"]["name"]
        rv = meta_in.get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(rt.plural, rt.group, name, "the object has been modified; please "
                           "apply your changes to the latest version and try again")
        self._check_type(rt, new)
        status_only = False
        if subresource == "status":
            status = new.get("status")
            applied = (new.get("metadata") or {}).get("managedFields") if managed else None
            status_only = applied is None and self._status_shares_old(rt, status)
        if status_only:
            # stored objects are never mutated: the new one shares all but its status, and
            # only the status is shaped (the strategy keeps the stored spec as it is)
            new = {**old, "metadata": dict(old["metadata"]), "status": status}
        elif subresource == "status":
            new = jcopy(old)
            if applied is not None:
                new["metadata"]["managedFields"] = applied
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
        elif subresource not in (None, "", "finalize") or (
                subresource == "finalize" and rt.key != "namespaces"):
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
        self._shape(rt, new, field_validation, status_only)
        if not status_only:
            kinds.prepare_update(rt, old, new)
        if rt.key == "namespaces" and subresource != "finalize":
            # namespaceStrategy.PrepareForUpdate: spec.finalizers change only via /finalize
            fins = (old.get("spec") or {}).get("finalizers")
            spec = new.setdefault("spec", {})
            if fins is None:
                spec.pop("finalizers", None)
            else:
                spec["finalizers"] = fins
        raise_if(_no_new_finalizers(old, new) + kinds.validate(rt, new, old)
                 + self._cross_object_errors(rt, new), rt.kind, rt.group, name)
        if subresource != "status":
            run_webhooks(rt.key, new, old)
        if _content(new) != _content(old) and "generation" in old["metadata"]:
            new["metadata"]["generation"] = old["metadata"]["generation"] + 1
        if field_manager and not managed:
            record_update(old, new, manager=field_manager, api_version=rt.api_version,
                          now=self.clock.timestamp(), subresource=subresource or None)
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if new == old:
            return out(old)
        if dry_run:
            return jcopy(new)
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers") \
                and not self._awaits_kubelet(rt, new) and not (
                    rt.key == "namespaces" and (new.get("spec") or {}).get("finalizers")):
            return out(self._remove(rt, new))
        return out(self._commit(rt, "MODIFIED", new, old))

    def patch(self, resource: str, name: str, body, *, patch_type: str = "merge",
              namespace: str | None = None, subresource: str | None = None,
              field_manager: str | None = None, force: bool = False,
              dry_run: bool = False, field_validation: str | None = None,
              copy: bool = True) -> dict:
        """copy=False: the stored object is returned as is (the caller must not mutate it)."""
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
            patched = merge_patch(old, body, copy_patch=False)   # copied below
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
        # a status write reads only the patched status (and the metadata's name and
        # resourceVersion): the rest may stay shared with the stored object
        patched = {**patched, "status": jcopy(patched["status"])} if (
            subresource == "status" and "status" in patched) else jcopy(patched)
        meta = patched.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if meta.get("name") != name:
            raise bad_request(f"the name of the object ({meta.get('name')}) does not match the "
                              f"name on the URL ({name})")
        return self._update(rt, old, patched, subresource, dry_run, field_manager,
                            field_validation=field_validation, copy=copy)

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
        self._shape_applied(rt, body, ns, name)
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
                                   api_version=rt.api_version, now=now,
                                   subresource=subresource or None)
        return self._update(rt, old, merged, subresource, dry_run, field_manager, managed=True)

    def _shape_applied(self, rt: ResourceType, body: dict, ns: str, name: str) -> None:
        """An applied configuration must fit the schema whatever fieldValidation says: the
        field manager converts it to a typed object first and fails with
        "failed to create typed patch object (<ns>/<name>; <group>/<version>, Kind=<kind>):
        <path>: field not declared in schema" (managedfields/internal/structuredmerge.go),
        which reaches the client as a Status with code 500 and no reason
        (apimachinery/pkg/api/errors ... ErrorToAPIStatus of a plain error)."""
        dropped: builtins.list[tuple] = []
        if rt.normalize is not None:
            rt.normalize(body, dropped)
        elif rt.crd_name:
            prune_and_default(rt.schema, body, dropped)
        if not dropped:
            return
        paths = [f".{p}: field not declared in schema"
                 for p in sorted(chain_path(c, k) for c, k in dropped)]
        group, version = (rt.api_version.split("/", 1) if "/" in rt.api_version
                          else ("", rt.api_version))
        where = f"{ns}/{name}; {group}/{version}, Kind={rt.kind}"
        detail = paths[0] if len(paths) == 1 else "errors:\n  " + "\n  ".join(paths)
        raise ApiError(500, "", f"failed to create typed patch object ({where}): {detail}")

    # ---- delete (kubesim/deletion.py) -----------------------------------------------------
    def _awaits_kubelet(self, rt: ResourceType, obj: dict) -> bool:
        return rt.key == "pods" and bool((obj.get("spec") or {}).get("nodeName")) and \
            (obj["metadata"].get("deletionGracePeriodSeconds") or 0) > 0

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
        self._base_rv = self._rv
        self._caches = {}
        self._sorted = {}
        self._owned = None
