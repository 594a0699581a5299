"""Same answers, less CPU: one deterministic workload through kubesim's store and simulation
(no HTTP), run against any checkout of ``kubesim/``, printing a digest of every stored object
and of every watch event (type and object, in order) beside the CPU seconds.

Two checkouts that give the same digests answered the same; their CPU seconds compare the
cost of the same work (200 PyTorchJobs of 3 pods under ResourceQuotas, the operator, the
scheduler, the kubelet and events on a 40-node cluster, 2,000 simulated seconds)::

    git archive <old commit> kubesim | tar -x -C /tmp/old
    .venv/bin/python bench/kubesim_differential.py /tmp/old
    .venv/bin/python bench/kubesim_differential.py .
"""
from __future__ import annotations

import hashlib
import json
import random
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import kubesim
from kubesim.clock import Clock
from kubesim.sim import Simulation
from kubesim.store import Store


def main() -> None:
    import kubesim_sim as ks  # after kubesim: it puts this checkout first on the path

    clock = Clock(deterministic=True, start=datetime(2026, 1, 1, tzinfo=UTC))
    store = Store(clock, seed=3)
    events: list = []
    store.subscribe_events(lambda e: events.append(
        (e[0], e[1], e[2].key, json.dumps(e[4], sort_keys=True))))
    sim = Simulation(store, profile=ks.profile(40), seed=1)
    sim.bootstrap()
    rng = random.Random(1)
    namespaces = [f"team-{i}" for i in range(4)]
    for ns in namespaces:
        store.create("namespaces", {"metadata": {"name": ns}})
        store.create("resourcequotas", {"metadata": {"name": "q", "namespace": ns}, "spec": {
            "hard": {"requests.nvidia.com/gpu": "1000", "limits.memory": "100Ti"}}})
    cpu = time.process_time()
    for i in range(200):
        body = ks.job(f"job-{i}", namespaces[i % 4], 2, rng.choice([1, 2, 4]),
                      "NVIDIA-A100-SXM4-80GB" if i % 5 else "NVIDIA-H800", rng.randint(60, 600))
        store.create(ks.PYTORCHJOBS, body, namespace=namespaces[i % 4])
        if i % 10 == 0:
            clock.advance(5)
            sim.tick()
    for _ in range(400):
        clock.advance(5)
        sim.tick()
    cpu = time.process_time() - cpu
    state = hashlib.sha256(json.dumps(store._data, sort_keys=True).encode()).hexdigest()[:16]
    history = hashlib.sha256(json.dumps(events).encode()).hexdigest()[:16]
    count = sum(len(b) for v in store._data.values() for b in v.values())
    print(f"kubesim from {Path(kubesim.__file__).parent}: {count} objects, state {state}; "
          f"{len(events)} watch events, {history}; CPU {cpu:.2f} s")


if __name__ == "__main__":
    main()
