"""The cluster's clock: the wall clock, as a real API server and kubelet read it.

Every stamp kubesim writes (``creationTimestamp``, conditions, ``managedFields``, events,
container states, log lines) is :meth:`Clock.now`:

* real mode: ``start + monotonic elapsed + advanced offset`` (the wall clock: ``start`` is
  the wall time when the clock was made);
* deterministic mode (tests): ``start + advanced offset``; time moves only through
  :meth:`Clock.advance`, which is the test's wall clock.

``speed`` never moves the clock. It only shortens what the *simulated workload* takes
(:meth:`Clock.wall_seconds`): a container that "trains for 2 h" at speed 60 runs for 2
minutes of this clock, and its timestamps say 2 minutes. What Kubernetes itself waits
(back-offs, deadlines, TTLs, retries, grace periods) is wall time, as in a real cluster.
"""
from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta


def rfc3339(dt: datetime) -> str:
    """'YYYY-MM-DDTHH:MM:SSZ' (seconds precision, as Kubernetes metav1.Time)."""
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


class Clock:
    def __init__(self, *, speed: float = 1.0, deterministic: bool = False,
                 start: datetime | None = None):
        if speed <= 0:
            raise ValueError("speed must be > 0")
        self.speed = float(speed)
        self.deterministic = deterministic
        if start is None:
            start = datetime.now(UTC).replace(microsecond=0)
        elif start.tzinfo is None:
            start = start.replace(tzinfo=UTC)
        self._start = start.astimezone(UTC)
        self._start_f = self._start.timestamp()
        self._mono0 = time.monotonic()
        self._offset = 0.0
        self._lock = threading.Lock()
        self._stamp: tuple[int, str] = (-1, "")

    def _elapsed(self) -> float:
        with self._lock:
            elapsed = self._offset
            if not self.deterministic:
                elapsed += time.monotonic() - self._mono0
        return elapsed

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self._elapsed())

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("the clock cannot go backwards")
        with self._lock:
            self._offset += seconds

    def wall_seconds(self, simulated: float) -> float:
        """How long on this clock simulated work of ``simulated`` seconds takes (a
        container's run, its start-up, its steps): ``simulated / speed``."""
        return simulated / self.speed

    def simulated_seconds(self, wall: float) -> float:
        """The simulated work done in ``wall`` seconds of this clock: ``wall * speed``."""
        return wall * self.speed

    def timestamp(self) -> str:
        """now() as RFC 3339 seconds, formatted once per second (the create path's hot
        spot: no datetime arithmetic unless the second changed)."""
        elapsed = self._elapsed()
        second = int((self._start_f + elapsed) // 1)
        cached = self._stamp
        if cached[0] != second:
            cached = self._stamp = (second, rfc3339(self._start + timedelta(seconds=elapsed)))
        return cached[1]
