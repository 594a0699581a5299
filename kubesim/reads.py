"""The read side of the Store: selectors, sorted listing with limit/continue, and the watch
history. Lists cost O(log n + objects visited): names are kept sorted per namespace."""
from __future__ import annotations

import base64
import bisect
import json
from collections import deque
from collections.abc import Callable, Iterator

from .errors import bad_request, gone
from .resources import ResourceType
from .selectors import parse_field_selector, parse_label_selector

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
# (resourceVersion, event type, resource type, namespace, stored object)
HistoryEntry = tuple[int, str, ResourceType, str, dict]


class ReadsMixin:
    """Mixed into Store; uses its _data, _sorted, _history and _rv."""

    # set by Store.__init__ (annotations only, for the type checker)
    _data: StoreData
    _sorted: dict[tuple[str, str], list[str]]
    _history: deque[HistoryEntry]
    _rv: int

    def matcher(self, rt: ResourceType, label_selector: str | None,
                field_selector: str | None) -> Callable[[dict], bool] | None:
        lp = parse_label_selector(label_selector)
        allowed = None if rt.crd_name else _META_FIELDS | FIELD_LABELS.get(rt.key, set())
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
                  field_selector=None, limit: int | None = None, continue_token=None):
        """(items, list resourceVersion, continue token or None, remaining count or None).
        Like the real server, remainingItemCount is only given for lists without selectors."""
        start = None
        if continue_token:
            try:
                tok = json.loads(base64.urlsafe_b64decode(continue_token.encode()))
                start, token_rv = tok["start"], int(tok["rv"])
            except (ValueError, KeyError, TypeError):
                raise bad_request("continue key is not valid: incorrect encoded start "
                                  "resourceVersion (version meta.k8s.io/v1)") from None
            if token_rv < self._history_floor():
                raise gone("The provided continue parameter is too old to display a consistent "
                           "list result. You can start a new list without the continue "
                           "parameter.")
        items: list[dict] = []
        token: str | None = None
        remaining: int | None = None
        it = self.select(rt, namespace, label_selector, field_selector, start)
        for obj in it:
            if limit and len(items) >= limit:
                last = items[-1]["metadata"]
                key = f"{last.get('namespace', '') if rt.namespaced else ''}/{last['name']}"
                token = base64.urlsafe_b64encode(json.dumps(
                    {"v": "meta.k8s.io/v1", "rv": self._rv, "start": key}).encode()).decode()
                if not label_selector and not field_selector:
                    remaining = self._count(rt, namespace) - self._position(rt, key,
                                                                            namespace)
                break
            items.append(obj)
        return items, str(self._rv), token, remaining

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

    def _history_floor(self) -> int:
        """The oldest resourceVersion that watches and continue tokens may still use."""
        return self._history[0][0] - 1 if self._history else self._rv

    def events_since(self, rv: int) -> list[HistoryEntry]:
        """History entries with resourceVersion > rv; 410 when rv fell out of the window."""
        floor = self._history_floor()
        if rv < floor:
            raise gone(f"too old resource version: {rv} ({floor})")
        if not self._history or rv >= self._rv:
            return []
        start = max(0, len(self._history) - (self._rv - rv))
        return [e for e in list(self._history)[start:] if e[0] > rv]
