""":class:`k8s_sync.specs.job.JobSpec`'s rules about its devices: whole GPUs, MIG slices,
shared GPUs (time-slicing/MPS replicas) and HAMi's per-card limits, one small check per
rule. ``k8s_sync.specs.job_checks.JOB_CHECKS`` runs them in order with the other rules;
a check may rely on the ones before it (an int is an int by the time its range is asked).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from k8s_sync import naming
from k8s_sync.specs.job_fields import MIG_SLICES_PER_REPLICA, SHARED_SUFFIX, SHARING_STRATEGIES
from k8s_sync.specs.quantities import _int_field, mig_resource

if TYPE_CHECKING:
    from k8s_sync.specs.job import JobSpec


# --- shape and devices ------------------------------------------------------------------------


def check_worker_replicas(spec: JobSpec) -> None:
    """``worker_replicas`` is an int >= 0."""
    _int_field(spec.worker_replicas, "worker_replicas")


def check_gpus_per_replica(spec: JobSpec) -> None:
    """``gpus_per_replica`` is an int >= 0."""
    _int_field(spec.gpus_per_replica, "gpus_per_replica")


def check_mig_profile(spec: JobSpec) -> None:
    """``mig_profile`` is a MIG profile like ``1g.10gb``."""
    if not spec.mig_profile:
        return
    try:
        mig_resource(spec.mig_profile)
    except ValueError as exc:
        raise ValueError(f"mig_profile: {exc}") from None


def check_mig_one_slice(spec: JobSpec) -> None:
    """A MIG job takes exactly one slice per replica: CUDA shows a process one MIG device,
    and NCCL cannot use MIG devices for GPU-to-GPU traffic, so more cannot be used."""
    if spec.mig_profile and spec.gpus_per_replica != MIG_SLICES_PER_REPLICA:
        raise ValueError("mig_profile: a MIG job takes exactly 1 slice per replica "
                         f"(gpus_per_replica=1), got {spec.gpus_per_replica}")


def check_mig_base_product(spec: JobSpec) -> None:
    """With ``mig_profile`` (mixed strategy), ``gpu_product`` is the base card's label."""
    if spec.mig_profile and ("-MIG-" in spec.gpu_product
                             or spec.gpu_product.endswith("-SHARED")):
        raise ValueError(
            f"gpu_product: {spec.gpu_product!r} is a MIG-single/shared product label, "
            f"which conflicts with mig_profile {spec.mig_profile!r} (mixed strategy "
            "keeps the base product, e.g. NVIDIA-A100-SXM4-80GB)")


def check_gpu_product_given(spec: JobSpec) -> None:
    """Whole GPUs name their model (``gpu_product``)."""
    if not spec.mig_profile and spec.gpus_per_replica > 0 and not spec.gpu_product:
        raise ValueError("gpu_product: required when gpus_per_replica > 0 "
                         "(the nvidia.com/gpu.product label value, e.g. NVIDIA-H800)")


def check_gpu_product_needs_gpus(spec: JobSpec) -> None:
    """A ``gpu_product`` comes with GPUs (a CPU-only job would occupy a GPU node)."""
    if spec.gpu_product and spec.gpus_per_replica == 0:
        raise ValueError("gpu_product: given but gpus_per_replica is 0 (a CPU-only "
                         "job would occupy a GPU node)")


def check_gpu_product_label(spec: JobSpec) -> None:
    """``gpu_product`` is a label value."""
    if spec.gpu_product and not naming.is_label_value(spec.gpu_product):
        raise ValueError(f"gpu_product: not a label value: {spec.gpu_product!r}")


# --- shared GPUs (time-slicing/MPS replicas) and HAMi vGPU limits -----------------------------


def check_gpu_shared_bool(spec: JobSpec) -> None:
    """``gpu_shared`` is a bool."""
    if not isinstance(spec.gpu_shared, bool):
        raise ValueError(f"gpu_shared: expected a bool, got {spec.gpu_shared!r}")


def check_gpu_shared_no_mig(spec: JobSpec) -> None:
    """A shared GPU takes no MIG profile."""
    if spec.gpu_shared and spec.mig_profile:
        raise ValueError("gpu_shared: a shared GPU takes no MIG profile (the device "
                         "plugin cannot share with MPS on MIG, and Trainyard does not "
                         "time-slice MIG slices)")


def check_gpu_shared_card(spec: JobSpec) -> None:
    """A shared GPU names its shares per replica and its card model."""
    if spec.gpu_shared and (spec.gpus_per_replica == 0 or not spec.gpu_product):
        raise ValueError("gpu_shared: needs gpus_per_replica > 0 (the shares per "
                         "replica) and gpu_product (the card model)")


def check_gpu_shared_not_mig_product(spec: JobSpec) -> None:
    """A shared GPU's model is not a MIG product label."""
    if spec.gpu_shared and "-MIG-" in spec.gpu_product:
        raise ValueError(f"gpu_shared: {spec.gpu_product!r} is a MIG product label")


def check_shared_product_label(spec: JobSpec) -> None:
    """A ``-SHARED`` product label asks for ``gpu_shared=True`` and the card model."""
    if not spec.gpu_shared and spec.gpu_product.endswith(SHARED_SUFFIX):
        raise ValueError(f"gpu_product: {spec.gpu_product!r} is a shared-GPU product "
                         "label: set gpu_shared=True (and give the card model)")


def check_sharing_strategy_shared(spec: JobSpec) -> None:
    """``sharing_strategy`` only for a shared GPU."""
    if spec.sharing_strategy and not spec.gpu_shared:
        raise ValueError("sharing_strategy: only for a shared GPU (gpu_shared=True)")


def check_sharing_strategy_known(spec: JobSpec) -> None:
    """``sharing_strategy`` is one of :data:`SHARING_STRATEGIES`."""
    if spec.sharing_strategy and spec.sharing_strategy not in SHARING_STRATEGIES:
        raise ValueError(f"sharing_strategy: {spec.sharing_strategy!r} is not one of "
                         f"{SHARING_STRATEGIES}")


def _hami_value(spec: JobSpec, name: str) -> int | None:
    value = getattr(spec, name)
    return None if isinstance(value, bool) or not isinstance(value, int) else value


def _hami_whole_number(spec: JobSpec, name: str) -> None:
    value = getattr(spec, name)
    if value is not None and _hami_value(spec, name) is None:
        raise ValueError(f"{name}: expected a whole number, got {value!r}")


def _hami_in_range(spec: JobSpec, name: str, high: int | None) -> None:
    value = _hami_value(spec, name)
    if value is not None and (value <= 0 or (high is not None and value > high)):
        raise ValueError(f"{name}: must be between 1 and {high}" if high
                         else f"{name}: must be > 0, got {value}")


def _hami_on_whole_gpus(spec: JobSpec, name: str) -> None:
    if getattr(spec, name) is not None and (
            spec.gpus_per_replica == 0 or spec.mig_profile or spec.gpu_shared):
        raise ValueError(f"{name}: a HAMi limit applies to whole or HAMi vGPUs only "
                         "(gpus_per_replica > 0, no mig_profile, not gpu_shared)")


def check_gpu_memory_whole(spec: JobSpec) -> None:
    """``gpu_memory_mib_per_card`` (HAMi ``nvidia.com/gpumem``) is a whole number."""
    _hami_whole_number(spec, "gpu_memory_mib_per_card")


def check_gpu_memory_range(spec: JobSpec) -> None:
    """``gpu_memory_mib_per_card`` is > 0."""
    _hami_in_range(spec, "gpu_memory_mib_per_card", None)


def check_gpu_memory_on_whole_gpus(spec: JobSpec) -> None:
    """``gpu_memory_mib_per_card`` only on whole (HAMi v-) GPUs."""
    _hami_on_whole_gpus(spec, "gpu_memory_mib_per_card")


def check_gpu_cores_whole(spec: JobSpec) -> None:
    """``gpu_cores_percent`` (HAMi ``nvidia.com/gpucores``) is a whole number."""
    _hami_whole_number(spec, "gpu_cores_percent")


def check_gpu_cores_range(spec: JobSpec) -> None:
    """``gpu_cores_percent`` is in 1..100."""
    _hami_in_range(spec, "gpu_cores_percent", 100)


def check_gpu_cores_on_whole_gpus(spec: JobSpec) -> None:
    """``gpu_cores_percent`` only on whole (HAMi v-) GPUs."""
    _hami_on_whole_gpus(spec, "gpu_cores_percent")
