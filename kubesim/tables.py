"""Server-side printing (meta.k8s.io/v1 Table), as `kubectl get` asks for with
``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``.

Ages are computed with the simulated clock, so `kubectl get` shows sensible ages even when
the simulation runs faster than real time."""
from __future__ import annotations

import re
from collections.abc import Callable
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


def _col(name: str, type_: str = "string", priority: int = 0, fmt: str = "",
         description: str = "") -> dict:
    return {"name": name, "type": type_, "format": fmt, "description": description or name,
            "priority": priority}


# Column sets and cells as pkg/printers/internalversion/printers.go (kubernetes/kubernetes)
# AddHandlers and its print* functions produce them; the Name column is added by table().
def _ts(o: dict) -> str | None:
    return o["metadata"].get("creationTimestamp")


def _template_cells(spec: dict) -> list:
    """layoutContainerCells: container names and images, comma-joined."""
    cs = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    return [",".join(c.get("name") or "" for c in cs), ",".join(c.get("image") or "" for c in cs)]


def _selector(sel: dict | None) -> str:
    """metav1.FormatLabelSelector."""
    if not sel:
        return "<none>"
    parts = [f"{k}={v}" for k, v in (sel.get("matchLabels") or {}).items()]
    for e in sel.get("matchExpressions") or []:
        op, vals = e.get("operator"), ",".join(e.get("values") or [])
        parts.append({"In": f"{e.get('key')} in ({vals})", "NotIn": f"{e.get('key')} notin "
                      f"({vals})", "Exists": e.get("key"), "DoesNotExist": f"!{e.get('key')}"
                      }.get(op, ""))
    return ",".join(parts) or "<none>"


def _pod_row(o: dict, now) -> list:
    st = o.get("status") or {}
    spec = o.get("spec") or {}
    css = st.get("containerStatuses") or []
    total = len(spec.get("containers") or [])
    ready = sum(1 for c in css if c.get("ready"))
    restarts = sum(c.get("restartCount", 0) for c in css)
    last_restart = max((((c.get("lastState") or {}).get("terminated") or {}).get("finishedAt")
                        or "" for c in css), default="")
    reason = st.get("reason") or st.get("phase") or "Unknown"
    for c in css:
        state = c.get("state") or {}
        if (state.get("waiting") or {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif (state.get("terminated") or {}).get("reason"):
            reason = state["terminated"]["reason"]
    if o["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    restarts_cell = str(restarts)
    if restarts and last_restart:   # printPod: "N (5m ago)"
        restarts_cell = f"{restarts} ({_age(last_restart, now)} ago)"
    gates = spec.get("readinessGates") or []
    conds = {c.get("type"): c.get("status") for c in st.get("conditions") or []}
    gates_cell = (f"{sum(1 for g in gates if conds.get(g.get('conditionType')) == 'True')}/"
                  f"{len(gates)}") if gates else "<none>"
    return [f"{ready}/{total}", reason, restarts_cell, _age(_ts(o), now),
            st.get("podIP") or "<none>", spec.get("nodeName") or "<none>",
            st.get("nominatedNodeName") or "<none>", gates_cell]


def _node_row(o: dict, now) -> list:
    st = o.get("status") or {}
    conds = {c.get("type"): c.get("status") for c in st.get("conditions") or []}
    status = "Ready" if conds.get("Ready") == "True" else \
        "NotReady" if "Ready" in conds else "Unknown"
    if (o.get("spec") or {}).get("unschedulable"):
        status += ",SchedulingDisabled"
    labels = o["metadata"].get("labels") or {}
    roles = sorted(k.split("/", 1)[1] for k in labels
                   if k.startswith("node-role.kubernetes.io/") and k.split("/", 1)[1])
    if labels.get("kubernetes.io/role"):
        roles = sorted({*roles, labels["kubernetes.io/role"]})
    info = st.get("nodeInfo") or {}
    addrs = {a.get("type"): a.get("address") for a in st.get("addresses") or []}
    return [status, ",".join(roles) or "<none>", _age(_ts(o), now),
            info.get("kubeletVersion") or "", addrs.get("InternalIP") or "<none>",
            addrs.get("ExternalIP") or "<none>", info.get("osImage") or "<unknown>",
            info.get("kernelVersion") or "<unknown>",
            info.get("containerRuntimeVersion") or "<unknown>"]


def _quota_row(o: dict, now) -> list:
    st = o.get("status") or {}
    hard, used = st.get("hard") or {}, st.get("used") or {}
    req = [f"{k}: {used.get(k, '0')}/{v}" for k, v in sorted(hard.items())
           if not k.startswith("limits.")]
    lim = [f"{k}: {used.get(k, '0')}/{v}" for k, v in sorted(hard.items())
           if k.startswith("limits.")]
    return [_age(_ts(o), now), ", ".join(req), ", ".join(lim)]


def _event_row(o: dict, now) -> list:
    io = o.get("involvedObject") or {}
    last = o.get("lastTimestamp") or o.get("eventTime") or _ts(o)
    first = o.get("firstTimestamp") or o.get("eventTime") or _ts(o)
    src = o.get("source") or {}
    source = src.get("component") or o.get("reportingComponent") or ""
    if src.get("host"):
        source += ", " + src["host"]
    return [_age(last, now), o.get("type") or "", o.get("reason") or "",
            f"{(io.get('kind') or '').lower()}/{io.get('name') or ''}",
            io.get("fieldPath") or "", source, (o.get("message") or "").strip(),
            _age(first, now), str(o.get("count") or 1), o["metadata"]["name"]]


def _ports(ports: list) -> str:
    out = []
    for p in ports or []:
        s = f"{p.get('port')}"
        if p.get("nodePort"):
            s += f":{p['nodePort']}"
        out.append(f"{s}/{p.get('protocol') or 'TCP'}")
    return ",".join(out) or "<none>"


def _service_row(o: dict, now) -> list:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    typ = spec.get("type") or "ClusterIP"
    ext = list(spec.get("externalIPs") or [])
    if typ == "ExternalName":
        ext = [spec.get("externalName") or ""]
    elif typ == "LoadBalancer":
        ext = [i.get("ip") or i.get("hostname") for i in
               (st.get("loadBalancer") or {}).get("ingress") or []] + ext
        ext = ext or ["<pending>"]
    sel = spec.get("selector") or {}
    return [typ, spec.get("clusterIP") or "<none>", ",".join(ext) or "<none>",
            _ports(spec.get("ports") or []), _age(_ts(o), now),
            ",".join(f"{k}={v}" for k, v in sorted(sel.items())) or "<none>"]


def _deployment_row(o: dict, now) -> list:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    return [f"{st.get('readyReplicas', 0)}/{spec.get('replicas', 0)}",
            st.get("updatedReplicas", 0), st.get("availableReplicas", 0), _age(_ts(o), now),
            *_template_cells(spec), _selector(spec.get("selector"))]


def _replicaset_row(o: dict, now) -> list:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    return [spec.get("replicas", 0), st.get("replicas", 0), st.get("readyReplicas", 0),
            _age(_ts(o), now), *_template_cells(spec), _selector(spec.get("selector"))]


def _daemonset_row(o: dict, now) -> list:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    ns_sel = ((spec.get("template") or {}).get("spec") or {}).get("nodeSelector") or {}
    return [st.get("desiredNumberScheduled", 0), st.get("currentNumberScheduled", 0),
            st.get("numberReady", 0), st.get("updatedNumberScheduled", 0),
            st.get("numberAvailable", 0),
            ",".join(f"{k}={v}" for k, v in sorted(ns_sel.items())) or "<none>",
            _age(_ts(o), now), *_template_cells(spec), _selector(spec.get("selector"))]


def _statefulset_row(o: dict, now) -> list:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    return [f"{st.get('readyReplicas', 0)}/{spec.get('replicas', 0)}", _age(_ts(o), now),
            *_template_cells(spec)]


def _job_row(o: dict, now) -> list:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    conds = {c.get("type"): c.get("status") for c in st.get("conditions") or []}
    status = ("Complete" if conds.get("Complete") == "True" else
              "Failed" if conds.get("Failed") == "True" else
              "Terminating" if o["metadata"].get("deletionTimestamp") else
              "SuccessCriteriaMet" if conds.get("SuccessCriteriaMet") == "True" else
              "FailureTarget" if conds.get("FailureTarget") == "True" else
              "Suspended" if conds.get("Suspended") == "True" else "Running")
    succeeded, par = st.get("succeeded", 0), spec.get("parallelism")
    completions = (f"{succeeded}/{spec['completions']}" if spec.get("completions") is not None
                   else f"{succeeded}/1 of {par}" if par is not None and par > 1
                   else f"{succeeded}/1")
    duration = ""
    if st.get("startTime"):
        from .clock import parse_rfc3339 as _p
        end = _p(st["completionTime"]) if st.get("completionTime") else now
        duration = human_duration((end - _p(st["startTime"])).total_seconds())
    return [status, completions, duration, _age(_ts(o), now), *_template_cells(spec),
            _selector(spec.get("selector"))]


def _pdb_row(o: dict, now) -> list:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    mn, mx = spec.get("minAvailable"), spec.get("maxUnavailable")
    return ["N/A" if mn is None else str(mn), "N/A" if mx is None else str(mx),
            st.get("disruptionsAllowed", 0), _age(_ts(o), now)]


def _pvc_row(o: dict, now) -> list:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    phase = "Terminating" if o["metadata"].get("deletionTimestamp") else st.get("phase") or ""
    modes = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX",
             "ReadWriteOncePod": "RWOP"}
    bound = bool(spec.get("volumeName"))
    return [phase, spec.get("volumeName") or "",
            (st.get("capacity") or {}).get("storage", "") if bound else "",
            ",".join(modes.get(m, m) for m in st.get("accessModes") or []) if bound else "",
            spec.get("storageClassName") or "",
            spec.get("volumeAttributesClassName") or "<unset>", _age(_ts(o), now),
            spec.get("volumeMode") or "<unset>"]


def _ingress_row(o: dict, now) -> list:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    hosts = [r.get("host") for r in spec.get("rules") or [] if r.get("host")]
    addrs = [i.get("ip") or i.get("hostname") for i in
             (st.get("loadBalancer") or {}).get("ingress") or []]
    return [spec.get("ingressClassName") or "<none>", ",".join(hosts) or "*",
            ",".join(a for a in addrs if a), "80, 443" if spec.get("tls") else "80",
            _age(_ts(o), now)]


def _claim_state(o: dict) -> str:
    """printers.go resourceClaimState: deleted, pending | allocated, reserved."""
    st = o.get("status") or {}
    states = ["deleted"] if o["metadata"].get("deletionTimestamp") else []
    if st.get("allocation") is None:
        if not states:
            states.append("pending")
    else:
        states.append("allocated")
        if st.get("reservedFor"):
            states.append("reserved")
    return ",".join(states)


BUILTIN: dict[str, tuple[list[dict], Callable[[dict, datetime], list]]] = {
    # pkg/printers/internalversion/printers.go: resourceClaim, resourceSlice
    "resourceclaims.resource.k8s.io": ([_col("State"), _col("Age")], lambda o, now: [
        _claim_state(o), _age(_ts(o), now)]),
    "resourceslices.resource.k8s.io": ([_col("Node"), _col("Driver"), _col("Pool"),
                                        _col("Age")], lambda o, now: [
        (o.get("spec") or {}).get("nodeName") or "<none>", (o.get("spec") or {}).get("driver"),
        ((o.get("spec") or {}).get("pool") or {}).get("name"), _age(_ts(o), now)]),
    "pods": ([_col("Ready"), _col("Status"), _col("Restarts"), _col("Age"),
              _col("IP", priority=1), _col("Node", priority=1),
              _col("Nominated Node", priority=1), _col("Readiness Gates", priority=1)],
             _pod_row),
    "nodes": ([_col("Status"), _col("Roles"), _col("Age"), _col("Version"),
               _col("Internal-IP", priority=1), _col("External-IP", priority=1),
               _col("OS-Image", priority=1), _col("Kernel-Version", priority=1),
               _col("Container-Runtime", priority=1)], _node_row),
    "namespaces": ([_col("Status"), _col("Age")], lambda o, now: [
        (o.get("status") or {}).get("phase") or "", _age(_ts(o), now)]),
    "resourcequotas": ([_col("Age"), _col("Request"), _col("Limit")], _quota_row),
    "events": ([_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"),
                _col("Subobject", priority=1), _col("Source", priority=1), _col("Message"),
                _col("First Seen", priority=1), _col("Count", priority=1),
                _col("Name", priority=1, fmt="name")], _event_row),
    "persistentvolumeclaims": ([_col("Status"), _col("Volume"), _col("Capacity"),
                                _col("Access Modes"), _col("StorageClass"),
                                _col("VolumeAttributesClass"), _col("Age"),
                                _col("VolumeMode", priority=1)], _pvc_row),
    "services": ([_col("Type"), _col("Cluster-IP"), _col("External-IP"), _col("Port(s)"),
                  _col("Age"), _col("Selector", priority=1)], _service_row),
    "configmaps": ([_col("Data", "integer"), _col("Age")], lambda o, now: [
        len(o.get("data") or {}) + len(o.get("binaryData") or {}), _age(_ts(o), now)]),
    "secrets": ([_col("Type"), _col("Data", "integer"), _col("Age")], lambda o, now: [
        o.get("type") or "", len(o.get("data") or {}), _age(_ts(o), now)]),
    "serviceaccounts": ([_col("Secrets"), _col("Age")], lambda o, now: [
        len(o.get("secrets") or []), _age(_ts(o), now)]),
    "deployments.apps": ([_col("Ready"), _col("Up-to-date"), _col("Available"), _col("Age"),
                          _col("Containers", priority=1), _col("Images", priority=1),
                          _col("Selector", priority=1)], _deployment_row),
    "replicasets.apps": ([_col("Desired", "integer"), _col("Current", "integer"),
                          _col("Ready", "integer"), _col("Age"),
                          _col("Containers", priority=1), _col("Images", priority=1),
                          _col("Selector", priority=1)], _replicaset_row),
    "daemonsets.apps": ([_col("Desired", "integer"), _col("Current", "integer"),
                         _col("Ready", "integer"), _col("Up-to-date", "integer"),
                         _col("Available", "integer"), _col("Node Selector"), _col("Age"),
                         _col("Containers", priority=1), _col("Images", priority=1),
                         _col("Selector", priority=1)], _daemonset_row),
    "statefulsets.apps": ([_col("Ready"), _col("Age"), _col("Containers", priority=1),
                           _col("Images", priority=1)], _statefulset_row),
    "jobs.batch": ([_col("Status"), _col("Completions"), _col("Duration"), _col("Age"),
                    _col("Containers", priority=1), _col("Images", priority=1),
                    _col("Selector", priority=1)], _job_row),
    "ingresses.networking.k8s.io": ([_col("Class"), _col("Hosts"), _col("Address"),
                                     _col("Ports"), _col("Age")], _ingress_row),
    "poddisruptionbudgets.policy": ([_col("Min Available"), _col("Max Unavailable"),
                                     _col("Allowed Disruptions", "integer"), _col("Age")],
                                    _pdb_row),
    "priorityclasses.scheduling.k8s.io": ([_col("Value", "integer"), _col("Global-Default"),
                                           _col("Age"), _col("PreemptionPolicy")],
                                          lambda o, now: [
        o.get("value", 0), str(bool(o.get("globalDefault"))).lower(), _age(_ts(o), now),
        o.get("preemptionPolicy") or ""]),
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
