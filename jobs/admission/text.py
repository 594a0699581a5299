"""Words for researchers, as stored texts: resource names, amounts, tiers, pools, times.

The engine translates nothing (of Django it imports only ``core.choices.Tier``): it builds plain
``{"code": ..., "args": {...}}`` literals (``core.texts``' stored-text shape) and the
page, the e-mail or the API renders them in the reader's language. Every code used here
and in :mod:`jobs.admission.engine` / :mod:`jobs.admission.explain` is registered, with
its English and translatable template, in :mod:`jobs.texts`.

Small texts that many reasons share (a tier, a pool, a resource) are built once and
shared: nobody mutates a stored text.

``ordinal`` and ``clock`` are the English renderings (``jobs.texts`` uses ``ordinal`` for
English pages; both are kept for logs and tests).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from core.choices import PoolKind
from core.resources import kinds
from tenants.demand import from_engine

from .types import TIER_RANK, TIERS, Text

_NO_ARGS: dict[str, Any] = {}

_TIER: dict[str, dict[str, Any]] = {
    tier: {"code": f"jobs.tier.{tier}", "args": _NO_ARGS} for tier in TIERS}
_POOL: dict[str, dict[str, Any]] = {
    pool: {"code": f"jobs.pool.{pool}", "args": _NO_ARGS} for pool in PoolKind.values}
_RESOURCE: dict[str, dict[str, Any]] = {}
_PLAIN = {k: f"jobs.resource.{k.replace('-', '_')}"
          for k in kinds(lambda d: d.job and d.qualifier is None)}
"""Dimensions a job consumes without a qualifier (``core.resources``), by their
resource-name code (``jobs.texts`` registers one per dimension: a test holds them)."""
_PLAIN_AMOUNT = {k: f"jobs.amount.{k.replace('-', '_')}" for k in _PLAIN}
_TWENTY_HOURS = timedelta(hours=20)


def tier(name: str) -> Text:
    """A tier's name ("development"), translated when shown; unknown tiers as they are."""
    return _TIER.get(name) or name


def pool(name: str) -> Text:
    """A pool's name ("dev"), translated when shown; unknown pools as they are."""
    return _POOL.get(name) or name


def resource_name(key: str) -> dict[str, Any]:
    """"gpu:NVIDIA-H800" -> "NVIDIA-H800"; "mig:1g.10gb" -> "1g.10gb MIG instances"."""
    found = _RESOURCE.get(key)
    if found is None:
        kind, _, name = key.partition(":")
        if kind == "mig":
            found = {"code": "jobs.resource.mig", "args": {"profile": name}}
        elif key in _PLAIN:
            found = {"code": _PLAIN[key], "args": _NO_ARGS}
        elif kind == "shared":
            found = {"code": "jobs.resource.shared", "args": {"model": name}}
        elif name:
            found = {"code": "jobs.resource.gpu", "args": {"model": name}}
        else:
            found = {"code": "jobs.resource.gpus", "args": _NO_ARGS}
        _RESOURCE[key] = found
    return found


def amount(n: int, key: str) -> dict[str, Any]:
    """"8 NVIDIA-H800", "3 1g.10gb MIG instances", "12.5 CPU cores" (``n`` in the engine's
    units: cpu, memory and gpu-memory in thousandths)."""
    kind, _, name = key.partition(":")
    if kind == "mig":
        return {"code": "jobs.amount.mig", "args": {"n": n, "profile": name}}
    if key in _PLAIN_AMOUNT:
        return {"code": _PLAIN_AMOUNT[key], "args": {"n": from_engine(key, n)}}
    if kind == "shared":
        return {"code": "jobs.amount.shared", "args": {"n": n, "model": name}}
    if name:
        return {"code": "jobs.amount.gpu", "args": {"n": n, "model": name}}
    return {"code": "jobs.amount.gpus", "args": {"n": n}}


def position(n: int) -> dict[str, Any]:
    """A 1-based position: "3rd" in English, the number where the sentence places it."""
    return {"code": "jobs.ordinal", "args": {"n": n}}


_QUEUE_PLACES: dict[tuple[bool, int, str], dict[str, Any]] = {}
_QUEUE_PLACES_MAX = 200_000


def queue_place(n: int, pool_name: str, *, behind_own: bool) -> dict[str, Any]:
    """"3rd in the dev queue" (and "behind jobs of your own tenant").

    The same few thousand texts recur in every pass, so they are built once and shared
    (a pass of a long queue then allocates one list per waiting job, not five objects:
    fewer young objects for the garbage collector to trace)."""
    key = (behind_own, n, pool_name)
    found = _QUEUE_PLACES.get(key)
    if found is None:
        code = "jobs.wait.position_own" if behind_own else "jobs.wait.position"
        found = {"code": code, "args": {"n": position(n), "pool": pool(pool_name)}}
        if len(_QUEUE_PLACES) < _QUEUE_PLACES_MAX:
            _QUEUE_PLACES[key] = found
    return found


def when(at: datetime, now: datetime) -> dict[str, Any]:
    """A clock time (UTC), with the date when it is not within the next 20 hours."""
    code = "jobs.clock.date" if at - now > _TWENTY_HOURS else "jobs.clock.time"
    return {"code": code, "args": {"at": at.isoformat()}}


def tiers(names: set[str]) -> Text:
    """{"production"} -> "production"; {"batch", "development"} -> "development and batch"."""
    ordered = [tier(t) for t in sorted(names, key=lambda t: (TIER_RANK.get(t, 99), t))]
    if len(ordered) <= 1:
        return ordered[0] if ordered else ""
    if len(ordered) == 2:
        return {"code": "jobs.tiers.two", "args": {"a": ordered[0], "b": ordered[1]}}
    first: Text = ordered[0]
    for more in ordered[1:-2]:   # unknown tiers beyond the three: "a, b, c and d"
        first = {"code": "jobs.tiers.comma", "args": {"a": first, "b": more}}
    return {"code": "jobs.tiers.three",
            "args": {"a": first, "b": ordered[-2], "c": ordered[-1]}}


# -- English renderings ------------------------------------------------------------------


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def clock(at: datetime, now: datetime) -> str:
    """HH:MM UTC, with the date when it is not within the next 20 hours."""
    if at - now > _TWENTY_HOURS:
        return at.strftime("%d %b %H:%M UTC")
    return at.strftime("%H:%M UTC")
