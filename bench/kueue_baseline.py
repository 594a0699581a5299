"""Kueue's published scheduler baseline, replayed against Trainyard's admission engine.

The scenario is kubernetes-sigs/kueue ``test/performance/scheduler/configs/baseline``:
5 independent capacity groups (here 5 GPU models of 120 GPUs, nodes of 8 GPUs, one
switch per model), 6 tenants per model with a nominal quota of 20 GPUs and a borrowing
ceiling of 100; per tenant 350 small jobs (1 GPU, 200 ms, priority 50, one every 100 ms),
100 medium (5 GPUs, 500 ms, priority 100, every 500 ms) and 50 large (20 GPUs, 1,000 ms,
priority 200, every 1,200 ms): 15,000 jobs.

Engine-alone mode (this script): a discrete-event loop on simulated time calls the
incremental engine (``jobs.admission.incremental.Engine.decide``, as the admission loop
does) at every instant something happens (arrivals and finishes
all fall on a 100 ms grid), applies its decisions at once (pods bind instantly, a
preempted job stops at once and is re-queued to run again from the start, as in Kueue's
test), and runs each admitted job for its run time. Prints the time to finish all jobs,
the mean use of the tenants' quota, the mean time to admission per class, the lower
bound (total work / capacity), the engine's speed (wall clock), and Kueue's published
averages beside them. The full recomputation (``jobs.admission.decide``) decides the same
inputs on every pass as the baseline: its time is printed beside the incremental
engine's, and its decisions must be the same (``--no-full``: the incremental engine
alone).

Reusable parts for a through-the-stack mode: ``make_workload()`` (the jobs and when they
arrive) and ``summarise()`` (figures from per-job ``Record`` s, which any runner can fill
in from the times it observes).

    .venv/bin/python bench/kueue_baseline.py [--quick] [--scale 0.2] [--no-full]
"""

from __future__ import annotations

import argparse
import heapq
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jobs.admission import (  # noqa: E402  (after the sys.path line, as a script)
    History,
    JobView,
    NodeView,
    Policy,
    PoolQuota,
    decide,
)
from jobs.admission.incremental import Engine  # noqa: E402

KUEUE = {"finish_s": 351.0, "use": 0.587, "small": 215.0, "medium": 76.8, "large": 6.7}
"""Kueue's published averages over 5 runs of the same scenario."""

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class JobClass:
    name: str
    count: int
    replicas: int
    gpus_per_replica: int
    run_ms: int
    priority: int
    every_ms: int

    @property
    def gpus(self) -> int:
        return self.replicas * self.gpus_per_replica


CLASSES = (
    JobClass("small", 350, 1, 1, 200, 50, 100),
    JobClass("medium", 100, 1, 5, 500, 100, 500),
    JobClass("large", 50, 5, 4, 1000, 200, 1200),   # 20 GPUs as 5 replicas of 4 (8-GPU nodes)
)


@dataclass(frozen=True)
class Scenario:
    models: tuple[str, ...] = tuple(f"GPU-{c}" for c in "ABCDE")
    tenants_per_model: int = 6
    gpus_per_model: int = 120
    gpus_per_node: int = 8
    nominal: int = 20
    ceiling: int = 100
    classes: tuple[JobClass, ...] = CLASSES

    def tenants(self, model: str) -> list[str]:
        return [f"{model.lower()}-t{i}" for i in range(self.tenants_per_model)]

    @property
    def capacity(self) -> int:
        return self.gpus_per_model * len(self.models)


@dataclass(frozen=True)
class WorkloadJob:
    """One job of the workload: who submits what, and when (ms from the start)."""

    id: int
    tenant: str
    model: str
    klass: str
    replicas: int
    gpus_per_replica: int
    run_ms: int
    priority: int
    arrival_ms: int

    @property
    def gpus(self) -> int:
        return self.replicas * self.gpus_per_replica


@dataclass
class Record:
    """What happened to one job: arrival, admissions, and each run interval (ms)."""

    job: WorkloadJob
    admissions_ms: list[int] = field(default_factory=list)
    runs_ms: list[tuple[int, int]] = field(default_factory=list)
    preemptions: int = 0
    finished_ms: int | None = None


def make_workload(scenario: Scenario, scale: float = 1.0) -> list[WorkloadJob]:
    """Every job of the scenario, ``scale`` × the counts per class, in arrival order."""
    jobs: list[WorkloadJob] = []
    next_id = 1
    for model in scenario.models:
        for tenant in scenario.tenants(model):
            for klass in scenario.classes:
                for k in range(max(1, round(klass.count * scale))):
                    jobs.append(WorkloadJob(next_id, tenant, model, klass.name, klass.replicas,
                                            klass.gpus_per_replica, klass.run_ms,
                                            klass.priority, k * klass.every_ms))
                    next_id += 1
    jobs.sort(key=lambda j: (j.arrival_ms, j.id))
    return jobs


def summarise(records: Sequence[Record], scenario: Scenario) -> dict[str, float]:
    """Figures from per-job records: finish time, quota use, admission waits, lower bound.

    * ``finish_s``: from the first arrival to the last finish;
    * ``use``: GPU-seconds of every run interval (including work lost to preemption)
      divided by (sum of the tenants' nominal quotas × ``finish_s``);
    * ``<class>``: mean seconds from arrival to first admission;
    * ``bound_s``: total work / capacity, for the busiest model (models are independent).
    """
    start = min(r.job.arrival_ms for r in records)
    end = max(r.finished_ms or 0 for r in records)
    finish_s = (end - start) / 1000
    gpu_ms = sum(r.job.gpus * (b - a) for r in records for a, b in r.runs_ms)
    nominal_total = scenario.nominal * scenario.tenants_per_model * len(scenario.models)
    out: dict[str, float] = {"finish_s": finish_s,
                             "use": gpu_ms / 1000 / (nominal_total * finish_s) if finish_s else 0}
    for klass in scenario.classes:
        waits = [(r.admissions_ms[0] - r.job.arrival_ms) / 1000 for r in records
                 if r.job.klass == klass.name and r.admissions_ms]
        out[klass.name] = statistics.fmean(waits) if waits else float("nan")
    work: dict[str, float] = {}
    for r in records:
        work[r.job.model] = work.get(r.job.model, 0.0) + r.job.gpus * r.job.run_ms / 1000
    out["bound_s"] = max(work.values()) / scenario.gpus_per_model
    out["preemptions"] = sum(r.preemptions for r in records)
    out["unfinished"] = sum(1 for r in records if r.finished_ms is None)
    return out


@dataclass
class EngineStats:
    calls: int = 0
    seconds: float = 0.0
    decisions: int = 0
    jobs_seen: int = 0
    latencies: list[float] = field(default_factory=list)
    preempt_reasons: dict[str, int] = field(default_factory=dict)
    full_seconds: float = 0.0
    full_latencies: list[float] = field(default_factory=list)
    groups: dict[str, int] = field(default_factory=dict)


def engine_policy() -> Policy:
    """Kueue's baseline settings mapped onto Trainyard's policy (printed by main())."""
    return Policy(watermark=1.0,
                  grace_seconds={"production": 0, "development": 0, "batch": 0},
                  preempt_lower_priority_within_tenant=True)


def run_engine(scenario: Scenario, workload: Sequence[WorkloadJob], full: bool = True,
               ) -> tuple[list[Record], EngineStats]:
    """Replay the workload on simulated time with the incremental engine alone (and, with
    ``full``, the full recomputation on the same inputs, timed and checked equal)."""
    engine = Engine()
    policy = engine_policy()
    history = History()
    quotas = [PoolQuota(tenant, "dev", {f"gpu:{m}": scenario.nominal},
                        {f"gpu:{m}": scenario.ceiling})
              for m in scenario.models for tenant in scenario.tenants(m)]
    per_model_nodes = scenario.gpus_per_model // scenario.gpus_per_node
    node_model = {f"{m}-n{i:02d}": m for m in scenario.models for i in range(per_model_nodes)}
    used = dict.fromkeys(node_model, 0)
    records = {j.id: Record(j) for j in workload}
    views: dict[int, JobView] = {}
    running: dict[int, tuple[int, int]] = {}   # id -> (start ms, end ms)
    finishes: list[tuple[int, int]] = []       # heap of (end ms, id)
    arrivals = list(workload)
    next_arrival = 0
    stats = EngineStats()
    done = 0

    def at(ms: int) -> datetime:
        return EPOCH + timedelta(milliseconds=ms)

    def nodes() -> list[NodeView]:
        return [NodeView(name, model, f"{model}-sw", scenario.gpus_per_node, used[name],
                         {}, {}, True) for name, model in node_model.items()]

    def release(view: JobView) -> None:
        for name in view.placement:
            used[name] -= view.gpus_per_replica

    now_ms = 0
    while done < len(records):
        candidates = []
        if next_arrival < len(arrivals):
            candidates.append(arrivals[next_arrival].arrival_ms)
        if finishes:
            candidates.append(finishes[0][0])
        now_ms = min(candidates)
        while finishes and finishes[0][0] <= now_ms:
            _, job_id = heapq.heappop(finishes)
            if job_id not in running or running[job_id][1] != now_ms:
                continue   # a stale entry of a preempted run
            start, _ = running.pop(job_id)
            release(views.pop(job_id))
            records[job_id].runs_ms.append((start, now_ms))
            records[job_id].finished_ms = now_ms
            done += 1
        while next_arrival < len(arrivals) and arrivals[next_arrival].arrival_ms <= now_ms:
            w = arrivals[next_arrival]
            next_arrival += 1
            views[w.id] = JobView(
                id=w.id, tenant=w.tenant, pool="dev", tier="development", gpu_model=w.model,
                mig_profile="", replicas=w.replicas, gpus_per_replica=w.gpus_per_replica,
                state="queued", submitted_at=at(w.arrival_ms),
                expected_seconds=w.run_ms / 1000, priority=w.priority)
        for _ in range(4):   # preemptions take effect at once: decide again at the same instant
            jobs = list(views.values())
            inputs = {"nodes": nodes(), "jobs": jobs, "quotas": quotas, "policy": policy,
                      "history": history, "now": at(now_ms)}
            t0 = time.perf_counter()
            decisions = engine.decide(**inputs)
            elapsed = time.perf_counter() - t0
            if full:
                t0 = time.perf_counter()
                baseline = decide(**inputs)
                stats.full_latencies.append(time.perf_counter() - t0)
                stats.full_seconds += stats.full_latencies[-1]
                if (baseline.admit, baseline.preempt) != (decisions.admit, decisions.preempt):
                    raise SystemExit(f"the engines decided differently at {now_ms} ms")
            stats.calls += 1
            stats.seconds += elapsed
            stats.latencies.append(elapsed)
            stats.jobs_seen += len(jobs)
            stats.decisions += len(decisions.admit) + len(decisions.preempt)
            for p in decisions.preempt:
                code = p.reason.get("code") if isinstance(p.reason, dict) else None
                kind = ("within the tenant, for higher priority"
                        if code == "jobs.preempt.priority"
                        else "reclaiming lent quota" if code == "jobs.preempt.return_borrowed"
                        else str(code or p.reason))
                stats.preempt_reasons[kind] = stats.preempt_reasons.get(kind, 0) + 1
                view = views[p.job_id]
                start, _ = running.pop(p.job_id)
                release(view)
                records[p.job_id].runs_ms.append((start, now_ms))
                records[p.job_id].preemptions += 1
                views[p.job_id] = replace(view, state="queued", placement=(), borrowing=False,
                                          admitted_at=None, started_at=None)
            for a in decisions.admit:
                view = views[a.job_id]
                for name in a.placement:
                    used[name] += view.gpus_per_replica
                views[a.job_id] = replace(view, state="running", placement=a.placement,
                                          borrowing=a.borrowing, admitted_at=at(now_ms),
                                          started_at=at(now_ms))
                end = now_ms + records[a.job_id].job.run_ms
                running[a.job_id] = (now_ms, end)
                heapq.heappush(finishes, (end, a.job_id))
                records[a.job_id].admissions_ms.append(now_ms)
            if not decisions.preempt:
                break
    stats.groups = dict(engine.stats)
    return list(records.values()), stats


def scaling(sizes: Sequence[int] = (1000, 2000, 4000, 8000, 16000)) -> None:
    """Print decide() latency against the number of jobs on the scenario's cluster.

    Per size: the cluster full of running jobs of the three classes (placed like the
    engine would), the rest queued; the same seed each time. The median of 3 calls.
    """
    import random

    scenario = Scenario()
    policy = engine_policy()
    quotas = [PoolQuota(tenant, "dev", {f"gpu:{m}": scenario.nominal},
                        {f"gpu:{m}": scenario.ceiling})
              for m in scenario.models for tenant in scenario.tenants(m)]
    per_model_nodes = scenario.gpus_per_model // scenario.gpus_per_node
    print(f"\ndecide() latency by number of jobs ({scenario.capacity} GPUs, "
          f"{per_model_nodes * len(scenario.models)} nodes, cluster full, the rest queued):")
    for size in sizes:
        rng = random.Random(size)
        used = {f"{m}-n{i:02d}": 0 for m in scenario.models for i in range(per_model_nodes)}
        jobs: list[JobView] = []
        for i in range(1, size + 1):
            model = rng.choice(scenario.models)
            tenant = rng.choice(scenario.tenants(model))
            klass = rng.choice(scenario.classes)
            view = JobView(id=i, tenant=tenant, pool="dev", tier="development",
                           gpu_model=model, mig_profile="", replicas=klass.replicas,
                           gpus_per_replica=klass.gpus_per_replica, state="queued",
                           submitted_at=EPOCH + timedelta(milliseconds=i),
                           expected_seconds=klass.run_ms / 1000, priority=klass.priority)
            spots = [n for n in used if n.startswith(model)
                     and used[n] + klass.gpus_per_replica <= scenario.gpus_per_node]
            if klass.replicas == 1 and spots:
                used[spots[0]] += klass.gpus_per_replica
                view = replace(view, state="running", placement=(spots[0],),
                               admitted_at=EPOCH, started_at=EPOCH)
            jobs.append(view)
        nodes = [NodeView(name, name.rsplit("-n", 1)[0], "sw", scenario.gpus_per_node,
                          count, {}, {}, True) for name, count in used.items()]
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            decide(nodes=nodes, jobs=jobs, quotas=quotas, policy=policy, history=History(),
                   now=EPOCH + timedelta(seconds=10))
            times.append(time.perf_counter() - t0)
        median = sorted(times)[1]
        print(f"  {size:>6} jobs: {median * 1000:7.1f} ms  ({median / size * 1e6:5.1f} us/job)")


def print_comparison(s: dict[str, float], scenario: Scenario) -> None:
    """The figures of ``summarise`` beside Kueue's published averages."""
    print(f"{'':34}{'Trainyard':>12}{'Kueue':>10}")
    print(f"{'time to finish all jobs (s)':34}{s['finish_s']:>12.1f}{KUEUE['finish_s']:>10.1f}")
    print(f"{'lower bound: work / capacity (s)':34}{s['bound_s']:>12.1f}{'':>10}")
    print(f"{'mean use of tenants quota':34}{s['use']:>12.1%}{KUEUE['use']:>10.1%}")
    for klass in scenario.classes:
        label = f"mean time to admission, {klass.name} (s)"
        print(f"{label:34}{s[klass.name]:>12.2f}{KUEUE[klass.name]:>10.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a 20%% run (--scale 0.2)")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of each class's count")
    parser.add_argument("--no-full", action="store_true",
                        help="the incremental engine alone (no baseline timing or check)")
    parser.add_argument("--scaling", action="store_true",
                        help="only print decide() latency against the number of jobs")
    args = parser.parse_args()
    if args.scaling:
        scaling()
        return
    scale = 0.2 if args.quick else args.scale
    scenario = Scenario()
    workload = make_workload(scenario, scale)
    print(f"Kueue baseline, engine alone on simulated time: {len(workload)} jobs, "
          f"{len(scenario.models)} GPU models x {scenario.gpus_per_model} GPUs "
          f"(nodes of {scenario.gpus_per_node}, one switch per model), "
          f"{scenario.tenants_per_model} tenants per model, quota {scenario.nominal}, "
          f"ceiling {scenario.ceiling}")
    print("Mapping: every job is tier 'development' in the 'dev' pool with priority 50/100/200 "
          "(small/medium/large); Policy(preempt_lower_priority_within_tenant=True) preempts a "
          "tenant's lower-priority jobs (Kueue withinClusterQueue: LowerPriority); a job within "
          "its nominal quota reclaims from any borrower (reclaimWithinCohort: Any); grace 0 s "
          "and no watermark eviction (Kueue has neither); a preempted job re-runs from the "
          "start; large = 5 replicas x 4 GPUs under one switch.")
    wall = time.perf_counter()
    records, stats = run_engine(scenario, workload, full=not args.no_full)
    wall = time.perf_counter() - wall
    s = summarise(records, scenario)
    lat = sorted(stats.latencies)
    p99 = lat[int(0.99 * (len(lat) - 1))]
    print()
    print_comparison(s, scenario)
    print()
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(stats.preempt_reasons.items()))
    print(f"preemptions: {int(s['preemptions'])} ({kinds or 'none'}); "
          f"unfinished jobs: {int(s['unfinished'])}")
    print(f"decide(): {stats.calls} calls in {stats.seconds:.1f} s wall "
          f"({stats.calls / stats.seconds:.1f} calls/s, "
          f"{stats.decisions / stats.seconds:.0f} admissions+preemptions/s); "
          f"{stats.jobs_seen / stats.calls:.0f} jobs per call on average; latency mean "
          f"{statistics.fmean(lat) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
          f"max {lat[-1] * 1000:.1f} ms; whole run {wall:.1f} s (incremental engine: "
          f"{stats.calls} passes, groups decided again {engine_share(stats)})")
    if stats.full_latencies:
        full = sorted(stats.full_latencies)
        full_p99 = full[int(0.99 * (len(full) - 1))]
        print(f"baseline, full recomputation on the same {len(full)} passes: "
              f"{stats.full_seconds:.1f} s, latency mean "
              f"{statistics.fmean(full) * 1000:.1f} ms, p99 {full_p99 * 1000:.1f} ms, max "
              f"{full[-1] * 1000:.1f} ms (same decisions on every pass)")


def engine_share(stats: EngineStats) -> str:
    decided, reused = stats.groups.get("groups_decided", 0), stats.groups.get("groups_reused", 0)
    return f"{decided / max(decided + reused, 1):.0%} ({decided} of {decided + reused})"


if __name__ == "__main__":
    main()
