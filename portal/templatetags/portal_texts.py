"""``{{ value|render_text }}``: a stored text (see :mod:`portal.texts`) in the reader's
language. Load with ``{% load portal_texts %}``."""

from __future__ import annotations

from django import template

from portal.texts import render

register = template.Library()


@register.filter
def render_text(value: object) -> str:
    return render(value)  # type: ignore[arg-type]


@register.filter
def job_state(value: str) -> str:
    """A job state code ("running") as its label in the reader's language."""
    from jobs.choices import JobState

    try:
        return str(JobState(value).label)
    except ValueError:
        return value
