"""Label selectors (equality and set-based) and field selectors, compiled to predicates."""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .errors import bad_request

Predicate = Callable[[dict], bool]
_EMPTY: dict = {}

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_SET_RE = re.compile(rf"^\s*(!?)\s*({_KEY})\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")
_EQ_RE = re.compile(rf"^\s*({_KEY})\s*(==|=|!=)\s*([-A-Za-z0-9_.]*)\s*$")


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in (p.strip() for p in parts) if p]


def _label_req(term: str) -> Callable[[dict], bool]:
    m = _EQ_RE.match(term)
    if m:
        key, op, val = m.groups()
        if op == "!=":
            return lambda labels: labels.get(key) != val
        return lambda labels: labels.get(key) == val
    m = _SET_RE.match(term)
    if m:
        neg, key, op, vals = m.groups()
        if op:
            if neg:
                raise bad_request(f"unable to parse requirement: {term!r}")
            values = {v.strip() for v in vals.split(",") if v.strip()}
            if op == "in":
                return lambda labels: labels.get(key) in values
            return lambda labels: labels.get(key) not in values
        if neg:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise bad_request(f"unable to parse requirement: found '{term}', expected: valid selector")


def parse_label_selector(text: str | None) -> Predicate | None:
    if not text or not text.strip():
        return None
    reqs = [_label_req(t) for t in _split_top(text)]
    if len(reqs) == 1:
        req = reqs[0]
        return lambda obj: req(obj["metadata"].get("labels") or _EMPTY)

    def pred(obj: dict) -> bool:
        labels = obj["metadata"].get("labels") or _EMPTY
        return all(r(labels) for r in reqs)
    return pred


def field_value(obj: dict, path: str) -> Any:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def parse_field_selector(text: str | None, allowed: set[str] | None = None,
                         aliases: dict[str, str] | None = None) -> Predicate | None:
    """Field selectors support =, == and != on a field path; `allowed` limits the labels
    (the real server answers 400 'field label not supported' for others) and `aliases`
    maps a label to the path it reads (events: source -> source.component)."""
    if not text or not text.strip():
        return None
    reqs = []
    for term in _split_top(text):
        m = re.match(r"^\s*([A-Za-z0-9_.\[\]/-]+)\s*(==|=|!=)\s*(.*?)\s*$", term)
        if not m:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        path, op, val = m.groups()
        if allowed is not None and path not in allowed:
            raise bad_request(f'field label not supported: {path}')
        reqs.append(((aliases or {}).get(path, path), op == "!=", val))

    def pred(obj: dict) -> bool:
        for path, neg, val in reqs:
            v = field_value(obj, path)
            sv = "" if v is None else (str(v).lower() if isinstance(v, bool) else str(v))
            if (sv == val) == neg:
                return False
        return True
    return pred
