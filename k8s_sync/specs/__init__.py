"""Plain, frozen specs that the domain apps build and ``k8s_sync.manifests`` turns into objects.

A selector in ``tenants`` (or ``jobs``) reads rows and builds these; ``k8s_sync`` never
sees a model instance. Every spec is a frozen dataclass; mapping fields are copied into
read-only mappings at construction, so a spec cannot change after it was built (compare
specs with ``==``; they are not meant to be hashed).

One module per spec; this package re-exports their names, so ``from k8s_sync.specs
import X`` is the way in (a module of the package imports its siblings, never this one):

* ``quantities``: catalog units rendered as canonical Kubernetes quantities (``"16"``,
  ``"500m"``, ``"64Gi"``), and the freezing of mapping fields;
* ``quota``: :class:`QuotaSpec` (a pool's ResourceQuota; what one can and cannot carry
  is in that module's docstring), :class:`StorageClassQuota`, :class:`LimitSpec`;
* ``pool``: :class:`PoolSpec`, :class:`NetworkSpec`;
* ``tier``: :class:`TierSpec`, :func:`default_tiers`;
* ``job_fields``: the words and rules of a job's fields (kinds, labels, image
  references, environment names, the checkpoint mount point);
* ``job_checks``: :class:`JobSpec`'s rules, one small check per rule, in a table run in
  order (``JOB_CHECKS``);
* ``job``: :class:`JobSpec`.
"""

from __future__ import annotations

from k8s_sync.specs.job import (
    JobSpec,
)
from k8s_sync.specs.job_fields import (
    DEFAULT_TRAINING_RUNTIME,
    ENV_NAME,
    GPU_PRODUCT_LABEL,
    HAMI_CORES_RESOURCE,
    HAMI_MEMORY_RESOURCE,
    JOB_KIND_PYTORCHJOB,
    JOB_KIND_TRAINJOB,
    MAX_RUN_SECONDS,
    MIG_SLICES_PER_REPLICA,
    OPERATOR_ENV,
    OPERATOR_ENV_PREFIX,
    RESERVED_ENV_PREFIX,
    SHARED_SUFFIX,
    SHARING_STRATEGIES,
    SHARING_STRATEGY_LABEL,
    SHM_MAX_GIB,
    SWITCH_LABEL,
    WORKLOAD_KINDS,
    checkpoint_path_problem,
    env_name_problem,
    validate_image,
)
from k8s_sync.specs.job_fields import (
    _is_qualified_name as _is_qualified_name,  # k8s_sync.placement imports it
)
from k8s_sync.specs.pool import (
    NetworkSpec,
    PoolSpec,
)
from k8s_sync.specs.quantities import (
    GPU_RESOURCE,
    SHARED_GPU_RESOURCE,
    Number,
    cpu_quantity,
    gib_quantity,
    mig_resource,
    thaw,
)
from k8s_sync.specs.quota import (
    LimitSpec,
    QuotaSpec,
    StorageClassQuota,
)
from k8s_sync.specs.tier import (
    PreemptionPolicy,
    TierSpec,
    default_tiers,
)

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
    "MIG_SLICES_PER_REPLICA",
    "OPERATOR_ENV",
    "OPERATOR_ENV_PREFIX",
    "RESERVED_ENV_PREFIX",
    "SHARED_GPU_RESOURCE",
    "SHARED_SUFFIX",
    "SHARING_STRATEGIES",
    "SHARING_STRATEGY_LABEL",
    "SHM_MAX_GIB",
    "SWITCH_LABEL",
    "WORKLOAD_KINDS",
    "JobSpec",
    "LimitSpec",
    "NetworkSpec",
    "Number",
    "PoolSpec",
    "PreemptionPolicy",
    "QuotaSpec",
    "StorageClassQuota",
    "TierSpec",
    "checkpoint_path_problem",
    "cpu_quantity",
    "default_tiers",
    "env_name_problem",
    "gib_quantity",
    "mig_resource",
    "thaw",
    "validate_image",
]
