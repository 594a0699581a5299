"""Kueue's Configuration (``config.kueue.x-k8s.io/v1beta2``) for kubesim's Kueue controller.

Kueue reads its Configuration from the ConfigMap ``kueue-manager-config`` in
``kueue-system``, key ``controller_manager_config.yaml`` (Kueue's
``config/components/manager/controller_manager_config.yaml``, mounted by its Deployment).
kubesim's controller reads the same ConfigMap when it exists and again whenever it
changes (a real Kueue reads it at start; a restart after an edit is what an operator
does); without it, Kueue's defaults apply (``apis/config/v1beta2/defaults.go``).

What is read: ``waitForPodsReady`` (``timeout``, ``blockAdmission``, ``recoveryTimeout``,
``requeuingStrategy``) and ``resources`` (``excludeResourcePrefixes``,
``transformations``, ``deviceClassMappings``: see ``kueue_dra.py``). Sources are Kueue
v0.19.2; see ``kubesim/KUEUE.md``.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from kubesim.sim.kueue_dra import parse_mappings
from kubesim.sim.util import parse_quantity

log = logging.getLogger("kubesim.sim.kueue")

CONFIG_NAMESPACE = "kueue-system"
CONFIG_NAME = "kueue-manager-config"
CONFIG_KEY = "controller_manager_config.yaml"
# apis/config/v1beta2/defaults.go
DEFAULT_TIMEOUT = 30 * 60.0                 # DefaultWaitForPodsReadyTimeout
DEFAULT_BACKOFF_BASE = 60                   # DefaultRequeuingBackoffBaseSeconds
DEFAULT_BACKOFF_MAX = 3600                  # DefaultRequeuingBackoffMaxSeconds

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: Any) -> float:
    """A ``metav1.Duration`` (Go's ``time.ParseDuration``: ``5m``, ``1h30m``, ``90s``,
    ``0s``) in seconds. Raises ``ValueError`` on anything else."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        raise ValueError(f"duration {value!r} has no unit")
    s = str(value).strip()
    if s in ("0", ""):
        return 0.0
    sign = -1.0 if s.startswith("-") else 1.0
    s = s.lstrip("+-")
    pos, total = 0, 0.0
    for m in _DURATION.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if pos != len(s) or not s:
        raise ValueError(f"invalid duration {value!r}")
    return sign * total


@dataclass(frozen=True)
class PodsReady:
    """``waitForPodsReady`` after Kueue's defaulting (``SetDefaults_Configuration``): on by
    default in v1beta2 (there is no ``enable``: ``pkg/util/waitforpodsready.Enabled`` is
    false only with the ``DisableWaitForPodsReady`` feature gate, read here from the
    Configuration's ``featureGates``)."""
    enabled: bool = True
    timeout: float = DEFAULT_TIMEOUT
    block_admission: bool = False
    recovery_timeout: float | None = DEFAULT_TIMEOUT   # defaults to timeout; 0 disables
    timestamp: str = "Eviction"                        # requeuingStrategy.timestamp
    backoff_limit: int | None = None                   # null: requeue forever
    backoff_base: int = DEFAULT_BACKOFF_BASE
    backoff_max: int = DEFAULT_BACKOFF_MAX


@dataclass(frozen=True)
class Transformation:
    input: str
    strategy: str = "Retain"                 # DefaultResourceTransformationStrategy
    multiply_by: str = ""
    outputs: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class KueueConfig:
    pods_ready: PodsReady = field(default_factory=PodsReady)
    exclude_prefixes: tuple[str, ...] = ()
    transformations: tuple[Transformation, ...] = ()
    # resources.deviceClassMappings: ((logical resource, (DeviceClass, ...)), ...)
    device_class_mappings: tuple[tuple[str, tuple[str, ...]], ...] = ()
    error: str = ""   # why the ConfigMap's text was not taken (defaults apply)

    def requests(self, per_pod: dict[str, int]) -> dict[str, int]:
        """A pod's requests as Kueue counts them against quota: excluded prefixes dropped,
        then the transformations applied (``pkg/workload/workload.go``
        ``totalRequestsFromPodSets``, ``dropExcludedResources``,
        ``applyResourceTransformations``)."""
        if not self.exclude_prefixes and not self.transformations:
            return per_pod
        req = {r: v for r, v in per_pod.items()
               if not any(r.startswith(p) for p in self.exclude_prefixes)}
        by_input = {t.input: t for t in self.transformations}
        if not any(r in by_input for r in req):
            return req
        retained: dict[str, int] = {}
        generated: dict[str, float] = {}
        for res, units in req.items():
            t = by_input.get(res)
            if t is None:
                retained[res] = units
                continue
            value = _value(res, units)
            if t.multiply_by and t.multiply_by in req:
                value *= _value(t.multiply_by, req[t.multiply_by])
            for out, factor in t.outputs:  # summed: the input order does not matter
                generated[out] = generated.get(out, 0.0) + value * factor
            if t.strategy == "Retain":
                retained[res] = units
        out_units = dict(retained)
        for res, value in generated.items():
            u = _units(res, max(0.0, value))  # a negative total is taken as zero
            out_units[res] = out_units.get(res, 0) + u
        return {r: v for r, v in out_units.items() if v}


def _value(res: str, units: int) -> float:
    return units / 1000.0 if res == "cpu" else float(units)


def _units(res: str, value: float) -> int:
    return round(value * 1000) if res == "cpu" else round(value)


def backoff_seconds(count: int, base: int, cap: int) -> float:
    """The requeue delay after the ``count``-th PodsReady timeout: ``base * 2^(count-1)``
    capped at ``cap`` (``pkg/workload/workload.go`` ``UpdateRequeueState`` with
    ``pkg/util/wait.NewBackoff(base, cap, 2, 0.0001).WaitTime(count)``; Kueue adds a jitter
    of at most 0.01%, left out so runs repeat)."""
    if count <= 0:
        return 0.0
    return float(min(base * 2 ** (count - 1), cap) if cap > 0 else base * 2 ** (count - 1))


def _opt_int(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer")
    return value


def parse(text: str) -> KueueConfig:
    """The Configuration in ``text`` with Kueue's defaults; an invalid one gives the
    defaults with ``error`` set (Kueue would refuse to start: ``pkg/config/validation.go``)."""
    try:
        doc = yaml.safe_load(text or "") or {}
        if not isinstance(doc, dict):
            raise ValueError("the Configuration is not a mapping")
        gates = doc.get("featureGates") or {}
        wfpr = doc.get("waitForPodsReady")
        wfpr = wfpr if isinstance(wfpr, dict) else {}
        timeout = parse_duration(wfpr["timeout"]) if wfpr.get("timeout") else DEFAULT_TIMEOUT
        if timeout == 0:
            timeout = DEFAULT_TIMEOUT  # defaults.go: a zero timeout takes the default
        if timeout < 0:
            raise ValueError("waitForPodsReady.timeout must be positive")
        rec = wfpr.get("recoveryTimeout")
        recovery = timeout if rec is None else parse_duration(rec)
        if recovery < 0:
            raise ValueError("waitForPodsReady.recoveryTimeout must be positive")
        rs = wfpr.get("requeuingStrategy") or {}
        stamp = rs.get("timestamp") or "Eviction"
        if stamp not in ("Eviction", "Creation"):
            raise ValueError(f"unsupported requeuingStrategy.timestamp {stamp!r}")
        limit = _opt_int(rs.get("backoffLimitCount"), "backoffLimitCount")
        base = _opt_int(rs.get("backoffBaseSeconds"), "backoffBaseSeconds") or \
            DEFAULT_BACKOFF_BASE
        cap = _opt_int(rs.get("backoffMaxSeconds"), "backoffMaxSeconds") or DEFAULT_BACKOFF_MAX
        if (limit is not None and limit < 0) or base < 0 or cap < 0:
            raise ValueError("requeuingStrategy values must not be negative")
        pods_ready = PodsReady(
            enabled=not bool(gates.get("DisableWaitForPodsReady")), timeout=timeout,
            block_admission=bool(wfpr.get("blockAdmission", False)),
            recovery_timeout=recovery or None, timestamp=stamp, backoff_limit=limit,
            backoff_base=base, backoff_max=cap)
        res = doc.get("resources") or {}
        excl = tuple(str(p) for p in res.get("excludeResourcePrefixes") or [])
        trans = []
        seen: set[str] = set()
        for t in res.get("transformations") or []:
            name = str(t.get("input") or "")
            strategy = t.get("strategy") or "Retain"
            if not name or name in seen or strategy not in ("Retain", "Replace"):
                raise ValueError(f"invalid resources.transformations entry {t!r}")
            seen.add(name)
            trans.append(Transformation(
                input=name, strategy=strategy, multiply_by=str(t.get("multiplyBy") or ""),
                outputs=tuple(sorted((str(k), parse_quantity(v))
                                     for k, v in (t.get("outputs") or {}).items()))))
        return KueueConfig(pods_ready=pods_ready, exclude_prefixes=excl,
                           transformations=tuple(trans),
                           device_class_mappings=parse_mappings(res))
    except (ValueError, TypeError, AttributeError, KeyError, yaml.YAMLError) as exc:
        log.warning("kueue configuration not taken (defaults apply): %s", exc)
        return KueueConfig(error=str(exc))


def from_configmap(obj: dict | None) -> KueueConfig:
    """The Configuration of Kueue's ConfigMap, or the defaults when it is absent."""
    if obj is None:
        return KueueConfig()
    return parse(((obj.get("data") or {}).get(CONFIG_KEY)) or "")


def is_config(resource: str, obj: dict) -> bool:
    md = obj.get("metadata") or {}
    return resource == "configmaps" and md.get("name") == CONFIG_NAME and \
        md.get("namespace") == CONFIG_NAMESPACE


def install(store: Any, text: str) -> None:
    """Put Kueue's ConfigMap in the store (``python -m kubesim --kueue-config FILE``):
    ``text`` is the ConfigMap's manifest, or a bare Configuration; the namespace
    ``kueue-system`` is created if missing, an existing ConfigMap replaced."""
    doc = yaml.safe_load(text) or {}
    if doc.get("kind") != "ConfigMap":
        doc = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": CONFIG_NAME, "namespace": CONFIG_NAMESPACE},
               "data": {CONFIG_KEY: text}}
    md = doc.setdefault("metadata", {})
    md.update(name=CONFIG_NAME, namespace=CONFIG_NAMESPACE)
    try:
        store.get("namespaces", CONFIG_NAMESPACE)
    except Exception:
        store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": CONFIG_NAMESPACE}})
    try:
        old = store.get("configmaps", CONFIG_NAME, namespace=CONFIG_NAMESPACE)
    except Exception:
        store.create("configmaps", doc, namespace=CONFIG_NAMESPACE)
        return
    md["resourceVersion"] = old["metadata"].get("resourceVersion")
    store.replace("configmaps", doc, namespace=CONFIG_NAMESPACE)
