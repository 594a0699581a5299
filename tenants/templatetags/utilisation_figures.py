"""The utilisation figures' names and values, the same on every page
(``tenants.utilisation.FIGURES``). Load with ``{% load utilisation_figures %}``:

* ``{% figure_th "idle_rate" %}``: the column head, its definition as the tooltip;
* ``{% figure_label "idle_rate" %}``: the name inline, with the same tooltip;
* ``{{ share|figure_percent }}``: a rate as every page writes it (a whole percent, "—"
  for None);
* ``{{ hours|figure_hours }}``: GPU-hours of a figure with exactly the digits the API
  sends (``Utilisation.as_api``: 2 decimals, ``tenants.utilisation.HOURS``), grouped.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django import template
from django.utils.html import format_html

from core.numbers import DASH, grouped, plain, to_decimal
from tenants.utilisation import FIGURES, HOURS

register = template.Library()


@register.simple_tag
def figure_th(name: str) -> str:
    figure = FIGURES[name]
    return format_html('<th title="{}" data-figure="{}">{}</th>', figure.definition, name,
                       figure.label)


@register.simple_tag
def figure_label(name: str) -> str:
    figure = FIGURES[name]
    return format_html('<span class="figure" title="{}" data-figure="{}">{}</span>',
                       figure.definition, name, figure.label)


@register.simple_tag
def figure_definition(name: str) -> str:
    return str(FIGURES[name].definition)


@register.filter
def figure_percent(value: Any) -> str:
    if value is None or value == "":
        return "—"
    whole = (Decimal(str(value)) * 100).quantize(Decimal(1), rounding=ROUND_HALF_UP)
    return f"{whole}%"


@register.filter
def figure_hours(value: Any) -> str:
    number = to_decimal(value)
    if number is None:
        return DASH
    places = len(format(HOURS, "f").partition(".")[2])  # 0.01: as ``as_api`` writes them
    return grouped(plain(number, places, keep=places))
