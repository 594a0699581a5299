"""The platform admins' figure of waste on the cluster page: GPU-hours idle while work
that fits them waited, the last 24 hours, by cause, and per hour as a stacked chart.

The figure is defined once (``jobs.admission.waste``), recorded by the admission loop and
read by ``jobs.idle_waiting``; this module only frames it for the page.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone
from django.utils.translation import gettext as _

from jobs import idle_waiting
from portal import charts


def idle_while_waiting_day(now: dt.datetime | None = None) -> dict[str, Any]:
    """The last 24 hours (to the current minute included): the totals of
    :func:`jobs.idle_waiting.window_totals` and ``figure``, a chart per hour by cause."""
    now = now or timezone.now()
    end = now.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    totals = idle_waiting.window_totals(end - dt.timedelta(hours=24), end)
    hours = idle_waiting.hourly(now - dt.timedelta(hours=23), 24)
    figure = charts.stacked_hours(
        _("Idle while work that fits waited, per hour"), x=hours["x"],
        series=hours["series"],
        names={c: str(label) for c, label in idle_waiting.CAUSE_LABELS.items()},
        unit=_("GPU-hours"))
    return {**totals, "figure": figure}
