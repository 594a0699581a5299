"""The gauges' colours agree with their legend (amber only above the quota; exactly at it
is full, in the in-use blue), and a trend chart's axis is its period, with words when the
period has no data (issue 29: "8 of 8" was amber, and an empty chart drew an axis from
11:59:59.999 to 12:00:00.0005)."""

import datetime as dt
from decimal import Decimal

from django.utils import timezone

from portal import charts
from portal.dashboards import Gauge

BLUE, AMBER = "#2563eb", "#f59e0b"


def _gauge(used, quota, borrowed=0):
    return Gauge(key="gpu:NVIDIA-H800", label="H800", unit="GPUs", used=Decimal(used),
                 quota=Decimal(quota), guaranteed=None, borrowed=Decimal(borrowed))


def _meter_region(meter):
    """The region a browser puts a ``<meter>``'s value in (HTML's rule for an optimum
    below ``low``): "optimum", "suboptimum" or "even-less-good"."""
    if meter["value"] <= meter["low"]:
        return "optimum"
    return "suboptimum" if meter["value"] <= meter["high"] else "even-less-good"


def test_amber_only_above_the_quota_and_full_at_it():
    seen = {}
    for used in (0, 4, 7.5, 8, 9):
        g = _gauge(used, 8)
        bar = g.figure()["data"][0]["gauge"]["bar"]["color"]
        seen[used] = (g.state, bar, _meter_region(g.meter))
    assert seen == {0: ("ok", BLUE, "optimum"), 4: ("ok", BLUE, "optimum"),
                    7.5: ("near", BLUE, "optimum"), 8: ("full", BLUE, "optimum"),
                    9: ("over", AMBER, "even-less-good")}
    # above the quota the amber band covers exactly the part above it
    steps = _gauge(9, 8).figure()["data"][0]["gauge"]["steps"]
    assert steps == [{"range": [8, 9], "color": charts._COLORS["elastic"]}]
    assert _gauge(8, 8).figure()["data"][0]["gauge"]["steps"] == []
    # one pool borrowing within the tenant's total: the badge says so, the bar stays blue
    assert _gauge(8, 8, borrowed=4).figure()["data"][0]["gauge"]["bar"]["color"] == BLUE
    # nothing granted and cards in use: every one of them above the quota of 0
    assert _gauge(2, 0).state == "over" and _meter_region(_gauge(2, 0).meter) == \
        "even-less-good"


def test_a_trend_spans_its_period_and_says_when_it_has_no_data():
    now = timezone.now().replace(microsecond=0)
    period = (now - dt.timedelta(days=7), now)
    one = charts.trend("GPUs", x=[now - dt.timedelta(hours=1)], allocated=[2.0],
                       utilised=[None], quota=[8.0], period=period)
    assert one["layout"]["xaxis"]["range"] == [period[0].isoformat(), now.isoformat()]
    assert one["data"][0]["mode"] == "lines+markers"   # one point: a marker, not nothing
    assert "annotations" not in one["layout"]
    empty = charts.trend("GPUs", x=[], allocated=[], utilised=[], quota=[], period=period)
    assert empty["layout"]["xaxis"]["range"] == [period[0].isoformat(), now.isoformat()]
    assert [a["text"] for a in empty["layout"]["annotations"]] == ["No data in this period yet."]
    assert empty["layout"]["yaxis"]["range"] == [0, 1]
    many = charts.trend("GPUs", x=[now - dt.timedelta(hours=h) for h in (2, 1)],
                        allocated=[1.0, 2.0], utilised=[0.5, 1.0], quota=[8.0, 8.0],
                        period=period)
    assert {d["mode"] for d in many["data"]} == {"lines"}
