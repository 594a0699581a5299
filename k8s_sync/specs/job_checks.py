"""The rules of :class:`k8s_sync.specs.job.JobSpec`, one small check per rule.

``JobSpec.__post_init__`` runs :data:`JOB_CHECKS` in order. A check takes the spec and
raises ``ValueError`` (its message starts with the field name) when its rule is broken;
the first broken rule is the error, so the order of the table is the order in which
errors are reported. A few checks also normalise the field they check, once it is known
good (``tier`` to a :class:`~core.choices.Tier`, ``command`` to a tuple, mappings frozen,
requests rounded down); a later check sees the normalised value. Each check can be read
and tested alone (``k8s_sync/tests/test_job_checks.py``). The rules about devices (GPUs,
MIG, shared GPUs, HAMi limits) are in ``k8s_sync.specs.job_checks_devices``.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import ROUND_FLOOR, Decimal
from typing import TYPE_CHECKING

from core.choices import Tier
from k8s_sync import naming
from k8s_sync.specs.job_checks_devices import (
    check_gpu_cores_on_whole_gpus,
    check_gpu_cores_range,
    check_gpu_cores_whole,
    check_gpu_memory_on_whole_gpus,
    check_gpu_memory_range,
    check_gpu_memory_whole,
    check_gpu_product_given,
    check_gpu_product_label,
    check_gpu_product_needs_gpus,
    check_gpu_shared_bool,
    check_gpu_shared_card,
    check_gpu_shared_no_mig,
    check_gpu_shared_not_mig_product,
    check_gpus_per_replica,
    check_mig_base_product,
    check_mig_one_slice,
    check_mig_profile,
    check_shared_product_label,
    check_sharing_strategy_known,
    check_sharing_strategy_shared,
    check_worker_replicas,
)
from k8s_sync.specs.job_fields import (
    _PLACEMENT_KEYS,
    DEFAULT_TRAINING_RUNTIME,
    ENV_NAME,
    GPU_PRODUCT_LABEL,
    JOB_KIND_TRAINJOB,
    MAX_RUN_SECONDS,
    WORKLOAD_KINDS,
    _is_qualified_name,
    checkpoint_path_problem,
    env_name_problem,
    validate_image,
)
from k8s_sync.specs.quantities import (
    Number,
    _decimal,
    _deep_freeze,
    _frozen,
    _int_field,
    cpu_quantity,
    gib_quantity,
)

if TYPE_CHECKING:
    from k8s_sync.specs.job import JobSpec

JobCheck = Callable[["JobSpec"], None]


def _set(spec: JobSpec, name: str, value: object) -> None:
    """Normalise a field of the frozen spec (only while it is being checked)."""
    object.__setattr__(spec, name, value)


# --- identity ---------------------------------------------------------------------------------


def check_job_id(spec: JobSpec) -> None:
    """``job_id`` (with ``name_hint``) makes a valid object name."""
    try:
        naming.job_name(spec.job_id, spec.name_hint)
    except ValueError as exc:
        raise ValueError(f"job_id: {exc}") from None


def check_kind(spec: JobSpec) -> None:
    """``kind`` is one of :data:`WORKLOAD_KINDS`."""
    if spec.kind not in WORKLOAD_KINDS:
        raise ValueError(f"kind: unknown job kind {spec.kind!r}; expected one of "
                         f"{tuple(WORKLOAD_KINDS)}")


def check_runtime(spec: JobSpec) -> None:
    """A TrainJob names a ClusterTrainingRuntime (default :data:`DEFAULT_TRAINING_RUNTIME`);
    a PyTorchJob names none."""
    if spec.kind != JOB_KIND_TRAINJOB:
        if spec.runtime:
            raise ValueError("runtime: only a TrainJob names a training runtime")
        return
    runtime = spec.runtime or DEFAULT_TRAINING_RUNTIME
    if len(runtime) > 253 or not naming.is_dns1123_subdomain(runtime):
        raise ValueError(f"runtime: not a ClusterTrainingRuntime name: {runtime!r}")
    _set(spec, "runtime", runtime)


def check_pool(spec: JobSpec) -> None:
    """``pool`` is one of :data:`naming.POOLS`."""
    if spec.pool not in naming.POOLS:
        raise ValueError(f"pool: unknown pool {spec.pool!r}; expected one of {naming.POOLS}")


def check_tenant_slug(spec: JobSpec) -> None:
    """``tenant_slug`` is given."""
    if not spec.tenant_slug:
        raise ValueError("tenant_slug: must not be empty")


def check_tier(spec: JobSpec) -> None:
    """``tier`` is a :class:`Tier` (normalised to the member)."""
    try:
        _set(spec, "tier", Tier(spec.tier))
    except ValueError:
        raise ValueError(f"tier: unknown tier {spec.tier!r}") from None


# --- container --------------------------------------------------------------------------------


def check_image(spec: JobSpec) -> None:
    """``image`` is a reference Trainyard accepts (:func:`validate_image`)."""
    validate_image(spec.image)


def _string_tuple(spec: JobSpec, name: str) -> None:
    value = getattr(spec, name)
    if isinstance(value, str):
        raise ValueError(f"{name}: expected a sequence of strings, not one string")
    value = tuple(value)
    if not all(isinstance(item, str) for item in value):
        raise ValueError(f"{name}: every item must be a string")
    _set(spec, name, value)


def check_command(spec: JobSpec) -> None:
    """``command`` is a sequence of strings (normalised to a tuple)."""
    _string_tuple(spec, "command")


def check_args(spec: JobSpec) -> None:
    """``args`` is a sequence of strings (normalised to a tuple)."""
    _string_tuple(spec, "args")


def _env_entry_problem(key: object, value: object) -> str | None:
    if not isinstance(key, str) or not ENV_NAME.match(key):
        return (f"env: {key!r} is not a valid variable name "
                "(letters, digits, '_', not starting with a digit)")
    problem = env_name_problem(key)
    if problem == "reserved":
        return f"env: {key!r} is reserved (TRAINYARD_* is set by Trainyard)"
    if problem == "operator":
        return f"env: {key!r} is set by the training operator"
    if not isinstance(value, str):
        return f"env: value of {key!r} must be a string, got {value!r}"
    return None


def check_env(spec: JobSpec) -> None:
    """Every ``env`` entry is a user's variable (:func:`env_name_problem`) with a string
    value, checked entry by entry (then frozen)."""
    for key, value in dict(spec.env).items():
        problem = _env_entry_problem(key, value)
        if problem:
            raise ValueError(problem)
    _set(spec, "env", _frozen(spec.env))


# --- compute ----------------------------------------------------------------------------------
# Requests are policy-derived from the limits (the caller's rule, in Trainyard
# tenants.demand), so they are rounded *down* to what a quantity can carry (1m, 1Mi);
# limits must be exact.


def _floor_request(spec: JobSpec, name: str, unit: Decimal) -> None:
    try:
        number = _decimal(getattr(spec, name), name)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    floored = (number / unit).to_integral_value(rounding=ROUND_FLOOR) * unit
    if floored != number:
        _set(spec, name, floored)


def round_cpu_request(spec: JobSpec) -> None:
    """``cpu_request`` is a number >= 0, rounded down to a millicore."""
    _floor_request(spec, "cpu_request", Decimal("0.001"))


def round_memory_request(spec: JobSpec) -> None:
    """``memory_request_gib`` is a number >= 0, rounded down to a MiB."""
    _floor_request(spec, "memory_request_gib", Decimal(1) / 1024)


def _positive_quantity(spec: JobSpec, name: str, render: Callable[[Number], str]) -> None:
    try:
        render(getattr(spec, name))
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    if _decimal(getattr(spec, name), name) == 0:
        raise ValueError(f"{name}: must be > 0")


def _request_within_limit(spec: JobSpec, low: str, high: str) -> None:
    if _decimal(getattr(spec, low), low) > _decimal(getattr(spec, high), high):
        raise ValueError(f"{low}: {getattr(spec, low)} exceeds {high} "
                         f"{getattr(spec, high)}")


def check_cpu_request(spec: JobSpec) -> None:
    """``cpu_request`` renders as a CPU quantity and is > 0."""
    _positive_quantity(spec, "cpu_request", cpu_quantity)


def check_cpu_limit(spec: JobSpec) -> None:
    """``cpu_limit`` renders exactly as a CPU quantity and is > 0."""
    _positive_quantity(spec, "cpu_limit", cpu_quantity)


def check_cpu_request_within_limit(spec: JobSpec) -> None:
    """``cpu_request`` <= ``cpu_limit``."""
    _request_within_limit(spec, "cpu_request", "cpu_limit")


def check_memory_request(spec: JobSpec) -> None:
    """``memory_request_gib`` renders as a memory quantity and is > 0."""
    _positive_quantity(spec, "memory_request_gib", gib_quantity)


def check_memory_limit(spec: JobSpec) -> None:
    """``memory_limit_gib`` renders exactly as a memory quantity and is > 0."""
    _positive_quantity(spec, "memory_limit_gib", gib_quantity)


def check_memory_request_within_limit(spec: JobSpec) -> None:
    """``memory_request_gib`` <= ``memory_limit_gib``."""
    _request_within_limit(spec, "memory_request_gib", "memory_limit_gib")


def check_shm(spec: JobSpec) -> None:
    """``shm_gib``, when given, renders as a memory quantity."""
    if spec.shm_gib is None:
        return
    try:
        gib_quantity(spec.shm_gib)
    except ValueError as exc:
        raise ValueError(f"shm_gib: {exc}") from None


def check_shm_within_memory(spec: JobSpec) -> None:
    """``/dev/shm`` counts against the memory limit and must not exceed it."""
    if spec.shm_gib is not None and (
            _decimal(spec.shm_gib, "shm_gib") > _decimal(spec.memory_limit_gib, "limit")):
        raise ValueError("shm_gib: /dev/shm counts against memory_limit_gib and "
                         "must not exceed it")


# --- policy -----------------------------------------------------------------------------------


def check_max_run_seconds(spec: JobSpec) -> None:
    """``max_run_seconds`` in 1..:data:`MAX_RUN_SECONDS`."""
    _int_field(spec.max_run_seconds, "max_run_seconds", minimum=1, maximum=MAX_RUN_SECONDS)


def check_grace_seconds(spec: JobSpec) -> None:
    """``grace_seconds`` in 0..one day."""
    _int_field(spec.grace_seconds, "grace_seconds", maximum=24 * 3600)


def check_checkpoint_interval(spec: JobSpec) -> None:
    """``checkpoint_interval_seconds`` >= 1."""
    _int_field(spec.checkpoint_interval_seconds, "checkpoint_interval_seconds", minimum=1)


def check_backoff_limit(spec: JobSpec) -> None:
    """``backoff_limit`` in 0..1000."""
    _int_field(spec.backoff_limit, "backoff_limit", maximum=1000)


def check_restart_count(spec: JobSpec) -> None:
    """``restart_count`` >= 0."""
    _int_field(spec.restart_count, "restart_count")


def check_resume(spec: JobSpec) -> None:
    """``resume`` is a bool."""
    if not isinstance(spec.resume, bool):
        raise ValueError(f"resume: expected a bool, got {spec.resume!r}")


def check_suspend(spec: JobSpec) -> None:
    """``suspend`` is a bool."""
    if not isinstance(spec.suspend, bool):
        raise ValueError(f"suspend: expected a bool, got {spec.suspend!r}")


# --- checkpoints ------------------------------------------------------------------------------


def check_checkpoint_claim(spec: JobSpec) -> None:
    """``checkpoint_claim``, when given, is a PVC name."""
    if spec.checkpoint_claim and not naming.is_dns1123_subdomain(spec.checkpoint_claim):
        raise ValueError(f"checkpoint_claim: not a valid PVC name: {spec.checkpoint_claim!r}")


def check_checkpoint_path(spec: JobSpec) -> None:
    """``checkpoint_path`` is a mount point (:func:`checkpoint_path_problem`)."""
    problem = checkpoint_path_problem(spec.checkpoint_path)
    if problem in ("relative", "system", "parent"):
        raise ValueError(f"checkpoint_path: must be an absolute path outside system "
                         f"directories, got {spec.checkpoint_path!r}")
    if problem == "characters":
        raise ValueError(f"checkpoint_path: no ':' or whitespace: {spec.checkpoint_path!r}")


def _wants_pvc(spec: JobSpec) -> bool:
    """The job asks Trainyard to create its checkpoint claim."""
    return bool(spec.checkpoint_storage_class) or spec.checkpoint_size_gib is not None


def check_checkpoint_one_source(spec: JobSpec) -> None:
    """An existing claim or a new one, not both."""
    if _wants_pvc(spec) and spec.checkpoint_claim:
        raise ValueError("checkpoint_claim: give an existing claim or "
                         "checkpoint_storage_class + checkpoint_size_gib, not both")


def check_checkpoint_class_and_size(spec: JobSpec) -> None:
    """A new claim names its StorageClass and its size."""
    if _wants_pvc(spec) and (not spec.checkpoint_storage_class
                             or spec.checkpoint_size_gib is None):
        raise ValueError("checkpoint_storage_class: needs checkpoint_size_gib too "
                         "(and vice versa)")


def check_checkpoint_storage_class(spec: JobSpec) -> None:
    """A new claim's StorageClass is a valid name."""
    if _wants_pvc(spec) and not naming.is_dns1123_subdomain(spec.checkpoint_storage_class):
        raise ValueError("checkpoint_storage_class: invalid StorageClass name "
                         f"{spec.checkpoint_storage_class!r}")


def check_checkpoint_size(spec: JobSpec) -> None:
    """A new claim's size renders as a storage quantity and is > 0 (a missing size is
    :func:`check_checkpoint_class_and_size`'s rule)."""
    size = spec.checkpoint_size_gib
    if not _wants_pvc(spec) or size is None:
        return
    try:
        gib_quantity(size)
    except ValueError as exc:
        raise ValueError(f"checkpoint_size_gib: {exc}") from None
    if _decimal(size, "checkpoint_size_gib") == 0:
        raise ValueError("checkpoint_size_gib: must be > 0")


# --- placement --------------------------------------------------------------------------------


def check_switch(spec: JobSpec) -> None:
    """``switch``, when given, is a label value."""
    if spec.switch and not naming.is_label_value(spec.switch):
        raise ValueError(f"switch: not a label value: {spec.switch!r}")


def check_switch_label(spec: JobSpec) -> None:
    """``switch_label`` is a label key."""
    if not _is_qualified_name(spec.switch_label):
        raise ValueError(f"switch_label: not a label key: {spec.switch_label!r}")


def check_nodes(spec: JobSpec) -> None:
    """``nodes`` is a sequence of node names (normalised: sorted, without repeats)."""
    if isinstance(spec.nodes, str):
        raise ValueError("nodes: expected a sequence of node names, not one string")
    nodes = tuple(sorted(set(spec.nodes)))
    for node in nodes:
        if not isinstance(node, str) or not naming.is_dns1123_subdomain(node):
            raise ValueError(f"nodes: not a node name: {node!r}")
    _set(spec, "nodes", nodes)


def check_placement_keys(spec: JobSpec) -> None:
    """``placement`` holds only tolerations, affinity and nodeSelector."""
    unknown = set(spec.placement) - _PLACEMENT_KEYS
    if unknown:
        raise ValueError(f"placement: unknown keys {sorted(unknown)}; "
                         f"expected some of {sorted(_PLACEMENT_KEYS)}")


def check_placement_gpu_product(spec: JobSpec) -> None:
    """``placement``'s nodeSelector does not ask for another GPU model (then frozen)."""
    selector = dict(spec.placement.get("nodeSelector") or {})
    if spec.gpu_product and selector.get(GPU_PRODUCT_LABEL, spec.gpu_product_label) != (
            spec.gpu_product_label):
        raise ValueError(f"placement: nodeSelector {GPU_PRODUCT_LABEL}="
                         f"{selector[GPU_PRODUCT_LABEL]!r} conflicts with gpu_product "
                         f"{spec.gpu_product_label!r}")
    _set(spec, "placement", _deep_freeze(dict(spec.placement)))


def check_annotations(spec: JobSpec) -> None:
    """Every annotation key is a qualified name with a string value (then frozen)."""
    for key, value in dict(spec.annotations).items():
        if not _is_qualified_name(key):
            raise ValueError(f"annotations: {key!r} is not a qualified name "
                             "([prefix/]name, e.g. kubesim.trainyard.io/run-seconds)")
        if not isinstance(value, str):
            raise ValueError(f"annotations: value of {key!r} must be a string, "
                             f"got {value!r}")
    _set(spec, "annotations", _frozen(spec.annotations))


#: Every rule of a JobSpec, in the order ``__post_init__`` runs them (the first broken
#: one is the error).
JOB_CHECKS: tuple[JobCheck, ...] = (
    # identity
    check_job_id, check_kind, check_runtime, check_pool, check_tenant_slug, check_tier,
    # container
    check_image, check_command, check_args, check_env,
    # shape and devices
    check_worker_replicas, check_gpus_per_replica, check_mig_profile, check_mig_one_slice,
    check_mig_base_product, check_gpu_product_given, check_gpu_product_needs_gpus,
    check_gpu_product_label,
    # shared GPUs and HAMi limits
    check_gpu_shared_bool, check_gpu_shared_no_mig, check_gpu_shared_card,
    check_gpu_shared_not_mig_product, check_shared_product_label,
    check_sharing_strategy_shared, check_sharing_strategy_known, check_gpu_memory_whole,
    check_gpu_memory_range, check_gpu_memory_on_whole_gpus, check_gpu_cores_whole,
    check_gpu_cores_range, check_gpu_cores_on_whole_gpus,
    # compute
    round_cpu_request, round_memory_request, check_cpu_request, check_cpu_limit,
    check_cpu_request_within_limit, check_memory_request, check_memory_limit,
    check_memory_request_within_limit, check_shm, check_shm_within_memory,
    # policy
    check_max_run_seconds, check_grace_seconds, check_checkpoint_interval,
    check_backoff_limit, check_restart_count, check_resume, check_suspend,
    # checkpoints
    check_checkpoint_claim, check_checkpoint_path, check_checkpoint_one_source,
    check_checkpoint_class_and_size, check_checkpoint_storage_class, check_checkpoint_size,
    # placement
    check_switch, check_switch_label, check_nodes, check_placement_keys,
    check_placement_gpu_product, check_annotations,
)
