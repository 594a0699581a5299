"""Simulated container logs: the pod's ``kubesim.trainyard.io/log`` annotation, then what a
torchrun training script prints, derived from the container's run (deterministic for a
seed): the rank banner, a resume line when it starts from a checkpoint, steps with a
falling loss and a throughput, epoch ends, checkpoint saves, and how it ended.

Each line is timed on the cluster's (wall) clock, as the kubelet stamps what a container
writes (``timestamps=true``); the lines themselves carry no time of their own, as a script
that prints with ``print()`` writes none. The script's progress is simulated time: a step
line every 30 simulated seconds, a checkpoint every ``TRAINYARD_CHECKPOINT_INTERVAL_SECONDS``
simulated seconds, so at the clock's ``speed`` 60 a line comes every half second.

Rank 0 also prints Trainyard's progress line (``TRAINYARD_PROGRESS {json}``, the format
of ``examples/train_resumable.py`` and docs/guides/checkpoints.md) at its start and with
every step line: the share of its steps done, the seconds left, the step and the loss.
:func:`run_progress` is that report at a given time (the Trainer controller's
``status.trainerStatus`` says the same, ``kubesim/sim/trainjob.py``).

The run's length is the kubelet's plan (``Kubelet.run_seconds``: what the pod's
annotation, its ``KUBESIM_RUN_SECONDS`` or the profile says a successful run lasts, in
simulated seconds, so ``run_seconds / speed`` on the clock), so the remaining time reported
(clock seconds) is when the container will in fact finish (unless it fails first).

One container *instance* is one run of the container: the current one, or with
``previous`` the one before the kubelet's last in-place restart (which the current one
resumes from, at its last checkpoint). A pod recreated after preemption
(``TRAINYARD_RESTART_COUNT`` > 0) resumes too. :func:`container_log` returns timed lines;
the API server (``kubesim/server.py``) applies ``sinceSeconds``/``sinceTime``,
``tailLines``, ``timestamps``, ``limitBytes`` and ``follow``. What the kubelet refuses
(no previous container, a container not started) raises :class:`LogUnavailable` with the
kubelet's words (pkg/kubelet/kubelet_pods.go ``validateContainerLogStatus``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import re
from dataclasses import dataclass

from kubesim.sim.util import ann, parse_time, stable_hash

STEP_SECONDS = 30.0  # one progress line per 30 s of simulated run time
STEPS_PER_LINE = 50
STEPS_PER_EPOCH = 2000
MAX_PROGRESS_LINES = 3000  # the newest lines of a very long run (a real log rotates too)
DEFAULT_CHECKPOINT_SECONDS = 600.0
PROGRESS_MARKER = "TRAINYARD_PROGRESS"  # the progress line's marker (docs/guides/checkpoints.md)


class LogUnavailable(Exception):
    """The kubelet cannot serve this log (HTTP 400 from the API server)."""


@dataclass
class ContainerLog:
    lines: list[tuple[float, str]]  # (time, text) in order
    running: bool  # more lines may come (follow keeps the stream open)


def _env(pod: dict, container: str) -> dict[str, str]:
    """The container's variables with a value, and those read from the pod's own labels or
    annotations (``fieldRef``, as Trainer's ``PET_NODE_RANK``)."""
    md = pod.get("metadata") or {}
    for c in (pod.get("spec") or {}).get("containers") or []:
        if c.get("name") == container:
            out = {}
            for e in c.get("env") or []:
                if "value" in e:
                    out[e.get("name")] = str(e.get("value", ""))
                    continue
                path = ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath", "")
                found = _FIELD_PATH.fullmatch(path)
                if found is not None:
                    value = (md.get(found.group(1)) or {}).get(found.group(2))
                    if value is not None:
                        out[e.get("name")] = str(value)
            return out
    return {}


_FIELD_PATH = re.compile(r"metadata\.(labels|annotations)\['([^']+)'\]")


def _rank(env: dict[str, str], gpus: int) -> int:
    """The global rank of the pod's first process: ``RANK`` (the training operator's), else
    torchrun's from ``PET_NODE_RANK`` x ``PET_NPROC_PER_NODE`` (``auto``: one per GPU)."""
    if "RANK" in env:
        return int(_float(env.get("RANK"), 0))
    node = int(_float(env.get("PET_NODE_RANK"), 0))
    nproc = env.get("PET_NPROC_PER_NODE", "1")
    per = int(nproc) if nproc.isdigit() else max(1, gpus)
    return node * per


def _float(value: str | None, default: float) -> float:
    try:
        return float(value) if value else default
    except ValueError:
        return default


def _checkpoint_step(base: int, start: float, end: float, every: float,
                     speed: float = 1.0) -> int:
    """The step of the last checkpoint an instance saved between ``start`` and ``end``
    (clock times; the script's ``every`` is simulated seconds)."""
    saves = int(max(0.0, end - start) * speed // every)
    lines = int(saves * every // STEP_SECONDS)
    return base + lines * STEPS_PER_LINE if saves else base


@dataclass(frozen=True)
class Progress:
    """What the training script's rank 0 reports at ``at``: ``TRAINYARD_PROGRESS``."""

    at: float
    percent: float
    remaining_seconds: int
    step: int
    total_steps: int
    loss: float | None
    next_at: float | None = None
    """When the next report is due (None: the run ended or stopped)."""

    def line(self) -> str:
        """The progress line as the script prints it (one JSON object after the marker)."""
        body: dict = {"percent": self.percent, "remaining_seconds": self.remaining_seconds,
                      "step": self.step, "total_steps": self.total_steps}
        if self.loss is not None:
            body["metrics"] = {"loss": round(self.loss, 4)}
        return f"{PROGRESS_MARKER} {json.dumps(body)}"


@dataclass(frozen=True)
class _Instance:
    """One run of a pod's main container, as its log tells it."""

    uid: str
    rank: int
    start: float
    end: float  # when it ended, else now
    stop: float  # where its step lines stop: a SIGTERM's time, else ``end``
    base: int  # the step it starts from (a resume)
    running: bool
    deleting: float | None
    exit_code: int
    planned: float  # how long a successful run lasts (the kubelet's plan), simulated seconds
    speed: float  # simulated seconds of the script per second of the clock
    loss0: float
    rate: float  # samples a second of one GPU

    @property
    def count(self) -> int:
        """Step lines printed so far."""
        return int(max(0.0, self.stop - self.start) * self.speed // STEP_SECONDS)

    def line_time(self, i: int) -> float:
        """When step line ``i`` is printed (the clock's time)."""
        return self.start + i * STEP_SECONDS / self.speed

    def noise(self, seed: int, step: int) -> random.Random:
        """The step's noise: the loss's first draw, the throughput's second."""
        return random.Random(stable_hash(seed, self.uid, self.rank, step))

    def loss(self, seed: int, step: int, noise: random.Random | None = None) -> float:
        noise = noise or self.noise(seed, step)
        return 0.35 + self.loss0 * math.exp(-step / 4000.0) + noise.uniform(-0.04, 0.04)

    def progress(self, seed: int, i: int) -> Progress:
        """The report printed with step line ``i`` (0: at the start, before any step)."""
        step = self.base + i * STEPS_PER_LINE
        total = self.base + self.planned / STEP_SECONDS * STEPS_PER_LINE
        percent = 100.0 if total <= 0 else min(100.0, 100.0 * step / total)
        at = self.line_time(i)
        end = self.start + self.planned / self.speed
        return Progress(at=at, percent=round(percent, 1),
                        remaining_seconds=round(max(0.0, end - at)),
                        step=step, total_steps=max(round(total), step),
                        loss=self.loss(seed, step) if i else None)

    def finished(self, seed: int) -> Progress:
        """The last report of a run that succeeded: all done."""
        step = self.base + self.count * STEPS_PER_LINE
        return Progress(at=self.end, percent=100.0, remaining_seconds=0, step=step,
                        total_steps=step, loss=self.loss(seed, step) if self.count else None)


def _instance(sim, info, run, env: dict[str, str], *, is_main: bool,
              previous: bool) -> _Instance:
    """The container instance a log (or a progress report) is about: the current one, or
    with ``previous`` the one before the last in-place restart."""
    rank = _rank(env, len(sim.gpu_assignment(*info.key)))
    every = max(STEP_SECONDS, _float(env.get("TRAINYARD_CHECKPOINT_INTERVAL_SECONDS"),
                                     DEFAULT_CHECKPOINT_SECONDS))
    rng0 = random.Random(stable_hash(sim.seed, info.uid, "resume"))
    pod_restarts = int(_float(env.get("TRAINYARD_RESTART_COUNT"), 0))
    # a pod recreated after preemption resumes from the checkpoint its predecessor left
    pod_base = pod_restarts * rng0.randint(4, 40) * STEPS_PER_LINE if pod_restarts else 0
    now = sim.now()
    speed = sim.kubelet.speed  # simulated seconds of the script per second of the clock
    deleting: float | None
    if previous:
        prev = run.prev_term or {}
        start = parse_time(prev.get("startedAt")) or run.started
        end = parse_time(prev.get("finishedAt")) or start
        exit_code = int(prev.get("exitCode") or 0)
        instance, running, deleting = run.restarts - 1, False, None
    else:
        start = run.run_started or run.started
        done = run.phase in ("Succeeded", "Failed")
        end = run.finished if done and run.finished else now
        exit_code = 0 if run.phase == "Succeeded" else 1
        instance, running, deleting = run.restarts, not done, run.deleting_since
        if done and run.last_term is not None:
            exit_code = int(run.last_term.get("exitCode") or exit_code)
    # Each in-place restart resumes from the last checkpoint of the instance before it. Only
    # the latest ends are known; an older instance is taken to have run as long as the last.
    base = pod_base
    if is_main and instance:
        prev_term = run.prev_term or {}
        p_start = parse_time(prev_term.get("startedAt")) or start
        p_end = parse_time(prev_term.get("finishedAt")) or p_start
        older = pod_base
        for _ in range(instance - 1):
            older = _checkpoint_step(older, p_start, p_end, every, speed)
        base = older if previous else _checkpoint_step(older, p_start, p_end, every, speed)
    rng = random.Random(stable_hash(sim.seed, info.uid, "loss", rank))
    loss0 = rng.uniform(2.5, 4.0)
    return _Instance(uid=info.uid, rank=rank, start=start, end=end,
                     stop=deleting if deleting is not None and deleting < end else end,
                     base=base, running=running, deleting=deleting, exit_code=exit_code,
                     planned=sim.kubelet.run_seconds(info.obj), speed=speed, loss0=loss0,
                     rate=rng.uniform(180.0, 260.0))


def run_progress(sim, namespace: str, name: str, *, reports: int = 0) -> Progress | None:
    """The last progress report the pod's training script printed by now (its current
    container; rank 0 only, as the script): None when the container has not started, or
    the pod is not rank 0. A run that succeeded reports 100%. ``reports``: report only
    every few step lines, about that many times in a whole run (as a client that throttles
    its reports; 0: every line)."""
    info = sim.state.pods.get((namespace, name))
    if info is None:
        return None
    run = sim.kubelet.runs.get((namespace, name))
    if run is None or run.uid != info.uid or not run.started:
        return None
    names = [c.get("name") for c in (info.obj.get("spec") or {}).get("containers") or []]
    env = _env(info.obj, names[0] if names else "main")
    inst = _instance(sim, info, run, env, is_main=True, previous=False)
    if inst.rank != 0:
        return None
    if not inst.running and inst.deleting is None and inst.exit_code == 0:
        return inst.finished(sim.seed)
    every = max(1, round(inst.planned / STEP_SECONDS / reports)) if reports > 0 else 1
    last = inst.count // every * every
    found = inst.progress(sim.seed, last)
    if inst.running and inst.deleting is None:
        return dataclasses.replace(found, next_at=inst.line_time(last + every))
    return found


def container_log(sim, namespace: str, name: str, container: str, *,
                  previous: bool = False) -> ContainerLog:
    info = sim.state.pods.get((namespace, name))
    if info is None:
        return ContainerLog([], False)
    pod = info.obj
    names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
    main = names[0] if names else "main"
    run = sim.kubelet.runs.get((namespace, name))
    if run is not None and run.uid != info.uid:
        run = None
    is_main = container == main
    if previous:
        prev = (run.prev_term if (run is not None and is_main and run.restarts) else None) or {}
        if not prev.get("containerID"):
            raise LogUnavailable(
                f'previous terminated container "{container}" in pod "{name}" not found')
    if run is None or not run.started:
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        waiting = next(((cs.get("state") or {}).get("waiting") or {} for cs in statuses
                        if cs.get("name") == container), {})
        reason = waiting.get("reason") or "ContainerCreating"
        text = {"ErrImagePull": "image can't be pulled",
                "ImagePullBackOff": "trying and failing to pull image"}.get(reason, reason)
        raise LogUnavailable(f'container "{container}" in pod "{name}" is waiting to start: '
                             f"{text}")
    env = _env(pod, main)
    world = int(_float(env.get("WORLD_SIZE"), 1))
    every = max(STEP_SECONDS, _float(env.get("TRAINYARD_CHECKPOINT_INTERVAL_SECONDS"),
                                     DEFAULT_CHECKPOINT_SECONDS))
    ckpt_dir = env.get("TRAINYARD_CHECKPOINT_DIR") or "/checkpoints"
    inst = _instance(sim, info, run, env, is_main=is_main, previous=previous)
    rank, start, end, base = inst.rank, inst.start, inst.end, inst.base
    running, deleting, exit_code = inst.running, inst.deleting, inst.exit_code

    lines: list[tuple[float, str]] = []
    custom = ann(pod, "log")
    if custom:
        lines.extend((start, line) for line in custom.splitlines())
    node = (pod.get("spec") or {}).get("nodeName", "")
    gpus = sim.gpu_assignment(namespace, name)
    gpu_list = ",".join(str(d["gpu"]) for d in gpus)
    lines.append((start, f"[kubesim] container {container} started on {node}"
                  + (f" (GPUs {gpu_list})" if gpu_list else "")))
    if not is_main:
        return ContainerLog(lines, running)
    tag = f"[rank {rank}]"
    reports = rank == 0  # the progress line: rank 0 only, as the example script
    if "WORLD_SIZE" in env:
        lines.append((start, f"{tag} torchrun: MASTER_ADDR="
                      f"{env.get('MASTER_ADDR')} MASTER_PORT={env.get('MASTER_PORT')} "
                      f"WORLD_SIZE={world} RANK={rank} LOCAL_WORLD_SIZE={max(1, len(gpus))}"))
    lines.append((start, f"{tag} initialised process group "
                  f"(backend {'nccl' if gpus else 'gloo'}); checkpoints in {ckpt_dir}"))
    if base:
        lines.append((start, f"{tag} resumed from step {base} "
                      f"({ckpt_dir}/step-{base}.pt)"))
    else:
        lines.append((start, f"{tag} no checkpoint found: starting at step 0"))
    if reports:
        lines.append((start, f"{tag} {inst.progress(sim.seed, 0).line()}"))

    rate = inst.rate * max(1, len(gpus))
    count = inst.count
    first = max(1, count - MAX_PROGRESS_LINES + 1)
    if first > 1:
        lines.append((start, f"{tag} ... (earlier steps rotated out)"))
    step = base
    for i in range(first, count + 1):
        t = inst.line_time(i)
        step = base + i * STEPS_PER_LINE
        noise = inst.noise(sim.seed, step)
        loss = inst.loss(sim.seed, step, noise)
        lr = 3e-4 * 0.5 * (1 + math.cos(math.pi * min(1.0, step / 200000.0)))
        epoch = step // STEPS_PER_EPOCH + 1
        lines.append((t, f"{tag} epoch {epoch} step {step} loss={loss:.4f} "
                      f"lr={lr:.2e} throughput={rate * noise.uniform(0.93, 1.05):.0f} "
                      "samples/s"))
        if reports:
            lines.append((t, f"{tag} {inst.progress(sim.seed, i).line()}"))
        if step % STEPS_PER_EPOCH == 0:
            lines.append((t, f"{tag} epoch {epoch - 1} finished at step {step}"))
        if int((i * STEP_SECONDS) // every) > int(((i - 1) * STEP_SECONDS) // every):
            lines.append((t, f"{tag} saved checkpoint step {step} to "
                          f"{ckpt_dir}/step-{step}.pt"))
    if deleting is not None and deleting <= end:
        lines.append((deleting, f"{tag} received SIGTERM: saving a "
                      f"checkpoint at step {step} before the grace period ends"))
        lines.append((deleting, f"{tag} saved checkpoint step {step} to "
                      f"{ckpt_dir}/step-{step}.pt"))
    elif not running:
        if exit_code == 0:
            if reports:
                lines.append((end, f"{tag} "
                              f"{inst.finished(sim.seed).line()}"))
            lines.append((end, f"{tag} training finished at step {step}"))
        else:
            lines.append((end, f"{tag} Traceback (most recent call last):"))
            lines.append((end, f"{tag} RuntimeError: CUDA error: an illegal "
                          "memory access was encountered"))
        word = "Completed" if exit_code == 0 else "Error"
        lines.append((end, f"[kubesim] container {container} exited "
                      f"({word}, exit code {exit_code})"))
    return ContainerLog(lines, running)


def pod_log(sim, namespace: str, name: str, container: str | None = None) -> str:
    """The current container's whole log as text ("" when there is none yet)."""
    info = sim.state.pods.get((namespace, name))
    if info is None:
        return ""
    names = [c.get("name") for c in (info.obj.get("spec") or {}).get("containers") or []]
    try:
        log = container_log(sim, namespace, name, container or (names[0] if names else "main"))
    except LogUnavailable:
        custom = ann(info.obj, "log")
        return custom + "\n" if custom else ""
    return "".join(text + "\n" for _t, text in log.lines)
