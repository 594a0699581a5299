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
"""From this share of its quota on, a gauge is "near" (amber on the page's meter)."""


def gauge_state(*, used: float, quota: float, limited: bool = True) -> str:
    """The one colour rule of every gauge (all resources, GPU memory included): "over"
    when use is above a set quota (never green: red on the page's meter, the amber
    borrowed colour on the chart's bar), "near" from :data:`NEAR_QUOTA` of it, else
    "ok"; "unlimited" when no quota is set (use is shown, not judged)."""
    if not limited:
        return "unlimited"
    if used > quota:
        return "over"
    if quota and used >= NEAR_QUOTA * quota:
        return "near"
    return "ok"


def gauge(title: str, *, used: float, quota: float, unit: str = "",
          guaranteed: float | None = None, borrowed: float = 0.0,
          limited: bool = True) -> Figure:
    """Used against quota: the bar is what is in use; the blue band the guaranteed part
    (overcommitted mode), the amber band the borrowed part above the quota; the line
    marks the quota. ``limited=False`` (no quota set): the bar alone, no line."""
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
                "bar": {"color": _COLORS["borrowed"] if gauge_state(
                    used=used, quota=quota, limited=limited) == "over" or borrowed > 0
                    else _COLORS["allocated"]},
                "steps": steps,
                **({"threshold": {"line": {"color": "#111827", "width": 3}, "thickness": 0.85,
                                  "value": _r(quota)}} if limited else {}),
            },
        }],
        "layout": _layout(title, height=190, margin={"l": 24, "r": 24, "t": 44, "b": 8}),
    }


def trend(title: str, *, x: Sequence[dt.datetime], allocated: Sequence[float | None],
          utilised: Sequence[float | None], quota: Sequence[float | None],
          unit: str = "", labels: dict[str, str] | None = None) -> Figure:
    """Allocated, utilised and quota over time (lines; quota dashed)."""
    names = {"allocated": "allocated", "utilised": "utilised", "quota": "quota"}
    names.update(labels or {})
    xs = [t.isoformat() for t in x]
    data = [
        {"type": "scatter", "mode": "lines", "name": names["allocated"], "x": xs,
         "y": [_r(v) for v in allocated], "line": {"color": _COLORS["allocated"]},
         "fill": "tozeroy", "fillcolor": "rgba(37,99,235,0.08)"},
        {"type": "scatter", "mode": "lines", "name": names["utilised"], "x": xs,
         "y": [_r(v) for v in utilised], "line": {"color": _COLORS["utilised"]},
         "connectgaps": False},
        {"type": "scatter", "mode": "lines", "name": names["quota"], "x": xs,
         "y": [_r(v) for v in quota], "line": {"color": _COLORS["quota"], "dash": "dash",
                                               "shape": "hv"}},
    ]
    return {"data": data, "layout": _layout(
        title, height=240, yaxis={"title": {"text": unit}, "rangemode": "tozero"},
        xaxis={"type": "date"}, legend={"orientation": "h", "y": -0.2},
        margin={"l": 48, "r": 16, "t": 40, "b": 48})}


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
