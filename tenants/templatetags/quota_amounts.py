"""``{{ amount|amount:resource_key }}``: a quota amount written by its unit's rule (see
:mod:`core.numbers`): GiB amounts (memory, GPU memory, storage) with at most one decimal,
counts and cores as quantities. Load with ``{% load quota_amounts %}``."""

from __future__ import annotations

from typing import Any

from django import template

from core import numbers
from tenants.catalog import GIB_KINDS

register = template.Library()


@register.filter
def amount(value: Any, key: str = "") -> str:
    kind = str(key or "").partition(":")[0]
    places = numbers.MEMORY_PLACES if kind in GIB_KINDS else numbers.QUANTITY_PLACES
    return numbers.quantity(value, places)
