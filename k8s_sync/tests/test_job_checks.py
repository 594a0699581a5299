"""Each rule of a JobSpec alone: one case per check of ``k8s_sync.specs.job_checks.JOB_CHECKS``.

Every case breaks one rule of an otherwise good spec; the spec refuses it with that rule's
message, and that rule is the check in the table that raises it (the checks before it
pass). A check added to the table without a case here fails
:func:`test_every_check_has_a_case`.
"""

from __future__ import annotations

import copy

import pytest

from k8s_sync.specs import JobSpec
from k8s_sync.specs.job_checks import JOB_CHECKS

GOOD = {
    "job_id": 7, "tenant_slug": "acme", "pool": "prod", "tier": "production",
    "image": "pytorch/pytorch:2.4", "max_run_seconds": 3600, "grace_seconds": 60,
    "checkpoint_interval_seconds": 600, "gpus_per_replica": 1, "gpu_product": "NVIDIA-H800",
}

#: (check, what breaks its rule, the message the spec gives), in the order of JOB_CHECKS.
CASES = [
    ("check_job_id", {"job_id": -1},
     "job_id: job_id must be made of [a-z0-9-]: -1"),
    ("check_kind", {"kind": "tfjob"},
     "kind: unknown job kind 'tfjob'; expected one of ('pytorchjob', 'trainjob')"),
    ("check_runtime", {"kind": "trainjob", "runtime": "Bad_Runtime"},
     "runtime: not a ClusterTrainingRuntime name: 'Bad_Runtime'"),
    ("check_runtime", {"runtime": "torch-distributed"},
     "runtime: only a TrainJob names a training runtime"),
    ("check_pool", {"pool": "qa"},
     "pool: unknown pool 'qa'; expected one of ('prod', 'dev')"),
    ("check_tenant_slug", {"tenant_slug": ""},
     "tenant_slug: must not be empty"),
    ("check_tier", {"tier": "urgent"},
     "tier: unknown tier 'urgent'"),
    ("check_image", {"image": "Bad/Image"},
     ("image: invalid repository component 'Bad' in 'Bad/Image' (lower-case letters, digits and "
      ". _ - separators only)")),
    ("check_command", {"command": "python train.py"},
     "command: expected a sequence of strings, not one string"),
    ("check_args", {"args": ("--lr", 1)},
     "args: every item must be a string"),
    ("check_env", {"env": {"1A": "x"}},
     "env: '1A' is not a valid variable name (letters, digits, '_', not starting with a digit)"),
    ("check_env", {"env": {"TRAINYARD_JOB": "x"}},
     "env: 'TRAINYARD_JOB' is reserved (TRAINYARD_* is set by Trainyard)"),
    ("check_env", {"env": {"MASTER_ADDR": "x"}},
     "env: 'MASTER_ADDR' is set by the training operator"),
    ("check_env", {"env": {"A": 1}},
     "env: value of 'A' must be a string, got 1"),
    ("check_worker_replicas", {"worker_replicas": -1},
     "worker_replicas: must be >= 0, got -1"),
    ("check_gpus_per_replica", {"gpus_per_replica": True},
     "gpus_per_replica: expected an int, got True"),
    ("check_mig_profile", {"mig_profile": "bogus", "gpu_product": ""},
     "mig_profile: not a MIG profile like '1g.10gb': 'bogus'"),
    ("check_mig_one_slice", {"mig_profile": "1g.10gb", "gpus_per_replica": 2, "gpu_product": ""},
     "mig_profile: a MIG job takes exactly 1 slice per replica (gpus_per_replica=1), got 2"),
    ("check_mig_base_product", {"mig_profile": "1g.10gb", "gpu_product": "NVIDIA-A100-MIG-1g.10gb"},
     ("gpu_product: 'NVIDIA-A100-MIG-1g.10gb' is a MIG-single/shared product label, which "
      "conflicts with mig_profile '1g.10gb' (mixed strategy keeps the base product, e.g. "
      "NVIDIA-A100-SXM4-80GB)")),
    ("check_gpu_product_given", {"gpu_product": ""},
     ("gpu_product: required when gpus_per_replica > 0 (the nvidia.com/gpu.product label value, "
      "e.g. NVIDIA-H800)")),
    ("check_gpu_product_needs_gpus", {"gpus_per_replica": 0},
     "gpu_product: given but gpus_per_replica is 0 (a CPU-only job would occupy a GPU node)"),
    ("check_gpu_product_label", {"gpu_product": "bad label!"},
     "gpu_product: not a label value: 'bad label!'"),
    ("check_gpu_shared_bool", {"gpu_shared": 1},
     "gpu_shared: expected a bool, got 1"),
    ("check_gpu_shared_no_mig", {"gpu_shared": True, "mig_profile": "1g.10gb"},
     ("gpu_shared: a shared GPU takes no MIG profile (the device plugin cannot share with MPS "
      "on MIG, and Trainyard does not time-slice MIG slices)")),
    ("check_gpu_shared_card", {"gpu_shared": True, "gpus_per_replica": 0, "gpu_product": ""},
     ("gpu_shared: needs gpus_per_replica > 0 (the shares per replica) and gpu_product (the "
      "card model)")),
    ("check_gpu_shared_not_mig_product",
     {"gpu_shared": True, "gpu_product": "NVIDIA-A100-MIG-1g.10gb"},
     "gpu_shared: 'NVIDIA-A100-MIG-1g.10gb' is a MIG product label"),
    ("check_shared_product_label", {"gpu_product": "NVIDIA-H800-SHARED"},
     ("gpu_product: 'NVIDIA-H800-SHARED' is a shared-GPU product label: set gpu_shared=True "
      "(and give the card model)")),
    ("check_sharing_strategy_shared", {"sharing_strategy": "mps"},
     "sharing_strategy: only for a shared GPU (gpu_shared=True)"),
    ("check_sharing_strategy_known", {"gpu_shared": True, "sharing_strategy": "bogus"},
     "sharing_strategy: 'bogus' is not one of ('time-slicing', 'mps')"),
    ("check_gpu_memory_whole", {"gpu_memory_mib_per_card": 1.5},
     "gpu_memory_mib_per_card: expected a whole number, got 1.5"),
    ("check_gpu_memory_range", {"gpu_memory_mib_per_card": 0},
     "gpu_memory_mib_per_card: must be > 0, got 0"),
    ("check_gpu_memory_on_whole_gpus", {"gpu_memory_mib_per_card": 1024, "gpu_shared": True},
     ("gpu_memory_mib_per_card: a HAMi limit applies to whole or HAMi vGPUs only "
      "(gpus_per_replica > 0, no mig_profile, not gpu_shared)")),
    ("check_gpu_cores_whole", {"gpu_cores_percent": "50"},
     "gpu_cores_percent: expected a whole number, got '50'"),
    ("check_gpu_cores_range", {"gpu_cores_percent": 101},
     "gpu_cores_percent: must be between 1 and 100"),
    ("check_gpu_cores_on_whole_gpus",
     {"gpu_cores_percent": 50, "gpus_per_replica": 0, "gpu_product": ""},
     ("gpu_cores_percent: a HAMi limit applies to whole or HAMi vGPUs only (gpus_per_replica > "
      "0, no mig_profile, not gpu_shared)")),
    ("round_cpu_request", {"cpu_request": "abc"},
     "cpu_request: cpu_request: not a number: 'abc'"),
    ("round_memory_request", {"memory_request_gib": -1},
     "memory_request_gib: memory_request_gib: must be a finite number >= 0, got -1"),
    ("check_cpu_request", {"cpu_request": "0.0005"},
     "cpu_request: must be > 0"),
    ("check_cpu_limit", {"cpu_limit": 0.0005},
     "cpu_limit: cpu cores: finer than 1m: 0.0005"),
    ("check_cpu_request_within_limit", {"cpu_request": 8, "cpu_limit": 4},
     "cpu_request: 8 exceeds cpu_limit 4"),
    ("check_memory_request", {"memory_request_gib": 0},
     "memory_request_gib: must be > 0"),
    ("check_memory_limit", {"memory_limit_gib": 1e-07},
     "memory_limit_gib: GiB: finer than 1Mi: 1e-07"),
    ("check_memory_request_within_limit", {"memory_request_gib": 64, "memory_limit_gib": 8},
     "memory_request_gib: 64 exceeds memory_limit_gib 8"),
    ("check_shm", {"shm_gib": 1e-07},
     "shm_gib: GiB: finer than 1Mi: 1e-07"),
    ("check_shm_within_memory", {"shm_gib": 100},
     "shm_gib: /dev/shm counts against memory_limit_gib and must not exceed it"),
    ("check_max_run_seconds", {"max_run_seconds": 2592001},
     "max_run_seconds: must be in 1..2592000, got 2592001"),
    ("check_grace_seconds", {"grace_seconds": 86401},
     "grace_seconds: must be in 0..86400, got 86401"),
    ("check_checkpoint_interval", {"checkpoint_interval_seconds": 0},
     "checkpoint_interval_seconds: must be >= 1, got 0"),
    ("check_backoff_limit", {"backoff_limit": 1001},
     "backoff_limit: must be in 0..1000, got 1001"),
    ("check_restart_count", {"restart_count": -1},
     "restart_count: must be >= 0, got -1"),
    ("check_resume", {"resume": 1},
     "resume: expected a bool, got 1"),
    ("check_suspend", {"suspend": 0},
     "suspend: expected a bool, got 0"),
    ("check_checkpoint_claim", {"checkpoint_claim": "Bad_Claim"},
     "checkpoint_claim: not a valid PVC name: 'Bad_Claim'"),
    ("check_checkpoint_path", {"checkpoint_path": "/proc/x"},
     "checkpoint_path: must be an absolute path outside system directories, got '/proc/x'"),
    ("check_checkpoint_path", {"checkpoint_path": "/a b"},
     "checkpoint_path: no ':' or whitespace: '/a b'"),
    ("check_checkpoint_one_source",
     {"checkpoint_claim": "mine", "checkpoint_storage_class": "fast", "checkpoint_size_gib": 10},
     ("checkpoint_claim: give an existing claim or checkpoint_storage_class + "
      "checkpoint_size_gib, not both")),
    ("check_checkpoint_class_and_size", {"checkpoint_storage_class": "fast"},
     "checkpoint_storage_class: needs checkpoint_size_gib too (and vice versa)"),
    ("check_checkpoint_storage_class",
     {"checkpoint_storage_class": "Bad_Class", "checkpoint_size_gib": 10},
     "checkpoint_storage_class: invalid StorageClass name 'Bad_Class'"),
    ("check_checkpoint_size", {"checkpoint_storage_class": "fast", "checkpoint_size_gib": 0},
     "checkpoint_size_gib: must be > 0"),
    ("check_switch", {"switch": "bad switch"},
     "switch: not a label value: 'bad switch'"),
    ("check_switch_label", {"switch_label": "bad key!"},
     "switch_label: not a label key: 'bad key!'"),
    ("check_nodes", {"nodes": "node-1"},
     "nodes: expected a sequence of node names, not one string"),
    ("check_nodes", {"nodes": ("Bad_Node",)},
     "nodes: not a node name: 'Bad_Node'"),
    ("check_placement_keys", {"placement": {"bogus": 1}},
     ("placement: unknown keys ['bogus']; expected some of ['affinity', 'nodeSelector', "
      "'tolerations']")),
    ("check_placement_gpu_product",
     {"placement": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100"}}},
     ("placement: nodeSelector nvidia.com/gpu.product='NVIDIA-A100' conflicts with gpu_product "
      "'NVIDIA-H800'")),
    ("check_annotations", {"annotations": {"bad key!": "x"}},
     ("annotations: 'bad key!' is not a qualified name ([prefix/]name, e.g. "
      "kubesim.trainyard.io/run-seconds)")),
    ("check_annotations", {"annotations": {"kubesim.trainyard.io/run-seconds": 5}},
     "annotations: value of 'kubesim.trainyard.io/run-seconds' must be a string, got 5"),
]


def test_every_check_has_a_case():
    assert {check.__name__ for check in JOB_CHECKS} == {name for name, _, _ in CASES}
    assert len({check.__name__ for check in JOB_CHECKS}) == len(JOB_CHECKS)


def test_the_good_spec_passes_every_check_alone():
    spec = JobSpec(**GOOD)
    for check in JOB_CHECKS:
        assert check(copy.copy(spec)) is None, check.__name__


@pytest.mark.parametrize(("name", "bad", "message"), CASES,
                         ids=[f"{name}-{i}" for i, (name, _, _) in enumerate(CASES)])
def test_each_rule_refuses_its_bad_input(name, bad, message):
    with pytest.raises(ValueError) as refused:
        JobSpec(**(GOOD | bad))
    assert str(refused.value) == message
    # the same bad input, given to the checks of a good spec one by one: the named check
    # is the first one to refuse it, with the same message
    spec = copy.copy(JobSpec(**GOOD))
    for field, value in bad.items():
        object.__setattr__(spec, field, value)
    for check in JOB_CHECKS:
        try:
            check(spec)
        except ValueError as exc:
            assert (check.__name__, str(exc)) == (name, message)
            break
    else:
        pytest.fail(f"no check refused {bad}")


def test_the_first_broken_rule_in_table_order_is_the_error():
    # env is checked before the limits, the limits before the checkpoint path
    with pytest.raises(ValueError, match=r"^env: 'TRAINYARD_X' is reserved"):
        JobSpec(**(GOOD | {"env": {"TRAINYARD_X": "1"}, "cpu_limit": 0,
                           "checkpoint_path": "relative"}))
    with pytest.raises(ValueError, match=r"^cpu_limit: must be > 0"):
        JobSpec(**(GOOD | {"cpu_limit": 0, "checkpoint_path": "relative"}))


def test_checks_normalise_what_they_accept():
    spec = JobSpec(**(GOOD | {"kind": "trainjob", "command": ["python"],
                              "nodes": ("n-2", "n-1", "n-2"), "cpu_request": "0.0015",
                              "env": {"B": "2", "A": "1"}}))
    assert spec.runtime == "torch-distributed"
    assert spec.command == ("python",)
    assert spec.nodes == ("n-1", "n-2")
    assert str(spec.cpu_request) == "0.001"
    assert list(spec.env) == ["A", "B"]
    with pytest.raises(TypeError):
        spec.env["C"] = "3"  # type: ignore[index]
