"""Simulated container logs: the pod's ``kubesim.trainyard.io/log`` annotation, then what a
torchrun training script prints, derived from the container's run (deterministic for a
seed): the rank banner, a resume line when it starts from a checkpoint, steps with a
falling loss and a throughput, epoch ends, checkpoint saves, and how it ended.

Each line is timed on the cluster's (wall) clock, as the kubelet stamps what a container
writes (``timestamps=true``); the lines themselves carry no time of their own, as a script
that prints with ``print()`` writes none. The script's progress is simulated time: a step
line every 30 simulated seconds, a checkpoint every ``TRAINYARD_CHECKPOINT_INTERVAL_SECONDS``
simulated seconds, so at the clock's ``speed`` 60 a line comes every half second.

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

import math
import random
from dataclasses import dataclass

from kubesim.sim.util import ann, parse_time, stable_hash

STEP_SECONDS = 30.0  # one progress line per 30 s of simulated run time
STEPS_PER_LINE = 50
STEPS_PER_EPOCH = 2000
MAX_PROGRESS_LINES = 3000  # the newest lines of a very long run (a real log rotates too)
DEFAULT_CHECKPOINT_SECONDS = 600.0


class LogUnavailable(Exception):
    """The kubelet cannot serve this log (HTTP 400 from the API server)."""


@dataclass
class ContainerLog:
    lines: list[tuple[float, str]]  # (time, text) in order
    running: bool  # more lines may come (follow keeps the stream open)


def _env(pod: dict, container: str) -> dict[str, str]:
    for c in (pod.get("spec") or {}).get("containers") or []:
        if c.get("name") == container:
            return {e.get("name"): str(e.get("value", "")) for e in c.get("env") or []
                    if "value" in e}
    return {}


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
    prev: dict = {}
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
    rank = int(_float(env.get("RANK"), 0))
    world = int(_float(env.get("WORLD_SIZE"), 1))
    every = max(STEP_SECONDS, _float(env.get("TRAINYARD_CHECKPOINT_INTERVAL_SECONDS"),
                                     DEFAULT_CHECKPOINT_SECONDS))
    ckpt_dir = env.get("TRAINYARD_CHECKPOINT_DIR") or "/checkpoints"
    rng0 = random.Random(stable_hash(sim.seed, info.uid, "resume"))
    pod_restarts = int(_float(env.get("TRAINYARD_RESTART_COUNT"), 0))
    # a pod recreated after preemption resumes from the checkpoint its predecessor left
    pod_base = pod_restarts * rng0.randint(4, 40) * STEPS_PER_LINE if pod_restarts else 0

    now = sim.now()
    speed = sim.kubelet.speed  # simulated seconds of the script per second of the clock
    assert run is not None  # not started raised above
    if previous:
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

    rng = random.Random(stable_hash(sim.seed, info.uid, "loss", rank))
    loss0 = rng.uniform(2.5, 4.0)
    rate = rng.uniform(180.0, 260.0) * max(1, len(gpus))
    stop = deleting if deleting is not None and deleting < end else end
    count = int(max(0.0, stop - start) * speed // STEP_SECONDS)
    first = max(1, count - MAX_PROGRESS_LINES + 1)
    if first > 1:
        lines.append((start, f"{tag} ... (earlier steps rotated out)"))
    step = base
    for i in range(first, count + 1):
        t = start + i * STEP_SECONDS / speed
        step = base + i * STEPS_PER_LINE
        noise = random.Random(stable_hash(sim.seed, info.uid, rank, step))
        loss = 0.35 + loss0 * math.exp(-step / 4000.0) + noise.uniform(-0.04, 0.04)
        lr = 3e-4 * 0.5 * (1 + math.cos(math.pi * min(1.0, step / 200000.0)))
        epoch = step // STEPS_PER_EPOCH + 1
        lines.append((t, f"{tag} epoch {epoch} step {step} loss={loss:.4f} "
                      f"lr={lr:.2e} throughput={rate * noise.uniform(0.93, 1.05):.0f} "
                      "samples/s"))
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
