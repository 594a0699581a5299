"""Fault injection: make matching requests fail, slow down or hang."""
from __future__ import annotations

import itertools
import re
import threading
from dataclasses import dataclass, field


@dataclass
class FaultRule:
    id: int
    method: str | None
    path_regex: str
    status: int | None = None
    delay: float = 0.0
    times: int | None = None          # None: unlimited
    timeout: bool = False             # hold the request (past any client timeout)
    message: str | None = None
    retry_after: int = 1
    hits: int = 0
    _re: re.Pattern[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._re = re.compile(self.path_regex)

    def matches(self, method: str, path: str) -> bool:
        if self.method and self.method.upper() != method.upper():
            return False
        return bool(self._re.search(path))

    def to_dict(self) -> dict:
        return {"id": self.id, "method": self.method, "path_regex": self.path_regex,
                "status": self.status, "delay": self.delay, "times": self.times,
                "timeout": self.timeout, "message": self.message, "hits": self.hits,
                "retry_after": self.retry_after}


class Faults:
    """Thread-safe registry. `add(...)` returns the rule; rules with `times` expire after
    that many matches. A rule matches a request by method (None: any) and a regex searched
    in the request path (with query string)."""

    def __init__(self) -> None:
        self._rules: list[FaultRule] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        #: bumped by :meth:`drop_watches`; an open watch that sees it change hangs up
        self.watch_epoch = 0
        self.watches_open = 0
        self.watches_dropped = 0
        self.requests = 0   # every request matched against the rules
        self.faulted = 0    # of them, answered by a rule

    def drop_watches(self) -> int:
        """Make every open watch connection drop (abruptly, as a lost connection would);
        returns how many were open. New watches are not affected."""
        with self._lock:
            self.watch_epoch += 1
            return self.watches_open

    def add(self, method: str | None = None, path_regex: str = ".*", status: int | None = None,
            delay: float = 0.0, times: int | None = None, timeout: bool = False,
            message: str | None = None, retry_after: int = 1) -> FaultRule:
        if status is None and not delay and not timeout:
            raise ValueError("a fault needs a status, a delay or timeout=True")
        if status is not None and not 100 <= int(status) <= 599:
            raise ValueError(f"bad status {status}")
        if times is not None and int(times) < 1:
            raise ValueError("times must be >= 1")
        rule = FaultRule(next(self._ids), method.upper() if method else None, path_regex,
                         int(status) if status is not None else None, float(delay),
                         int(times) if times is not None else None, bool(timeout), message,
                         int(retry_after), 0)
        with self._lock:
            self._rules.append(rule)
        return rule

    def remove(self, rule: FaultRule | int) -> None:
        rid = rule if isinstance(rule, int) else rule.id
        with self._lock:
            self._rules = [r for r in self._rules if r.id != rid]

    def clear(self) -> None:
        """No rules, and the counts start again (open watches stay open)."""
        with self._lock:
            self._rules = []
            self.requests = self.faulted = self.watches_dropped = 0

    def rules(self) -> list[FaultRule]:
        with self._lock:
            return list(self._rules)

    def match(self, method: str, path: str) -> FaultRule | None:
        with self._lock:
            self.requests += 1
            for r in self._rules:
                if r.matches(method, path):
                    r.hits += 1
                    self.faulted += 1
                    if r.times is not None:
                        r.times -= 1
                        if r.times <= 0:
                            self._rules.remove(r)
                    return r
        return None
