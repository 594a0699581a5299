"""The simulated cluster's clock.

Real mode: ``start + monotonic elapsed * speed + advanced offset``.
Deterministic mode: time moves only through :meth:`Clock.advance`.
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

    def now(self) -> datetime:
        with self._lock:
            elapsed = self._offset
            if not self.deterministic:
                elapsed += (time.monotonic() - self._mono0) * self.speed
        return self._start + timedelta(seconds=elapsed)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("the clock cannot go backwards")
        with self._lock:
            self._offset += seconds

    def timestamp(self) -> str:
        """now() as RFC 3339 seconds, formatted once per second (the create path's hot
        spot: no datetime arithmetic unless the second changed)."""
        with self._lock:
            elapsed = self._offset
            if not self.deterministic:
                elapsed += (time.monotonic() - self._mono0) * self.speed
        second = int((self._start_f + elapsed) // 1)
        cached = self._stamp
        if cached[0] != second:
            cached = self._stamp = (second, rfc3339(self._start + timedelta(seconds=elapsed)))
        return cached[1]
