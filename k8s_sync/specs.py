"""Plain, frozen specs that the domain apps build and ``k8s_sync.manifests`` turns into objects.

A selector in ``tenants`` (or ``jobs``) reads rows and builds these; ``k8s_sync`` never
sees a model instance. Every spec is a frozen dataclass; mapping fields are copied into
read-only mappings at construction, so a spec cannot change after it was built (compare
specs with ``==``; they are not meant to be hashed).

Quantities are given in catalog units (CPU cores, GiB, counts) and rendered into
canonical Kubernetes quantity strings here (``"16"``, ``"500m"``, ``"64Gi"``), because the
``kubernetes`` client 37 rejects non-string quantities in typed bodies and because the
server normalises quantities anyway, so rendering them canonically keeps resyncs no-ops.

What a ResourceQuota can and cannot carry (kubernetes-facts §0-§1):

* GPUs only with the ``requests.`` prefix: ``requests.nvidia.com/gpu`` is the *total*
  backstop over all models; per-GPU-model quota is enforced by Trainyard's admission
  (the device plugin cannot name GPUs per model), so per-model numbers, GPU memory and
  IOPS from the quota catalog are **not** part of :class:`QuotaSpec`.
* MIG profiles (mixed strategy) are separate resources: ``requests.nvidia.com/mig-<p>``.
* Shared GPUs (time-slicing / MPS with rename): ``requests.nvidia.com/gpu.shared``.
* Storage per StorageClass: ``<class>.storageclass.storage.k8s.io/requests.storage`` and
  ``.../persistentvolumeclaims``; these live only in the unscoped quota.

The backstop must allow what admission may admit: when a tenant may borrow up to an
elastic ceiling, the selector passes the ceiling, not the nominal quota.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from types import MappingProxyType
from typing import Literal

from k8s_sync import naming

__all__ = [
    "GPU_RESOURCE",
    "SHARED_GPU_RESOURCE",
    "LimitSpec",
    "NetworkSpec",
    "PoolSpec",
    "QuotaSpec",
    "StorageClassQuota",
    "TierSpec",
    "cpu_quantity",
    "default_tiers",
    "gib_quantity",
    "mig_resource",
]

GPU_RESOURCE = "nvidia.com/gpu"
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
_MIG_PROFILE = re.compile(r"^[0-9]+g\.[0-9]+gb$")

Number = int | float | Decimal | str


# --- quantity rendering ---------------------------------------------------------------------


def _decimal(value: Number, what: str) -> Decimal:
    if isinstance(value, bool):
        raise ValueError(f"{what}: expected a number, got {value!r}")
    try:
        number = Decimal(str(value))
    except InvalidOperation as exc:
        raise ValueError(f"{what}: not a number: {value!r}") from exc
    if not number.is_finite() or number < 0:
        raise ValueError(f"{what}: must be a finite number >= 0, got {value!r}")
    return number


def cpu_quantity(cores: Number) -> str:
    """Render CPU cores canonically: ``16`` -> ``"16"``, ``0.5`` -> ``"500m"``.

    Raises ``ValueError`` for negatives or precision finer than a millicore.
    """
    number = _decimal(cores, "cpu cores")
    if number == number.to_integral_value():
        return str(int(number))
    milli = number * 1000
    if milli != milli.to_integral_value():
        raise ValueError(f"cpu cores: finer than 1m: {cores!r}")
    return f"{int(milli)}m"


def gib_quantity(gib: Number) -> str:
    """Render GiB canonically: ``64`` -> ``"64Gi"``, ``0.5`` -> ``"512Mi"``, 2048 -> ``"2Ti"``."""
    number = _decimal(gib, "GiB")
    if number == 0:
        return "0"  # the API server renders any zero as "0"; match it so resyncs are no-ops
    for factor, suffix in ((Decimal(1024), "Ti"), (Decimal(1), "Gi"), (Decimal(1) / 1024, "Mi")):
        scaled = number / factor
        if scaled == scaled.to_integral_value():
            return f"{int(scaled)}{suffix}"
    raise ValueError(f"GiB: finer than 1Mi: {gib!r}")


def _count(value: int, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what}: expected an int >= 0, got {value!r}")
    return str(value)


def mig_resource(profile: str) -> str:
    """``"1g.10gb"`` -> ``"nvidia.com/mig-1g.10gb"`` (device-plugin mixed strategy name)."""
    profile = profile.removeprefix("mig-")
    if not _MIG_PROFILE.match(profile):
        raise ValueError(f"not a MIG profile like '1g.10gb': {profile!r}")
    return f"nvidia.com/mig-{profile}"


def _frozen(mapping: Mapping[str, object] | None) -> Mapping[str, object]:
    return MappingProxyType(dict(sorted((mapping or {}).items())))


# --- quota -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class StorageClassQuota:
    """Quota for one StorageClass. ``None`` leaves that key out (unlimited)."""

    storage_class: str
    storage_gib: Number | None = None
    pvc_count: int | None = None

    def __post_init__(self) -> None:
        if not naming.is_dns1123_subdomain(self.storage_class):
            raise ValueError(f"invalid StorageClass name {self.storage_class!r}")


@dataclass(frozen=True)
class QuotaSpec:
    """The hard limits of one tenant pool's ResourceQuota, in catalog units.

    ``None`` means "no limit" (the key is omitted). ``gpus`` is the total of
    ``nvidia.com/gpu`` over every GPU model. ``mig`` maps a MIG profile (``"1g.10gb"``)
    to a count. ``extra`` is an escape hatch of raw ``hard`` keys to quantity strings,
    e.g. ``{"count/pytorchjobs.kubeflow.org": "50"}``; it cannot override a key set by a
    typed field (that raises ``ValueError`` in :meth:`to_hard`).
    """

    cpu_cores: Number | None = None
    memory_gib: Number | None = None
    gpus: int | None = None
    shared_gpus: int | None = None
    mig: Mapping[str, int] = field(default_factory=dict)
    storage_gib: Number | None = None
    pvc_count: int | None = None
    storage_classes: tuple[StorageClassQuota, ...] = ()
    pods: int | None = None
    extra: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "mig", _frozen(self.mig))
        object.__setattr__(self, "extra", _frozen(self.extra))
        object.__setattr__(self, "storage_classes", tuple(self.storage_classes))
        names = [sc.storage_class for sc in self.storage_classes]
        if len(names) != len(set(names)):
            raise ValueError(f"duplicate StorageClass in quota: {names}")
        self.to_hard()  # validate every value now, not at reconcile time

    def to_hard(self, *, suspended: bool = False) -> dict[str, str]:
        """The ``spec.hard`` mapping (fresh dict, keys sorted).

        ``suspended=True`` zeroes ``pods`` and every GPU key (full, shared and MIG), which
        stops new pods without touching running ones or any stored object.
        """
        hard: dict[str, str] = {}
        if self.cpu_cores is not None:
            hard["requests.cpu"] = cpu_quantity(self.cpu_cores)
        if self.memory_gib is not None:
            hard["requests.memory"] = gib_quantity(self.memory_gib)
        if self.gpus is not None:
            hard[f"requests.{GPU_RESOURCE}"] = _count(self.gpus, "gpus")
        if self.shared_gpus is not None:
            hard[f"requests.{SHARED_GPU_RESOURCE}"] = _count(self.shared_gpus, "shared_gpus")
        for profile, count in self.mig.items():
            hard[f"requests.{mig_resource(profile)}"] = _count(count, f"mig {profile}")
        if self.storage_gib is not None:
            hard["requests.storage"] = gib_quantity(self.storage_gib)
        if self.pvc_count is not None:
            hard["persistentvolumeclaims"] = _count(self.pvc_count, "pvc_count")
        for sc in self.storage_classes:
            prefix = f"{sc.storage_class}.storageclass.storage.k8s.io"
            if sc.storage_gib is not None:
                hard[f"{prefix}/requests.storage"] = gib_quantity(sc.storage_gib)
            if sc.pvc_count is not None:
                hard[f"{prefix}/persistentvolumeclaims"] = _count(sc.pvc_count, "pvc_count")
        if self.pods is not None:
            hard["pods"] = _count(self.pods, "pods")
        for key, value in self.extra.items():
            if key in hard:
                raise ValueError(f"extra quota key {key!r} collides with a typed field")
            if not isinstance(value, str):
                raise ValueError(f"extra quota value for {key!r} must be a string")
            if key.startswith("limits.nvidia.com/"):
                # Accepted by the API server but never enforced (kubernetes-facts §0.1).
                raise ValueError(f"{key!r} is silently ignored by Kubernetes; use requests.")
            hard[key] = value
        if suspended:
            hard["pods"] = "0"
            for key in list(hard):
                if key.startswith("requests.nvidia.com/"):
                    hard[key] = "0"
            hard.setdefault(f"requests.{GPU_RESOURCE}", "0")
        return dict(sorted(hard.items()))


# --- limits ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LimitSpec:
    """Per-container defaults and caps of a pool (one LimitRange).

    Defaults matter because a quota on ``requests.cpu``/``requests.memory`` rejects any
    pod that does not state them; ``default_request_*`` fills them in. ``default_*``
    (limits) are optional: left ``None`` no default limit is set, *unless* a ``max_*``
    is set, in which case Kubernetes copies ``max`` into ``default``
    (kubernetes-facts §2). GPUs always get ``default``/``defaultRequest`` ``"0"`` so a
    GPU ``max`` can never hand every container GPUs.
    """

    default_request_cpu: Number | None = "0.5"
    default_request_memory_gib: Number | None = 1
    default_cpu: Number | None = None
    default_memory_gib: Number | None = None
    max_cpu: Number | None = None
    max_memory_gib: Number | None = None
    max_gpus: int | None = None
    max_pvc_storage_gib: Number | None = None

    def __post_init__(self) -> None:
        for name in ("default_request_cpu", "default_cpu", "max_cpu"):
            value = getattr(self, name)
            if value is not None:
                cpu_quantity(value)
        for name in ("default_request_memory_gib", "default_memory_gib", "max_memory_gib",
                     "max_pvc_storage_gib"):
            value = getattr(self, name)
            if value is not None:
                gib_quantity(value)
        if self.max_gpus is not None:
            _count(self.max_gpus, "max_gpus")
        # The API server rejects defaultRequest > default > max with a 422; fail early.
        for low, high in (("default_request_cpu", "default_cpu"), ("default_cpu", "max_cpu"),
                          ("default_request_cpu", "max_cpu"),
                          ("default_request_memory_gib", "default_memory_gib"),
                          ("default_memory_gib", "max_memory_gib"),
                          ("default_request_memory_gib", "max_memory_gib")):
            lo, hi = getattr(self, low), getattr(self, high)
            if lo is not None and hi is not None and _decimal(lo, low) > _decimal(hi, high):
                raise ValueError(f"{low} ({lo}) must not exceed {high} ({hi})")


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


# --- tiers -----------------------------------------------------------------------------------

PreemptionPolicy = Literal["PreemptLowerPriority", "Never"]
_MAX_USER_PRIORITY = 1_000_000_000


@dataclass(frozen=True)
class TierSpec:
    """One scheduling tier, rendered as a cluster-wide PriorityClass.

    ``value`` and ``preemption_policy`` are immutable in Kubernetes: changing them for an
    existing class makes apply fail with a permanent 422; the caller must delete and
    recreate the class (running pods keep their resolved priority).
    """

    name: naming.Tier
    value: int
    preemption_policy: PreemptionPolicy
    description: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", naming.Tier(self.name))
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise ValueError(f"priority value must be an int, got {self.value!r}")
        if not -2_147_483_648 <= self.value <= _MAX_USER_PRIORITY:
            raise ValueError(f"priority value out of the user range: {self.value}")
        if self.preemption_policy not in ("PreemptLowerPriority", "Never"):
            raise ValueError(f"unknown preemptionPolicy {self.preemption_policy!r}")

    @property
    def priority_class_name(self) -> str:
        return naming.priority_class_name(self.name)


def default_tiers() -> tuple[TierSpec, ...]:
    """The three tiers, highest first.

    Trainyard's admission engine is the queue and the preemptor: it suspends victims
    after the tier's grace period so they can checkpoint, and resumes them later. The
    kube-scheduler must not race it by killing single pods of a gang, so:

    * production ``PreemptLowerPriority``: an admitted production job must start; if the
      engine's view was stale, evicting a lower-tier pod is the lesser harm, and lower
      tiers are preemptible by policy anyway (production is never preempted);
    * development ``Never``: dev work waits for the engine to free capacity the
      checkpoint-friendly way rather than killing batch pods behind its back;
    * batch ``Never``: runs only on idle capacity and must never displace anyone.

    None is ``globalDefault``: only one may exist cluster-wide and the cluster admin may
    already own it; Trainyard always sets ``priorityClassName`` on its own pods.
    """
    return (
        TierSpec(naming.Tier.PRODUCTION, 100_000, "PreemptLowerPriority",
                 "Trainyard production training; never preempted by Trainyard."),
        TierSpec(naming.Tier.DEVELOPMENT, 10_000, "Never",
                 "Trainyard development training; preemptible after a grace period."),
        TierSpec(naming.Tier.BATCH, 1_000, "Never",
                 "Trainyard batch training on idle capacity; first to be preempted."),
    )
