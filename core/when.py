"""One way to show an estimated time (an ETA): in the reader's time zone, with its day.

"today 21:05 UTC", "tomorrow 03:10 UTC", "Thu 3 Dec 21:05 UTC", and the year when it is
not this year. Days are counted in the active time zone (``django.utils.timezone``), so
"tomorrow" is the reader's tomorrow. Pages use the ``eta`` filter
(``{% load portal_texts %}``: ``{{ job.eta_p50|eta }}``), which wraps the text in a
``<time>`` element carrying the exact instant; JSON gives the same text beside the ISO
instant (``eta_text``).
"""

from __future__ import annotations

import datetime as dt

from django.utils import formats, timezone
from django.utils.translation import gettext as _
from django.utils.translation import pgettext


def eta_text(value: dt.datetime | None, *, now: dt.datetime | None = None) -> str:
    """The day and time of ``value`` for people ("" for None)."""
    if value is None:
        return ""
    local = timezone.localtime(value)
    today = timezone.localtime(now or timezone.now()).date()
    # Translators: a Django time format (H hour, i minute, T time zone abbreviation).
    clock = formats.date_format(local, pgettext("Django format of an ETA's time", "H:i T"))
    days = (local.date() - today).days
    if days == 0:
        return _("today %(time)s") % {"time": clock}
    if days == 1:
        return _("tomorrow %(time)s") % {"time": clock}
    if days == -1:
        return _("yesterday %(time)s") % {"time": clock}
    if local.year == today.year:
        # Translators: a Django date format (D weekday, j day, M month, H:i time, T zone).
        return formats.date_format(local, pgettext("Django format of an ETA this year",
                                                   "D j M H:i T"))
    # Translators: a Django date format (j day, M month, Y year, H:i time, T zone).
    return formats.date_format(local, pgettext("Django format of an ETA another year",
                                               "j M Y H:i T"))
