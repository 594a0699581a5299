"""Kueue mode's ETA accuracy benchmark's code path on a tiny input (the benchmark itself:
bench/eta_accuracy_kueue.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from core.tests.scripts import load_script

BENCH = Path(__file__).resolve().parents[2] / "bench" / "eta_accuracy_kueue.py"


def test_the_kueue_eta_benchmark_scores_kueue_mode_against_kueue_admissions():
    bench = load_script(BENCH, "eta_accuracy_kueue")
    workload = bench.base.make_workload(2, 200, 7)
    assert len(workload) > 10
    run = bench.run_kueue(workload, 7)
    # Kueue admitted every job, and each start is an admission after the job's arrival
    assert run.unstarted == 0 and run.passes > 0
    arrivals = {a.id: a.at for a in workload}
    assert all(s >= arrivals[job] for job, starts in run.starts.items() for s in starts)
    # some jobs waited, and Kueue mode predicted their starts: p90 never before p50
    assert run.kueue and all(p.p90 >= p.p50 >= p.at - 1e-6 for p in run.kueue)
    assert any(p.first for p in run.kueue)
    # each predicted job had its place in Kueue's queue from the visibility API
    assert run.positioned == len(run.kueue)
    figures = bench.figures(run, bench.base.replay(workload, 7))
    for name in ("Kueue mode, every pass", "naive vs Kueue, every pass", "engine, every pass"):
        f = figures[name]
        assert f["n"] > 0 and 0 <= f["coverage"] <= 1 and not math.isnan(f["mae"])
        assert f["relative"] == f["mae"] / f["wait"] and f["wait"] > 0


def test_the_kueue_bench_uses_trainyards_kueue_objects_for_the_demo_grants():
    bench = load_script(BENCH, "eta_accuracy_kueue")
    objects = bench.kueue_objects()
    queues = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ClusterQueue"}
    # a queue and a batch queue per pool of seed_demo's grants
    pools = sum(len(p) for p in bench.base.QUOTA.values())
    assert len(queues) == 2 * pools
    assert any(o["kind"] == "Topology" for o in objects)
    batch = [q for name, q in queues.items() if name.endswith("-batch")]
    assert all(q["spec"]["preemption"]["reclaimWithinCohort"] == "Never" for q in batch)


def test_a_run_kueue_preempts_resumes_with_what_it_had_left():
    """The cluster's A100s full of batch and development work; a production job within its
    queue's nominal quota makes Kueue reclaim a batch job, which resumes later and runs
    only its remainder (as the engine's replay does)."""
    bench = load_script(BENCH, "eta_accuracy_kueue")
    arrival, a100 = bench.base.Arrival, bench.base.A100
    workload: list = []

    def add(at, tenant, pool, tier, template, replicas, per, run=3600.0):
        workload.append(arrival(len(workload) + 1, at, tenant, pool, tier, template, a100,
                                replicas, per, run, None))

    for tenant, pool, n in (("nlp", "prod", 3), ("nlp", "dev", 1), ("vision", "dev", 1),
                            ("speech", "prod", 1)):
        for _ in range(n):
            add(0.0, tenant, pool, "batch", "ddp-8gpu", 1, 8)
    add(0.0, "vision", "dev", "development", "ddp-8gpu", 1, 8)
    add(0.0, "nlp", "dev", "development", "ddp-8gpu", 1, 8)
    for _ in range(8):
        add(1.0, "nlp", "prod", "production", "finetune-1gpu", 1, 1)
    add(600.0, "speech", "prod", "production", "ddp-8gpu", 1, 8)
    run = bench.run_kueue(workload, 1)
    assert run.evictions == 1 and run.unstarted == 0
    evicted = next(job for job, starts in run.starts.items() if len(starts) == 2)
    assert workload[evicted - 1].tier == "batch"
    assert run.starts[len(workload)][0] >= 600   # the production job, after the grace
    first, again = run.starts[evicted]
    held = run.starts[len(workload)][0] - first   # it ran until its quota was released
    assert run.finished[evicted] - again == pytest.approx(3600 - held, abs=1)
