"""Quantity rendering and freezing shared by every spec (``k8s_sync.specs``).

Quantities are given in catalog units (CPU cores, GiB, counts) and rendered into
canonical Kubernetes quantity strings here (``"16"``, ``"500m"``, ``"64Gi"``), because the
``kubernetes`` client 37 rejects non-string quantities in typed bodies and because the
server normalises quantities anyway, so rendering them canonically keeps resyncs no-ops.
Mapping fields of a spec are copied into read-only mappings (:func:`_frozen`,
:func:`_deep_freeze`); :func:`thaw` turns them back into fresh dicts and lists.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from types import MappingProxyType
from typing import Any

GPU_RESOURCE = "nvidia.com/gpu"
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
_MIG_PROFILE = re.compile(r"^[0-9]+g\.[0-9]+gb$")

Number = int | float | Decimal | str


# --- quantity rendering ---------------------------------------------------------------------


def _decimal(value: Number, what: str) -> Decimal:
    if isinstance(value, bool):
        raise ValueError(f"{what}: expected a number, got {value!r}")
    try:
        number = Decimal(str(value))
    except InvalidOperation as exc:
        raise ValueError(f"{what}: not a number: {value!r}") from exc
    if not number.is_finite() or number < 0:
        raise ValueError(f"{what}: must be a finite number >= 0, got {value!r}")
    return number


def cpu_quantity(cores: Number) -> str:
    """Render CPU cores canonically: ``16`` -> ``"16"``, ``0.5`` -> ``"500m"``.

    Raises ``ValueError`` for negatives or precision finer than a millicore.
    """
    number = _decimal(cores, "cpu cores")
    if number == number.to_integral_value():
        return str(int(number))
    milli = number * 1000
    if milli != milli.to_integral_value():
        raise ValueError(f"cpu cores: finer than 1m: {cores!r}")
    return f"{int(milli)}m"


def gib_quantity(gib: Number) -> str:
    """Render GiB canonically: ``64`` -> ``"64Gi"``, ``0.5`` -> ``"512Mi"``, 2048 -> ``"2Ti"``."""
    number = _decimal(gib, "GiB")
    if number == 0:
        return "0"  # the API server renders any zero as "0"; match it so resyncs are no-ops
    for factor, suffix in ((Decimal(1024), "Ti"), (Decimal(1), "Gi"), (Decimal(1) / 1024, "Mi")):
        scaled = number / factor
        if scaled == scaled.to_integral_value():
            return f"{int(scaled)}{suffix}"
    raise ValueError(f"GiB: finer than 1Mi: {gib!r}")


def _count(value: int, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what}: expected an int >= 0, got {value!r}")
    return str(value)


def mig_resource(profile: str) -> str:
    """``"1g.10gb"`` -> ``"nvidia.com/mig-1g.10gb"`` (device-plugin mixed strategy name)."""
    profile = profile.removeprefix("mig-")
    if not _MIG_PROFILE.match(profile):
        raise ValueError(f"not a MIG profile like '1g.10gb': {profile!r}")
    return f"nvidia.com/mig-{profile}"


def _frozen(mapping: Mapping[str, object] | None) -> Mapping[str, object]:
    return MappingProxyType(dict(sorted((mapping or {}).items())))


# --- freezing and plain fields ----------------------------------------------------------------


def _int_field(value: object, name: str, *, minimum: int = 0,
               maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name}: expected an int, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f">= {minimum}" if maximum is None else f"in {minimum}..{maximum}"
        raise ValueError(f"{name}: must be {bound}, got {value}")
    return value


def _deep_freeze(value: Any) -> Any:
    """Dicts -> read-only mappings, lists -> tuples (recursively), so a spec cannot change."""
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): _deep_freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_deep_freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """The inverse of the freezing done by specs: fresh dicts and lists (for manifests)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [thaw(v) for v in value]
    return value
