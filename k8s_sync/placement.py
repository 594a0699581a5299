"""Dedicated nodes: the label and taint on a node, and the matching job placement (pure).

A node dedicated to a tenant carries the label ``trainyard.io/dedicated=<tenant>`` and
the taint ``trainyard.io/dedicated=<tenant>:NoSchedule``, so only pods that tolerate
it (that tenant's jobs) can land there. The tenant's jobs get the toleration and a
preference for their dedicated nodes; they may still use shared nodes.

Topology levels (the platform policy's ``topology_levels``): node-label keys of the
network, widest first. A multi-node gang is placed under one value of the *last* level
(its "switch"); :func:`switch_of` is the one place that reads it from a node's labels.
Empty means :data:`DEFAULT_TOPOLOGY_LEVELS`, the labels kubesim sets (rack, then leaf
switch). Other fabrics label nodes differently, e.g. Kueue's TAS examples use
``cloud.google.com/gce-topology-block`` / ``cloud.google.com/gce-topology-subblock``
on GKE, ``topology.kubernetes.io/zone`` for zones, NVIDIA Topograph
``network.topology.nvidia.com/spine`` / ``network.topology.nvidia.com/leaf``. The rules
are Kueue's for a Topology's levels (kueue.sigs.k8s.io/docs/concepts/topology): 1 to 16
unique label keys, ``kubernetes.io/hostname`` only as the last one.

Pinning (``JobSpec.nodes``, rendered by ``manifests.build_pytorchjob``): the engine's
chosen nodes become required node affinity on the field ``metadata.name``
(``matchFields``), not on the label ``kubernetes.io/hostname``, whose value "may be the
same as the node name in some environments and a different value in other environments"
(kubernetes.io/docs/reference/node/node-labels/); the DaemonSet controller pins its pods
to a node the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from k8s_sync import naming
from k8s_sync.specs import SWITCH_LABEL
from k8s_sync.specs import _is_qualified_name as is_qualified_name

__all__ = ["DEDICATED_KEY", "DEFAULT_TOPOLOGY_LEVELS", "HOSTNAME_LABEL", "NODE_NAME_FIELD",
           "RACK_LABEL", "configured_topology_levels", "dedicated_placement",
           "node_dedication_patch", "node_topology", "set_topology_source", "switch_label",
           "switch_of", "topology_levels", "validate_topology_levels"]

log = logging.getLogger(__name__)
DEDICATED_KEY = "trainyard.io/dedicated"
#: kubesim's rack label (and Trainyard's convention for on-premise racks).
RACK_LABEL = "trainyard.io/rack"
#: The topology levels when the policy names none: rack, then leaf switch.
DEFAULT_TOPOLOGY_LEVELS: tuple[str, ...] = (RACK_LABEL, SWITCH_LABEL)
HOSTNAME_LABEL = "kubernetes.io/hostname"
#: The only field node selector terms' ``matchFields`` support.
NODE_NAME_FIELD = "metadata.name"
MAX_TOPOLOGY_LEVELS = 16


def validate_topology_levels(levels: object) -> tuple[str, ...]:
    """``levels`` checked as a Kueue Topology's levels (1 to 16 unique node-label keys,
    ``kubernetes.io/hostname`` only last); ``ValueError`` naming the bad key otherwise."""
    if isinstance(levels, str) or not isinstance(levels, Iterable):
        raise ValueError("topology_levels: expected a list of node-label keys")
    out = tuple(levels)
    if not out:
        raise ValueError("topology_levels: at least one level is needed")
    if len(out) > MAX_TOPOLOGY_LEVELS:
        raise ValueError(f"topology_levels: at most {MAX_TOPOLOGY_LEVELS} levels")
    for i, key in enumerate(out):
        if not is_qualified_name(key):
            raise ValueError(f"topology_levels: {key!r} is not a label key "
                             "([prefix/]name, e.g. trainyard.io/switch)")
        if key == HOSTNAME_LABEL and i != len(out) - 1:
            raise ValueError(f"topology_levels: {HOSTNAME_LABEL} can only be the last level")
    if len(set(out)) != len(out):
        raise ValueError("topology_levels: a label key appears twice")
    return out


def topology_levels(configured: Iterable[str] | None) -> tuple[str, ...]:
    """The levels in force: the configured ones, or the default when there are none."""
    levels = tuple(configured or ())
    return validate_topology_levels(levels) if levels else DEFAULT_TOPOLOGY_LEVELS


def switch_label(levels: Iterable[str] | None) -> str:
    """The node label a multi-node gang shares one value of: the last level."""
    return topology_levels(levels)[-1]


def node_topology(labels: Mapping[str, str] | None, levels: Iterable[str] | None
                  ) -> tuple[str, ...]:
    """A node's value for each level ("" where it has no such label), widest first."""
    labels = labels or {}
    return tuple(str(labels.get(key, "")) for key in topology_levels(levels))


_source: Callable[[], Iterable[str] | None] | None = None


def set_topology_source(source: Callable[[], Iterable[str] | None] | None) -> None:
    """Register where the configured levels come from (the tenants app registers the
    platform policy at start-up: k8s_sync cannot import it)."""
    global _source
    _source = source


def configured_topology_levels() -> tuple[str, ...]:
    """The levels in force now: the registered source's, else the default (also when
    the stored value is unusable, which ``policy_update`` never lets through)."""
    try:
        return topology_levels(_source() if _source is not None else None)
    except ValueError:
        log.warning("invalid topology levels configured; using %s", DEFAULT_TOPOLOGY_LEVELS)
        return DEFAULT_TOPOLOGY_LEVELS


def switch_of(labels: Mapping[str, str] | None, levels: Iterable[str] | None) -> str:
    """The "switch" of a node: its value of the last topology level ("" if unlabelled)."""
    return str((labels or {}).get(switch_label(levels), ""))


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
