"""events.k8s.io/v1 Event: a second view of the core v1 Events, as in Kubernetes (one
storage, two representations). Field names follow pkg/apis/events/v1 conversion."""
from __future__ import annotations

import re
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


_QUALIFIED_MSG = ("name part must consist of alphanumeric characters, '-', '_' or '.', and "
                  "must start and end with an alphanumeric character (e.g. 'MyName',  or "
                  "'my.name',  or '123-abc', regex used for validation is "
                  "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
_LIMITS = (("reportingInstance", "reportingInstance", 128), ("action", "action", 128),
           ("reason", "reason", 128), ("message", "message", 1024))


def _required(field: str) -> dict:
    return {"field": field, "reason": "FieldValueRequired", "message": "Required value"}


def _bad(field: str, why: str, value: str = "") -> dict:
    return {"field": field, "reason": "FieldValueInvalid",
            "message": f'Invalid value: "{value}": {why}'}


def validation_errors(core: dict) -> list[dict]:
    """pkg/apis/core/validation/events.go ValidateEventCreate for events.k8s.io/v1:
    legacyValidateEvent (reportingController, reportingInstance, action, reason required
    once eventTime is set; lengths; the namespace of the regarding object), then the
    strict rules (eventTime required, type Normal or Warning, the deprecated* fields
    unset, series.count >= 2). Field paths are the internal ones, as the server reports
    them (`reportingController`, `message` for note, `involvedObject` for regarding)."""
    errs: list[dict] = []
    ns = (core.get("metadata") or {}).get("namespace") or ""
    inv_ns = (core.get("involvedObject") or {}).get("namespace") or ""
    if core.get("eventTime"):
        if not inv_ns and ns not in ("default", "kube-system"):
            errs.append(_bad("involvedObject.namespace", "does not match event.namespace"))
        ctrl = core.get("reportingComponent") or ""
        if not ctrl:
            errs.append(_required("reportingController"))
        else:
            name = ctrl.rsplit("/", 1)[-1]
            if not re.match(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$", name) or \
                    len(name) > 63:
                errs.append(_bad("reportingController", _QUALIFIED_MSG, ctrl))
        for key, field, limit in _LIMITS:
            value = core.get(key) or ""
            if not value and key != "message":
                errs.append(_required(field))
            elif len(value) > limit:
                errs.append(_bad(field, f"can have at most {limit} characters"))
    elif (inv_ns and ns != inv_ns) or (not inv_ns and ns not in ("", "default")):
        errs.append(_bad("involvedObject.namespace", "does not match event.namespace",
                         inv_ns))
    series = core.get("series")
    if series is not None:
        if (series.get("count") or 0) < 2:
            errs.append(_bad("series.count", "should be at least 2"))
        if not series.get("lastObservedTime"):
            errs.append(_required("series.lastObservedTime"))
    if not core.get("eventTime"):
        errs.append(_required("eventTime"))
    if core.get("type") not in ("Normal", "Warning"):
        errs.append(_bad("type", f"has invalid value: {core.get('type') or ''}"))
    for key in ("firstTimestamp", "lastTimestamp", "count"):
        if core.get(key):
            errs.append(_bad(key, "needs to be unset"))
    if (core.get("source") or {}).get("component") or (core.get("source") or {}).get("host"):
        errs.append(_bad("source", "needs to be unset"))
    return errs
