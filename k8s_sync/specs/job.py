"""One Trainyard training job, as ``k8s_sync.manifests`` renders it (``k8s_sync.specs``).

Its fields are checked in ``__post_init__`` by the table of rules in
``k8s_sync.specs.job_checks`` (one small check per rule, run in order).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from core.choices import Tier
from k8s_sync import naming
from k8s_sync.specs.job_checks import JOB_CHECKS
from k8s_sync.specs.job_fields import (
    JOB_KIND_PYTORCHJOB,
    SHARED_SUFFIX,
    SHM_MAX_GIB,
    SWITCH_LABEL,
    WORKLOAD_KINDS,
)
from k8s_sync.specs.quantities import (
    GPU_RESOURCE,
    SHARED_GPU_RESOURCE,
    Number,
    _decimal,
    mig_resource,
)


@dataclass(frozen=True)
class JobSpec:
    """One Trainyard training job, as ``k8s_sync.manifests.build_pytorchjob`` renders it.

    Built by the jobs app from a TrainingJob row; every check that would otherwise come
    back from the API server (or worse, silently from the training operator) is done in
    ``__post_init__`` (one check per rule, ``k8s_sync.specs.job_checks.JOB_CHECKS``) and
    raises ``ValueError`` whose message starts with the field name.

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
    # per replica, extended resources of the registry's dimensions (core.resources)
    extended: Mapping[str, int] = field(default_factory=dict)
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
        # every rule of the spec, in order; the first broken one raises ValueError (its
        # message starts with the field name). Some also normalise their field.
        for check in JOB_CHECKS:
            check(self)

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
