"""The read side of the Store: selectors, sorted listing with limit/continue, and the watch
history. Lists cost O(log n + objects visited): names are kept sorted per namespace."""
from __future__ import annotations

import base64
import bisect
import json
from collections.abc import Callable, Iterator

from .errors import bad_request, gone
from .resources import ResourceType
from .selectors import parse_field_selector, parse_label_selector
from .watchcache import HistoryEntry, WatchCache

_META_FIELDS = {"metadata.name", "metadata.namespace"}
FIELD_LABELS = {
    "pods": {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
             "spec.serviceAccountName", "status.phase", "status.podIP",
             "status.nominatedNodeName", "spec.hostNetwork"},
    "events": {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
               "involvedObject.uid", "involvedObject.apiVersion",
               "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
               "reportingComponent", "source", "type"},
    "nodes": {"spec.unschedulable"},
    "namespaces": {"status.phase"},
    "secrets": {"type"},
    "persistentvolumeclaims": set(),
}
FIELD_ALIASES = {"events": {"source": "source.component"}}

# resource key -> namespace ("" for cluster-scoped) -> name -> stored object
StoreData = dict[str, dict[str, dict[str, dict]]]
# apiserver/pkg/storage/etcd3/errors.go
EXPIRED_LIST = "The resourceVersion for the provided list is too old."
INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted "
    "between the time the first chunk was returned and now may show up in the list.")


class ReadsMixin:
    """Mixed into Store; uses its _data, _sorted, _caches, _base_rv and _rv."""

    # set by Store.__init__ (annotations only, for the type checker)
    _data: StoreData
    _sorted: dict[tuple[str, str], list[str]]
    _caches: dict[str, WatchCache]
    _base_rv: int
    _rv: int

    def matcher(self, rt: ResourceType, label_selector: str | None,
                field_selector: str | None) -> Callable[[dict], bool] | None:
        lp = parse_label_selector(label_selector)
        # a custom resource selects on metadata.name/namespace and its CRD's selectableFields
        # only (apiextensions-apiserver; docs: custom-resource-definitions/#crd-selectable-
        # fields), anything else is 400 "field label not supported: ..."
        allowed = (_META_FIELDS | set(rt.selectable_fields)) if rt.crd_name else \
            _META_FIELDS | FIELD_LABELS.get(rt.key, set())
        fp = parse_field_selector(field_selector, allowed, FIELD_ALIASES.get(rt.key))
        if lp and fp:
            return lambda o: lp(o) and fp(o)
        return lp or fp

    def _sorted_names(self, key: str, ns: str, bucket: dict) -> list[str]:
        names = self._sorted.get((key, ns))
        if names is None:
            names = self._sorted[(key, ns)] = sorted(bucket)
        return names

    def select(self, rt: ResourceType, namespace: str | None, label_selector: str | None = None,
               field_selector: str | None = None, start_after: str | None = None
               ) -> Iterator[dict]:
        """Stored objects (not copies) sorted by namespace/name, after `start_after`
        ("namespace/name") when given. Cost: O(log n + objects visited)."""
        pred = self.matcher(rt, label_selector, field_selector)
        buckets = self._data.get(rt.key, {})
        if rt.namespaced and namespace:
            spaces = [namespace] if namespace in buckets else []
        else:
            spaces = sorted(buckets)
        after_ns, after_name = (start_after.split("/", 1) if start_after else ("", None))
        for ns in spaces:
            if after_name is not None and ns < after_ns:
                continue
            bucket = buckets[ns]
            names = self._sorted_names(rt.key, ns, bucket)
            i = bisect.bisect_right(names, after_name) if after_name is not None \
                and ns == after_ns else 0
            # index, don't slice: a slice would copy the whole name list for every list call
            # (callers that write while iterating materialise the result first)
            for j in range(i, len(names)):
                obj = bucket.get(names[j])
                if obj is not None and (pred is None or pred(obj)):
                    yield obj

    def list_page(self, rt: ResourceType, namespace: str | None, label_selector=None,
                  field_selector=None, limit: int | None = None, continue_token=None,
                  resource_version: int | None = None):
        """(items, list resourceVersion, continue token or None, remaining count or None).

        Every page of a paginated list shows the collection as it was at the first page's
        resourceVersion (the token carries it), as etcd serves a continue at the token's
        revision (apiserver/pkg/storage/etcd3/store.go GetList); ``resource_version`` lists
        at an older version (resourceVersionMatch=Exact). Both are rebuilt from the
        resource's event history; a version older than the history gets 410 Expired with
        the etcd3 store's messages (apiserver/pkg/storage/etcd3/errors.go), and an expired
        continue token comes back with a token that continues at the latest version
        (resourceVersion -1, handleCompactedErrorForPaging). Like the real server,
        remainingItemCount is only given for lists without selectors."""
        start = None
        at = resource_version
        if continue_token:
            start, token_rv = _decode_continue(continue_token)
            if token_rv == -1:
                at = None
            elif token_rv < self._floor(rt):
                err = gone(INCONSISTENT_CONTINUE)
                err.metadata = {"continue": _encode_continue(start, -1)}
                raise err
            else:
                at = token_rv
        elif at is not None and at < self._floor(rt):
            raise gone(EXPIRED_LIST)
        changes = self._changes_since(rt, at, namespace) if at is not None and \
            at < self._rv else None
        list_rv = self._rv if at is None else at
        selected = bool(label_selector or field_selector)
        if changes:
            return self._snapshot_page(rt, namespace, label_selector, field_selector, limit,
                                       start, changes, list_rv)
        items: list[dict] = []
        token: str | None = None
        remaining: int | None = None
        it = self.select(rt, namespace, label_selector, field_selector, start)
        for obj in it:
            if limit and len(items) >= limit:
                last = items[-1]["metadata"]
                key = f"{last.get('namespace', '') if rt.namespaced else ''}/{last['name']}"
                token = _encode_continue(key, list_rv)
                if not selected:
                    remaining = self._count(rt, namespace) - self._position(rt, key,
                                                                            namespace)
                break
            items.append(obj)
        return items, str(list_rv), token, remaining

    def _snapshot_page(self, rt, namespace, label_selector, field_selector, limit, start,
                       changes: dict, list_rv: int):
        """list_page when objects of rt changed since list_rv: current objects after `start`
        with the changed ones put back as they were at list_rv. O(objects listed)."""
        def key(o: dict) -> tuple[str, str]:
            m = o["metadata"]
            return (m.get("namespace", "") if rt.namespaced else "", m["name"])
        cur = {key(o): o for o in self.select(rt, namespace, None, None, start)}
        after = tuple(start.split("/", 1)) if start else None
        for k, old in changes.items():
            if after is not None and k <= after:
                continue
            if old is None:
                cur.pop(k, None)
            else:
                cur[k] = old
        keys = sorted(cur)
        pred = self.matcher(rt, label_selector, field_selector)
        items: list[dict] = []
        token = remaining = None
        for i, k in enumerate(keys):
            obj = cur[k]
            if pred is not None and not pred(obj):
                continue
            if limit and len(items) >= limit:
                last = key(items[-1])
                token = _encode_continue(f"{last[0]}/{last[1]}", list_rv)
                if pred is None:
                    remaining = len(keys) - i
                break
            items.append(obj)
        return items, str(list_rv), token, remaining

    def _changes_since(self, rt: ResourceType, rv: int, namespace: str | None
                       ) -> dict[tuple[str, str], dict | None]:
        """(namespace, name) -> the object as it was at rv (None: absent) for every object
        of rt written after rv."""
        cache = self._caches.get(rt.key)
        if cache is None:
            return {}
        out: dict[tuple[str, str], dict | None] = {}
        only = namespace if rt.namespaced and namespace else None
        for e in reversed(cache.since(rv)):      # the oldest change after rv wins
            if only is not None and e[3] != only:
                continue
            out[(e[3], e[4]["metadata"]["name"])] = e[5]
        return out

    def _count(self, rt: ResourceType, namespace: str | None) -> int:
        buckets = self._data.get(rt.key, {})
        if rt.namespaced and namespace:
            return len(buckets.get(namespace, ()))
        return sum(len(b) for b in buckets.values())

    def _position(self, rt: ResourceType, key: str, namespace: str | None = None) -> int:
        """How many objects sort at or before namespace/name `key` (in the list of one
        `namespace` when given: earlier namespaces' objects are not in it)."""
        ns, name = key.split("/", 1)
        buckets = self._data.get(rt.key, {})
        before = 0 if rt.namespaced and namespace else \
            sum(len(b) for n, b in buckets.items() if n < ns)
        names = self._sorted_names(rt.key, ns, buckets.get(ns, {}))
        return before + bisect.bisect_right(names, name)

    def _floor(self, rt: ResourceType) -> int:
        """The newest resourceVersion that watches and lists of rt can no longer start from
        (the watch cache's oldest event - 1, cacher/watch_cache.go)."""
        cache = self._caches.get(rt.key)
        return cache.floor if cache is not None else self._base_rv

    def events_since(self, rt: ResourceType, rv: int) -> list[HistoryEntry]:
        """rt's history entries with resourceVersion > rv; 410 when rv fell out of it, with
        the watch cache's message (cacher/watch_cache.go getAllEventsSinceLocked)."""
        floor = self._floor(rt)
        if rv < floor:
            raise gone(f"too old resource version: {rv} ({floor})")
        cache = self._caches.get(rt.key)
        if cache is None or rv >= self._rv:
            return []
        return cache.since(rv)


def _encode_continue(start: str, rv: int) -> str:
    return base64.urlsafe_b64encode(json.dumps(
        {"v": "meta.k8s.io/v1", "rv": rv, "start": start}).encode()).decode()


def _decode_continue(token: str) -> tuple[str, int]:
    try:
        tok = json.loads(base64.urlsafe_b64decode(token.encode()))
        start, rv = tok["start"], int(tok["rv"])
    except (ValueError, KeyError, TypeError):
        raise bad_request("continue key is not valid: incorrect encoded start "
                          "resourceVersion (version meta.k8s.io/v1)") from None
    if not isinstance(start, str) or "/" not in start:
        raise bad_request("continue key is not valid: encoded start key empty")
    return start, rv
