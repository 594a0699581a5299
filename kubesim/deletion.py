"""Deletion as kube-apiserver's generic registry and the garbage collector do it.

Sources (kubernetes/kubernetes):
- staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go: ``Delete``,
  ``updateForGracefulDeletionAndFinalizers``, ``deletionFinalizersForGarbageCollection``
  (``orphan`` / ``foregroundDeletion`` from propagationPolicy, then the object's finalizers,
  then the kind's default), ``markAsDeleting`` (deletionTimestamp now, grace 0, generation+1)
  and ``finalizeDelete``: a store without ``ReturnDeletedObject`` answers an immediate delete
  with ``Status{status: Success, details: {name, group, kind: <resource>, uid}}``; one with
  it (pods, namespaces, services, serviceaccounts, storageclasses) answers with the object.
  An object kept by finalizers or a grace period is answered as stored (deletionTimestamp).
- staging/src/k8s.io/apiserver/pkg/registry/rest/delete.go ``BeforeDelete``: precondition
  conflicts, a pod's grace period may only be shortened once deletion started.
- staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/validation ``ValidateDeleteOptions``.
- pkg/controller/garbagecollector/garbagecollector.go: Orphan strips the owner's reference
  from the dependents then drops ``orphan``; Foreground deletes the dependents and drops
  ``foregroundDeletion`` once no dependent with ``blockOwnerDeletion: true`` remains;
  Background deletes dependents whose owners are all gone. A dependent that still has a
  live owner only loses the reference. Here the collector runs synchronously after the
  change that needs it (the DELETE still answers with the object as the registry left it).
- pkg/registry/batch/job/strategy.go ``DefaultGarbageCollectionPolicy``: batch/v1 Jobs
  orphan their pods unless a policy is given.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from .clock import rfc3339
from .errors import conflict, invalid
from .jsonutil import jcopy
from .resources import ResourceType

if TYPE_CHECKING:
    from .clock import Clock
    from .reads import StoreData
    from .resources import Registry

FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"
POLICIES = ("Foreground", "Background", "Orphan")
#: registries built with ReturnDeletedObject: true (pkg/registry/core/{pod,namespace,service,
#: serviceaccount}/storage/storage.go, pkg/registry/storage/storageclass/storage/storage.go,
#: pkg/registry/resource/{deviceclass,resourceclaim,resourceclaimtemplate,resourceslice}/
#: storage/storage.go)
RETURNS_OBJECT = frozenset({"pods", "namespaces", "services", "serviceaccounts",
                            "storageclasses.storage.k8s.io",
                            "deviceclasses.resource.k8s.io", "resourceclaims.resource.k8s.io",
                            "resourceclaimtemplates.resource.k8s.io",
                            "resourceslices.resource.k8s.io"})
#: kinds whose default garbage-collection policy is OrphanDependents
ORPHAN_BY_DEFAULT = frozenset({"jobs.batch"})


def validate_delete_options(policy, orphan_dependents) -> None:
    """ValidateDeleteOptions: 422 on DeleteOptions.meta.k8s.io."""
    causes = []
    if orphan_dependents is not None and policy is not None:
        causes.append({"field": "propagationPolicy", "reason": "FieldValueInvalid",
                       "message": f'Invalid value: "{policy}": orphanDependents and '
                                  'deletionPropagation cannot be both set'})
    if policy is not None and policy not in POLICIES:
        causes.append({"field": "propagationPolicy", "reason": "FieldValueNotSupported",
                       "message": f'Unsupported value: "{policy}": supported values: '
                                  '"Foreground", "Background", "Orphan", "nil"'})
    if causes:
        raise invalid("DeleteOptions", "meta.k8s.io", "", causes)


def delete_status(rt: ResourceType, obj: dict) -> dict:
    """finalizeDelete's answer for registries that do not return the deleted object."""
    meta = obj["metadata"]
    details = {"name": meta["name"], **({"group": rt.group} if rt.group else {}),
               "kind": rt.plural, "uid": meta.get("uid")}
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": details}


def _gc_finalizers(rt: ResourceType, finalizers: list, policy: str | None,
                   orphan_dependents: bool | None) -> list:
    """deletionFinalizersForGarbageCollection: the finalizers after this delete."""
    if orphan_dependents is not None:
        orphan, foreground = orphan_dependents, False
    elif policy is not None:
        orphan, foreground = policy == "Orphan", policy == "Foreground"
    else:
        first = next((f for f in finalizers if f in (ORPHAN, FOREGROUND)), None)
        orphan = first == ORPHAN if first else rt.key in ORPHAN_BY_DEFAULT
        foreground = first == FOREGROUND
    out = [f for f in finalizers if f not in (ORPHAN, FOREGROUND)]
    if orphan:
        out.append(ORPHAN)
    if foreground:
        out.append(FOREGROUND)
    return out


class DeletionMixin:
    """Mixed into Store: delete and the garbage collector."""

    if TYPE_CHECKING:  # provided by Store
        clock: Clock
        registry: Registry
        _data: StoreData
        _owned: dict[str, set[tuple[str, str, str]]] | None
        _gc_busy: set[str]

        def rt(self, resource: str) -> ResourceType: ...

        def raw(self, rt: ResourceType, name: str, ns: str | None) -> dict | None: ...

        def _ns_of(self, rt: ResourceType, namespace: str | None,
                   obj: dict | None = None) -> str: ...

        def _get_or_404(self, rt: ResourceType, name: str, ns: str) -> dict: ...

        def _commit(self, rt: ResourceType, etype: str, new: dict,
                    old: dict | None) -> dict: ...

        def _delete_namespace(self, rt: ResourceType, ns_obj: dict,
                              dry_run: bool = False) -> dict: ...

    # ---- the registry's delete ------------------------------------------------------------
    def delete(self, resource: str, name: str, *, namespace: str | None = None,
               grace_period_seconds: int | None = None, propagation_policy: str | None = None,
               dry_run: bool = False, preconditions: dict | None = None,
               orphan_dependents: bool | None = None) -> dict:
        """Delete (or start deleting) an object; returns it as the registry left it."""
        return jcopy(self.delete_ex(resource, name, namespace=namespace,
                                    grace_period_seconds=grace_period_seconds,
                                    propagation_policy=propagation_policy, dry_run=dry_run,
                                    preconditions=preconditions,
                                    orphan_dependents=orphan_dependents)[0])

    def delete_ex(self, resource: str, name: str, *, namespace: str | None = None,
                  grace_period_seconds: int | None = None,
                  propagation_policy: str | None = None, dry_run: bool = False,
                  preconditions: dict | None = None,
                  orphan_dependents: bool | None = None) -> tuple[dict, bool]:
        """(object, deleted now). The object is the stored one: do not mutate it."""
        validate_delete_options(propagation_policy, orphan_dependents)
        rt = self.rt(resource)
        ns = self._ns_of(rt, namespace)
        old = self._get_or_404(rt, name, ns)
        meta = old["metadata"]
        if rt.key == "namespaces":
            self._check_preconditions(rt, old, preconditions, namespace_style=True)
            return self._delete_namespace(rt, old, dry_run), False
        self._check_preconditions(rt, old, preconditions)
        finalizers = _gc_finalizers(rt, meta.get("finalizers") or [], propagation_policy,
                                    orphan_dependents)
        graceful = rt.key == "pods"
        if not graceful and not finalizers:   # the common case: gone at once, one copy
            if dry_run:
                return old, True
            return self._commit(rt, "DELETED", jcopy(old), old), True
        new = jcopy(old)
        nmeta = new["metadata"]
        period = 0
        if graceful:
            dgps = meta.get("deletionGracePeriodSeconds")
            if meta.get("deletionTimestamp"):
                if not dgps:
                    graceful = False            # already at 0: finalizers decide
                elif grace_period_seconds is not None and max(
                        grace_period_seconds, 0 if grace_period_seconds >= 0 else 1) < dgps:
                    period = grace_period_seconds if grace_period_seconds >= 0 else 1
                    start = datetime.fromisoformat(meta["deletionTimestamp"].replace(
                        "Z", "+00:00")) - timedelta(seconds=dgps)
                    nmeta["deletionTimestamp"] = rfc3339(start + timedelta(seconds=period))
                    nmeta["deletionGracePeriodSeconds"] = period
                else:
                    return old, False           # pending graceful deletion: unchanged
            else:
                period = self._pod_grace(old, grace_period_seconds)
                nmeta["deletionTimestamp"] = rfc3339(self.clock.now()
                                                     + timedelta(seconds=period))
                nmeta["deletionGracePeriodSeconds"] = period
                if nmeta.get("generation"):
                    nmeta["generation"] += 1
        if finalizers != (meta.get("finalizers") or []):
            nmeta["finalizers"] = finalizers
        keep = bool(finalizers) or (graceful and period > 0)
        if keep:
            if not graceful:   # markAsDeleting
                if not meta.get("deletionTimestamp") and nmeta.get("generation"):
                    nmeta["generation"] += 1
                now = self.clock.timestamp()
                if not meta.get("deletionTimestamp") or meta["deletionTimestamp"] > now:
                    nmeta["deletionTimestamp"] = now
                nmeta["deletionGracePeriodSeconds"] = 0
            if new == old:
                return old, False
            if dry_run:
                return new, False
            return self._commit(rt, "MODIFIED", new, old), False
        if dry_run:
            return new, True
        return self._commit(rt, "DELETED", new, old), True

    def _pod_grace(self, pod: dict, requested: int | None) -> int:
        """podStrategy.CheckGracefulDelete (pkg/registry/core/pod/strategy.go)."""
        spec = pod.get("spec") or {}
        default = spec.get("terminationGracePeriodSeconds")
        period: int = requested if requested is not None else (
            30 if default is None else int(default))
        if not spec.get("nodeName") or (pod.get("status") or {}).get("phase") in (
                "Succeeded", "Failed"):
            period = 0
        return 1 if period < 0 else period

    def _check_preconditions(self, rt: ResourceType, obj: dict, pre: dict | None,
                             namespace_style: bool = False) -> None:
        if not pre:
            return
        meta = obj["metadata"]
        for key, field, why in (("uid", "UID", "deleted and then recreated"),
                                ("resourceVersion", "ResourceVersion", "modified")):
            want = pre.get(key)
            if want and want != meta.get(key):
                if namespace_style:   # pkg/registry/core/namespace/storage/storage.go
                    raise conflict(rt.plural, rt.group, meta["name"],
                                   f"Precondition failed: {field} in precondition: {want}, "
                                   f"{field} in object meta: {meta.get(key)}")
                # rest.BeforeDelete: the conflict names the kind, not the resource
                err = conflict(rt.kind, rt.group, meta["name"],
                               f"the {field} in the precondition ({want}) does not match the "
                               f"{field} in record ({meta.get(key)}). The object might have "
                               f"been {why}")
                err.details = {"name": meta["name"], **({"group": rt.group} if rt.group
                                                         else {}), "kind": rt.kind}
                raise err

    # ---- the garbage collector ------------------------------------------------------------
    def _index_owners(self, key: str, ns: str, name: str, old_refs, new_refs) -> None:
        owned = self._owned
        if owned is None:
            return
        entry = (key, ns, name)
        for ref in old_refs or ():
            deps = owned.get(ref.get("uid"))
            if deps is not None:
                deps.discard(entry)
                if not deps:
                    del owned[ref.get("uid")]
        for ref in new_refs or ():
            owned.setdefault(ref.get("uid"), set()).add(entry)

    def _dependents_of(self, uid: str) -> list[tuple[ResourceType, dict]]:
        if self._owned is None:
            self._owned = {}
            for key, buckets in self._data.items():
                for ns, bucket in buckets.items():
                    for name, obj in bucket.items():
                        for ref in obj["metadata"].get("ownerReferences") or ():
                            self._owned.setdefault(ref.get("uid"), set()).add((key, ns, name))
        out = []
        for key, ns, name in sorted(self._owned.get(uid, ())):
            drt = self.registry.find(key)
            dep = self._data.get(key, {}).get(ns, {}).get(name) if drt else None
            if drt is not None and dep is not None:
                out.append((drt, dep))
        return out

    def _owner_of(self, ref: dict, ns: str) -> tuple[ResourceType, dict] | bool | None:
        """The live owner a reference names; None when gone, True when its kind is unknown
        (never collect on a guess)."""
        av, kind = ref.get("apiVersion", ""), ref.get("kind")
        group = av.split("/")[0] if "/" in av else ""
        ort = next((r for r in self.registry.all() if r.kind == kind and r.group == group
                    and not r.view_of), None)
        if ort is None:
            return True
        obj = self.raw(ort, ref.get("name", ""), ns if ort.namespaced else "")
        if obj is None or obj["metadata"].get("uid") != ref.get("uid"):
            return None
        return ort, obj

    def _gc_after_change(self, rt: ResourceType, ns: str, old: dict | None,
                         new: dict | None) -> None:
        if new is not None:
            fins = new["metadata"].get("finalizers")
            if fins and new["metadata"].get("deletionTimestamp") and (
                    ORPHAN in fins or FOREGROUND in fins):
                self._gc_owner(rt, new)
            return
        assert old is not None
        meta = old["metadata"]
        if self._owned is None or meta.get("uid") in self._owned:
            self._gc_dependents(meta.get("uid", ""))
        for ref in meta.get("ownerReferences") or ():
            owner = self._owner_of(ref, ns)
            if isinstance(owner, tuple) and FOREGROUND in (
                    owner[1]["metadata"].get("finalizers") or ()) and \
                    owner[1]["metadata"].get("deletionTimestamp"):
                self._gc_owner(*owner)

    def _gc_owner(self, rt: ResourceType, owner: dict) -> None:
        uid = owner["metadata"]["uid"]
        if uid in self._gc_busy:
            return
        self._gc_busy.add(uid)
        try:
            fins = owner["metadata"].get("finalizers") or []
            if ORPHAN in fins:
                for drt, dep in self._dependents_of(uid):
                    self._drop_refs(drt, dep, {uid})
                self._drop_finalizer(rt, owner, ORPHAN)
                return
            blocking = False
            for drt, dep in self._dependents_of(uid):
                self._collect(drt, dep, waiting_owner=uid)
                dmeta = dep["metadata"]
                cur = self.raw(drt, dmeta["name"], dmeta.get("namespace"))
                if cur is not None and any(
                        r.get("uid") == uid and r.get("blockOwnerDeletion")
                        for r in cur["metadata"].get("ownerReferences") or ()):
                    blocking = True
            if not blocking:
                self._drop_finalizer(rt, owner, FOREGROUND)
        finally:
            self._gc_busy.discard(uid)

    def _gc_dependents(self, uid: str) -> None:
        """Background: the owner is gone; collect what depended on it."""
        for drt, dep in self._dependents_of(uid):
            self._collect(drt, dep)

    def _collect(self, drt: ResourceType, dep: dict, waiting_owner: str | None = None) -> None:
        """attemptToDeleteItem: delete a dependent with no live owner left, else drop the
        references to owners that are gone or waiting for their dependents."""
        dmeta = dep["metadata"]
        if dmeta.get("deletionTimestamp"):
            return
        ns = dmeta.get("namespace", "")
        solid, stale = False, set()
        for ref in dmeta.get("ownerReferences") or ():
            if ref.get("uid") == waiting_owner:
                stale.add(ref.get("uid"))
                continue
            owner = self._owner_of(ref, ns)
            if owner is None:
                stale.add(ref.get("uid"))
            elif not isinstance(owner, tuple) or FOREGROUND not in (
                    owner[1]["metadata"].get("finalizers") or ()):
                solid = True
            else:
                stale.add(ref.get("uid"))
        if solid:
            self._drop_refs(drt, dep, stale)
            return
        fins = dmeta.get("finalizers") or ()
        has_deps = bool(self._dependents_of(dmeta.get("uid", "")))
        policy = "Orphan" if ORPHAN in fins else "Foreground" if (
            FOREGROUND in fins or (waiting_owner and has_deps)) else "Background"
        self.delete_ex(drt.key, dmeta["name"], namespace=ns or None, propagation_policy=policy)

    def _drop_refs(self, drt: ResourceType, dep: dict, uids: set) -> None:
        dmeta = dep["metadata"]
        cur = self.raw(drt, dmeta["name"], dmeta.get("namespace"))
        if cur is None or not uids:
            return
        refs = cur["metadata"].get("ownerReferences") or []
        kept = [r for r in refs if r.get("uid") not in uids]
        if len(kept) == len(refs):
            return
        new = jcopy(cur)
        if kept:
            new["metadata"]["ownerReferences"] = kept
        else:
            new["metadata"].pop("ownerReferences", None)
        self._commit(drt, "MODIFIED", new, cur)

    def _drop_finalizer(self, rt: ResourceType, obj: dict, finalizer: str) -> None:
        meta = obj["metadata"]
        cur = self.raw(rt, meta["name"], meta.get("namespace"))
        if cur is None or cur["metadata"].get("uid") != meta.get("uid") or finalizer not in (
                cur["metadata"].get("finalizers") or ()):
            return
        new = jcopy(cur)
        rest = [f for f in cur["metadata"]["finalizers"] if f != finalizer]
        if rest:
            new["metadata"]["finalizers"] = rest
        else:
            new["metadata"].pop("finalizers", None)
        # ShouldDeleteDuringUpdate (registry/store.go): no finalizers left, deleting, grace 0
        if not rest and new["metadata"].get("deletionTimestamp") and not (
                new["metadata"].get("deletionGracePeriodSeconds") or 0) > 0:
            self._commit(rt, "DELETED", new, cur)
        else:
            self._commit(rt, "MODIFIED", new, cur)
