"""Numbers as people read them and as the API sends them: one format per unit.

* a **quantity** (cores, cards, instances, GiB of quota, GPU-hours): never an exponent
  (``Decimal("1E+2")`` is ``100``), at most :data:`QUANTITY_PLACES` decimals, trailing
  zeros dropped, thousands grouped: ``1234.5000`` -> ``1,234.5``;
* **memory**: always GiB, at most one decimal: ``8948.719`` -> ``8,948.7 GiB``;
* **money**: always two decimals and the currency: ``1234.5`` -> ``1,234.50 USD``; a unit
  price keeps up to six decimals (``0.012500`` -> ``0.0125 USD``), never fewer than two;
* a **billed quantity** (an invoice line's GPU-hours, core-hours, GiB-hours, GiB-months,
  GiB sent; a month's GPU-hours billed): at most :data:`BILLED_PLACES` (4) decimals, the
  line's stored precision (``billing.pricing.QUANTITY_PLACES``), trailing zeros dropped,
  on the page, the PDF, the CSV and the API alike (``billed_quantity``; ``group=False``
  for the CSV and the API): ``738.90061`` -> ``738.9006`` everywhere, ``24.0000`` -> ``24``;
  its unit price is ``unit_price_plain`` (2 to 6 decimals) and its amount money (2);
* the **API** sends plain decimal strings: no exponent, no grouping, trailing zeros
  dropped (``api_decimal``).

The decimal separator is the active language's; the thousands separator is the language's
or, where it has none (Chinese), a comma, grouped by three. Template filters:
``{% load portal_numbers %}`` (``quantity``, ``gib``, ``money``, ``unit_price``).
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.utils.formats import get_format
from django.utils.translation import gettext as _

QUANTITY_PLACES = 3
MEMORY_PLACES = 1
MONEY_PLACES = 2
UNIT_PRICE_PLACES = 6
BILLED_PLACES = 4
DASH = "—"


def to_decimal(value: Any) -> Decimal | None:
    """``value`` (Decimal, int, float, numeric string) as a finite Decimal, else None."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        number = value if isinstance(value, Decimal) else Decimal(str(value))
    except (InvalidOperation, ValueError, TypeError):
        return None
    return number if number.is_finite() else None


def plain(value: Decimal, places: int, *, keep: int = 0) -> str:
    """``value`` rounded half-up to ``places`` decimals, written without an exponent, with
    trailing zeros dropped down to ``keep`` decimals; no grouping ("-1E+1" -> "-10")."""
    rounded = value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    text = format(rounded, "f")
    if "." in text:
        whole, frac = text.split(".")
        frac = frac.rstrip("0")
        frac = frac + "0" * (keep - len(frac)) if len(frac) < keep else frac
        text = f"{whole}.{frac}" if frac else whole
    elif keep:
        text = f"{text}.{'0' * keep}"
    return "0" + text[2:] if text.startswith("-0") and not text.strip("-0.") else text


def grouped(text: str) -> str:
    """A plain decimal string with the language's separators, thousands grouped by 3."""
    sign = "-" if text.startswith("-") else ""
    whole, _sep, frac = text.lstrip("-").partition(".")
    thousands = get_format("THOUSAND_SEPARATOR") or ","
    decimal_sep = get_format("DECIMAL_SEPARATOR") or "."
    groups: list[str] = []
    while len(whole) > 3:
        groups.insert(0, whole[-3:])
        whole = whole[:-3]
    groups.insert(0, whole)
    out = sign + thousands.join(groups)
    return f"{out}{decimal_sep}{frac}" if frac else out


def quantity(value: Any, places: int = QUANTITY_PLACES) -> str:
    """A count or amount for people: ``1E+2`` -> ``100``, ``1234.5000`` -> ``1,234.5``."""
    number = to_decimal(value)
    return DASH if number is None else grouped(plain(number, places))


def gib(value: Any) -> str:
    """Memory in GiB: ``8948.719`` -> ``8,948.7 GiB`` (the one memory rule)."""
    number = to_decimal(value)
    if number is None:
        return DASH
    return _("%(amount)s GiB") % {"amount": grouped(plain(number, MEMORY_PLACES))}


def _priced(value: Any, places: int, currency: str | None) -> str:
    number = to_decimal(value)
    if number is None:
        return DASH
    return f"{grouped(plain(number, places, keep=MONEY_PLACES))} " \
           f"{currency or settings.TRAINYARD_CURRENCY}"


def money(value: Any, currency: str | None = None) -> str:
    """An amount of money with its currency: ``1234.5`` -> ``1,234.50 USD``."""
    return _priced(value, MONEY_PLACES, currency)


def unit_price(value: Any, currency: str | None = None) -> str:
    """A price per unit (up to 6 decimals, at least 2) with its currency."""
    return _priced(value, UNIT_PRICE_PLACES, currency)


def api_decimal(value: Any) -> str:
    """A Decimal for the API (and for messages, CSV, input values): plain, no exponent, no
    grouping (``1E+2`` -> ``"100"``); "" for no number."""
    number = to_decimal(value)
    if number is None:
        return ""
    places = max(0, -number.as_tuple().exponent)  # type: ignore[operator]
    return plain(number, places)


def billed_quantity(value: Any, *, group: bool = True) -> str:
    """A billed quantity (see the module): up to 4 decimals, trailing zeros dropped;
    thousands grouped for people, plain (``group=False``) for the CSV and the API."""
    number = to_decimal(value)
    if number is None:
        return DASH if group else ""
    text = plain(number, BILLED_PLACES)
    return grouped(text) if group else text


def unit_price_plain(value: Any) -> str:
    """A unit price without currency or grouping, for the CSV and the API: 2 to 6
    decimals, as :func:`unit_price` shows it (``1.650000`` -> ``1.65``)."""
    number = to_decimal(value)
    return "" if number is None else plain(number, UNIT_PRICE_PLACES, keep=MONEY_PLACES)


def money_plain(value: Any) -> str:
    """An amount of money for the CSV and the API: exactly 2 decimals, no grouping."""
    number = to_decimal(value)
    return "" if number is None else plain(number, MONEY_PLACES, keep=MONEY_PLACES)


def money_amount(value: Any) -> str:
    """An amount of money without the currency, for a text that names it already."""
    number = to_decimal(value)
    return DASH if number is None else grouped(plain(number, MONEY_PLACES, keep=MONEY_PLACES))
