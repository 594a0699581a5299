"""Estimated start times: simulate the queue forward on aggregate capacity per resource key.

The simulation is deliberately simple and fast (O(events log events) per key): every
holder releases its GPUs at its expected end; queued jobs start in the engine's order,
skipping (backfilling past) jobs that do not fit yet, within their pool's ceiling. It
ignores node boundaries, future preemptions and new arrivals, so it is an estimate.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass, field

TPK = tuple[str, str, str]


@dataclass
class KeySim:
    """One resource key's state for the simulation; times are seconds from now."""

    free: int
    """Free units now (after this call's admissions), aggregate over schedulable nodes."""
    releases: list[tuple[float, float, int, TPK]] = field(default_factory=list)
    """(end p50, end p90, units, tenant pool key) of every holder."""
    use: dict[TPK, int] = field(default_factory=dict)
    ceiling: dict[TPK, int] = field(default_factory=dict)
    queue: list[tuple[int, int, TPK, float, float]] = field(default_factory=list)
    """(job id, units, tenant pool key, duration p50, duration p90) in admission order."""


def simulate(sim: KeySim, which: int) -> dict[int, float]:
    """Start time (seconds from now) of each queued job, using p50 (which=0) or p90 (1) times.

    Jobs that never start in the simulation are absent from the result.
    """
    events: list[tuple[float, int, int, TPK]] = []
    for seq, (end50, end90, units, tpk) in enumerate(sim.releases):
        events.append((max(end50 if which == 0 else end90, 0.0), seq, units, tpk))
    heapq.heapify(events)
    seq = len(events)
    buckets: dict[int, list[int]] = defaultdict(list)
    for idx, entry in enumerate(sim.queue):
        buckets[entry[1]].append(idx)  # indexes ascend: already heaps
    blocked: dict[TPK, list[int]] = defaultdict(list)
    use = dict(sim.use)
    free = sim.free
    started: dict[int, float] = {}
    t = 0.0
    queue = sim.queue
    while True:
        while True:
            best = -1
            for units, heap in buckets.items():
                if heap and units <= free and (best < 0 or heap[0] < best):
                    best = heap[0]
            if best < 0:
                break
            job_id, units, tpk, d50, d90 = queue[best]
            heapq.heappop(buckets[units])
            if use.get(tpk, 0) + units > sim.ceiling.get(tpk, 0):
                blocked[tpk].append(best)
                continue
            started[job_id] = t
            free -= units
            use[tpk] = use.get(tpk, 0) + units
            heapq.heappush(events, (t + (d50 if which == 0 else d90), seq, units, tpk))
            seq += 1
        if not events or len(started) == len(queue):
            break
        t = events[0][0]
        while events and events[0][0] <= t:
            _, _, units, tpk = heapq.heappop(events)
            free += units
            use[tpk] = use.get(tpk, 0) - units
            for idx in blocked.pop(tpk, ()):
                heapq.heappush(buckets[queue[idx][1]], idx)
    return started
