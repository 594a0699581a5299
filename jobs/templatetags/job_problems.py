"""``{% job_problem job as p %}``: the job's problem as shown (``jobs.problem_text``).
Load with ``{% load job_problems %}``."""

from __future__ import annotations

from typing import Any

from django import template

from jobs.problem_text import Shown, shown

register = template.Library()


@register.simple_tag
def job_problem(job: Any) -> Shown | None:
    return shown(job)
