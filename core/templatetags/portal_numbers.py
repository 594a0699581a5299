"""Number filters, one per unit (see :mod:`core.numbers`). Load with
``{% load portal_numbers %}``: ``{{ amount|quantity }}``, ``{{ gib_value|gib }}``,
``{{ total|money }}`` or ``{{ total|money:invoice.currency }}``, ``{{ price|unit_price }}``."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html

from core import numbers

register = template.Library()


register.filter("quantity", numbers.quantity)
register.filter("gib", numbers.gib)
# an invoice line's quantity, a month's GPU-hours billed: the one billed-quantity rule
register.filter("billed_quantity", numbers.billed_quantity)


def _with_currency(text: str) -> str:
    """The currency code marked ``translate="no"``: it stays as written in any language."""
    amount, sep, code = text.rpartition(" ")
    if not sep:
        return text
    return format_html('{}&nbsp;<span translate="no">{}</span>', amount, code)


@register.filter
def money(value: Any, currency: str | None = None) -> str:
    return _with_currency(numbers.money(value, currency or None))


@register.filter
def unit_price(value: Any, currency: str | None = None) -> str:
    return _with_currency(numbers.unit_price(value, currency or None))


# a number for an input's value or placeholder: plain, no grouping (``1E+2`` -> 100)
register.filter("decimal_input", numbers.api_decimal)
# money without its currency, for a sentence that names the currency itself
register.filter("money_amount", numbers.money_amount)
