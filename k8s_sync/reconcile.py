"""Desired versus observed: decide which objects to write and which to delete, then do it.

The one way Trainyard converges a set of Kubernetes objects (a pool's, or the
cluster-wide PriorityClasses) is :func:`converge`. Its decision is pure (:func:`plan`):

* **Write** a desired object when it is missing or when some field Trainyard sets
  differs from what the cluster holds (:func:`needs_apply`). Fields the server adds
  (uid, defaults, status, other managers' fields) are ignored, so a cluster that already
  holds Trainyard's intent costs reads, never writes.
* **Delete** an object of the owner's kinds that carries *all* of the owner's labels
  (Trainyard's managed-by label among them) but is no longer declared
  (:func:`stale_objects`). An object without those labels is never deleted, whoever
  created it, nor a Namespace (removing a pool's namespace is a decision of its own,
  ``tenants.tasks._remove_namespace``), nor a namespaced object outside the owner's
  namespace.

Level-triggered and idempotent: a second converge of the same intent writes and deletes
nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from k8s_sync import manifests, naming
from k8s_sync.client import ObjectRef

__all__ = ["NEVER_DELETED_KINDS", "ConvergeResult", "ObservedIndex", "Owner", "Plan",
           "converge", "index_observed", "is_subset", "needs_apply", "plan", "pool_owner",
           "stale_objects"]

ObservedIndex = Mapping[tuple[str, str, str | None, str], Mapping[str, Any]]
Kind = tuple[str, str]  # (apiVersion, kind)

#: Kinds a converge never deletes, even when an owned object is no longer declared.
NEVER_DELETED_KINDS: frozenset[Kind] = frozenset({("v1", "Namespace")})


class _Client(Protocol):
    def read(self, api_version: str, kind: str, name: str,
             namespace: str | None = None) -> dict[str, Any] | None: ...

    def list_objects(self, api_version: str, kind: str, namespace: str | None = None, *,
                     label_selector: str | None = None) -> list[dict[str, Any]]: ...

    def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]: ...

    def ensure_absent(self, api_version: str, kind: str, name: str,
                      namespace: str | None = None) -> bool: ...


@dataclass(frozen=True)
class Owner:
    """What marks one owner's objects in the cluster.

    ``labels``: the labels every object of the owner carries, Trainyard's managed-by
    label included (an object lacking one of them is not the owner's); ``kinds``: the
    (apiVersion, kind) the owner may have, listed by ``labels`` and pruned; ``namespace``:
    the owner's namespace (a namespaced object elsewhere is not the owner's).
    """

    labels: Mapping[str, str]
    kinds: tuple[Kind, ...]
    namespace: str | None = None
    #: own namespaced objects in every namespace (the Kueue objects: LocalQueues in
    #: each pool's namespace) rather than only in ``namespace``
    any_namespace: bool = False

    def __post_init__(self) -> None:
        if self.labels.get(naming.LABEL_MANAGED_BY) != naming.MANAGED_BY:
            raise ValueError("an owner's labels must include "
                             f"{naming.LABEL_MANAGED_BY}={naming.MANAGED_BY}: converge deletes "
                             "only objects Trainyard manages")
        if len(self.labels) < 2:
            raise ValueError("an owner needs labels beyond managed-by (whose objects?)")

    @property
    def selector(self) -> str:
        """The label selector that lists the owner's objects."""
        return naming.label_selector(dict(self.labels))

    def owns(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj`` (as listed) is one of the owner's objects."""
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        if (obj.get("apiVersion"), obj.get("kind")) not in self.kinds:
            return False
        if any(labels.get(key) != value for key, value in self.labels.items()):
            return False
        namespace = meta.get("namespace")
        return self.any_namespace or namespace is None or namespace == self.namespace


def pool_owner(tenant_slug: str, pool: str) -> Owner:
    """The owner of one tenant pool's objects: its labels, :data:`manifests.POOL_KINDS`
    and its namespace."""
    return Owner(labels=naming.pool_labels(tenant_slug, pool), kinds=manifests.POOL_KINDS,
                 namespace=naming.namespace_name(tenant_slug, pool))


def is_subset(desired: Any, observed: Any) -> bool:
    """True when every field of ``desired`` is present in ``observed`` with the same value.

    Maps may have extra keys in ``observed``; lists must have the same length and match
    item by item; scalars compare equal (an int equals its string form, since the
    server may render numbers in quantities as strings).
    """
    if isinstance(desired, Mapping):
        if not isinstance(observed, Mapping):
            return False
        return all(key in observed and is_subset(value, observed[key])
                   for key, value in desired.items())
    if isinstance(desired, list):
        return (isinstance(observed, list) and len(desired) == len(observed)
                and all(is_subset(d, o) for d, o in zip(desired, observed, strict=True)))
    if desired == observed:
        return True
    if isinstance(desired, (int, float)) and not isinstance(desired, bool):
        return str(desired) == str(observed)
    return False


#: Maps whose keys Trainyard alone decides, compared by their key sets too: a key that is
#: no longer declared (a ResourceQuota limit lifted, e.g. when a pool may borrow any idle
#: capacity, or when a suspension ends) must be written away, which server-side apply does.
EXACT_MAPS: Mapping[Kind, tuple[tuple[str, ...], ...]] = {
    ("v1", "ResourceQuota"): (("spec", "hard"),),
}


def _at(obj: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(part)  # type: ignore[assignment]
    return obj


def needs_apply(desired: Mapping[str, Any], observed: Mapping[str, Any] | None) -> bool:
    """Whether ``desired`` must be written: missing, any desired field differs, or a map of
    :data:`EXACT_MAPS` holds a key ``desired`` no longer declares."""
    if observed is None:
        return True
    if _terminating(observed):
        return True  # being deleted: applying again is how it comes back once gone
    wanted = {k: v for k, v in desired.items() if k not in ("apiVersion", "kind", "status")}
    if not is_subset(wanted, observed):
        return True
    for path in EXACT_MAPS.get((desired.get("apiVersion", ""), desired.get("kind", "")), ()):
        mine, theirs = _at(desired, path), _at(observed, path)
        if isinstance(mine, Mapping) and isinstance(theirs, Mapping) and set(theirs) - set(mine):
            return True
    return False


def _terminating(obj: Mapping[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def _key(api_version: str, kind: str, namespace: str | None, name: str) -> tuple:
    return (api_version, kind, namespace or None, name)


def _key_of(obj: Mapping[str, Any]) -> tuple:
    meta = obj.get("metadata") or {}
    return _key(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])


def index_observed(objects: Iterable[Mapping[str, Any]]) -> dict[tuple, Mapping[str, Any]]:
    """Index listed objects by (apiVersion, kind, namespace, name)."""
    return {_key_of(obj): obj for obj in objects}


def stale_objects(desired: Iterable[Mapping[str, Any]], observed: Iterable[Mapping[str, Any]],
                  owner: Owner) -> list[ObjectRef]:
    """The observed objects ``owner`` owns (:meth:`Owner.owns`) that ``desired`` no longer
    declares, in observed order: what a converge deletes.

    Never a kind of :data:`NEVER_DELETED_KINDS`, and never an object already being
    deleted (its deletion is under way; asking again would only count twice).
    """
    declared = {_key_of(obj) for obj in desired}
    stale = []
    for obj in observed:
        if (not owner.owns(obj) or _terminating(obj)
                or (obj["apiVersion"], obj["kind"]) in NEVER_DELETED_KINDS
                or _key_of(obj) in declared):
            continue
        stale.append(ObjectRef.of(obj))
    return stale


@dataclass(frozen=True)
class Plan:
    """What a converge must do: the desired objects to write (in order), and the owned
    objects to delete."""

    apply: tuple[Mapping[str, Any], ...]
    delete: tuple[ObjectRef, ...]

    @property
    def empty(self) -> bool:
        return not self.apply and not self.delete


def plan(desired: Iterable[Mapping[str, Any]], observed: Iterable[Mapping[str, Any]],
         owner: Owner | None = None) -> Plan:
    """Compare ``desired`` with ``observed`` (what the cluster holds of them, and, with an
    ``owner``, every object it lists for that owner). Pure.

    An object missing from ``observed`` is taken as missing in the cluster. Without an
    ``owner`` nothing is deleted.
    """
    desired = list(desired)
    observed = list(observed)
    index = index_observed(observed)
    to_apply = tuple(obj for obj in desired if needs_apply(obj, index.get(_key_of(obj))))
    to_delete = tuple(stale_objects(desired, observed, owner)) if owner is not None else ()
    return Plan(apply=to_apply, delete=to_delete)


@dataclass
class ConvergeResult:
    """What one converge did: the objects written and deleted, and its read calls."""

    applied: list[ObjectRef] = field(default_factory=list)
    deleted: list[ObjectRef] = field(default_factory=list)
    reads: int = 0

    @property
    def writes(self) -> int:
        return len(self.applied)

    @property
    def deletes(self) -> int:
        return len(self.deleted)

    @property
    def changed(self) -> bool:
        return bool(self.applied or self.deleted)


def converge(client: _Client, desired: Iterable[Mapping[str, Any]], *,
             owner: Owner | None = None, assume_missing: bool = False) -> ConvergeResult:
    """Make the cluster hold ``desired``: apply (server-side), in order, each object that is
    missing or differs; then, with an ``owner``, delete the owner's objects that are no
    longer declared (see :func:`stale_objects`).

    Reads: with an ``owner``, one list call per owned kind (by the owner's label selector);
    a desired object of another kind, or every one without an ``owner``, is read by itself.
    ``assume_missing`` skips every read and deletes nothing (the first sync of a new pool:
    every object must be written anyway; a later converge prunes). Raises the client's
    K8sError on the first failure; what was done before it stays done and a rerun is
    harmless.
    """
    desired = list(desired)
    result = ConvergeResult()
    observed: list[Mapping[str, Any]] = []
    if not assume_missing:
        listed_kinds = set(owner.kinds) if owner is not None else set()
        if owner is not None:
            for api_version, kind in owner.kinds:
                observed += client.list_objects(api_version, kind,
                                                label_selector=owner.selector)
                result.reads += 1
        for obj in desired:
            ref = ObjectRef.of(obj)
            if (ref.api_version, ref.kind) in listed_kinds:
                continue
            current = client.read(ref.api_version, ref.kind, ref.name, ref.namespace)
            result.reads += 1
            if current is not None:
                observed.append(current)
    todo = plan(desired, observed, None if assume_missing else owner)
    for obj in todo.apply:
        client.apply(obj)
        result.applied.append(ObjectRef.of(obj))
    for ref in todo.delete:
        if client.ensure_absent(ref.api_version, ref.kind, ref.name, ref.namespace):
            result.deleted.append(ref)
    return result
