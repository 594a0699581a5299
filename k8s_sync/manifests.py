"""Pure builders: plain specs in, plain Kubernetes manifests (dicts) out.

Contracts:

* No I/O, no clock, no settings, no ``kubernetes`` import; the same spec always yields
  the same manifest, so a resync that changes nothing is a no-op apply.
* Every call returns fresh dicts that share nothing with the spec or with each other.
* Names come from :mod:`k8s_sync.naming`; labels are set only in :func:`_metadata`.
* Quantities are canonical strings (what the API server would store), so server-side
  apply of an unchanged spec does not change the object.
* The manifests are the *declared intent* of Trainyard's field manager: they carry no
  ``status``, ``resourceVersion`` or ``managedFields``.

Per tenant pool, in apply order (:func:`desired_pool_objects`): Namespace,
ServiceAccount, Role, RoleBinding, NetworkPolicy, LimitRange, ResourceQuota. Cluster-wide
(:func:`desired_cluster_objects`): one PriorityClass per tier.

Design choices, with the facts they rest on (``shared/reference/kubernetes-facts.md``):

* **One unscoped ResourceQuota** carries compute, GPU, MIG, storage and PVC keys.
  PriorityClass-scoped quotas would reject storage/object-count keys (§0.2) and tiers
  are ordered by Trainyard's admission, not by quota, so no scoped quota is built.
* **Suspended pool**: the namespace and every object stay; the quota's ``pods`` and all
  ``requests.nvidia.com/*`` keys become ``"0"``. Quota admission only checks *new*
  pods, so nothing running is killed and nothing stored is deleted; stopping running
  jobs is the admission engine's decision (it suspends PyTorchJobs). Lifting the
  suspension restores the normal values on the next apply. The namespace is labelled
  ``trainyard.io/suspended: "true"`` so observers and humans can see why.
* **LimitRange** always sets GPU ``default``/``defaultRequest`` to ``"0"`` (§0.3); CPU and
  memory ``defaultRequest`` let pods that omit requests pass the cpu/memory quota.
* **RBAC, least privilege**: researchers submit and cancel through the portal, so that
  Trainyard's admission stays the only queue. Their group gets *read-only* access to
  what they need to debug their work (pods, logs, events, services, PVCs, quota,
  limit ranges, PyTorchJobs). No secrets, no exec/port-forward, no writes. The
  ServiceAccount is the identity of job pods; it is bound to nothing and does not
  automount an API token.
* **NetworkPolicy**: every pod is isolated both ways; allowed are traffic from/to pods
  of the same namespace (NCCL/Gloo between master and workers), DNS to the cluster
  DNS pods, and any ``NetworkSpec.egress_cidrs``. No ingress from other namespaces.
* **Namespace** enforces the ``baseline`` Pod Security Standard by default (no privileged
  or host-namespace pods), which GPU training pods do not need; ``PoolSpec.pod_security``
  relaxes it where RDMA needs extra capabilities.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from k8s_sync import naming
from k8s_sync.specs import (
    GPU_RESOURCE,
    LimitSpec,
    NetworkSpec,
    PoolSpec,
    TierSpec,
    cpu_quantity,
    default_tiers,
    gib_quantity,
)

__all__ = [
    "POOL_NAMESPACED_KINDS",
    "Manifest",
    "build_limit_range",
    "build_namespace",
    "build_network_policy",
    "build_priority_class",
    "build_resource_quota",
    "build_role",
    "build_role_binding",
    "build_service_account",
    "desired_cluster_objects",
    "desired_pool_objects",
]

Manifest = dict[str, Any]

RBAC_GROUP = "rbac.authorization.k8s.io"
POD_SECURITY_LABEL = "pod-security.kubernetes.io/enforce"
_READ = ["get", "list", "watch"]


def _metadata(
    name: str, labels: Mapping[str, str], namespace: str | None = None
) -> dict[str, Any]:
    """The one place where object metadata (and thus labels) is assembled."""
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = dict(sorted(labels.items()))
    return meta


def _pool_object(spec: PoolSpec, api_version: str, kind: str, name: str) -> Manifest:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": _metadata(name, spec.labels, spec.namespace),
    }


# --- per pool --------------------------------------------------------------------------------


def build_namespace(spec: PoolSpec) -> Manifest:
    """The pool's Namespace ``ty-<tenant>-<pool>``; kept (and labelled) when suspended."""
    labels = {**spec.labels, naming.LABEL_SUSPENDED: "true" if spec.suspended else "false"}
    if spec.pod_security is not None:
        labels[POD_SECURITY_LABEL] = spec.pod_security
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": _metadata(spec.namespace, labels)}


def build_service_account(spec: PoolSpec) -> Manifest:
    """The identity of the pool's job pods: no permissions, no automounted token."""
    obj = _pool_object(spec, "v1", "ServiceAccount", naming.SERVICE_ACCOUNT_NAME)
    obj["automountServiceAccountToken"] = False
    return obj


def build_role(spec: PoolSpec) -> Manifest:
    """Read-only Role for the tenant's people (see the module docstring for the why)."""
    obj = _pool_object(spec, f"{RBAC_GROUP}/v1", "Role", naming.ROLE_NAME)
    obj["rules"] = [
        {"apiGroups": [""],
         "resources": ["events", "limitranges", "persistentvolumeclaims", "pods", "pods/log",
                       "resourcequotas", "services"],
         "verbs": list(_READ)},
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": list(_READ)},
        {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs", "pytorchjobs/status"],
         "verbs": list(_READ)},
    ]
    return obj


def build_role_binding(spec: PoolSpec) -> Manifest:
    """Binds :func:`build_role` to the tenant's group.

    ``roleRef`` is immutable; the binding is named after the role it references
    (``naming.ROLE_BINDING_NAME == naming.ROLE_NAME``), so a future change of role is a
    new binding, never an in-place roleRef change (which the API server rejects with 422).
    """
    obj = _pool_object(spec, f"{RBAC_GROUP}/v1", "RoleBinding", naming.ROLE_BINDING_NAME)
    obj["subjects"] = [{"kind": "Group", "apiGroup": RBAC_GROUP, "name": spec.tenant_group}]
    obj["roleRef"] = {"apiGroup": RBAC_GROUP, "kind": "Role", "name": naming.ROLE_NAME}
    return obj


def _dns_peer(network: NetworkSpec) -> dict[str, Any]:
    peer: dict[str, Any] = {
        "namespaceSelector": {
            "matchLabels": {"kubernetes.io/metadata.name": network.dns_namespace}
        }
    }
    if network.dns_pod_labels:
        peer["podSelector"] = {"matchLabels": dict(network.dns_pod_labels)}
    return peer


def build_network_policy(spec: PoolSpec) -> Manifest:
    """Isolate every pod of the pool: same-namespace traffic, DNS, listed CIDRs only."""
    obj = _pool_object(spec, "networking.k8s.io/v1", "NetworkPolicy",
                       naming.NETWORK_POLICY_NAME)
    egress: list[dict[str, Any]] = [
        {"to": [{"podSelector": {}}]},
        {"to": [_dns_peer(spec.network)],
         "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
    ]
    if spec.network.egress_cidrs:
        egress.append({"to": [{"ipBlock": {"cidr": cidr}} for cidr in spec.network.egress_cidrs]})
    obj["spec"] = {
        "podSelector": {},
        "policyTypes": ["Ingress", "Egress"],
        # A peer with only a podSelector means "pods of THIS namespace".
        "ingress": [{"from": [{"podSelector": {}}]}],
        "egress": egress,
    }
    return obj


def _container_limits(limits: LimitSpec) -> dict[str, Any]:
    default: dict[str, str] = {GPU_RESOURCE: "0"}
    default_request: dict[str, str] = {GPU_RESOURCE: "0"}
    maximum: dict[str, str] = {}
    if limits.default_cpu is not None:
        default["cpu"] = cpu_quantity(limits.default_cpu)
    if limits.default_memory_gib is not None:
        default["memory"] = gib_quantity(limits.default_memory_gib)
    if limits.default_request_cpu is not None:
        default_request["cpu"] = cpu_quantity(limits.default_request_cpu)
    if limits.default_request_memory_gib is not None:
        default_request["memory"] = gib_quantity(limits.default_request_memory_gib)
    if limits.max_cpu is not None:
        maximum["cpu"] = cpu_quantity(limits.max_cpu)
    if limits.max_memory_gib is not None:
        maximum["memory"] = gib_quantity(limits.max_memory_gib)
    if limits.max_gpus is not None:
        maximum[GPU_RESOURCE] = str(limits.max_gpus)
    item: dict[str, Any] = {
        "type": "Container",
        "default": dict(sorted(default.items())),
        "defaultRequest": dict(sorted(default_request.items())),
    }
    if maximum:
        item["max"] = dict(sorted(maximum.items()))
    return item


def build_limit_range(spec: PoolSpec) -> Manifest:
    """Per-container defaults/caps; GPU ``default`` and ``defaultRequest`` are always 0."""
    obj = _pool_object(spec, "v1", "LimitRange", naming.LIMIT_RANGE_NAME)
    items = [_container_limits(spec.limits)]
    if spec.limits.max_pvc_storage_gib is not None:
        items.append({"type": "PersistentVolumeClaim",
                      "max": {"storage": gib_quantity(spec.limits.max_pvc_storage_gib)}})
    obj["spec"] = {"limits": items}
    return obj


def build_resource_quota(spec: PoolSpec) -> Manifest:
    """The pool's single, unscoped ResourceQuota (the backstop, never the queue)."""
    obj = _pool_object(spec, "v1", "ResourceQuota", naming.RESOURCE_QUOTA_NAME)
    obj["spec"] = {"hard": spec.quota.to_hard(suspended=spec.suspended)}
    return obj


#: (apiVersion, kind) of the namespaced objects of a pool, for pruning and observing.
#: The Namespace itself is deliberately absent: pruning must never delete a namespace.
POOL_NAMESPACED_KINDS: tuple[tuple[str, str], ...] = (
    ("v1", "ServiceAccount"),
    (f"{RBAC_GROUP}/v1", "Role"),
    (f"{RBAC_GROUP}/v1", "RoleBinding"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("v1", "LimitRange"),
    ("v1", "ResourceQuota"),
)


def desired_pool_objects(spec: PoolSpec) -> list[Manifest]:
    """Every object of one tenant pool, in apply order.

    The Namespace comes first (everything else lives in it); the LimitRange precedes the
    ResourceQuota so pods never meet a cpu/memory quota without defaults.
    """
    return [
        build_namespace(spec),
        build_service_account(spec),
        build_role(spec),
        build_role_binding(spec),
        build_network_policy(spec),
        build_limit_range(spec),
        build_resource_quota(spec),
    ]


# --- cluster-wide ----------------------------------------------------------------------------


def build_priority_class(tier: TierSpec) -> Manifest:
    """The PriorityClass of one tier. ``value``/``preemptionPolicy`` are immutable (422)."""
    labels = {**naming.managed_labels(), naming.LABEL_TIER: tier.name.value}
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": _metadata(tier.priority_class_name, labels),
        "value": tier.value,
        "preemptionPolicy": tier.preemption_policy,
        "globalDefault": False,
        "description": tier.description,
    }


def desired_cluster_objects(tiers: Iterable[TierSpec] | None = None) -> list[Manifest]:
    """The cluster-wide objects: one PriorityClass per tier (default: :func:`default_tiers`)."""
    chosen = default_tiers() if tiers is None else tuple(tiers)
    names = [tier.priority_class_name for tier in chosen]
    if len(names) != len(set(names)):
        raise ValueError(f"duplicate tiers: {names}")
    return [build_priority_class(tier) for tier in chosen]
