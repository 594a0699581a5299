"""Server-side printing (meta.k8s.io/v1 Table), as `kubectl get` asks for with
``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``.

Ages are computed with the simulated clock, so `kubectl get` shows sensible ages even when
the simulation runs faster than real time."""
from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from .clock import parse_rfc3339
from .resources import ResourceType


def wants_table(accept: str) -> bool:
    return "as=Table" in accept and "g=meta.k8s.io" in accept


def human_duration(seconds: float) -> str:
    """kubectl's duration.HumanDuration."""
    s = int(seconds)
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = s // 3600
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    d = h // 24
    if h < 24 * 8:
        return f"{d}d{h % 24}h" if h % 24 else f"{d}d"
    if h < 24 * 365 * 2:
        return f"{d}d"
    return f"{d // 365}y{d % 365}d" if h < 24 * 365 * 8 else f"{d // 365}y"


def _age(ts: str | None, now: datetime) -> str:
    if not ts:
        return "<unknown>"
    try:
        return human_duration((now - parse_rfc3339(ts)).total_seconds())
    except ValueError:
        return "<invalid>"


def json_path(obj, path: str):
    """The subset of JSONPath that CRD printer columns use: .a.b, [n], [-1:], [*]."""
    cur = obj
    for m in re.finditer(r"\.([^.\[\]]+)|\[([^\]]*)\]", path):
        name, index = m.groups()
        if name is not None:
            cur = cur.get(name) if isinstance(cur, dict) else None
        elif isinstance(cur, list):
            if index == "*":
                continue
            if ":" in index:
                a, _, b = index.partition(":")
                part = cur[int(a) if a else None:int(b) if b else None]
                cur = part[0] if len(part) == 1 else (part or None)
            else:
                try:
                    cur = cur[int(index)]
                except (ValueError, IndexError):
                    cur = None
        else:
            cur = None
        if cur is None:
            return None
    return cur


def _col(name: str, type_: str = "string", priority: int = 0, fmt: str = "") -> dict:
    return {"name": name, "type": type_, "format": fmt, "description": name, "priority": priority}


def _pod_row(o: dict, now) -> list:
    st = o.get("status") or {}
    css = st.get("containerStatuses") or []
    total = len((o.get("spec") or {}).get("containers") or [])
    ready = sum(1 for c in css if c.get("ready"))
    restarts = sum(c.get("restartCount", 0) for c in css)
    reason = st.get("reason") or st.get("phase") or "Unknown"
    for c in css:
        state = c.get("state") or {}
        if (state.get("waiting") or {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif (state.get("terminated") or {}).get("reason"):
            reason = state["terminated"]["reason"]
    if o["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    return [f"{ready}/{total}", reason, restarts, _age(o["metadata"].get("creationTimestamp"), now),
            st.get("podIP") or "<none>", (o.get("spec") or {}).get("nodeName") or "<none>"]


def _node_row(o: dict, now) -> list:
    conds = {c.get("type"): c.get("status") for c in (o.get("status") or {}).get("conditions")
             or []}
    status = "Ready" if conds.get("Ready") == "True" else "NotReady"
    if (o.get("spec") or {}).get("unschedulable"):
        status += ",SchedulingDisabled"
    labels = o["metadata"].get("labels") or {}
    roles = ",".join(sorted(k.split("/", 1)[1] for k in labels
                            if k.startswith("node-role.kubernetes.io/"))) or "<none>"
    info = (o.get("status") or {}).get("nodeInfo") or {}
    return [status, roles, _age(o["metadata"].get("creationTimestamp"), now),
            info.get("kubeletVersion") or ""]


def _quota_row(o: dict, now) -> list:
    st = o.get("status") or {}
    hard, used = st.get("hard") or {}, st.get("used") or {}
    req = [f"{k}: {used.get(k, '0')}/{v}" for k, v in sorted(hard.items())
           if not k.startswith("limits.")]
    lim = [f"{k}: {used.get(k, '0')}/{v}" for k, v in sorted(hard.items())
           if k.startswith("limits.")]
    return [_age(o["metadata"].get("creationTimestamp"), now), ", ".join(req), ", ".join(lim)]


def _event_row(o: dict, now) -> list:
    io = o.get("involvedObject") or {}
    last = o.get("lastTimestamp") or o.get("eventTime") or o["metadata"].get("creationTimestamp")
    return [_age(last, now), o.get("type") or "", o.get("reason") or "",
            f"{(io.get('kind') or '').lower()}/{io.get('name') or ''}", o.get("message") or "",
            o["metadata"]["name"]]


BUILTIN = {
    "pods": ([_col("Ready"), _col("Status"), _col("Restarts", "integer"), _col("Age"),
              _col("IP", priority=1), _col("Node", priority=1)], _pod_row),
    "nodes": ([_col("Status"), _col("Roles"), _col("Age"), _col("Version")], _node_row),
    "namespaces": ([_col("Status"), _col("Age")], lambda o, now: [
        (o.get("status") or {}).get("phase") or "", _age(o["metadata"].get("creationTimestamp"),
                                                         now)]),
    "resourcequotas": ([_col("Age"), _col("Request"), _col("Limit")], _quota_row),
    "events": ([_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"),
                _col("Message"), _col("Name", priority=1, fmt="name")], _event_row),
    "persistentvolumeclaims": ([_col("Status"), _col("Capacity"), _col("StorageClass"),
                                _col("Age")], lambda o, now: [
        (o.get("status") or {}).get("phase") or "",
        ((o.get("status") or {}).get("capacity") or {}).get("storage", ""),
        (o.get("spec") or {}).get("storageClassName") or "",
        _age(o["metadata"].get("creationTimestamp"), now)]),
    "priorityclasses.scheduling.k8s.io": ([_col("Value", "integer"), _col("Global-Default"),
                                           _col("Age")], lambda o, now: [
        o.get("value", 0), str(bool(o.get("globalDefault"))).lower(),
        _age(o["metadata"].get("creationTimestamp"), now)]),
}


def _crd_columns(rt: ResourceType):
    cols = []
    for c in rt.printer_columns or []:
        cols.append(_col(c["name"], "string" if c.get("type") == "date" else
                         c.get("type", "string"), c.get("priority", 0)))

    def row(o: dict, now) -> list:
        out = []
        for c in rt.printer_columns or []:
            v = json_path(o, c.get("jsonPath", ""))
            if c.get("type") == "date":
                v = _age(v, now) if v else "<unknown>"
            out.append(v)
        return out
    return cols, row


def table(rt: ResourceType, objects: list[dict], now: datetime, resource_version: str,
          include: str | None = None, continue_token: str | None = None) -> dict:
    if rt.key in BUILTIN:
        cols, rowfn = BUILTIN[rt.key]
    elif rt.printer_columns:
        cols, rowfn = _crd_columns(rt)
    else:
        cols, rowfn = [_col("Age")], lambda o, now: [
            _age(o["metadata"].get("creationTimestamp"), now)]
    if not any(c["name"] == "Age" for c in cols) and rt.key not in BUILTIN:
        cols = [*cols, _col("Age")]
        base = rowfn
        rowfn = lambda o, now: [*base(o, now), _age(  # noqa: E731
            o["metadata"].get("creationTimestamp"), now)]
    name_first = rt.key != "events"   # events print the name last, in -o wide only
    rows = []
    for o in objects:
        row: dict[str, Any] = {"cells": [o["metadata"]["name"], *rowfn(o, now)] if name_first
               else rowfn(o, now)}
        if include == "Object":
            row["object"] = o
        elif include != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": o["metadata"]}
        rows.append(row)
    meta = {"resourceVersion": resource_version}
    if continue_token:
        meta["continue"] = continue_token
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
            "columnDefinitions": [_col("Name", fmt="name"), *cols] if name_first else cols,
            "rows": rows}
