"""Form fields every app's forms use."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django import forms


def plain_decimal(value: Decimal) -> Decimal:
    """``value`` without trailing fractional zeros and without an exponent: 85.000 -> 85,
    0.250 -> 0.25, 1E+2 -> 100. Raises ``InvalidOperation`` past Decimal's precision."""
    if value == value.to_integral_value():
        return value.quantize(Decimal(1))
    return value.normalize()


class DecimalField(forms.DecimalField):
    """A ``DecimalField`` for which trailing zeros are not precision.

    A stored ``Decimal('85.000')`` is shown as ``85`` and accepted back by a field with
    ``decimal_places=1``, so a page always saves its own values unchanged; a number too
    large for its field is a field error, never a server error.
    """

    def to_python(self, value: Any) -> Decimal | None:  # type: ignore[override]
        number = super().to_python(value)
        if number is None:
            return None
        try:
            return plain_decimal(number)
        except InvalidOperation:  # beyond Decimal's precision: the bounds say how far
            return number

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, Decimal) and value.is_finite():
            try:
                return format(plain_decimal(value), "f")
            except InvalidOperation:
                return value
        return value
