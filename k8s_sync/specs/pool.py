"""A tenant pool and its network policy, as ``k8s_sync.manifests`` renders them
(``k8s_sync.specs``)."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from k8s_sync import naming
from k8s_sync.specs.quantities import _frozen
from k8s_sync.specs.quota import LimitSpec, QuotaSpec

# --- network ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class NetworkSpec:
    """Where a pool's pods may talk to beyond their own namespace.

    DNS: pods matching ``dns_pod_labels`` in namespace ``dns_namespace`` on port 53
    (UDP and TCP); an empty ``dns_pod_labels`` allows any pod of that namespace.
    ``egress_cidrs`` are extra destinations (e.g. an object store), empty by default.
    """

    dns_namespace: str = "kube-system"
    dns_pod_labels: Mapping[str, str] = field(
        default_factory=lambda: {"k8s-app": "kube-dns"}
    )
    egress_cidrs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not naming.is_dns1123_label(self.dns_namespace):
            raise ValueError(f"invalid namespace {self.dns_namespace!r}")
        object.__setattr__(self, "dns_pod_labels", _frozen(self.dns_pod_labels))
        object.__setattr__(self, "egress_cidrs", tuple(self.egress_cidrs))
        for cidr in self.egress_cidrs:
            try:
                if "/" not in cidr:  # the API server parses with net.ParseCIDR
                    raise ValueError("needs a /prefix")
                ipaddress.ip_network(cidr, strict=True)
            except ValueError as exc:  # the API server would answer 422 at every reconcile
                raise ValueError(f"invalid egress CIDR {cidr!r}: {exc}") from exc


# --- pool ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolSpec:
    """Everything Kubernetes needs to know about one tenant pool (``prod`` or ``dev``).

    ``tenant_group`` is the RBAC Group name the tenant's people authenticate with, as the
    API server sees it (with any OIDC prefix), e.g. ``"oidc:team-a"``. ``suspended``
    keeps the namespace and every object but zeroes pods and GPUs in the quota.
    ``pod_security`` is the Pod Security Standard the namespace enforces; ``baseline``
    forbids privileged pods, host namespaces and extra capabilities such as ``IPC_LOCK``
    (which RDMA/InfiniBand setups need: pass ``"privileged"`` there); ``None`` leaves the
    label off (the cluster default applies).
    """

    tenant_slug: str
    pool: Literal["prod", "dev"]
    tenant_group: str
    quota: QuotaSpec = field(default_factory=QuotaSpec)
    production_quota: QuotaSpec | None = None
    """What the pool's production pods may hold (a ResourceQuota scoped to the production
    PriorityClass): production never borrows. None: no such quota (dev pools)."""
    limits: LimitSpec = field(default_factory=LimitSpec)
    network: NetworkSpec = field(default_factory=NetworkSpec)
    suspended: bool = False
    pod_security: Literal["privileged", "baseline", "restricted"] | None = "baseline"

    def __post_init__(self) -> None:
        naming.validate_pool(self.pool)
        if self.pod_security not in (None, "privileged", "baseline", "restricted"):
            raise ValueError(f"unknown Pod Security level {self.pod_security!r}")
        if not self.tenant_slug:
            raise ValueError("tenant_slug must not be empty")
        if not self.tenant_group or not self.tenant_group.strip():
            raise ValueError("tenant_group must not be empty")

    @property
    def namespace(self) -> str:
        """The pool's namespace, ``ty-<tenant>-<pool>``."""
        return naming.namespace_name(self.tenant_slug, self.pool)

    @property
    def labels(self) -> dict[str, str]:
        """The labels every object of this pool carries (a fresh dict)."""
        return naming.pool_labels(self.tenant_slug, self.pool)
