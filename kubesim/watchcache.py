"""The bounded event history of one resource, sized as the API server's watch cache.

kube-apiserver keeps a ring of recent events per resource (the cacher's watchCache,
staging/src/k8s.io/apiserver/pkg/storage/cacher/watch_cache.go). A watch resumes from it; a
resourceVersion older than its oldest event gets 410 Expired "too old resource version: X (Y)"
with Y = oldest - 1 (getAllEventsSinceLocked). Its capacity starts at 100
(defaultLowerBoundCapacity), doubles up to 100*1024 (defaultUpperBoundCapacity) while the
oldest event is fresher than eventFreshDuration (75 s: the bookmark frequency + 15 s) and
halves when the last quarter is stale (resizeCacheLocked). Freshness is measured on the real
clock, as the API server does, not on the simulated one.

``Store(watch_cache_size=N)`` fixes the capacity at N (no resizing), so a test can run the
410 path with a handful of writes. Each entry also keeps the object as it was before the
event (the cacher's PrevObject), which serves two things the real server does: a MODIFIED
that takes an object out of a watch's selector reaches that watch as DELETED, and lists at an
older resourceVersion (continue pages, resourceVersionMatch=Exact) see that snapshot.
"""
from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .resources import ResourceType

# (resourceVersion, event type, resource type, namespace, stored object, previous object)
HistoryEntry = tuple[int, str, "ResourceType", str, dict, "dict | None"]

LOWER_BOUND = 100          # cacher/watch_cache.go defaultLowerBoundCapacity
UPPER_BOUND = 100 * 1024   # cacher/watch_cache.go defaultUpperBoundCapacity
FRESH_SECONDS = 75.0       # cacher DefaultEventFreshDuration (bookmark frequency + 15 s)


class WatchCache:
    __slots__ = ("capacity", "clock", "entries", "floor", "fresh", "lower", "times", "upper")

    def __init__(self, floor: int, size: int | None = None, clock=time.monotonic):
        self.entries: deque[HistoryEntry] = deque()
        self.times: deque[float] = deque()
        self.lower = self.upper = self.capacity = size or LOWER_BOUND
        if size is None:
            self.upper = UPPER_BOUND
        self.floor = floor       # the newest resourceVersion a watch may no longer resume from
        self.fresh = FRESH_SECONDS
        self.clock = clock

    def append(self, entry: HistoryEntry) -> None:
        self.entries.append(entry)
        if self.lower == self.upper:          # fixed size
            if len(self.entries) > self.capacity:
                self._evict(len(self.entries) - self.capacity)
            return
        now = self.clock()
        self.times.append(now)
        n = len(self.entries)
        if n <= self.capacity:
            return
        # full: grow while the oldest event is fresh, shrink when a quarter is stale
        if now - self.times[0] < self.fresh and self.capacity < self.upper:
            self.capacity = min(self.capacity * 2, self.upper)
            return
        if self.capacity > self.lower and \
                now - self.times[n - 1 - self.capacity // 4] > self.fresh:
            self.capacity = max(self.capacity // 2, self.lower)
        self._evict(n - self.capacity)

    def _evict(self, k: int) -> None:
        for _ in range(k):
            self.entries.popleft()
            if self.times:
                self.times.popleft()
        # oldest deliverable event is the first one kept: floor = oldest - 1
        self.floor = self.entries[0][0] - 1 if self.entries else self.floor

    def since(self, rv: int) -> list[HistoryEntry]:
        """Entries newer than rv, oldest first (the caller checked rv >= floor)."""
        out = []
        for e in reversed(self.entries):
            if e[0] <= rv:
                break
            out.append(e)
        out.reverse()
        return out
