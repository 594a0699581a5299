#!/usr/bin/env python3
"""A PyTorch training script that survives preemption: Trainyard's checkpoint contract.

Run it as the job's command, alone (one process) or under ``torchrun`` (one process per
GPU, any number of nodes)::

    python /workspace/train_resumable.py --steps 20000
    torchrun /workspace/train_resumable.py --steps 20000

What it does, and what every script on Trainyard should do (docs/guides/checkpoints.md):

* reads ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` (set by torchrun, or by the training
  operator for one process per pod) and, when ``WORLD_SIZE`` > 1, joins the process group:
  NCCL on GPUs, Gloo on CPUs. Under torchrun it needs no ``--nnodes`` or
  ``--nproc-per-node``: the training operator sets ``PET_NNODES``, ``PET_NPROC_PER_NODE``,
  ``PET_NODE_RANK``, ``PET_MASTER_ADDR`` and ``PET_MASTER_PORT``, which torchrun reads, from
  the job's own replica count, so they always match the workers you asked for;
* saves a checkpoint into ``TRAINYARD_CHECKPOINT_DIR`` every
  ``TRAINYARD_CHECKPOINT_INTERVAL_SECONDS`` and when it gets SIGTERM (a preemption, a
  maintenance drain, a cancel): it finishes the step it is in, saves, and exits with
  143 (128 + SIGTERM) well inside ``TRAINYARD_GRACE_SECONDS``. It does not exit 0 then:
  a pod that exits 0 would look like a finished training;
* writes atomically (a temporary file, flushed, then ``os.replace``), only on rank 0,
  and keeps the last ``--keep`` checkpoints, so a kill in the middle of a save never
  leaves a broken "latest" checkpoint;
* resumes from the newest readable checkpoint whenever there is one (after a
  preemption Trainyard also sets ``TRAINYARD_RESUME=1``; a container restart by the
  operator does not, and resumes all the same), restoring model, optimizer, random
  state and step, and logs the step it resumed from.
* reports its progress on rank 0 with Trainyard's progress line, one JSON object after
  ``TRAINYARD_PROGRESS`` (the share of its steps done, the seconds it expects to need
  still, measured on this run, the step and the loss), when it starts, every
  ``--progress-interval`` seconds and when it finishes. Trainyard reads the last one from
  the log and shows it on the job's page; the jobs waiting behind it get their estimated
  start from it.

The model and data are deliberately tiny (a small MLP fitting a fixed random linear map,
batches drawn from a generator seeded by the step) so the script runs in seconds on a
CPU; replace ``build_model`` and ``batch`` with your own. Only the standard library and
``torch`` are needed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

CHECKPOINT_RE = re.compile(r"^ckpt-(\d{8})\.pt$")
PROGRESS_MARKER = "TRAINYARD_PROGRESS"  # docs/guides/checkpoints.md, "Reporting progress"
SIGTERM_EXIT = 128 + signal.SIGTERM  # 143, what a process killed by SIGTERM reports
FEATURES = 16


def log(message: str) -> None:
    """One line on stdout, flushed (a pod's log is what a researcher reads)."""
    rank = os.environ.get("RANK", "0")
    print(f"[train_resumable rank={rank}] {message}", flush=True)


def env_number(name: str, default: float) -> float:
    value = os.environ.get(name, "")
    try:
        return float(value) if value else default
    except ValueError:
        log(f"ignoring {name}={value!r}: not a number")
        return default


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--steps", type=int, default=1000, help="train until this step")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint-dir",
                        default=os.environ.get("TRAINYARD_CHECKPOINT_DIR", "./checkpoints"),
                        help="default: $TRAINYARD_CHECKPOINT_DIR")
    parser.add_argument("--checkpoint-interval", type=float,
                        default=env_number("TRAINYARD_CHECKPOINT_INTERVAL_SECONDS", 300),
                        help="seconds between checkpoints; default: "
                             "$TRAINYARD_CHECKPOINT_INTERVAL_SECONDS, else 300")
    parser.add_argument("--keep", type=int, default=2, help="checkpoints to keep (>= 1)")
    parser.add_argument("--step-seconds", type=float, default=0.0,
                        help="sleep this long in every step (to simulate real work)")
    parser.add_argument("--progress-interval", type=float, default=60.0,
                        help="seconds between progress lines (rank 0); default 60")
    args = parser.parse_args(argv)
    if (args.steps < 1 or args.keep < 1 or args.checkpoint_interval <= 0
            or args.progress_interval <= 0):
        parser.error("--steps and --keep must be >= 1, --checkpoint-interval and "
                     "--progress-interval > 0")
    return args


# --- distributed -------------------------------------------------------------------------


class Dist:
    """Rank, world size and device of this process; the process group when world > 1."""

    def __init__(self) -> None:
        self.rank = int(os.environ.get("RANK", "0"))
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        if torch.cuda.is_available():
            torch.cuda.set_device(self.local_rank)
            self.device = torch.device("cuda", self.local_rank)
        else:
            self.device = torch.device("cpu")
        if self.world > 1:
            backend = "nccl" if self.device.type == "cuda" else "gloo"
            dist.init_process_group(backend=backend, init_method="env://")
            log(f"joined the process group: backend={backend} world_size={self.world}")

    def any_of(self, *flags: bool) -> list[bool]:
        """Each flag ORed over all ranks (so every rank stops and saves at the same step)."""
        if self.world == 1:
            return list(flags)
        tensor = torch.tensor([1.0 if f else 0.0 for f in flags], device=self.device)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return [bool(v) for v in tensor.tolist()]

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()

    def close(self) -> None:
        """Leave the group together: every rank reaches the barrier before any rank tears
        its gloo/NCCL threads down (a rank that destroys its group while a peer still
        talks to it can abort the peer at exit: "terminate called without an active
        exception")."""
        if self.world > 1 and dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()


# --- model and data (replace with your own) ----------------------------------------------


def build_model() -> nn.Module:
    return nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 1))


def batch(step: int, rank: int, args: argparse.Namespace,
          device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch of ``step`` for ``rank``: a function of the step, so a resumed run sees
    exactly the data the interrupted one would have seen next."""
    gen = torch.Generator().manual_seed(args.seed * 1_000_003 + step * 1009 + rank)
    target = torch.Generator().manual_seed(args.seed)
    weights = torch.randn(FEATURES, 1, generator=target)
    x = torch.randn(args.batch_size, FEATURES, generator=gen)
    y = x @ weights + 0.01 * torch.randn(args.batch_size, 1, generator=gen)
    return x.to(device), y.to(device)


# --- checkpoints -------------------------------------------------------------------------


def checkpoints(directory: Path) -> list[tuple[int, Path]]:
    """(step, path) of the complete checkpoints in ``directory``, newest first."""
    if not directory.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in directory.iterdir()
             if (m := CHECKPOINT_RE.match(p.name))]
    return sorted(found, reverse=True)


def save(directory: Path, step: int, model: nn.Module, optimizer: torch.optim.Optimizer,
         keep: int, reason: str) -> Path:
    """Write ``ckpt-<step>.pt`` atomically, then drop all but the newest ``keep``."""
    started = time.monotonic()
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"ckpt-{step:08d}.pt"
    tmp = directory / f".{final.name}.{os.getpid()}.tmp"
    state: dict[str, Any] = {
        "step": step,
        "model": unwrap(model).state_dict(),
        "optimizer": optimizer.state_dict(),
        "rng": torch.get_rng_state(),
        "job": os.environ.get("TRAINYARD_JOB", ""),
        "restart_count": int(os.environ.get("TRAINYARD_RESTART_COUNT", "0") or 0),
        "saved_at": time.time(),
    }
    with open(tmp, "wb") as fh:
        torch.save(state, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, final)  # atomic on POSIX: readers see the old set or the new file
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # make the rename itself durable
        finally:
            os.close(dir_fd)
    except OSError:
        pass
    for _, old in checkpoints(directory)[keep:]:
        old.unlink(missing_ok=True)
    log(f"saved checkpoint step={step} reason={reason} path={final} "
        f"seconds={time.monotonic() - started:.3f}")
    return final


def load_latest(directory: Path, model: nn.Module, optimizer: torch.optim.Optimizer,
                device: torch.device) -> int:
    """Restore the newest readable checkpoint; the step it was saved at (0 for none)."""
    for step, path in checkpoints(directory):
        try:
            state = torch.load(path, map_location=device, weights_only=False)
        except Exception as exc:  # a truncated file from a kill mid-write of an old version
            log(f"skipping unreadable checkpoint {path}: {exc}")
            continue
        unwrap(model).load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"])
        log(f"resumed from step {step} (checkpoint {path})")
        return int(state["step"])
    return 0


def unwrap(model: nn.Module) -> nn.Module:
    return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model


# --- progress ----------------------------------------------------------------------------


class Progress:
    """Trainyard's progress line, printed by rank 0 (docs/guides/checkpoints.md):
    ``TRAINYARD_PROGRESS {"percent": ..., "remaining_seconds": ..., "step": ...,
    "total_steps": ..., "metrics": {"loss": ...}}``, at most every ``every`` seconds.
    The remaining time is measured on this run: its pace since it started (or resumed)."""

    def __init__(self, rank: int, first_step: int, total_steps: int, every: float) -> None:
        self.rank, self.first, self.total, self.every = rank, first_step, total_steps, every
        self.started = time.monotonic()
        self.last = float("-inf")

    def report(self, step: int, loss: float | None, *, force: bool = False) -> None:
        now = time.monotonic()
        if self.rank != 0 or (not force and now - self.last < self.every):
            return
        self.last = now
        body: dict[str, Any] = {"percent": round(100.0 * min(step, self.total) / self.total, 1),
                                "step": step, "total_steps": self.total}
        done = step - self.first
        if step >= self.total:
            body["remaining_seconds"] = 0
        elif done > 0:
            body["remaining_seconds"] = round((now - self.started) / done * (self.total - step))
        if loss is not None:
            body["metrics"] = {"loss": round(loss, 6)}
        print(f"{PROGRESS_MARKER} {json.dumps(body)}", flush=True)


# --- training loop -----------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stop = {"signal": 0}

    def on_signal(signum: int, _frame: Any) -> None:
        if not stop["signal"]:
            log(f"got {signal.Signals(signum).name}: finishing this step, then saving")
        stop["signal"] = signum

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    ranks = Dist()
    torch.manual_seed(args.seed)
    model: nn.Module = build_model().to(ranks.device)
    if ranks.world > 1:
        model = nn.parallel.DistributedDataParallel(
            model, device_ids=[ranks.local_rank] if ranks.device.type == "cuda" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    directory = Path(args.checkpoint_dir)
    log(f"job={os.environ.get('TRAINYARD_JOB', '-')} tier={os.environ.get('TRAINYARD_TIER', '-')}"
        f" checkpoint_dir={directory} interval={args.checkpoint_interval:g}s"
        f" grace={os.environ.get('TRAINYARD_GRACE_SECONDS', '-')}s"
        f" resume={os.environ.get('TRAINYARD_RESUME', '0')}"
        f" restart_count={os.environ.get('TRAINYARD_RESTART_COUNT', '0')}")
    if os.environ.get("TRAINYARD_CHECKPOINT_PERSISTENT") == "0" and ranks.rank == 0:
        log("warning: the checkpoint directory is not a volume; a preemption loses it")

    step = load_latest(directory, model, optimizer, ranks.device)  # every rank loads
    if step == 0 and os.environ.get("TRAINYARD_RESUME") == "1":
        log("TRAINYARD_RESUME=1 but there is no checkpoint: starting from step 0")
    if step == 0:
        log("starting from step 0")
    loss_fn = nn.MSELoss()
    last_save = time.monotonic()
    loss = torch.tensor(0.0)
    progress = Progress(ranks.rank, step, args.steps, args.progress_interval)
    progress.report(step, None, force=True)
    while step < args.steps:
        x, y = batch(step, ranks.rank, args, ranks.device)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        step += 1
        if args.step_seconds:
            time.sleep(args.step_seconds)
        due = ranks.rank == 0 and time.monotonic() - last_save >= args.checkpoint_interval
        stopping, saving = ranks.any_of(bool(stop["signal"]), due)
        if stopping or saving:
            if ranks.rank == 0:
                save(directory, step, model, optimizer, args.keep,
                     "signal" if stopping else "interval")
            ranks.barrier()  # nobody exits (or runs ahead) before the checkpoint is written
            last_save = time.monotonic()
        if stopping:
            log(f"stopped at step {step} of {args.steps}; exiting with {SIGTERM_EXIT} "
                "to be resumed from the checkpoint")
            ranks.close()
            return SIGTERM_EXIT
        if step % 100 == 0 and ranks.rank == 0:
            log(f"step {step} loss {loss.item():.6f}")
        if ranks.rank == 0 and time.monotonic() - progress.last >= args.progress_interval:
            progress.report(step, loss.item())
    if ranks.rank == 0 and (not checkpoints(directory) or checkpoints(directory)[0][0] != step):
        save(directory, step, model, optimizer, args.keep, "final")
    ranks.barrier()
    progress.report(step, loss.item(), force=True)
    log(f"finished at step {step} loss {loss.item():.6f}")
    ranks.close()
    return 0


if __name__ == "__main__":
    code = main()
    # Leave without the interpreter's teardown: torch's gloo threads can still be joinable
    # when C++ static destructors run, and abort a rank that finished cleanly ("terminate
    # called without an active exception", seen in a full test run here after the
    # barrier and destroy_process_group): a job trained to its end would exit 134 and be
    # marked failed. Everything is written and flushed by now.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
