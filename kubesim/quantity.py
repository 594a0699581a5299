"""Kubernetes resource.Quantity: parsing, canonical formatting, arithmetic on Fractions.

Canonical form follows apimachinery: the suffix family of the input (binary SI,
decimal SI or decimal exponent) is kept, and the value is written with the
largest suffix that keeps it an integer (``1024Mi`` -> ``1Gi``, ``1000m`` -> ``1``,
``0.5`` -> ``500m``). Precision below 1m (nano for SI) is rounded up like the API server.
"""
from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: dict[str, Fraction | int] = {
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": 1,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_RE = re.compile(r"^([+-]?)(\d+\.?\d*|\.\d+)"
                 r"(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE]([+-]?\d+))?$")


class QuantityError(ValueError):
    pass


def _parse(value) -> tuple[Fraction, str]:
    """Returns (value, format) where format is 'binary', 'decimal' or 'exponent'."""
    if type(value) is str:
        return _parse_str(value)
    return _parse_any(value)


@lru_cache(maxsize=8192)
def _parse_str(value: str) -> tuple[Fraction, str]:
    """_parse of a string, remembered: the same few quantities are parsed on every write
    (Fractions are immutable, so the cached ones are shared safely)."""
    return _parse_any(value)


def _parse_any(value) -> tuple[Fraction, str]:
    if isinstance(value, bool):
        raise QuantityError(f"quantities must match the regular expression: {value!r}")
    if isinstance(value, int):
        return Fraction(value), "decimal"
    if isinstance(value, float):
        return Fraction(str(value)), "decimal"
    if not isinstance(value, str):
        raise QuantityError(f"invalid quantity {value!r}")
    m = _RE.match(value.strip())
    if not m:
        raise QuantityError(
            "quantities must match the regular expression "
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
    sign, num, suffix, exp = m.groups()
    n = Fraction(num)
    if sign == "-":
        n = -n
    if exp is not None:
        return n * Fraction(10) ** int(exp), "exponent"
    if suffix in _BINARY:
        return n * _BINARY[suffix], "binary"
    return n * _DECIMAL[suffix or ""], "decimal"


def parse_quantity(value) -> Fraction:
    return _parse(value)[0]


def _round_up(v: Fraction, unit: Fraction) -> Fraction:
    q = v / unit
    if q.denominator != 1:
        q = Fraction(-((-q.numerator) // q.denominator))  # ceil
    return q * unit


@lru_cache(maxsize=8192, typed=True)
def format_quantity(v: Fraction, fmt: str = "decimal") -> str:
    if v < 0:
        return "-" + format_quantity(-v, fmt)
    if v == 0:
        return "0"
    if fmt == "binary" and v.denominator == 1 and v >= 1024:
        for suf in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            if v % _BINARY[suf] == 0:
                return f"{v // _BINARY[suf]}{suf}"
        return str(v.numerator)
    if fmt == "binary" and v.denominator == 1:
        return str(v.numerator)
    if fmt == "binary":
        fmt = "decimal"
    v = _round_up(v, Fraction(1, 10**9))
    if fmt == "exponent":
        # decimal exponent form, multiple of 3: 1e3, 12e6
        mant, e = v, 0
        while mant.denominator != 1:
            mant *= 1000
            e -= 3
        while mant != 0 and mant % 1000 == 0:
            mant /= 1000
            e += 3
        return f"{mant.numerator}" + (f"e{e}" if e else "")
    for suf in ("E", "P", "T", "G", "M", "k", "", "m", "u", "n"):
        unit = _DECIMAL[suf]
        q = v / unit
        if q.denominator == 1 and (q >= 1 or suf == "n"):
            return f"{q.numerator}{suf}"
    return str(v)


def canonical(value) -> str:
    """Canonical string of a quantity (as the API server stores it)."""
    if type(value) is str:
        return _canonical_str(value)
    v, fmt = _parse(value)
    return format_quantity(v, fmt)


@lru_cache(maxsize=8192)
def _canonical_str(value: str) -> str:
    v, fmt = _parse_str(value)
    return format_quantity(v, fmt)
