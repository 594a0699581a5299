"""One way to show a time: in the reader's language and time zone, always with its day and
its zone.

"today 21:05 UTC", "tomorrow 03:10 UTC", "Thu 3 Dec 21:05 UTC", and the year when it is
not this year. Days are counted in the active time zone (``django.utils.timezone``), so
"tomorrow" is the reader's tomorrow. Two precisions of the one format: minutes for an
estimate or a deadline (:func:`eta_text`), seconds for what happened (:func:`when_text`
with ``seconds=True``: a job's transitions, the cluster's events, its log lines).

Pages use the filters of ``{% load portal_texts %}``: ``{{ job.eta_p50|eta }}`` and
``{{ transition.at|when }}`` (seconds; ``|when:"minutes"`` for minutes), which wrap the
text in a ``<time>`` element carrying the exact instant; JSON gives the same text beside
the ISO instant (``eta_text``, ``when_text``).
"""

from __future__ import annotations

import datetime as dt

from django.utils import formats, timezone
from django.utils.translation import gettext as _
from django.utils.translation import pgettext


def when_text(value: dt.datetime | None, *, now: dt.datetime | None = None,
              seconds: bool = False) -> str:
    """The day, time and zone of ``value`` for people ("" for None); with ``seconds``
    the time has its seconds."""
    if value is None:
        return ""
    local = timezone.localtime(value)
    today = timezone.localtime(now or timezone.now()).date()
    if seconds:
        # Translators: a Django time format (H hour, i minute, s second, T time zone).
        clock = formats.date_format(local, pgettext("Django format of a moment's time",
                                                    "H:i:s T"))
    else:
        # Translators: a Django time format (H hour, i minute, T time zone abbreviation).
        clock = formats.date_format(local, pgettext("Django format of an ETA's time",
                                                    "H:i T"))
    days = (local.date() - today).days
    if days == 0:
        return _("today %(time)s") % {"time": clock}
    if days == 1:
        return _("tomorrow %(time)s") % {"time": clock}
    if days == -1:
        return _("yesterday %(time)s") % {"time": clock}
    if local.year == today.year:
        if seconds:
            # Translators: a Django date format (D weekday, j day, M month, H:i:s time,
            # T zone).
            return formats.date_format(local, pgettext("Django format of a moment this year",
                                                       "D j M H:i:s T"))
        # Translators: a Django date format (D weekday, j day, M month, H:i time, T zone).
        return formats.date_format(local, pgettext("Django format of an ETA this year",
                                                   "D j M H:i T"))
    if seconds:
        # Translators: a Django date format (j day, M month, Y year, H:i:s time, T zone).
        return formats.date_format(local, pgettext("Django format of a moment another year",
                                                   "j M Y H:i:s T"))
    # Translators: a Django date format (j day, M month, Y year, H:i time, T zone).
    return formats.date_format(local, pgettext("Django format of an ETA another year",
                                               "j M Y H:i T"))


def eta_text(value: dt.datetime | None, *, now: dt.datetime | None = None) -> str:
    """An estimate's day and time for people, to the minute ("" for None)."""
    return when_text(value, now=now)
