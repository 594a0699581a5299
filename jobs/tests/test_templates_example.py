"""The job templates run the shipped resumable example, and their torchrun launch cannot
disagree with the workers and GPUs of the job: no counts in the command, the operator's
PET_* variables (from the PyTorchJob's replicas and nprocPerNode) carry them."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.templates import EXAMPLE_SCRIPT, TEMPLATES
from k8s_sync.manifests import build_pytorchjob
from k8s_sync.naming import Tier
from k8s_sync.specs import JobSpec

REPO = Path(__file__).resolve().parents[2]
COUNT_FLAGS = ("--nnodes", "--nproc-per-node", "--nproc_per_node", "--node-rank",
               "--node_rank")


def test_the_example_the_templates_run_is_in_the_repository():
    assert (REPO / "examples" / Path(EXAMPLE_SCRIPT).name).is_file()


@pytest.mark.parametrize("key", sorted(TEMPLATES))
def test_template_runs_the_example_without_process_counts(key):
    template = TEMPLATES[key]
    argv = [*template["command"], *template["args"]]
    assert EXAMPLE_SCRIPT in argv
    assert argv[0] in ("python", "torchrun")
    # More than one process (GPUs or pods) needs torchrun, one process plain python.
    many = template["workers"] > 1 or template["gpus_per_worker"] > 1
    assert argv[0] == ("torchrun" if many else "python"), key
    assert not [a for a in argv if a.split("=")[0] in COUNT_FLAGS], argv


@pytest.mark.parametrize("key", sorted(TEMPLATES))
def test_template_job_gives_torchrun_its_counts_through_the_operator(key):
    """What torchrun reads: PET_NNODES = all replicas of the PyTorchJob, PET_NPROC_PER_NODE
    = its nprocPerNode (training-operator v1 envvar.go, as kubesim's operator does)."""
    t = TEMPLATES[key]
    spec = JobSpec(job_id=1, tenant_slug="acme", pool="prod" if t["tier"] == "production"
                   else "dev", tier=Tier(t["tier"]), image="python:3.12-slim",
                   command=tuple(t["command"]), args=tuple(t["args"]),
                   max_run_seconds=t["max_run_seconds"], grace_seconds=30,
                   checkpoint_interval_seconds=300, worker_replicas=t["workers"] - 1,
                   gpus_per_replica=t["gpus_per_worker"], gpu_product="NVIDIA-H800",
                   cpu_request=1, cpu_limit=t["cpu_per_worker"],
                   memory_request_gib=1, memory_limit_gib=t["memory_gib_per_worker"])
    manifest = build_pytorchjob(spec)
    replicas = sum(r["replicas"] for r in manifest["spec"]["pytorchReplicaSpecs"].values())
    assert replicas == t["workers"]
    assert manifest["spec"]["nprocPerNode"] == str(t["gpus_per_worker"])
