"""Signals the jobs app sends for higher apps to answer (``jobs`` never imports them).

``job_cost_estimate``: what a cleaned submission (``clean``, the job form's and the API's
fields) would be billed for each named run time (``runs``: name -> seconds, e.g. ``max``
and ``expected``). ``billing.receivers`` answers with the invoice's own arithmetic
(``billing.selectors.preview_costs``); with no receiver the preview has no cost.
"""

from __future__ import annotations

from typing import Any, cast

from django.dispatch import Signal

job_cost_estimate = Signal()


def cost_estimate(clean: dict[str, Any], runs: dict[str, int]) -> dict[str, Any] | None:
    """The first receiver's answer to :data:`job_cost_estimate`, or None."""
    for _receiver, answer in job_cost_estimate.send(sender=None, clean=clean, runs=runs):
        if answer is not None:
            return cast(dict[str, Any], answer)
    return None
