"""events.k8s.io/v1 Event: a second view of the core v1 Events, as in Kubernetes (one
storage, two representations). Field names follow pkg/apis/events/v1 conversion."""
from __future__ import annotations

from typing import Any

from .jsonutil import jcopy

API_VERSION = "events.k8s.io/v1"

# (core field, events.k8s.io field)
_RENAMES = (("involvedObject", "regarding"), ("related", "related"), ("message", "note"),
            ("reportingComponent", "reportingController"),
            ("reportingInstance", "reportingInstance"), ("source", "deprecatedSource"),
            ("firstTimestamp", "deprecatedFirstTimestamp"),
            ("lastTimestamp", "deprecatedLastTimestamp"), ("count", "deprecatedCount"),
            ("action", "action"), ("reason", "reason"), ("type", "type"),
            ("series", "series"), ("eventTime", "eventTime"))
_FIELD_LABELS = {"regarding.": "involvedObject.", "reportingController": "reportingComponent",
                 "deprecatedSource": "source", "note": "message"}


def _micro(ts: str | None) -> str | None:
    """RFC3339 seconds -> MicroTime ('...T10:00:00Z' -> '...T10:00:00.000000Z')."""
    if not ts:
        return None
    return ts if "." in ts else ts[:-1] + ".000000Z"


def to_v1(core: dict) -> dict:
    out: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "Event",
                           "metadata": core.get("metadata") or {}}
    for old, new in _RENAMES:
        if core.get(old) is not None:
            out[new] = core[old]
    if not out.get("eventTime"):
        meta = out["metadata"]
        out["eventTime"] = _micro(core.get("firstTimestamp") or core.get("lastTimestamp")
                                  or meta.get("creationTimestamp"))
    if not out.get("reportingController") and (core.get("source") or {}).get("component"):
        out["reportingController"] = core["source"]["component"]
    return out


def to_core(v1: dict) -> dict:
    out = {"apiVersion": "v1", "kind": "Event", "metadata": jcopy(v1.get("metadata") or {})}
    for old, new in _RENAMES:
        if v1.get(new) is not None:
            out[old] = jcopy(v1[new])
    out.setdefault("involvedObject", {})
    return out


def field_selector(text: str | None) -> str | None:
    """Translate events.k8s.io field labels (regarding.kind, reportingController, ...) to
    the core ones the store knows."""
    if not text:
        return text
    terms = []
    for term in text.split(","):
        label, sep, rest = term.partition("!=") if "!=" in term else term.partition("=")
        label = label.strip()
        for new, old in _FIELD_LABELS.items():
            if label == new or (new.endswith(".") and label.startswith(new)):
                label = old + label[len(new):]
                break
        terms.append(label + sep + rest)
    return ",".join(terms)
