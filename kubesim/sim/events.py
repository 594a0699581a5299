"""core/v1 Events written by the simulated controllers, with repeat aggregation and a TTL."""

from __future__ import annotations

import collections
import contextlib
import logging

from kubesim.sim.util import fmt_time, stable_hash

log = logging.getLogger("kubesim.sim.events")


class EventRecorder:
    """Creates Events; a repeat (same object, reason, message, type, source) bumps
    count and lastTimestamp instead of creating another Event."""

    def __init__(self, store, now_fn, *, ttl_seconds: float = 3600.0, enabled: bool = True):
        self.store = store
        self.now_fn = now_fn  # -> float epoch seconds
        self.ttl = ttl_seconds
        self.enabled = enabled
        self._agg: dict[tuple, list] = {}  # key -> [namespace, name, count]
        self._order: collections.deque = collections.deque()  # (created_at, key)
        self._seq = 0
        self.written = 0

    def record(
        self,
        obj: dict,
        etype: str,
        reason: str,
        message: str,
        *,
        component: str,
        host: str | None = None,
        kind: str | None = None,
        api_version: str | None = None,
        field_path: str | None = None,
    ) -> None:
        if not self.enabled:
            return
        md = obj.get("metadata") or {}
        ns = md.get("namespace") or "default"
        uid = md.get("uid", "")
        key = (ns, uid, md.get("name"), reason, message, etype, component)
        now = self.now_fn()
        ts = fmt_time(now)
        hit = self._agg.get(key)
        if hit is not None:
            hit[2] += 1
            try:
                self.store.patch(
                    "events",
                    hit[1],
                    {"count": hit[2], "lastTimestamp": ts},
                    patch_type="merge",
                    namespace=hit[0],
                    copy=False,
                )
                self.written += 1
                return
            except Exception:  # deleted meanwhile: fall through and create a new one
                del self._agg[key]
        self._seq += 1
        name = f"{md.get('name', 'obj')}.{stable_hash(uid, reason, message, self._seq):016x}"
        ref = {
            "apiVersion": api_version or obj.get("apiVersion", "v1"),
            "kind": kind or obj.get("kind", ""),
            "name": md.get("name", ""),
            "uid": uid,
        }
        if md.get("namespace"):
            ref["namespace"] = md["namespace"]
        if md.get("resourceVersion"):
            ref["resourceVersion"] = md["resourceVersion"]
        if field_path:
            ref["fieldPath"] = field_path
        source = {"component": component}
        if host:
            source["host"] = host
        ev = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": ns},
            "involvedObject": ref,
            "reason": reason,
            "message": message,
            "type": etype,
            "source": source,
            "firstTimestamp": ts,
            "lastTimestamp": ts,
            "count": 1,
            "reportingComponent": component,
            "reportingInstance": host or f"{component}-kubesim",
        }
        try:
            self.store.create("events", ev, namespace=ns, copy=False)   # built here, handed over
        except Exception as exc:  # namespace gone, etc.: events are best effort
            log.debug("event not recorded: %s", exc)
            return
        self.written += 1
        self._agg[key] = [ns, name, 1]
        self._order.append((now, key))

    def expire(self) -> None:
        """Delete events older than the TTL (only the ones this recorder wrote)."""
        if not self._order:
            return
        cutoff = self.now_fn() - self.ttl
        while self._order and self._order[0][0] < cutoff:
            _, key = self._order.popleft()
            hit = self._agg.pop(key, None)
            if hit is None:
                continue
            with contextlib.suppress(Exception):
                self.store.delete("events", hit[1], namespace=hit[0])
