"""Controllers the API server runs synchronously after every committed change: the
namespace lifecycle (Terminating, cascade, finalize), the quota controller (status.hard and
status.used, kept current incrementally) and CRD registration."""
from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from . import admission as adm
from . import policy
from .errors import conflict
from .jsonutil import jcopy
from .resources import ResourceType

if TYPE_CHECKING:
    from .clock import Clock
    from .reads import StoreData
    from .resources import Registry

CRD_KEY = "customresourcedefinitions.apiextensions.k8s.io"
ROOT_CA_DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters.")
#: kubesim serves plain HTTP; the bundle is a placeholder with the real shape
KUBESIM_CA = "-----BEGIN CERTIFICATE-----\nkubesim-has-no-tls\n-----END CERTIFICATE-----\n"


class ControllersMixin:
    """Mixed into Store; uses its _data, _commit, _remove, delete, rt and registry."""

    if TYPE_CHECKING:  # provided by Store; declared for the type checker only
        clock: Clock
        registry: Registry
        _data: StoreData
        _ns_sweeping: set[str]
        publish_root_ca: bool

        def rt(self, resource: str) -> ResourceType: ...

        def raw(self, rt: ResourceType, name: str, ns: str | None) -> dict | None: ...

        def _uid(self) -> str: ...

        def _commit(self, rt: ResourceType, etype: str, new: dict,
                    old: dict | None) -> dict: ...

        def _remove(self, rt: ResourceType, obj: dict) -> dict: ...

        def _gc_after_change(self, rt: ResourceType, ns: str, old: dict | None,
                             new: dict | None) -> None: ...

        def delete(self, resource: str, name: str, *, namespace: str | None = None,
                   grace_period_seconds: int | None = None,
                   propagation_policy: str | None = None, dry_run: bool = False,
                   preconditions: dict | None = None) -> dict: ...

        def patch(self, resource: str, name: str, body, *, patch_type: str = "merge",
                  namespace: str | None = None, subresource: str | None = None,
                  field_manager: str | None = None, force: bool = False,
                  dry_run: bool = False, field_validation: str | None = None) -> dict: ...

    def _delete_namespace(self, rt: ResourceType, ns_obj: dict, dry_run: bool = False) -> dict:
        """pkg/registry/core/namespace/storage/storage.go Delete: the first delete sets
        deletionTimestamp and phase Terminating and answers with the namespace; a later one
        while spec.finalizers is not empty is a 409. The namespace controller
        (pkg/controller/namespace/deletion/namespaced_resources_deleter.go) then deletes the
        content, reports what remains in status.conditions, and finalizes (drops
        `kubernetes` from spec.finalizers) once nothing is left."""
        name = ns_obj["metadata"]["name"]
        if ns_obj["metadata"].get("deletionTimestamp"):
            if (ns_obj.get("spec") or {}).get("finalizers"):
                raise conflict("namespaces", "", name, "The system is ensuring all content "
                               "is removed from this namespace.  Upon completion, this "
                               "namespace will automatically be purged by the system.")
            if dry_run or ns_obj["metadata"].get("finalizers"):
                return ns_obj
            return self._remove(rt, jcopy(ns_obj))
        new = jcopy(ns_obj)
        new["metadata"]["deletionTimestamp"] = self.clock.timestamp()
        new["metadata"]["deletionGracePeriodSeconds"] = 0
        new.setdefault("status", {})["phase"] = "Terminating"
        if dry_run:
            return new
        ns_obj = self._commit(rt, "MODIFIED", new, ns_obj)
        self._ns_sweeping.add(name)
        try:
            for other in self.registry.all():
                if not other.namespaced or other.view_of:
                    continue
                for obj_name in list(self._data.get(other.key, {}).get(name, {})):
                    obj = self._data[other.key][name].get(obj_name)
                    if obj is not None and not obj["metadata"].get("deletionTimestamp"):
                        self.delete(other.key, obj_name, namespace=name,
                                    propagation_policy="Background")
        finally:
            self._ns_sweeping.discard(name)
        self._maybe_finalize_namespace(name)
        return ns_obj

    def _namespace_created(self, name: str) -> None:
        """What controllers add to every new namespace: the ServiceAccount `default`
        (pkg/controller/serviceaccount/serviceaccounts_controller.go) and, when
        `publish_root_ca` is on (the default, as in every real cluster), the ConfigMap
        kube-root-ca.crt (:meth:`_publish_root_ca`)."""
        now = self.clock.timestamp()
        sa_rt = self.rt("serviceaccounts")
        if self.raw(sa_rt, "default", name) is None:
            self._commit(sa_rt, "ADDED", {
                "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {
                    "name": "default", "namespace": name, "uid": self._uid(),
                    "creationTimestamp": now}}, None)
        if self.publish_root_ca:
            self._publish_root_ca(name)

    def _publish_root_ca(self, name: str) -> None:
        """syncNamespace of pkg/controller/certificates/rootcacertpublisher/publisher.go,
        run on a namespace's creation and on any change to its kube-root-ca.crt: create the
        ConfigMap (data ``ca.crt``, the description annotation) when missing, reset its data
        and annotation when changed; nothing in a namespace that is gone or terminating (the
        create would be refused there)."""
        nso = self._data.get("namespaces", {}).get("", {}).get(name)
        if nso is None or nso["metadata"].get("deletionTimestamp"):
            return
        cm_rt = self.rt("configmaps")
        data = {"ca.crt": KUBESIM_CA}
        cm = self.raw(cm_rt, adm.ROOT_CA_CONFIGMAP, name)
        if cm is None:
            self._commit(cm_rt, "ADDED", {
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {
                    "name": adm.ROOT_CA_CONFIGMAP, "namespace": name, "uid": self._uid(),
                    "creationTimestamp": self.clock.timestamp(), "annotations": {
                        "kubernetes.io/description": ROOT_CA_DESCRIPTION}},
                "data": data}, None)
            return
        if cm.get("data") == data and \
                (cm["metadata"].get("annotations") or {}).get("kubernetes.io/description"):
            return
        new = jcopy(cm)
        new["data"] = data
        new.pop("binaryData", None)
        new["metadata"].setdefault("annotations", {})[
            "kubernetes.io/description"] = ROOT_CA_DESCRIPTION
        self._commit(cm_rt, "MODIFIED", new, cm)

    def _maybe_finalize_namespace(self, name: str) -> dict | None:
        nso = self._data.get("namespaces", {}).get("", {}).get(name)
        if nso is None or not nso["metadata"].get("deletionTimestamp") or \
                name in self._ns_sweeping:
            return None
        remaining: dict[str, int] = {}
        by_finalizer: dict[str, int] = {}
        for key, buckets in self._data.items():
            bucket = buckets.get(name)
            if not bucket:
                continue
            rt = self.registry.find(key)
            label = f"{rt.plural}.{rt.group}" if rt else key
            remaining[label] = len(bucket)
            for obj in bucket.values():
                for f in obj["metadata"].get("finalizers") or ():
                    by_finalizer[f] = by_finalizer.get(f, 0) + 1
        conditions = _namespace_conditions(remaining, by_finalizer,
                                           (nso.get("status") or {}).get("conditions") or [],
                                           self.clock.timestamp())
        if remaining:
            if conditions != (nso.get("status") or {}).get("conditions"):
                new = jcopy(nso)
                new["status"]["conditions"] = conditions
                self._commit(self.rt("namespaces"), "MODIFIED", new, nso)
            return None
        final = jcopy(nso)
        final["status"]["conditions"] = conditions
        spec = final.setdefault("spec", {})
        spec["finalizers"] = [f for f in spec.get("finalizers") or () if f != "kubernetes"]
        if spec["finalizers"] or final["metadata"].get("finalizers"):
            if final == nso:
                return None
            return self._commit(self.rt("namespaces"), "MODIFIED", final, nso)
        return self._remove(self.rt("namespaces"), final)

    # ---- controllers run synchronously on every change --------------------------------------
    def _after_change(self, rt: ResourceType, ns: str, old: dict | None, new: dict | None):
        if (new is None and old is not None) or (
                new is not None and new["metadata"].get("deletionTimestamp")):
            self._gc_after_change(rt, ns, old, new)
        if rt.key == CRD_KEY:
            self._crd_changed(old, new)
            return
        if rt.key == "namespaces":
            if old is None and new is not None:
                self._namespace_created(new["metadata"]["name"])
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
        # what an object counts against quota depends on its spec and (pods) on whether it
        # is terminal: a write that changes neither (status, events) moves no quota
        if quotas and not (old is not None and new is not None
                           and old.get("spec") == new.get("spec")
                           and adm.is_terminal(old) == adm.is_terminal(new)):
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
        if rt.key == "configmaps" and self.publish_root_ca and \
                (new or old or {})["metadata"].get("name") == adm.ROOT_CA_CONFIGMAP:
            self._publish_root_ca(ns)
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


#: pkg/controller/namespace/deletion/status_condition_utils.go
_NS_OK = (("NamespaceDeletionDiscoveryFailure", "ResourcesDiscovered",
           "All resources successfully discovered"),
          ("NamespaceDeletionGroupVersionParsingFailure", "ParsedGroupVersions",
           "All legacy kube types successfully parsed"),
          ("NamespaceDeletionContentFailure", "ContentDeleted",
           "All content successfully deleted, may be waiting on finalization"),
          ("NamespaceContentRemaining", "ContentRemoved", "All content successfully removed"),
          ("NamespaceFinalizersRemaining", "ContentHasNoFinalizers",
           "All content-preserving finalizers finished"))


def _namespace_conditions(remaining: dict[str, int], by_finalizer: dict[str, int],
                          previous: list[dict], now: str) -> list[dict]:
    """The namespace deleter's conditions: SomeResourcesRemain ("pods. has 2 resource
    instances") and SomeFinalizersRemain ("example.com/x in 1 resource instances")."""
    bad = {}
    if remaining:
        bad["NamespaceContentRemaining"] = (
            "SomeResourcesRemain", "Some resources are remaining: " + ", ".join(sorted(
                f"{k} has {n} resource instances" for k, n in remaining.items())))
    if by_finalizer:
        bad["NamespaceFinalizersRemaining"] = (
            "SomeFinalizersRemain", "Some content in the namespace has finalizers "
            "remaining: " + ", ".join(sorted(f"{f} in {n} resource instances"
                                              for f, n in by_finalizer.items())))
    before = {c.get("type"): c for c in previous}
    out = []
    for ctype, reason, message in _NS_OK:
        status = "False"
        if ctype in bad:
            status, (reason, message) = "True", bad[ctype]
        prev = before.get(ctype)
        since = prev["lastTransitionTime"] if prev and prev.get("status") == status else now
        out.append({"type": ctype, "status": status, "lastTransitionTime": since,
                    "reason": reason, "message": message})
    return out
