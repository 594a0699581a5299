"""Controllers the API server runs synchronously after every committed change: the
namespace lifecycle (Terminating, cascade, finalize), the quota controller (status.hard and
status.used, kept current incrementally) and CRD registration."""
from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from . import admission as adm
from . import policy
from .jsonutil import jcopy
from .resources import ResourceType

if TYPE_CHECKING:
    from .clock import Clock
    from .reads import StoreData
    from .resources import Registry

CRD_KEY = "customresourcedefinitions.apiextensions.k8s.io"


class ControllersMixin:
    """Mixed into Store; uses its _data, _commit, _remove, delete, rt and registry."""

    if TYPE_CHECKING:  # provided by Store; declared for the type checker only
        clock: Clock
        registry: Registry
        _data: StoreData

        def rt(self, resource: str) -> ResourceType: ...

        def _commit(self, rt: ResourceType, etype: str, new: dict,
                    old: dict | None) -> dict: ...

        def _remove(self, rt: ResourceType, obj: dict) -> dict: ...

        def delete(self, resource: str, name: str, *, namespace: str | None = None,
                   grace_period_seconds: int | None = None,
                   propagation_policy: str | None = None, dry_run: bool = False,
                   preconditions: dict | None = None) -> dict: ...

        def patch(self, resource: str, name: str, body, *, patch_type: str = "merge",
                  namespace: str | None = None, subresource: str | None = None,
                  field_manager: str | None = None, force: bool = False,
                  dry_run: bool = False, field_validation: str | None = None) -> dict: ...

    def _delete_namespace(self, rt: ResourceType, ns_obj: dict) -> dict:
        name = ns_obj["metadata"]["name"]
        if not ns_obj["metadata"].get("deletionTimestamp"):
            new = jcopy(ns_obj)
            new["metadata"]["deletionTimestamp"] = self.clock.timestamp()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            new["status"] = {"phase": "Terminating"}
            ns_obj = self._commit(rt, "MODIFIED", new, ns_obj)
        for other in self.registry.all():
            if not other.namespaced or other.view_of:
                continue
            for obj_name in list(self._data.get(other.key, {}).get(name, {})):
                obj = self._data[other.key][name].get(obj_name)
                if obj is not None and not obj["metadata"].get("deletionTimestamp"):
                    self.delete(other.key, obj_name, namespace=name)
        return self._maybe_finalize_namespace(name) or ns_obj

    def _maybe_finalize_namespace(self, name: str) -> dict | None:
        nso = self._data.get("namespaces", {}).get("", {}).get(name)
        if nso is None or not nso["metadata"].get("deletionTimestamp"):
            return None
        for buckets in self._data.values():
            if buckets.get(name):
                return None
        final = jcopy(nso)
        final.setdefault("spec", {})["finalizers"] = []
        return self._remove(self.rt("namespaces"), final)

    # ---- controllers run synchronously on every change --------------------------------------
    def _after_change(self, rt: ResourceType, ns: str, old: dict | None, new: dict | None):
        if rt.key == CRD_KEY:
            self._crd_changed(old, new)
            return
        if rt.key == "resourcequotas":
            if new is not None and (old is None or old.get("spec") != new.get("spec")):
                self._recompute_quota(new)
            return
        if not ns:
            return
        if rt.key == policy.PDB_KEY:   # the disruption controller (policy.py)
            if new is not None and (old is None or old.get("spec") != new.get("spec")
                                    or old["metadata"].get("generation")
                                    != new["metadata"].get("generation")):
                policy.refresh(self, ns, only=new)  # type: ignore[arg-type]
        elif rt.key == "pods" and self._data.get(policy.PDB_KEY, {}).get(ns):
            policy.refresh(self, ns)  # type: ignore[arg-type]
        quotas = self._data.get("resourcequotas", {}).get(ns)
        if quotas:
            for quota in list(quotas.values()):
                before = adm.quota_usage_for(quota, rt.key, old)
                after = adm.quota_usage_for(quota, rt.key, new)
                delta = {k: after.get(k, Fraction(0)) - before.get(k, Fraction(0))
                         for k in set(before) | set(after)}
                status = adm.apply_delta(quota, delta)
                if status is not None:
                    updated = jcopy(quota)
                    updated["status"] = status
                    self._commit(self.rt("resourcequotas"), "MODIFIED", updated, quota)
        if new is None:
            self._maybe_finalize_namespace(ns)

    def _recompute_quota(self, quota: dict) -> None:
        ns = quota["metadata"]["namespace"]

        def objects(key: str):
            rt = self.registry.find(key)
            return list(self._data.get(rt.key, {}).get(ns, {}).values()) if rt else []
        status = adm.compute_status(quota, objects)
        if status != quota.get("status"):
            updated = jcopy(quota)
            updated["status"] = status
            self._commit(self.rt("resourcequotas"), "MODIFIED", updated, quota)

    def _crd_changed(self, old: dict | None, new: dict | None) -> None:
        if new is None:
            assert old is not None  # a deletion always carries the stored object
            rt = self.registry.unregister_crd(old)
            if rt is not None:
                for _ns, bucket in list(self._data.get(rt.key, {}).items()):
                    for obj in list(bucket.values()):
                        self._commit(rt, "DELETED", jcopy(obj), obj)
                self._data.pop(rt.key, None)
        elif old is None or old.get("spec") != new.get("spec"):
            self.registry.register_crd(new)

    def _propagate(self, owner_uid: str, ns: str, policy: str) -> None:
        """Orphan: strip the owner from its dependents' ownerReferences. Foreground: delete
        the dependents first. (The real server parks the owner behind a finalizer until the
        garbage collector is done; here both happen at once. Background is left to the
        simulation's GC.)"""
        for other in self.registry.all():
            if other.view_of:
                continue
            for obj in list(self._data.get(other.key, {}).get(ns or "", {}).values()):
                refs = obj["metadata"].get("ownerReferences") or []
                if not any(r.get("uid") == owner_uid for r in refs):
                    continue
                if policy == "Orphan":
                    kept = [r for r in refs if r.get("uid") != owner_uid]
                    self.patch(other.key, obj["metadata"]["name"],
                               {"metadata": {"ownerReferences": kept or None}},
                               namespace=obj["metadata"].get("namespace"))
                elif not obj["metadata"].get("deletionTimestamp"):
                    self.delete(other.key, obj["metadata"]["name"],
                                namespace=obj["metadata"].get("namespace"),
                                propagation_policy="Foreground")
