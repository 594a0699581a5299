"""Desired versus observed: decide which objects need a write, then write only those.

``needs_apply`` is pure: an object needs applying when it is missing or when some field
Trainyard sets differs from what the cluster holds. Fields the server adds (uid,
defaults, status, other managers' fields) are ignored, so a cluster that already holds
Trainyard's intent costs reads, never writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from k8s_sync.client import ObjectRef

__all__ = ["ConvergeResult", "ObservedIndex", "converge", "index_observed", "is_subset",
           "needs_apply"]

ObservedIndex = Mapping[tuple[str, str, str | None, str], Mapping[str, Any]]


class _Client(Protocol):
    def read(self, api_version: str, kind: str, name: str,
             namespace: str | None = None) -> dict[str, Any] | None: ...

    def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]: ...


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


def needs_apply(desired: Mapping[str, Any], observed: Mapping[str, Any] | None) -> bool:
    """Whether ``desired`` must be written: missing, or any desired field differs."""
    if observed is None:
        return True
    if (observed.get("metadata") or {}).get("deletionTimestamp"):
        return True  # being deleted: applying again is how it comes back once gone
    wanted = {k: v for k, v in desired.items() if k not in ("apiVersion", "kind", "status")}
    return not is_subset(wanted, observed)


def _key(api_version: str, kind: str, namespace: str | None, name: str) -> tuple:
    return (api_version, kind, namespace or None, name)


def index_observed(objects: Iterable[Mapping[str, Any]]) -> dict[tuple, Mapping[str, Any]]:
    """Index listed objects by (apiVersion, kind, namespace, name)."""
    index: dict[tuple, Mapping[str, Any]] = {}
    for obj in objects:
        meta = obj.get("metadata") or {}
        index[_key(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])] = obj
    return index


@dataclass
class ConvergeResult:
    """What one converge did: the objects written, and how many calls it made."""

    applied: list[ObjectRef] = field(default_factory=list)
    reads: int = 0
    writes: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.applied)


def converge(client: _Client, desired: Iterable[Mapping[str, Any]], *,
             observed: ObservedIndex | None = None, assume_missing: bool = False
             ) -> ConvergeResult:
    """Apply, in order, each desired object that is missing or differs.

    ``observed``: an index from :func:`index_observed` (a relist), used instead of one
    read per object; ``assume_missing``: skip reads entirely (first sync of a new pool:
    every object must be written anyway). Raises the client's K8sError on the first
    failure; objects written before it stay written and a rerun is harmless.
    """
    result = ConvergeResult()
    for obj in desired:
        ref = ObjectRef.of(obj)
        if assume_missing:
            current = None
        elif observed is not None:
            current = observed.get(_key(ref.api_version, ref.kind, ref.namespace, ref.name))
        else:
            current = client.read(ref.api_version, ref.kind, ref.name, ref.namespace)
            result.reads += 1
        if needs_apply(obj, current):
            client.apply(obj)
            result.writes += 1
            result.applied.append(ref)
    return result
