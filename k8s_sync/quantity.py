"""Kubernetes resource quantities ("500m", "16Gi", "1e3") as exact Decimals, and back.

Pure: used by the observers to sum pod requests and size PVCs, and by the capacity
selectors. ``parse_quantity`` raises ``ValueError`` on anything the API server would
reject, so a bad value fails loudly instead of counting as zero.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

__all__ = ["format_decimal", "parse_quantity"]

_SUFFIXES = {
    "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40, "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60,
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
    "P": Decimal("1e15"), "E": Decimal("1e18"),
}
_QUANTITY = re.compile(
    r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")


def parse_quantity(value: str | int | float) -> Decimal:
    """``"500m"`` -> ``Decimal("0.5")``, ``"1Gi"`` -> ``Decimal(1073741824)``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Decimal(str(value))
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    number, exponent, suffix = match.groups()
    try:
        if exponent:
            return Decimal(number + exponent)
        return Decimal(number) * _SUFFIXES[suffix or ""]
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only numbers
        raise ValueError(f"not a Kubernetes quantity: {value!r}") from exc


def format_decimal(value: Decimal) -> str:
    """A plain decimal string without exponent or trailing zeros: ``"0.5"``, ``"8"``."""
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")
