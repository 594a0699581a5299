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
from decimal import ROUND_FLOOR, Decimal, InvalidOperation
from types import MappingProxyType
from typing import Any, Literal

from core.choices import Tier
from k8s_sync import naming

__all__ = [
    "DEFAULT_TRAINING_RUNTIME",
    "ENV_NAME",
    "GPU_PRODUCT_LABEL",
    "GPU_RESOURCE",
    "HAMI_CORES_RESOURCE",
    "HAMI_MEMORY_RESOURCE",
    "JOB_KIND_PYTORCHJOB",
    "JOB_KIND_TRAINJOB",
    "MAX_RUN_SECONDS",
    "SHARED_GPU_RESOURCE",
    "SHARED_SUFFIX",
    "SHARING_STRATEGY_LABEL",
    "SWITCH_LABEL",
    "WORKLOAD_KINDS",
    "JobSpec",
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
    "thaw",
    "validate_image",
]

GPU_RESOURCE = "nvidia.com/gpu"
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"

#: The job kinds a JobSpec renders: a Kubeflow training-operator v1 PyTorchJob
#: (``manifests.build_pytorchjob``) or a Kubeflow Trainer v2 TrainJob
#: (``manifests.build_trainjob``), each as its (apiVersion, kind).
JOB_KIND_PYTORCHJOB = "pytorchjob"
JOB_KIND_TRAINJOB = "trainjob"
WORKLOAD_KINDS: Mapping[str, tuple[str, str]] = MappingProxyType({
    JOB_KIND_PYTORCHJOB: ("kubeflow.org/v1", "PyTorchJob"),
    JOB_KIND_TRAINJOB: ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
})
#: The ClusterTrainingRuntime a TrainJob references unless it names another (Trainer's
#: chart installs it: ``charts/kubeflow-trainer/files/runtimes/torch-distributed.yaml``).
DEFAULT_TRAINING_RUNTIME = "torch-distributed"
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

    name: Tier
    value: int
    preemption_policy: PreemptionPolicy
    description: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", Tier(self.name))
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
        TierSpec(Tier.PRODUCTION, 100_000, "PreemptLowerPriority",
                 "Trainyard production training; never preempted by Trainyard."),
        TierSpec(Tier.DEVELOPMENT, 10_000, "Never",
                 "Trainyard development training; preemptible after a grace period."),
        TierSpec(Tier.BATCH, 1_000, "Never",
                 "Trainyard batch training on idle capacity; first to be preempted."),
    )


# --- training jobs ----------------------------------------------------------------------------

#: Node label (GPU Feature Discovery) naming the GPU model, e.g. ``NVIDIA-H800``.
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
SHARED_SUFFIX = "-SHARED"  # GFD's product suffix on renamed shared GPUs
SHARING_STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"
SHARING_STRATEGIES = ("time-slicing", "mps")
HAMI_MEMORY_RESOURCE = "nvidia.com/gpumem"  # MiB per card (HAMi)
HAMI_CORES_RESOURCE = "nvidia.com/gpucores"  # % of a card (HAMi)
#: Node label naming the leaf switch a node hangs off (kubesim and Trainyard topology).
SWITCH_LABEL = "trainyard.io/switch"
#: Prefix of the environment variables Trainyard sets itself; users may not set them.
RESERVED_ENV_PREFIX = "TRAINYARD_"
#: Set by the training operator on the ``pytorch`` container (and read by torchrun); a
#: user value would silently win over the operator's and break the rendezvous.
OPERATOR_ENV = frozenset({"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"})
OPERATOR_ENV_PREFIX = "PET_"
#: A MIG job takes exactly this many slices per replica (see :class:`JobSpec`).
MIG_SLICES_PER_REPLICA = 1
#: Upper bound of ``max_run_seconds``: anything longer is a typo, not a training run.
MAX_RUN_SECONDS = 30 * 24 * 3600
#: ``/dev/shm`` default cap (a tmpfs counts against the container's memory limit).
SHM_MAX_GIB = 64

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# OCI / distribution reference grammar (github.com/distribution/reference, regexp.go),
# restricted to what Trainyard accepts: [registry[:port]/]path[:tag][@sha256:<64 hex>].
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = re.compile(rf"^{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*(?::[0-9]+)?$")
_PATH_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
_DIGEST = re.compile(r"^sha256:[a-f0-9]{64}$")
_IMAGE_NAME_MAX = 255


def validate_image(ref: str) -> str:
    """Return ``ref`` if it is an image reference Trainyard accepts, else raise ``ValueError``.

    Grammar: ``[registry[:port]/]path[:tag][@sha256:<64 hex>]``. The first ``/``-separated
    component is a registry when it contains ``.`` or ``:`` or is ``localhost`` (as docker
    decides); every path component is lower-case ``[a-z0-9]`` runs joined by ``.``, ``_``,
    ``__`` or dashes. No whitespace, no upper-case repository, name <= 255 characters.
    """
    if not isinstance(ref, str) or not ref:
        raise ValueError("image: must not be empty")
    if ref != ref.strip() or any(ch.isspace() for ch in ref):
        raise ValueError(f"image: must not contain whitespace: {ref!r}")
    rest, _, digest = ref.partition("@")
    if digest and not _DIGEST.match(digest):
        raise ValueError(f"image: digest must be sha256:<64 lower-case hex>: {ref!r}")
    name, tag = rest, ""
    last_slash = rest.rfind("/")
    if rest.rfind(":") > last_slash:  # a ':' after the last '/' starts the tag
        name, _, tag = rest.rpartition(":")
        if not _TAG.match(tag):
            raise ValueError(f"image: invalid tag {tag!r} in {ref!r}")
    if not name or len(name) > _IMAGE_NAME_MAX:
        raise ValueError(f"image: repository name empty or longer than 255: {ref!r}")
    parts = name.split("/")
    first = parts[0]
    if len(parts) > 1 and ("." in first or ":" in first or first == "localhost"):
        if not _DOMAIN.match(first):
            raise ValueError(f"image: invalid registry {first!r} in {ref!r}")
        parts = parts[1:]
    for part in parts:
        if not _PATH_COMPONENT.match(part):
            raise ValueError(
                f"image: invalid repository component {part!r} in {ref!r} "
                "(lower-case letters, digits and . _ - separators only)")
    return ref


_QUALIFIED_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def _is_qualified_name(key: object) -> bool:
    """A label/annotation key: ``[<DNS-1123 subdomain>/]<name of <= 63 chars>``."""
    if not isinstance(key, str):
        return False
    prefix, _, name = key.rpartition("/")
    if prefix and not naming.is_dns1123_subdomain(prefix):
        return False
    return bool(_QUALIFIED_NAME.match(name))


def _int_field(value: object, name: str, *, minimum: int = 0,
               maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name}: expected an int, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f">= {minimum}" if maximum is None else f"in {minimum}..{maximum}"
        raise ValueError(f"{name}: must be {bound}, got {value}")
    return value


def _deep_freeze(value: Any) -> Any:
    """Dicts -> read-only mappings, lists -> tuples (recursively), so a spec cannot change."""
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): _deep_freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_deep_freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """The inverse of the freezing done by specs: fresh dicts and lists (for manifests)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [thaw(v) for v in value]
    return value


_PLACEMENT_KEYS = frozenset({"tolerations", "affinity", "nodeSelector"})
#: Mount points a checkpoint volume must not shadow: these directories themselves...
_SYSTEM_DIRS = frozenset({"", "/dev", "/dev/shm", "/proc", "/sys", "/etc",  # noqa: S108
                          "/bin", "/sbin", "/lib", "/lib64", "/usr", "/boot", "/var", "/run",
                          "/var/run"})
#: ...and anything under these: the runtime refuses mounts into /proc (runc's
#: checkProcMount), and a volume under /etc, /dev or /var/run/secrets hides files the
#: kubelet mounts there (resolv.conf, hosts, /dev/shm, the service-account token).
_SYSTEM_TREES = ("/proc/", "/sys/", "/dev/", "/etc/", "/var/run/secrets/", "/run/secrets/")


def env_name_problem(name: object) -> Literal["invalid", "reserved", "operator"] | None:
    """Why ``name`` cannot be a user's environment variable, or ``None``: ``"invalid"``
    (not letters, digits and ``_``), ``"reserved"`` (``TRAINYARD_*``, set by Trainyard) or
    ``"operator"`` (set by the training operator: :data:`OPERATOR_ENV`, ``PET_*``). The one
    rule; ``JobSpec`` and the submission checks both ask it."""
    if not isinstance(name, str) or not ENV_NAME.match(name):
        return "invalid"
    if name.upper().startswith(RESERVED_ENV_PREFIX):
        return "reserved"
    if name in OPERATOR_ENV or name.startswith(OPERATOR_ENV_PREFIX):
        return "operator"
    return None


def checkpoint_path_problem(path: object) -> Literal["relative", "characters", "parent",
                                                     "system"] | None:
    """Why ``path`` cannot be a checkpoint mount point, or ``None``: ``"relative"`` (not
    absolute), ``"characters"`` (':' or whitespace), ``"parent"`` (a ``..`` component) or
    ``"system"`` (a system directory, or under /proc, /sys, /dev, /etc, /var/run/secrets).
    The one rule; ``JobSpec`` and the submission checks both ask it."""
    if not isinstance(path, str) or not path.startswith("/"):
        return "relative"
    if ":" in path or any(ch.isspace() for ch in path):
        return "characters"
    if ".." in path.split("/"):
        return "parent"
    clean = "/" + "/".join(part for part in path.split("/") if part and part != ".")
    if clean.rstrip("/") in _SYSTEM_DIRS or (clean + "/").startswith(_SYSTEM_TREES):
        return "system"
    return None


@dataclass(frozen=True)
class JobSpec:
    """One Trainyard training job, as ``k8s_sync.manifests.build_pytorchjob`` renders it.

    Built by the jobs app from a TrainingJob row; every check that would otherwise come
    back from the API server (or worse, silently from the training operator) is done in
    ``__post_init__`` and raises ``ValueError`` whose message starts with the field name.

    Shape: one Master plus ``worker_replicas`` Workers (the job has ``1 +
    worker_replicas`` pods: :attr:`replicas`), each with ``gpus_per_replica`` whole GPUs
    of model ``gpu_product`` (the ``nvidia.com/gpu.product`` node label), or exactly one
    MIG slice of ``mig_profile`` (``nvidia.com/mig-<profile>``, mixed strategy; a CUDA
    process sees one MIG device and NCCL cannot use MIG peers), or no GPU.
    ``gpu_shared``: the ``gpus_per_replica`` are shares of time-sliced/MPS cards
    (``nvidia.com/gpu.shared``, product label ``<gpu_product>-SHARED``, optionally
    ``sharing_strategy``). ``gpu_memory_mib_per_card`` / ``gpu_cores_percent``: HAMi's
    ``nvidia.com/gpumem`` / ``nvidia.com/gpucores`` limits per card, on whole GPUs (which
    HAMi serves as vGPUs on distinct cards).

    * CPU and memory: requests may be below limits (idle headroom is shared); each
      request must not exceed its limit. Requests are rounded down to 1 millicore / 1 MiB
      (so a request derived from the limit always works; the caller derives them, in
      Trainyard ``tenants.demand.cpu_request``/``memory_request_gib``); limits must be
      exact. GPUs/MIG slices are always requests == limits.
    * ``grace_seconds`` (terminationGracePeriodSeconds) and
      ``checkpoint_interval_seconds`` come from the tier policy; the caller passes them.
    * ``max_run_seconds`` becomes ``runPolicy.activeDeadlineSeconds``; the operator counts
      it from ``status.startTime``, which a suspend resets, so it bounds one *run segment*
      (admission to preemption/finish), not the job's total running time.
    * Checkpoint volume: ``checkpoint_claim`` names an existing PVC; or
      ``checkpoint_storage_class`` + ``checkpoint_size_gib`` make Trainyard create
      ``<job>-ckpt`` (``manifests.build_checkpoint_pvc``); with neither, the checkpoint
      directory is an ``emptyDir`` that does **not** survive preemption.
    * ``switch``: required node affinity ``<switch_label> In [<switch>]`` (all replicas
      under one leaf switch); ``switch_label`` is the last topology level of the policy
      (``placement.switch_label``, default ``trainyard.io/switch``). ``nodes``: the nodes
      admission counted the replicas on; required node affinity ``metadata.name In
      [<node>]`` (``matchFields``, one term per node), so kube-scheduler cannot put a
      replica elsewhere.
      Both are ANDed into every required term of ``placement``, which is
      ``placement.dedicated_placement(tenant)`` (or any ``{"tolerations", "affinity",
      "nodeSelector"}`` mapping), merged into every pod.
    * ``kind``: ``"pytorchjob"`` (a PyTorchJob, one Master plus the Workers) or
      ``"trainjob"`` (a Kubeflow Trainer v2 TrainJob of ``trainer.numNodes`` =
      :attr:`replicas` nodes on the ClusterTrainingRuntime ``runtime``, default
      :data:`DEFAULT_TRAINING_RUNTIME`); the same pods, resources and contract either way.
    * ``annotations`` go on the pod templates (kubesim reads ``kubesim.trainyard.io/*``
      there). ``shm_gib`` sizes ``/dev/shm``; ``None`` derives it (see
      :attr:`effective_shm_gib`).
    """

    job_id: int | str
    tenant_slug: str
    pool: Literal["prod", "dev"]
    tier: Tier
    image: str
    max_run_seconds: int
    grace_seconds: int
    checkpoint_interval_seconds: int
    name_hint: str = ""
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    worker_replicas: int = 0
    gpus_per_replica: int = 0
    gpu_product: str = ""
    mig_profile: str = ""
    gpu_shared: bool = False
    sharing_strategy: str = ""
    gpu_memory_mib_per_card: int | None = None
    gpu_cores_percent: int | None = None
    cpu_request: Number = 1
    cpu_limit: Number = 1
    memory_request_gib: Number = 4
    memory_limit_gib: Number = 4
    shm_gib: Number | None = None
    backoff_limit: int = 3
    checkpoint_claim: str = ""
    checkpoint_path: str = "/checkpoints"
    checkpoint_storage_class: str = ""
    checkpoint_size_gib: Number | None = None
    # the new claim's VolumeAttributesClass: its provisioned IOPS (k8s_sync.storage)
    checkpoint_volume_attributes_class: str = ""
    resume: bool = False
    restart_count: int = 0
    switch: str = ""
    switch_label: str = SWITCH_LABEL
    nodes: tuple[str, ...] = ()
    placement: Mapping[str, Any] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    suspend: bool = True
    kind: str = JOB_KIND_PYTORCHJOB
    runtime: str = ""

    def __post_init__(self) -> None:
        # identity
        try:
            naming.job_name(self.job_id, self.name_hint)
        except ValueError as exc:
            raise ValueError(f"job_id: {exc}") from None
        if self.kind not in WORKLOAD_KINDS:
            raise ValueError(f"kind: unknown job kind {self.kind!r}; expected one of "
                             f"{tuple(WORKLOAD_KINDS)}")
        if self.kind == JOB_KIND_TRAINJOB:
            runtime = self.runtime or DEFAULT_TRAINING_RUNTIME
            if len(runtime) > 253 or not naming.is_dns1123_subdomain(runtime):
                raise ValueError(f"runtime: not a ClusterTrainingRuntime name: {runtime!r}")
            object.__setattr__(self, "runtime", runtime)
        elif self.runtime:
            raise ValueError("runtime: only a TrainJob names a training runtime")
        if self.pool not in naming.POOLS:
            raise ValueError(f"pool: unknown pool {self.pool!r}; expected one of {naming.POOLS}")
        if not self.tenant_slug:
            raise ValueError("tenant_slug: must not be empty")
        try:
            object.__setattr__(self, "tier", Tier(self.tier))
        except ValueError:
            raise ValueError(f"tier: unknown tier {self.tier!r}") from None
        # container
        validate_image(self.image)
        for name in ("command", "args"):
            value = getattr(self, name)
            if isinstance(value, str):
                raise ValueError(f"{name}: expected a sequence of strings, not one string")
            value = tuple(value)
            if not all(isinstance(item, str) for item in value):
                raise ValueError(f"{name}: every item must be a string")
            object.__setattr__(self, name, value)
        for key, value in dict(self.env).items():
            if not isinstance(key, str) or not ENV_NAME.match(key):
                raise ValueError(f"env: {key!r} is not a valid variable name "
                                 "(letters, digits, '_', not starting with a digit)")
            problem = env_name_problem(key)
            if problem == "reserved":
                raise ValueError(f"env: {key!r} is reserved (TRAINYARD_* is set by Trainyard)")
            if problem == "operator":
                raise ValueError(f"env: {key!r} is set by the training operator")
            if not isinstance(value, str):
                raise ValueError(f"env: value of {key!r} must be a string, got {value!r}")
        object.__setattr__(self, "env", _frozen(self.env))
        # shape and devices
        _int_field(self.worker_replicas, "worker_replicas")
        _int_field(self.gpus_per_replica, "gpus_per_replica")
        if self.mig_profile:
            try:
                mig_resource(self.mig_profile)
            except ValueError as exc:
                raise ValueError(f"mig_profile: {exc}") from None
            if self.gpus_per_replica != MIG_SLICES_PER_REPLICA:
                # CUDA shows a process one MIG device, and NCCL cannot use MIG devices
                # for GPU-to-GPU traffic: more than one slice per pod cannot be used.
                raise ValueError("mig_profile: a MIG job takes exactly 1 slice per replica "
                                 f"(gpus_per_replica=1), got {self.gpus_per_replica}")
            if "-MIG-" in self.gpu_product or self.gpu_product.endswith("-SHARED"):
                raise ValueError(
                    f"gpu_product: {self.gpu_product!r} is a MIG-single/shared product label, "
                    f"which conflicts with mig_profile {self.mig_profile!r} (mixed strategy "
                    "keeps the base product, e.g. NVIDIA-A100-SXM4-80GB)")
        elif self.gpus_per_replica > 0 and not self.gpu_product:
            raise ValueError("gpu_product: required when gpus_per_replica > 0 "
                             "(the nvidia.com/gpu.product label value, e.g. NVIDIA-H800)")
        if self.gpu_product:
            if self.gpus_per_replica == 0:
                raise ValueError("gpu_product: given but gpus_per_replica is 0 (a CPU-only "
                                 "job would occupy a GPU node)")
            if not naming.is_label_value(self.gpu_product):
                raise ValueError(f"gpu_product: not a label value: {self.gpu_product!r}")
        self._check_gpu_sharing()
        # compute: requests are policy-derived from the limits (the caller's rule, in
        # Trainyard tenants.demand), so they are rounded *down* to what a quantity can
        # carry (1m, 1Mi); limits must be exact.
        for name, unit in (("cpu_request", Decimal("0.001")),
                           ("memory_request_gib", Decimal(1) / 1024)):
            value = getattr(self, name)
            try:
                number = _decimal(value, name)
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
            floored = (number / unit).to_integral_value(rounding=ROUND_FLOOR) * unit
            if floored != number:
                object.__setattr__(self, name, floored)
        for low, high, render in (("cpu_request", "cpu_limit", cpu_quantity),
                                  ("memory_request_gib", "memory_limit_gib", gib_quantity)):
            for name in (low, high):
                try:
                    render(getattr(self, name))
                except ValueError as exc:
                    raise ValueError(f"{name}: {exc}") from None
                if _decimal(getattr(self, name), name) == 0:
                    raise ValueError(f"{name}: must be > 0")
            if _decimal(getattr(self, low), low) > _decimal(getattr(self, high), high):
                raise ValueError(f"{low}: {getattr(self, low)} exceeds {high} "
                                 f"{getattr(self, high)}")
        if self.shm_gib is not None:
            try:
                gib_quantity(self.shm_gib)
            except ValueError as exc:
                raise ValueError(f"shm_gib: {exc}") from None
            if _decimal(self.shm_gib, "shm_gib") > _decimal(self.memory_limit_gib, "limit"):
                raise ValueError("shm_gib: /dev/shm counts against memory_limit_gib and "
                                 "must not exceed it")
        # policy
        _int_field(self.max_run_seconds, "max_run_seconds", minimum=1, maximum=MAX_RUN_SECONDS)
        _int_field(self.grace_seconds, "grace_seconds", maximum=24 * 3600)
        _int_field(self.checkpoint_interval_seconds, "checkpoint_interval_seconds", minimum=1)
        _int_field(self.backoff_limit, "backoff_limit", maximum=1000)
        _int_field(self.restart_count, "restart_count")
        if not isinstance(self.resume, bool):
            raise ValueError(f"resume: expected a bool, got {self.resume!r}")
        if not isinstance(self.suspend, bool):
            raise ValueError(f"suspend: expected a bool, got {self.suspend!r}")
        # checkpoints
        if self.checkpoint_claim and not naming.is_dns1123_subdomain(self.checkpoint_claim):
            raise ValueError(f"checkpoint_claim: not a valid PVC name: {self.checkpoint_claim!r}")
        path_problem = checkpoint_path_problem(self.checkpoint_path)
        if path_problem in ("relative", "system", "parent"):
            raise ValueError(f"checkpoint_path: must be an absolute path outside system "
                             f"directories, got {self.checkpoint_path!r}")
        if path_problem == "characters":
            raise ValueError(f"checkpoint_path: no ':' or whitespace: {self.checkpoint_path!r}")
        wants_pvc = bool(self.checkpoint_storage_class) or self.checkpoint_size_gib is not None
        if wants_pvc:
            if self.checkpoint_claim:
                raise ValueError("checkpoint_claim: give an existing claim or "
                                 "checkpoint_storage_class + checkpoint_size_gib, not both")
            if not self.checkpoint_storage_class or self.checkpoint_size_gib is None:
                raise ValueError("checkpoint_storage_class: needs checkpoint_size_gib too "
                                 "(and vice versa)")
            if not naming.is_dns1123_subdomain(self.checkpoint_storage_class):
                raise ValueError("checkpoint_storage_class: invalid StorageClass name "
                                 f"{self.checkpoint_storage_class!r}")
            try:
                gib_quantity(self.checkpoint_size_gib)
            except ValueError as exc:
                raise ValueError(f"checkpoint_size_gib: {exc}") from None
            if _decimal(self.checkpoint_size_gib, "checkpoint_size_gib") == 0:
                raise ValueError("checkpoint_size_gib: must be > 0")
        # placement
        if self.switch and not naming.is_label_value(self.switch):
            raise ValueError(f"switch: not a label value: {self.switch!r}")
        if not _is_qualified_name(self.switch_label):
            raise ValueError(f"switch_label: not a label key: {self.switch_label!r}")
        if isinstance(self.nodes, str):
            raise ValueError("nodes: expected a sequence of node names, not one string")
        nodes = tuple(sorted(set(self.nodes)))
        for node in nodes:
            if not isinstance(node, str) or not naming.is_dns1123_subdomain(node):
                raise ValueError(f"nodes: not a node name: {node!r}")
        object.__setattr__(self, "nodes", nodes)
        unknown = set(self.placement) - _PLACEMENT_KEYS
        if unknown:
            raise ValueError(f"placement: unknown keys {sorted(unknown)}; "
                             f"expected some of {sorted(_PLACEMENT_KEYS)}")
        selector = dict(self.placement.get("nodeSelector") or {})
        if self.gpu_product and selector.get(GPU_PRODUCT_LABEL, self.gpu_product_label) != (
                self.gpu_product_label):
            raise ValueError(f"placement: nodeSelector {GPU_PRODUCT_LABEL}="
                             f"{selector[GPU_PRODUCT_LABEL]!r} conflicts with gpu_product "
                             f"{self.gpu_product_label!r}")
        object.__setattr__(self, "placement", _deep_freeze(dict(self.placement)))
        for key, value in dict(self.annotations).items():
            if not _is_qualified_name(key):
                raise ValueError(f"annotations: {key!r} is not a qualified name "
                                 "([prefix/]name, e.g. kubesim.trainyard.io/run-seconds)")
            if not isinstance(value, str):
                raise ValueError(f"annotations: value of {key!r} must be a string, "
                                 f"got {value!r}")
        object.__setattr__(self, "annotations", _frozen(self.annotations))

    def _check_gpu_sharing(self) -> None:
        """Shared GPUs (time-slicing/MPS replicas) and HAMi vGPU limits."""
        if not isinstance(self.gpu_shared, bool):
            raise ValueError(f"gpu_shared: expected a bool, got {self.gpu_shared!r}")
        if self.gpu_shared:
            if self.mig_profile:
                raise ValueError("gpu_shared: a shared GPU takes no MIG profile (the device "
                                 "plugin cannot share with MPS on MIG, and Trainyard does not "
                                 "time-slice MIG slices)")
            if self.gpus_per_replica == 0 or not self.gpu_product:
                raise ValueError("gpu_shared: needs gpus_per_replica > 0 (the shares per "
                                 "replica) and gpu_product (the card model)")
            if "-MIG-" in self.gpu_product:
                raise ValueError(f"gpu_shared: {self.gpu_product!r} is a MIG product label")
        elif self.gpu_product.endswith(SHARED_SUFFIX):
            raise ValueError(f"gpu_product: {self.gpu_product!r} is a shared-GPU product "
                             "label: set gpu_shared=True (and give the card model)")
        if self.sharing_strategy:
            if not self.gpu_shared:
                raise ValueError("sharing_strategy: only for a shared GPU (gpu_shared=True)")
            if self.sharing_strategy not in SHARING_STRATEGIES:
                raise ValueError(f"sharing_strategy: {self.sharing_strategy!r} is not one of "
                                 f"{SHARING_STRATEGIES}")
        for name, high in (("gpu_memory_mib_per_card", None), ("gpu_cores_percent", 100)):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name}: expected a whole number, got {value!r}")
            if value <= 0 or (high is not None and value > high):
                raise ValueError(f"{name}: must be between 1 and {high}" if high
                                 else f"{name}: must be > 0, got {value}")
            if self.gpus_per_replica == 0 or self.mig_profile or self.gpu_shared:
                raise ValueError(f"{name}: a HAMi limit applies to whole or HAMi vGPUs only "
                                 "(gpus_per_replica > 0, no mig_profile, not gpu_shared)")

    # --- derived -----------------------------------------------------------------------------

    @property
    def gpu_product_label(self) -> str:
        """The ``nvidia.com/gpu.product`` value the pods select: the card model, with GFD's
        ``-SHARED`` suffix for a shared GPU (``renameByDefault``; NVIDIA k8s-device-plugin
        README, "Shared Access to GPUs")."""
        if self.gpu_shared and not self.gpu_product.endswith(SHARED_SUFFIX):
            return self.gpu_product + SHARED_SUFFIX
        return self.gpu_product

    @property
    def name(self) -> str:
        """The PyTorchJob's (or TrainJob's) name, ``naming.job_name(job_id, name_hint)``."""
        return naming.job_name(self.job_id, self.name_hint)

    @property
    def workload_type(self) -> tuple[str, str]:
        """(apiVersion, kind) of the object the job runs as (:data:`WORKLOAD_KINDS`)."""
        return WORKLOAD_KINDS[self.kind]

    @property
    def namespace(self) -> str:
        """The tenant pool's namespace."""
        return naming.namespace_name(self.tenant_slug, self.pool)

    @property
    def labels(self) -> dict[str, str]:
        """Job labels plus the tier label (a fresh dict)."""
        return {**naming.job_labels(self.tenant_slug, self.pool, self.job_id),
                naming.LABEL_TIER: self.tier.value}

    @property
    def replicas(self) -> int:
        """Pods of the job: the Master plus the Workers."""
        return 1 + self.worker_replicas

    @property
    def gpu_resource(self) -> str | None:
        """The extended resource each pod requests (``None`` for CPU-only jobs)."""
        if self.gpus_per_replica == 0:
            return None
        if self.gpu_shared:
            return SHARED_GPU_RESOURCE
        return mig_resource(self.mig_profile) if self.mig_profile else GPU_RESOURCE

    @property
    def checkpoint_claim_name(self) -> str | None:
        """The PVC mounted at ``checkpoint_path``: the given claim, ``<job>-ckpt`` when
        Trainyard creates it, or ``None`` (an emptyDir)."""
        if self.checkpoint_claim:
            return self.checkpoint_claim
        if self.checkpoint_storage_class:
            return f"{self.name}-ckpt"
        return None

    @property
    def effective_shm_gib(self) -> Decimal:
        """``/dev/shm`` size: ``shm_gib``, else half the memory limit capped at 64 GiB,
        rounded down to a whole MiB (tmpfs pages are charged to the memory limit)."""
        if self.shm_gib is not None:
            return _decimal(self.shm_gib, "shm_gib")
        half = _decimal(self.memory_limit_gib, "memory_limit_gib") / 2
        mib = int(min(half, Decimal(SHM_MAX_GIB)) * 1024)
        return Decimal(mib) / 1024
