"""Simulated container logs: the pod's kubesim.trainyard.io/log annotation, then training-like
progress lines derived from the run's elapsed time (deterministic for a seed)."""

from __future__ import annotations

import math
import random

from kubesim.sim.util import ann, fmt_time, stable_hash

STEP_SECONDS = 30.0
MAX_LINES = 500


def pod_log(sim, namespace: str, name: str, container: str | None = None) -> str:
    info = sim.state.pods.get((namespace, name))
    if info is None:
        return ""
    pod = info.obj
    containers = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
    main = containers[0] if containers else "main"
    container = container or main
    lines: list[str] = []
    custom = ann(pod, "log")
    if custom:
        lines.extend(custom.splitlines())
    run = sim.kubelet.runs.get((namespace, name))
    if run is None or run.uid != info.uid or not run.started:
        return "\n".join(lines) + ("\n" if lines else "")
    node = (pod.get("spec") or {}).get("nodeName", "")
    gpus = ",".join(str(d["gpu"]) for d in sim.gpu_assignment(namespace, name))
    lines.append(
        f"{fmt_time(run.run_started)} [kubesim] container {container} started on {node}"
        + (f" (GPUs {gpus})" if gpus else "")
    )
    if container == main:
        env = {}
        for c in (pod.get("spec") or {}).get("containers") or []:
            if c.get("name") == container:
                env = {e.get("name"): e.get("value") for e in c.get("env") or []}
        if "WORLD_SIZE" in env:
            lines.append(
                f"{fmt_time(run.run_started)} [rank {env.get('RANK', '0')}] "
                f"MASTER_ADDR={env.get('MASTER_ADDR')} MASTER_PORT={env.get('MASTER_PORT')} "
                f"WORLD_SIZE={env.get('WORLD_SIZE')}"
            )
        end = run.finished if run.phase in ("Succeeded", "Failed") else sim.now()
        elapsed = max(0.0, end - run.run_started)
        rng = random.Random(stable_hash(sim.seed, info.uid, "loss"))
        loss0 = rng.uniform(2.5, 4.0)
        steps = int(elapsed // STEP_SECONDS)
        first = max(1, steps - MAX_LINES + 1)
        for i in range(first, steps + 1):
            loss = loss0 * math.exp(-i / 200.0) + rng.uniform(0.0, 0.05)
            lines.append(
                f"{fmt_time(run.run_started + i * STEP_SECONDS)} step {i * 100} "
                f"loss={loss:.4f} throughput={rng.uniform(900, 1100):.0f} samples/s"
            )
    if run.phase in ("Succeeded", "Failed") and run.finished:
        lines.append(
            f"{fmt_time(run.finished)} [kubesim] container {container} exited "
            f"({'Completed' if run.phase == 'Succeeded' else 'Error'})"
        )
    return "\n".join(lines) + "\n"
