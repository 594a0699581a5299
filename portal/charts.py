"""Plotly figure specs as plain dicts (``{"data": [...], "layout": {...}}``).

The server computes every number; the browser only draws (static/js/dashboard.js passes
these to ``Plotly.react`` from the locally served plotly.js). Plain dicts instead of
``plotly.graph_objects`` keep a page render in the low milliseconds (no validation);
the trace and layout keys are plotly.js's own, so a figure pasted into plotly.py
renders the same. The pages load a partial plotly.js with only the trace types used here
(scatter, indicator, histogram, heatmap): a new one goes into
scripts/plotly-bundle/entry.js and scripts/build-plotly-bundle.sh first.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from django.utils.translation import gettext as _

Figure = dict[str, Any]

_FONT = {"family": "system-ui, sans-serif", "size": 12}
_COLORS = {"allocated": "#2563eb", "utilised": "#16a34a", "quota": "#6b7280",
           "borrowed": "#f59e0b", "guaranteed": "#dbeafe", "elastic": "#fef3c7"}


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    layout = {"title": {"text": title, "font": {"size": 14}}, "font": _FONT,
              "margin": {"l": 40, "r": 16, "t": 40, "b": 36}, "paper_bgcolor": "rgba(0,0,0,0)",
              "plot_bgcolor": "rgba(0,0,0,0)"}
    layout.update(extra)
    return layout


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(float(value), digits)


NEAR_QUOTA = 0.9
"""From this share of its quota on, a gauge is "near" (a state, not a colour)."""


def gauge_state(*, used: float, quota: float, limited: bool = True) -> str:
    """The one colour rule of every gauge (all resources, GPU memory included): "over"
    when use is above a set quota, the only amber one (the borrowed colour, on the
    chart's bar and on the page's meter, as the legend says); "full" at exactly the
    quota, "near" from :data:`NEAR_QUOTA` of it, else "ok", all in the in-use blue;
    "unlimited" when no quota is set (use is shown, not judged)."""
    if not limited:
        return "unlimited"
    if used > quota:
        return "over"
    if quota and used == quota:
        return "full"
    if quota and used >= NEAR_QUOTA * quota:
        return "near"
    return "ok"


def gauge(title: str, *, used: float, quota: float, unit: str = "",
          guaranteed: float | None = None, borrowed: float = 0.0,
          limited: bool = True) -> Figure:
    """Used against quota: the bar is what is in use (amber only above the quota); the
    blue band the guaranteed part (overcommitted mode), the amber band the part above
    the quota; the line marks the quota (a bar that reaches it: full). ``limited=False``
    (no quota set): the bar alone, no line. ``borrowed`` is kept for the callers' sake:
    what a pool borrows within the tenant's total does not colour the bar."""
    top = max(quota, used, 1e-9) * 1.15
    steps = []
    if guaranteed is not None and guaranteed > 0:
        steps.append({"range": [0, guaranteed], "color": _COLORS["guaranteed"]})
    if limited and used > quota:
        steps.append({"range": [quota, used], "color": _COLORS["elastic"]})
    suffix = f" {unit}" if unit else ""
    return {
        "data": [{
            "type": "indicator", "mode": "gauge+number", "value": _r(used),
            "number": {"suffix": suffix, "valueformat": ".4~g"},
            "gauge": {
                "axis": {"range": [0, _r(top)]},
                # amber only above the quota: at it the gauge is full, not borrowing
                # (a pool's borrowing within the tenant's total is the badge's to say)
                "bar": {"color": _COLORS["borrowed"] if gauge_state(
                    used=used, quota=quota, limited=limited) == "over"
                    else _COLORS["allocated"]},
                "steps": steps,
                **({"threshold": {"line": {"color": "#111827", "width": 3}, "thickness": 0.85,
                                  "value": _r(quota)}} if limited else {}),
            },
        }],
        "layout": _layout(title, height=190, margin={"l": 24, "r": 24, "t": 44, "b": 8}),
    }


def no_data_text() -> str:
    """What a chart (or the place of one) says when its period has no data yet."""
    return _("No data in this period yet.")


def _mode(ys: Sequence[float | None]) -> str:
    """A line needs two points: a series with fewer is drawn as its markers."""
    return "lines" if sum(v is not None for v in ys) >= 2 else "lines+markers"


def trend(title: str, *, x: Sequence[dt.datetime], allocated: Sequence[float | None],
          utilised: Sequence[float | None], quota: Sequence[float | None],
          unit: str = "", labels: dict[str, str] | None = None,
          period: tuple[dt.datetime, dt.datetime] | None = None) -> Figure:
    """Allocated, utilised and quota over time (lines; quota dashed). ``period``: the
    x axis spans it whatever the data (plotly would stretch one sample into a
    millisecond-wide axis, or draw an arbitrary one with none); with no sample it says
    :func:`no_data_text` in the middle instead of drawing empty lines."""
    names = {"allocated": "allocated", "utilised": "utilised", "quota": "quota"}
    names.update(labels or {})
    xs = [t.isoformat() for t in x]
    ys = {"allocated": [_r(v) for v in allocated], "utilised": [_r(v) for v in utilised],
          "quota": [_r(v) for v in quota]}
    data = [
        {"type": "scatter", "mode": _mode(ys["allocated"]), "name": names["allocated"],
         "x": xs, "y": ys["allocated"], "line": {"color": _COLORS["allocated"]},
         "fill": "tozeroy", "fillcolor": "rgba(37,99,235,0.08)"},
        {"type": "scatter", "mode": _mode(ys["utilised"]), "name": names["utilised"],
         "x": xs, "y": ys["utilised"], "line": {"color": _COLORS["utilised"]},
         "connectgaps": False},
        {"type": "scatter", "mode": _mode(ys["quota"]), "name": names["quota"], "x": xs,
         "y": ys["quota"], "line": {"color": _COLORS["quota"], "dash": "dash",
                                    "shape": "hv"}},
    ]
    xaxis: dict[str, Any] = {"type": "date"}
    if period is not None:
        xaxis["range"] = [period[0].isoformat(), period[1].isoformat()]
    extra: dict[str, Any] = {}
    if not any(v is not None for series in ys.values() for v in series):
        extra = {"annotations": [{"text": no_data_text(), "showarrow": False,
                                  "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5,
                                  "font": {"size": 13, "color": "#5c6b64"}}],
                 "showlegend": False}
        # an empty y axis: 0 to 1 rather than plotly's -1 to 4
        yaxis = {"title": {"text": unit}, "range": [0, 1]}
    else:
        yaxis = {"title": {"text": unit}, "rangemode": "tozero"}
    return {"data": data, "layout": _layout(
        title, height=240, yaxis=yaxis, xaxis=xaxis, legend={"orientation": "h", "y": -0.2},
        margin={"l": 48, "r": 16, "t": 40, "b": 48}, **extra)}


def histogram(title: str, values: Sequence[float], *, unit: str = "") -> Figure:
    """The distribution of ``values`` (e.g. wait minutes)."""
    return {"data": [{"type": "histogram", "x": [_r(v, 1) for v in values],
                      "marker": {"color": _COLORS["allocated"]}, "nbinsx": 20}],
            "layout": _layout(title, height=220, bargap=0.05,
                              xaxis={"title": {"text": unit}}, yaxis={"title": {"text": "#"}})}


def heatmap(title: str, *, z: Sequence[Sequence[float | None]], x: Sequence[str],
            y: Sequence[str], unit: str = "%") -> Figure:
    """A day x hour grid (allocation by hour)."""
    return {"data": [{"type": "heatmap", "z": [[_r(v, 1) for v in row] for row in z],
                      "x": list(x), "y": list(y), "zmin": 0, "zmax": 100 if unit == "%" else None,
                      "colorscale": [[0, "#eff6ff"], [0.5, "#60a5fa"], [1, "#1e3a8a"]],
                      "hoverongaps": False, "xgap": 1, "ygap": 1,
                      "colorbar": {"ticksuffix": unit, "thickness": 10}}],
            "layout": _layout(title, height=80 + 24 * max(1, len(y)),
                              xaxis={"title": {"text": _("hour (UTC)")}, "type": "category"},
                              yaxis={"type": "category", "autorange": "reversed"},
                              margin={"l": 90, "r": 16, "t": 40, "b": 40})}


CAUSE_COLORS = {"soft_limit": "#f59e0b", "own_quota": "#2563eb", "reservation": "#7c3aed",
                "cap": "#dc2626", "watermark": "#0891b2", "other": "#6b7280"}
"""The colour of each cause of idle-while-waiting (``jobs.admission.waste.CAUSES``)."""


def stacked_hours(title: str, *, x: Sequence[dt.datetime], series: dict[str, Sequence[float]],
                  names: dict[str, str], unit: str = "") -> Figure:
    """Per hour, stacked areas, one per series (step-shaped: an hour's value holds for
    the hour); series all zero are left out of the legend but kept in the order."""
    xs = [t.isoformat() for t in x]
    data = [{"type": "scatter", "mode": "lines", "name": names.get(k, k), "x": xs,
             "y": [_r(v) for v in values], "stackgroup": "one",
             "line": {"shape": "hv", "width": 0.5, "color": CAUSE_COLORS.get(k, "#6b7280")},
             "showlegend": any(values)}
            for k, values in series.items()]
    return {"data": data, "layout": _layout(
        title, height=260, yaxis={"title": {"text": unit}, "rangemode": "tozero"},
        xaxis={"type": "date"}, legend={"orientation": "h", "y": -0.25},
        margin={"l": 48, "r": 16, "t": 40, "b": 56})}
