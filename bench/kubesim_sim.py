"""Benchmark of the kubesim simulation: schedule and run N pods on a large GPU cluster.

In-process Store + Simulation on a deterministic clock advanced in fixed steps
(no HTTP).  Prints figures; never asserts timings.

    .venv/bin/python bench/kubesim_sim.py [--nodes 500] [--pods 5000] [--step 5] [--kueue]

``--kueue`` submits the jobs suspended to Kueue (sim/kueue.py): a ClusterQueue per team in
one cohort, each with a tenth of the GPUs as nominal quota and borrowing the rest.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubesim.clock import Clock
from kubesim.sim import Simulation, load_profile
from kubesim.store import Store

PYTORCHJOBS = "pytorchjobs.kubeflow.org"


def profile(nodes: int, kubelet_events: bool = True) -> dict:
    """Profile "large" (400 A100 + 100 H800 nodes) for the default 500 nodes, else scaled."""
    prof = load_profile("large")
    if nodes != 500:
        a100 = nodes * 4 // 5
        prof["pools"][0]["count"] = a100
        prof["pools"][1]["count"] = nodes - a100
    prof["simulation"].update(startup_seconds=2, run_seconds=600, kubelet_events=kubelet_events)
    return prof


def job(name: str, ns: str, workers: int, gpus: int, product: str, run: int) -> dict:
    tmpl = {
        "metadata": {"annotations": {"kubesim.trainyard.io/run-seconds": str(run)}},
        "spec": {
            "nodeSelector": {"nvidia.com/gpu.product": product},
            "terminationGracePeriodSeconds": 30,
            "containers": [
                {
                    "name": "pytorch",
                    "image": "registry.example/train:1",
                    "resources": {
                        "limits": {"nvidia.com/gpu": str(gpus), "cpu": "8", "memory": "64Gi"}
                    },
                }
            ],
        },
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": tmpl},
                "Worker": {"replicas": workers, "template": tmpl},
            }
        },
    }


def kueue_queues(store: Store, namespaces: list[str], sim: Simulation) -> None:
    """Flavors per GPU model, a ClusterQueue per namespace (a tenth of each model as nominal
    quota, cohort ``all``), a LocalQueue ``q`` in each namespace."""
    k = "kueue.x-k8s.io"
    gpus: dict[str, int] = {}
    for n in store.list("nodes"):
        product = n["metadata"]["labels"].get("nvidia.com/gpu.product")
        if product:
            gpus[product] = gpus.get(product, 0) + int(n["status"]["capacity"]["nvidia.com/gpu"])
    flavors = {p: p.lower().replace("_", "-") for p in gpus}
    store.create(f"resourceflavors.{k}", {"apiVersion": f"{k}/v1beta2", "kind": "ResourceFlavor",
                                          "metadata": {"name": "default"}, "spec": {}})
    for product, name in flavors.items():
        store.create(f"resourceflavors.{k}", {
            "apiVersion": f"{k}/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name},
            "spec": {"nodeLabels": {"nvidia.com/gpu.product": product}}})
    for ns in namespaces:
        store.create(f"clusterqueues.{k}", {
            "apiVersion": f"{k}/v1beta2", "kind": "ClusterQueue", "metadata": {"name": ns},
            "spec": {"cohortName": "all", "namespaceSelector": {},
                     "preemption": {"reclaimWithinCohort": "Any"},
                     "resourceGroups": [
                         {"coveredResources": ["cpu", "memory"], "flavors": [{
                             "name": "default", "resources": [
                                 {"name": "cpu", "nominalQuota": 100000},
                                 {"name": "memory", "nominalQuota": "1000Ti"}]}]},
                         {"coveredResources": ["nvidia.com/gpu"], "flavors": [
                             {"name": flavors[p], "resources": [
                                 {"name": "nvidia.com/gpu", "nominalQuota": n // len(namespaces)}]}
                             for p, n in sorted(gpus.items())]}]}})
        store.create(f"localqueues.{k}", {
            "apiVersion": f"{k}/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "q", "namespace": ns}, "spec": {"clusterQueue": ns}})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--step", type=float, default=5.0, help="simulated seconds per tick")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--no-kubelet-events",
        action="store_true",
        help="skip the kubelet's Created/Started/Killing events (fewer store writes)",
    )
    ap.add_argument("--kueue", action="store_true",
                    help="submit through kubesim's Kueue controller (queues per team)")
    args = ap.parse_args()

    clock = Clock(deterministic=True)
    store = Store(clock)
    store_time = {"s": 0.0, "n": 0}
    for meth in ("create", "patch", "delete"):
        orig = getattr(store, meth)

        def timed(*a, _orig=orig, **kw):
            t = time.perf_counter()
            try:
                return _orig(*a, **kw)
            finally:
                store_time["s"] += time.perf_counter() - t
                store_time["n"] += 1

        setattr(store, meth, timed)
    t0 = time.perf_counter()
    sim = Simulation(store, profile=profile(args.nodes, not args.no_kubelet_events), seed=args.seed)
    sim.bootstrap()
    t_boot = time.perf_counter() - t0
    gpus = sum(int(n["status"]["capacity"].get("nvidia.com/gpu", 0)) for n in store.list("nodes"))
    print(f"cluster: {args.nodes} nodes, {gpus} GPUs; bootstrap {t_boot * 1000:.0f} ms")

    # idle tick
    for _ in range(5):
        clock.advance(1)
        sim.tick()
    idle = []
    for _ in range(200):
        clock.advance(1)
        s = time.perf_counter()
        sim.tick()
        idle.append(time.perf_counter() - s)
    print(f"idle tick: median {statistics.median(idle) * 1e6:.1f} µs, max {max(idle) * 1e6:.1f} µs")

    rng = random.Random(args.seed)
    namespaces = [f"team-{i}" for i in range(10)]
    for ns in namespaces:
        store.create(
            "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        )
    if args.kueue:
        kueue_queues(store, namespaces, sim)
    pods_per_job = 4
    n_jobs = args.pods // pods_per_job
    t_create = time.perf_counter()
    for i in range(n_jobs):
        product = "NVIDIA-A100-SXM4-80GB" if i % 5 else "NVIDIA-H800"
        body = job(f"job-{i}", namespaces[i % len(namespaces)], pods_per_job - 1,
                   rng.choice([1, 2, 4, 8]), product, rng.randint(300, 1800))
        if args.kueue:
            body["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "q"}
            body["spec"]["runPolicy"] = {"suspend": True}
        store.create(PYTORCHJOBS, body, namespace=namespaces[i % len(namespaces)])
    t_create = time.perf_counter() - t_create
    print(
        f"created {n_jobs} PyTorchJobs ({n_jobs * pods_per_job} pods) in the store: "
        f"{t_create:.2f} s"
    )

    busy = []
    store_time.update(s=0.0, n=0)
    t_run = time.perf_counter()
    sim_seconds = 0.0
    first_all_bound = None
    done = 0
    while True:
        clock.advance(args.step)
        sim_seconds += args.step
        s = time.perf_counter()
        sim.tick()
        busy.append(time.perf_counter() - s)
        if int(sim_seconds) % 60 == 0:
            done = sum(
                1
                for j in sim.state.jobs.values()
                if any(
                    c.get("type") == "Succeeded" and c.get("status") == "True"
                    for c in (j.get("status") or {}).get("conditions") or []
                )
            )
            if first_all_bound is None and sim.scheduler.binds >= n_jobs * pods_per_job \
                    and not args.kueue:
                first_all_bound = time.perf_counter() - t_run
            if done == n_jobs:
                break
            if sim_seconds > 7 * 24 * 3600:
                print("gave up after a simulated week")
                break
    wall = time.perf_counter() - t_run
    busy_sorted = sorted(busy)
    print(
        f"all {done}/{n_jobs} jobs succeeded: {sim_seconds / 3600:.1f} simulated hours "
        f"in {wall:.2f} s wall "
        f"({len(busy)} ticks of {args.step:g} s; speed-up {sim_seconds / wall:,.0f}x)"
    )
    if first_all_bound is not None:
        print(f"all {n_jobs * pods_per_job} pods bound after {first_all_bound:.2f} s wall")
    print(
        f"pods bound {sim.scheduler.binds}, scheduling attempts {sim.scheduler.attempts}, "
        f"pods created by the operator {sim.operator.created}, events written {sim.events.written}"
    )
    print(
        f"busy tick: median {statistics.median(busy) * 1e3:.2f} ms, "
        f"p95 {busy_sorted[int(len(busy) * 0.95)] * 1e3:.2f} ms, "
        f"max {busy_sorted[-1] * 1e3:.1f} ms"
    )
    print(
        "time per controller (including their store writes): "
        + ", ".join(f"{k} {v:.2f} s" for k, v in sim.timings.items())
    )
    if args.kueue:
        print(f"kueue: {sim.kueue.reconciles} passes, "
              f"{sim.timings.get('kueue', 0.0) / max(1, sim.kueue.reconciles) * 1e3:.2f} ms each")
    print(
        f"store writes during the run: {store_time['n']} taking {store_time['s']:.2f} s "
        f"({store_time['s'] / max(1, store_time['n']) * 1e6:.0f} µs each); "
        f"simulation's own work {wall - store_time['s']:.2f} s"
    )
    s = time.perf_counter()
    txt = sim.metrics_text()
    print(
        f"metrics_text: {len(txt.splitlines())} lines in {(time.perf_counter() - s) * 1e3:.1f} ms"
    )


if __name__ == "__main__":
    main()
