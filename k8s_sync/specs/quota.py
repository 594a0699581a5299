"""A tenant pool's ResourceQuota and LimitRange, in catalog units (``k8s_sync.specs``).

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

from collections.abc import Mapping
from dataclasses import dataclass, field

from k8s_sync import naming
from k8s_sync.specs.quantities import (
    GPU_RESOURCE,
    SHARED_GPU_RESOURCE,
    Number,
    _count,
    _decimal,
    _frozen,
    cpu_quantity,
    gib_quantity,
    mig_resource,
)

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
