"""``{{ value|render_text }}``: a stored text (see :mod:`core.texts`) in the reader's
language; ``{{ at|eta }}``: an estimated time with its day, ``{{ at|when }}``: a moment
with its day, to the second (``|when:"minutes"``: to the minute), both in one format
(:mod:`core.when`). Load with ``{% load portal_texts %}``."""

from __future__ import annotations

from django import template
from django.utils.html import format_html

from core.texts import render
from core.when import eta_text, when_text

register = template.Library()


@register.filter
def render_text(value: object) -> str:
    return render(value)  # type: ignore[arg-type]


@register.filter
def render_text_html(value: object) -> str:
    """Like ``render_text``; a plain string (a message from Kubernetes or the operator, or
    text a person typed) is marked ``translate="no"``: it is shown as written."""
    if isinstance(value, str):
        return format_html('<span translate="no">{}</span>', value) if value else ""
    return render(value)  # type: ignore[arg-type]


@register.filter
def eta(value: object) -> str:
    """An ETA as ``<time datetime="...">today 21:05 UTC</time>`` (:func:`core.when.eta_text`);
    "" for none."""
    if not value:
        return ""
    return format_html('<time datetime="{}">{}</time>', value.isoformat(),  # type: ignore[attr-defined]
                       eta_text(value))  # type: ignore[arg-type]


@register.filter
def when(value: object, precision: str = "seconds") -> str:
    """A moment as ``<time datetime="...">today 21:05:09 UTC</time>`` (:func:`core.when.
    when_text`; ``"minutes"``: without the seconds); "" for none."""
    if not value:
        return ""
    return format_html('<time datetime="{}">{}</time>', value.isoformat(),  # type: ignore[attr-defined]
                       when_text(value, seconds=precision != "minutes"))  # type: ignore[arg-type]
