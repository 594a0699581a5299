"""Words for researchers: resource names, ordinals, times."""

from __future__ import annotations

from datetime import datetime, timedelta


def resource_name(key: str, amount: int | None = None) -> str:
    """"gpu:NVIDIA-H800" -> "NVIDIA-H800"; "mig:1g.10gb" -> "1g.10gb MIG instances"."""
    kind, _, name = key.partition(":")
    if kind == "mig":
        return f"{name} MIG instance" + ("" if amount == 1 else "s")
    return name or "GPUs"


def amount(n: int, key: str) -> str:
    """"8 NVIDIA-H800", "3 1g.10gb MIG instances"."""
    return f"{n} {resource_name(key, n)}"


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def clock(when: datetime, now: datetime) -> str:
    """HH:MM UTC, with the date when it is not within the next 20 hours."""
    if when - now > timedelta(hours=20):
        return when.strftime("%d %b %H:%M UTC")
    return when.strftime("%H:%M UTC")


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def tiers_phrase(tiers: set[str]) -> str:
    """{"production"} -> "production"; {"batch", "development"} -> "development and batch"."""
    from .types import TIER_RANK

    ordered = sorted(tiers, key=lambda t: (TIER_RANK.get(t, 99), t))
    if len(ordered) <= 1:
        return "".join(ordered)
    return ", ".join(ordered[:-1]) + " and " + ordered[-1]
