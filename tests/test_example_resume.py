"""examples/train_resumable.py, run for real with CPU PyTorch: it checkpoints on its
interval, saves and exits on SIGTERM (what a preemption sends), and a restart with
TRAINYARD_RESUME=1 continues from the saved step to the end, ending with exactly the
model an uninterrupted run produces. Also under torchrun with two Gloo ranks.

torch comes from scripts/ensure-torch.sh (``make test`` runs it); without it these tests
skip and say so.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.tests.scripts import load_script
from jobs.progress import parse_line

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed: scripts/ensure-torch.sh installs the CPU build")

# Real interpreter starts and training: more than the suite's 120 s on a loaded machine.
# Both on one xdist worker (each run is CPU-bound), scheduled first with the other groups.
pytestmark = [pytest.mark.timeout(300), pytest.mark.xdist_group("torch")]

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "train_resumable.py"
STEPS = 200


def _env(ckpt: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TRAINYARD_", "PET_", "TORCHELASTIC_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    env.update({"TRAINYARD_CHECKPOINT_DIR": str(ckpt),
                "TRAINYARD_CHECKPOINT_INTERVAL_SECONDS": "1", "TRAINYARD_JOB": "tj-1-example",
                "TRAINYARD_TIER": "development", "TRAINYARD_GRACE_SECONDS": "300",
                "TRAINYARD_CHECKPOINT_PERSISTENT": "1", "TRAINYARD_RESUME": "0",
                "TRAINYARD_RESTART_COUNT": "0", "OMP_NUM_THREADS": "1",
                "PYTHONUNBUFFERED": "1", **extra})
    return env


def _saved_steps(ckpt: Path) -> list[int]:
    return sorted(int(p.name[5:13]) for p in ckpt.glob("ckpt-*.pt"))


def _start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)


def _interrupt_after_first_checkpoint(proc: subprocess.Popen, ckpt: Path) -> int:
    """Wait until the run has saved a checkpoint on its own (mid-run), then SIGTERM it
    as the kubelet does on preemption; its exit code."""
    deadline = time.monotonic() + 90
    while not _saved_steps(ckpt):
        assert proc.poll() is None, "the script ended before its first checkpoint"
        assert time.monotonic() < deadline, "no checkpoint within 90 s"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=60)


def _run_reference(ckpt: Path) -> dict:
    """The same training without interruption, in this process: its final model."""
    module = load_script(SCRIPT, "train_resumable")
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        assert module.main(["--steps", str(STEPS), "--checkpoint-dir", str(ckpt),
                            "--checkpoint-interval", "3600"]) == 0
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    return torch.load(ckpt / f"ckpt-{STEPS:08d}.pt", weights_only=False)["model"]


def test_sigterm_saves_and_the_restart_resumes_from_the_saved_step(tmp_path):
    ckpt = tmp_path / "ckpt"
    first = tmp_path / "first.log"
    proc = _start([sys.executable, str(SCRIPT), "--steps", str(STEPS), "--step-seconds", "0.03"],
                  _env(ckpt), first)
    assert _interrupt_after_first_checkpoint(proc, ckpt) == 143  # 128 + SIGTERM, not 0
    out = first.read_text()
    assert "starting from step 0" in out
    assert re.search(r"saved checkpoint step=\d+ reason=interval", out), out
    saved = re.search(r"saved checkpoint step=(\d+) reason=signal", out)
    assert saved, out
    stopped_at = int(saved.group(1))
    assert 0 < stopped_at < STEPS
    assert f"stopped at step {stopped_at} of {STEPS}" in out
    assert max(_saved_steps(ckpt)) == stopped_at
    assert not list(ckpt.glob(".*.tmp"))  # written atomically: no temporary left behind
    state = torch.load(ckpt / f"ckpt-{stopped_at:08d}.pt", weights_only=False)
    assert state["step"] == stopped_at and state["job"] == "tj-1-example"

    second = tmp_path / "second.log"
    resumed = subprocess.run([sys.executable, str(SCRIPT), "--steps", str(STEPS)],
                             env=_env(ckpt, TRAINYARD_RESUME="1", TRAINYARD_RESTART_COUNT="1"),
                             stdout=second.open("w"), stderr=subprocess.STDOUT, timeout=120)
    out = second.read_text()
    assert resumed.returncode == 0, out
    assert f"resumed from step {stopped_at} " in out
    assert "starting from step 0" not in out
    assert f"finished at step {STEPS}" in out
    # its progress lines, as Trainyard reads them: from the resumed step to 100%
    reports = [r for line in out.splitlines() if (r := parse_line(line)) is not None]
    assert reports[0].step == stopped_at and reports[0].percent == round(
        100 * stopped_at / STEPS, 1)
    assert (reports[-1].percent, reports[-1].remaining_seconds, reports[-1].step) == (
        100.0, 0, STEPS)
    assert [name for name, _ in reports[-1].metrics] == ["loss"]
    final = torch.load(ckpt / f"ckpt-{STEPS:08d}.pt", weights_only=False)
    assert final["step"] == STEPS and final["restart_count"] == 1
    assert len(_saved_steps(ckpt)) <= 2  # --keep 2

    reference = _run_reference(tmp_path / "reference")
    assert reference.keys() == final["model"].keys()
    for name, tensor in reference.items():
        assert torch.equal(tensor, final["model"][name]), name


@pytest.mark.slow
def test_torchrun_two_gloo_ranks_stop_together_and_resume(tmp_path):
    ckpt = tmp_path / "ckpt"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                "--nproc-per-node=2", str(SCRIPT), "--steps", "150"]
    first = tmp_path / "first.log"
    # TRAINYARD_RESUME=1 with an empty directory (an emptyDir lost with its pod): step 0
    proc = _start([*torchrun, "--step-seconds", "0.03"], _env(ckpt, TRAINYARD_RESUME="1"),
                  first)
    _interrupt_after_first_checkpoint(proc, ckpt)  # torchrun itself reports the signal
    out = first.read_text()
    assert "TRAINYARD_RESUME=1 but there is no checkpoint: starting from step 0" in out
    assert "joined the process group: backend=gloo world_size=2" in out
    stops = re.findall(r"rank=(\d)\] stopped at step (\d+) of 150", out)
    assert sorted(rank for rank, _ in stops) == ["0", "1"], out
    stopped_at = {int(step) for _, step in stops}
    assert len(stopped_at) == 1, stops  # both ranks agreed on the step
    (step,) = stopped_at
    assert 0 < step < 150 and max(_saved_steps(ckpt)) == step
    assert not re.search(r"rank=1\] saved checkpoint", out)  # only rank 0 writes

    second = tmp_path / "second.log"
    resumed = subprocess.run(torchrun, env=_env(ckpt, TRAINYARD_RESUME="1"),
                             stdout=second.open("w"), stderr=subprocess.STDOUT, timeout=120)
    out = second.read_text()
    assert resumed.returncode == 0, out
    assert out.count(f"resumed from step {step} ") == 2  # every rank loads the checkpoint
    assert "finished at step 150" in out and max(_saved_steps(ckpt)) == 150


def _trainjob_env(spec) -> dict[str, str]:
    """The node container's Trainyard variables of the job's TrainJob as the kubelet
    resolves them: ``trainer.env`` values, and the downward API's
    ``metadata.annotations['<key>']`` from the pod annotations of Trainyard's runtime
    patch (``spec.trainer`` cannot change; the patch can, on every resume)."""
    from k8s_sync import manifests

    obj = manifests.build_workload(spec)
    [patch] = [p for p in obj["spec"]["runtimePatches"]
               if p["manager"] == manifests.TRAINYARD_PATCH_MANAGER]
    annotations = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0][
        "template"]["spec"]["template"]["metadata"]["annotations"]
    env = {}
    for item in obj["spec"]["trainer"]["env"]:
        if "value" in item:
            env[item["name"]] = item["value"]
        else:
            path = item["valueFrom"]["fieldRef"]["fieldPath"]
            env[item["name"]] = annotations[re.fullmatch(
                r"metadata\.annotations\['(.+)'\]", path).group(1)]
    return env


def test_a_trainjob_is_preempted_and_resumes_from_its_checkpoint(tmp_path):
    """The checkpoint contract through a Kubeflow Trainer v2 TrainJob: the variables of
    the queued TrainJob start the example from step 0; SIGTERM (the preemption) saves;
    the variables after Trainyard's resume patch (restart count 1) resume it from the
    saved step to the end."""
    import dataclasses

    from k8s_sync.specs import JobSpec

    ckpt = tmp_path / "ckpt"
    spec = JobSpec(job_id=1, name_hint="example", tenant_slug="acme", pool="dev",
                   tier="development", image="registry.example.org/ml/trainer:1",
                   command=("python", "train_resumable.py"), max_run_seconds=3600,
                   grace_seconds=300, checkpoint_interval_seconds=1,
                   checkpoint_path=str(ckpt), kind="trainjob")
    base = {k: v for k, v in _env(ckpt).items() if not k.startswith("TRAINYARD_")}
    first_env = {**base, **_trainjob_env(spec)}
    assert first_env["TRAINYARD_RESUME"] == "0"
    first = tmp_path / "first.log"
    proc = _start([sys.executable, str(SCRIPT), "--steps", str(STEPS), "--step-seconds", "0.03"],
                  first_env, first)
    assert _interrupt_after_first_checkpoint(proc, ckpt) == 143
    saved = re.search(r"saved checkpoint step=(\d+) reason=signal", first.read_text())
    assert saved, first.read_text()
    stopped_at = int(saved.group(1))

    resumed_env = {**base, **_trainjob_env(dataclasses.replace(
        spec, resume=True, restart_count=1, suspend=False))}
    assert (resumed_env["TRAINYARD_RESUME"], resumed_env["TRAINYARD_RESTART_COUNT"]) == ("1", "1")
    second = tmp_path / "second.log"
    done = subprocess.run([sys.executable, str(SCRIPT), "--steps", str(STEPS)], env=resumed_env,
                          stdout=second.open("w"), stderr=subprocess.STDOUT, timeout=120)
    out = second.read_text()
    assert done.returncode == 0, out
    assert f"resumed from step {stopped_at} " in out and "starting from step 0" not in out
    final = torch.load(ckpt / f"ckpt-{STEPS:08d}.pt", weights_only=False)
    assert final["step"] == STEPS and final["restart_count"] == 1
    assert final["job"] == spec.name
