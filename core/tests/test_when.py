"""An ETA is shown with its day, in the reader's time zone (core.when, the eta filter)."""

from __future__ import annotations

import datetime as dt

from django.template import Context, Template
from django.utils import timezone, translation

from core.when import eta_text

UTC = dt.UTC


def test_today_tomorrow_and_a_date_in_the_readers_time_zone():
    now = dt.datetime(2026, 5, 4, 20, 0, tzinfo=UTC)
    with translation.override("en"), timezone.override("UTC"):
        assert eta_text(now + dt.timedelta(hours=1, minutes=5), now=now) == "today 21:05 UTC"
        assert eta_text(now + dt.timedelta(hours=7, minutes=10), now=now) == "tomorrow 03:10 UTC"
        assert eta_text(now + dt.timedelta(days=3), now=now) == "Thu 7 May 20:00 UTC"
        assert eta_text(now + dt.timedelta(days=300), now=now) == "28 Feb 2027 20:00 UTC"
        assert eta_text(None) == ""
    # the same instants, read in Shanghai (UTC+8): 04:00 there is already the 5th
    with translation.override("en"), timezone.override("Asia/Shanghai"):
        assert eta_text(now + dt.timedelta(hours=1, minutes=5), now=now) == "today 05:05 CST"
        assert eta_text(now - dt.timedelta(hours=1), now=now) == "today 03:00 CST"


def test_the_eta_filter_wraps_the_words_in_a_time_element():
    when = timezone.now() + dt.timedelta(minutes=5)
    with translation.override("en"), timezone.override("UTC"):
        html = Template("{% load portal_texts %}{{ w|eta }}|{{ none|eta }}").render(
            Context({"w": when, "none": None}))
    assert html.startswith(f'<time datetime="{when.isoformat()}">')
    assert ("today " in html or "tomorrow " in html) and html.endswith("</time>|")
