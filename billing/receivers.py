"""Billing's answers to signals of lower apps: the utilisation figures a tenants page
needs (``tenants.usage.pools_utilisation``), read from the ledger, and the cost of a job
the preview shows (``jobs.signals.job_cost_estimate``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.dispatch import receiver

from billing import selectors
from jobs.signals import job_cost_estimate
from tenants.usage import pools_utilisation
from tenants.utilisation import Utilisation


@receiver(pools_utilisation)
def utilisation_of_pools(sender: Any, *, pools: list[Any], start: dt.date, end: dt.date,
                         now: dt.datetime | None = None, **kwargs: Any
                         ) -> dict[int, dict[str, Utilisation]]:
    wanted = {p.pk for p in pools}
    figures = selectors.utilisation_figures(start, end, {p.tenant_id for p in pools},
                                            by_pool=True, now=now)
    return {pk: kinds for pk, kinds in figures.items() if pk in wanted}


@receiver(job_cost_estimate)
def cost_of_a_submission(sender: Any, *, clean: dict[str, Any], runs: dict[str, int],
                         **kwargs: Any) -> dict[str, Any] | None:
    return selectors.preview_costs(clean, runs)
