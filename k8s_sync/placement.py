"""Dedicated nodes: the label and taint on a node, and the matching job placement (pure).

A node dedicated to a tenant carries the label ``trainyard.io/dedicated=<tenant>`` and
the taint ``trainyard.io/dedicated=<tenant>:NoSchedule``, so only pods that tolerate
it (that tenant's jobs) can land there. The tenant's jobs get the toleration and a
preference for their dedicated nodes; they may still use shared nodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from k8s_sync import naming

__all__ = ["DEDICATED_KEY", "dedicated_placement", "node_dedication_patch"]

DEDICATED_KEY = "trainyard.io/dedicated"


def _taint(tenant_slug: str) -> dict[str, str]:
    return {"key": DEDICATED_KEY, "value": naming.label_value(tenant_slug),
            "effect": "NoSchedule"}


def node_dedication_patch(node: Mapping[str, Any], tenant_slug: str | None
                          ) -> dict[str, Any] | None:
    """The merge patch that makes ``node`` dedicated to ``tenant_slug`` (None: to nobody),
    or None when it already is. Other labels and taints are kept; the patch carries the
    node's resourceVersion, so a concurrent change makes it fail with a 409 (retry)."""
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    taints = list((node.get("spec") or {}).get("taints") or [])
    others = [t for t in taints if t.get("key") != DEDICATED_KEY]
    wanted_taints = [*others, _taint(tenant_slug)] if tenant_slug else others
    wanted_label = naming.label_value(tenant_slug) if tenant_slug else None
    if labels.get(DEDICATED_KEY) == wanted_label and taints == wanted_taints:
        return None
    return {
        "metadata": {"labels": {DEDICATED_KEY: wanted_label},
                     "resourceVersion": meta.get("resourceVersion")},
        "spec": {"taints": wanted_taints or None},
    }


def dedicated_placement(tenant_slug: str) -> dict[str, Any]:
    """Pod-spec fields for a tenant that has dedicated nodes: tolerate its taint and
    prefer its nodes (weight 100)."""
    value = naming.label_value(tenant_slug)
    return {
        "tolerations": [{"key": DEDICATED_KEY, "operator": "Equal", "value": value,
                         "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 100,
            "preference": {"matchExpressions": [
                {"key": DEDICATED_KEY, "operator": "In", "values": [value]}]},
        }]}},
    }
