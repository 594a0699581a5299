"""Strict helpers that read settings from the environment.

Every setting Trainyard reads from the environment goes through one of these, so a
typo ("ture", "10s") fails loudly at start-up instead of silently meaning "off".
Secrets may come from a file: ``NAME_FILE`` wins over ``NAME`` (mounted Kubernetes
Secrets, Docker secrets).
"""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

__all__ = ["env_bool", "env_float", "env_int", "env_list", "env_secret", "env_str"]

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def env_str(name: str, default: str | None = None, *, required: bool = False) -> str:
    """Return ``$name``; with ``required`` an unset or empty value is an error."""
    value = os.environ.get(name)
    if value is None or value == "":
        if required:
            raise ImproperlyConfigured(f"{name} must be set")
        return default if default is not None else ""
    return value


def env_bool(name: str, default: bool) -> bool:
    """Parse a boolean; only true/false (and 1/0, yes/no, on/off) are accepted."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, not {raw!r}")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    """Parse an integer, optionally bounded below."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, not {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, not {value}")
    return value


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    """Parse a decimal number, optionally bounded below."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, not {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, not {value}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    """Parse a comma-separated list; blanks are dropped."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_secret(name: str, default: str | None = None) -> str | None:
    """Read ``$NAME_FILE`` (which must exist when set), else ``$NAME``, else the default."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={path} cannot be read: {exc}") from None
    value = os.environ.get(name)
    return value if value else default
