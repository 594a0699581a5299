"""``{{ amount|amount:resource_key }}``: a quota amount written by its unit's rule (see
:mod:`core.numbers`): GiB amounts (memory, GPU memory, storage) with at most one decimal,
counts and cores as quantities; ``{{ amount|unit_of:resource_key }}``: its unit, singular
or plural as the amount wants ("1 card", "2 cards"). Load with ``{% load quota_amounts %}``."""

from __future__ import annotations

from typing import Any

from django import template

from core import numbers
from tenants.catalog import GIB_KINDS, Resource

register = template.Library()


@register.filter
def amount(value: Any, key: str = "") -> str:
    kind = str(key or "").partition(":")[0]
    places = numbers.MEMORY_PLACES if kind in GIB_KINDS else numbers.QUANTITY_PLACES
    return numbers.quantity(value, places)


@register.filter
def unit_of(value: Any, key: str = "") -> str:
    try:
        return Resource.parse(str(key)).unit_for(value if value is not None else 0)
    except (ValueError, TypeError, ArithmeticError):
        return ""
