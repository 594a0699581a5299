"""decide() time per pass against the jobs in view and against the tenants, for the full
engine (``jobs.admission.decide``) and the incremental one (``jobs.admission.incremental
.Engine``) side by side (issue 19, item 4).

The cluster: ``--models`` GPU models (default 10) of 20 nodes of 8 GPUs, two switches per
model; tenant i mostly on model i mod models, ``--spread`` (one in ten) of its jobs on the
next model, which joins every model into one group of the incremental engine (0 keeps
each model's tenants apart); a dev pool each with a nominal quota of its share of the
model and a ceiling of four times that; jobs of Kueue's three classes (1, 5 and 5x4 GPUs,
priorities 50/100/200). The cluster starts full of running jobs, the rest queued. Every
measured pass is what a busy admission loop sees: the previous pass's admissions and
preemptions carried out, ``--changes`` submissions and as many finishes, and the clock
moved 100 ms (the incremental engine with ``max_age`` 30 s, as the loop runs it). Both
engines decide the same inputs; the decisions are checked equal on every pass (the
incremental engine must not be faster by being wrong).

Prints, per size, median and p99 pass time of each engine and the share of groups the
incremental one decided again; and both engines deciding without explaining the queue
(``explain=False``, "no-ETA": what the admission loop runs on the passes between two
explanations, ``jobs.admission.cadence``; the incremental one on its own copy of the
cluster, same decisions checked), with its CPU time (``time.process_time``) beside the
wall time. Figures depend on the machine's load (2 shared cores here): compare the columns
of one run, not runs.

    .venv/bin/python bench/admission_scaling.py [--quick] [--passes 20] [--changes 4]
        [--models 10] [--spread 0.1] [--max-jobs 50000] [--jobs-only|--tenants-only]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jobs.admission import (  # noqa: E402  (after the sys.path line, as a script)
    Decisions,
    History,
    JobView,
    NodeView,
    Policy,
    PoolQuota,
    decide,
)
from jobs.admission.incremental import Engine  # noqa: E402

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
CLASSES = ((1, 1, 50, 200.0), (1, 5, 100, 500.0), (5, 4, 200, 1000.0))
"""(replicas, GPUs per replica, priority, expected seconds): Kueue's small, medium, large."""
NODES_PER_MODEL = 20
GPUS_PER_NODE = 8


class Cluster:
    """A cluster and its jobs, changed between passes as the admission loop would see."""

    def __init__(self, jobs: int, tenants: int, models: int, seed: int = 1,
                 spread: float = 0.1) -> None:
        self.rng = random.Random(seed)
        self.spread = spread
        self.models = [f"GPU-{i:02d}" for i in range(models)]
        self.tenants = [f"t{i:04d}" for i in range(tenants)]
        self.now = EPOCH + timedelta(hours=1)
        self.used: dict[str, int] = {}
        self.node_model: dict[str, str] = {}
        for model in self.models:
            for n in range(NODES_PER_MODEL):
                name = f"{model}-n{n:02d}"
                self.used[name] = 0
                self.node_model[name] = model
        per_model = NODES_PER_MODEL * GPUS_PER_NODE
        on_model: dict[str, list[str]] = {m: [] for m in self.models}
        for i, tenant in enumerate(self.tenants):
            on_model[self.models[i % models]].append(tenant)
        self.quotas: list[PoolQuota] = []
        for i, tenant in enumerate(self.tenants):
            home = self.models[i % models]
            share = max(1, per_model // max(len(on_model[home]), 1))
            nxt = self.models[(i + 1) % models]
            nominal = {f"gpu:{home}": share, f"gpu:{nxt}": max(1, share // 4)}
            self.quotas.append(PoolQuota(tenant, "dev", nominal,
                                         {k: 4 * v for k, v in nominal.items()}))
        self.policy = Policy(watermark=1.0, preempt_lower_priority_within_tenant=True)
        self.history = History()
        self.jobs: dict[int, JobView] = {}
        self.next_id = 1
        for _ in range(jobs):
            self.submit(age_ms=self.rng.randint(0, 3_600_000))
        self.fill()

    def submit(self, age_ms: int = 0) -> None:
        i = self.rng.randrange(len(self.tenants))
        tenant = self.tenants[i]
        model = self.models[(i + (1 if self.rng.random() < self.spread else 0))
                            % len(self.models)]
        replicas, per, priority, seconds = self.rng.choice(CLASSES)
        self.jobs[self.next_id] = JobView(
            id=self.next_id, tenant=tenant, pool="dev", tier="development", gpu_model=model,
            mig_profile="", replicas=replicas, gpus_per_replica=per, state="queued",
            submitted_at=self.now - timedelta(milliseconds=age_ms),
            expected_seconds=seconds, priority=priority)
        self.next_id += 1

    def fill(self) -> None:
        """Start queued single-replica jobs where they fit until the cluster is full."""
        for job in list(self.jobs.values()):
            if job.replicas != 1:
                continue
            for name, model in self.node_model.items():
                if model == job.gpu_model and self.used[name] + job.gpus_per_replica \
                        <= GPUS_PER_NODE:
                    self.used[name] += job.gpus_per_replica
                    self.jobs[job.id] = replace(job, state="running", placement=(name,),
                                                admitted_at=self.now, started_at=self.now)
                    break

    def nodes(self) -> list[NodeView]:
        return [NodeView(name, model, f"{model}-sw{int(name[-2:]) % 2}", GPUS_PER_NODE,
                         self.used[name], {}, {}, True)
                for name, model in self.node_model.items()]

    def inputs(self) -> dict:
        return {"nodes": self.nodes(), "jobs": list(self.jobs.values()), "quotas": self.quotas,
                "policy": self.policy, "history": self.history, "now": self.now}

    def step(self, decisions: Decisions, changes: int) -> None:
        """Carry out the decisions, then ``changes`` finishes and submissions; 100 ms on."""
        for a in decisions.admit:
            job = self.jobs[a.job_id]
            for name in a.placement:
                self.used[name] += job.gpus_per_replica
            self.jobs[a.job_id] = replace(job, state="running", placement=a.placement,
                                          borrowing=a.borrowing, admitted_at=self.now,
                                          started_at=self.now)
        for p in decisions.preempt:
            job = self.jobs[p.job_id]
            for name in job.placement:
                self.used[name] -= job.gpus_per_replica
            self.jobs[p.job_id] = replace(job, state="queued", placement=(), borrowing=False,
                                          admitted_at=None, started_at=None)
        running = sorted(j.id for j in self.jobs.values() if j.state == "running")
        for job_id in self.rng.sample(running, min(changes, len(running))):
            job = self.jobs.pop(job_id)
            for name in job.placement:
                self.used[name] -= job.gpus_per_replica
        for _ in range(changes):
            self.submit()
        self.now += timedelta(milliseconds=100)


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def measure(jobs: int, tenants: int, models: int, passes: int, changes: int,
            full_passes: int, spread: float = 0.1) -> dict[str, float]:
    """Pass times (s) of both engines over ``passes`` passes (the full engine timed on
    the first ``full_passes`` of them, the rest decided by the incremental one alone once
    checked equal on those)."""
    cluster = Cluster(jobs, tenants, models, spread=spread)
    engine = Engine()
    engine.decide(**cluster.inputs())   # the first pass decides everything (a restart)
    quiet = Engine()   # the same passes, deciding only (its decisions are the same)
    quiet.decide(**cluster.inputs(), explain=False)
    quiet_t: list[float] = []
    quiet_cpu: list[float] = []
    full_t: list[float] = []
    bare_t: list[float] = []   # the full engine deciding without explaining (most passes)
    inc_t: list[float] = []
    decided = reused = 0
    in_view = 0
    for n in range(passes):
        inputs = cluster.inputs()
        in_view = len(inputs["jobs"])
        before = dict(engine.stats)
        t0 = time.perf_counter()
        got = engine.decide(**inputs)
        inc_t.append(time.perf_counter() - t0)
        decided += engine.stats["groups_decided"] - before.get("groups_decided", 0)
        t0, c0 = time.perf_counter(), time.process_time()
        only = quiet.decide(**inputs, explain=False)
        quiet_t.append(time.perf_counter() - t0)
        quiet_cpu.append(time.process_time() - c0)
        if (only.admit, only.preempt) != (got.admit, got.preempt):
            raise SystemExit(f"the deciding-only engine differs at {jobs} jobs, pass {n}")
        reused += engine.stats["groups_reused"] - before.get("groups_reused", 0)
        if n < full_passes:
            t0 = time.perf_counter()
            want = decide(**inputs)
            full_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            bare = decide(**inputs, explain=False)
            bare_t.append(time.perf_counter() - t0)
            if (want.admit, want.preempt) != (got.admit, got.preempt) or (
                    bare.admit, bare.preempt) != (got.admit, got.preempt):
                raise SystemExit(f"decisions differ at {jobs} jobs, pass {n}")
        cluster.step(got, changes)
    return {"in_view": in_view, "full_med": statistics.median(full_t), "full_p99": p99(full_t),
            "bare_med": statistics.median(bare_t), "bare_p99": p99(bare_t),
            "inc_med": statistics.median(inc_t), "inc_p99": p99(inc_t),
            "redecided": decided / max(decided + reused, 1),
            "quiet_med": statistics.median(quiet_t), "quiet_p99": p99(quiet_t),
            "quiet_cpu_med": statistics.median(quiet_cpu), "quiet_cpu_p99": p99(quiet_cpu)}


def table(title: str, label: str, rows: list[tuple[int, dict[str, float]]]) -> None:
    print(f"\n{title}")
    print(f"{label:>9} {'in view':>8} | {'full med':>9} {'full p99':>9} | "
          f"{'no-ETA med':>10} {'no-ETA p99':>10} | "
          f"{'incr med':>9} {'incr p99':>9} | {'groups redecided':>16} {'speed-up':>8} | "
          f"incr no-ETA med/p99 wall, CPU")
    for value, r in rows:
        print(f"{value:>9} {r['in_view']:>8.0f} | {r['full_med'] * 1000:>7.1f}ms "
              f"{r['full_p99'] * 1000:>7.1f}ms | {r['bare_med'] * 1000:>8.1f}ms "
              f"{r['bare_p99'] * 1000:>8.1f}ms | {r['inc_med'] * 1000:>7.1f}ms "
              f"{r['inc_p99'] * 1000:>7.1f}ms | {r['redecided']:>15.0%} "
              f"{r['full_med'] / max(r['inc_med'], 1e-9):>7.1f}x | "
              f"{r['quiet_med'] * 1000:.1f}/{r['quiet_p99'] * 1000:.1f}ms, "
              f"{r['quiet_cpu_med'] * 1000:.1f}/{r['quiet_cpu_p99'] * 1000:.1f}ms", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="1k-10k jobs, 30-300 tenants, fewer passes")
    parser.add_argument("--passes", type=int, default=20)
    parser.add_argument("--changes", type=int, default=4,
                        help="submissions and finishes between two passes")
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--spread", type=float, default=0.1,
                        help="share of a tenant's jobs on a second model (0: one model each)")
    parser.add_argument("--tenants-only", action="store_true", help="only the tenants sweep")
    parser.add_argument("--jobs-only", action="store_true", help="only the jobs sweep")
    parser.add_argument("--max-jobs", type=int, default=50000,
                        help="largest size of the jobs sweep (100000 takes minutes a pass)")
    args = parser.parse_args()
    sizes = tuple(n for n in (1000, 5000, 10000, 50000, 100000) if n <= args.max_jobs)
    if args.quick:
        sizes = (1000, 5000, 10000)
    tenant_counts = (30, 100, 300) if args.quick else (30, 100, 300, 1000, 2000)
    passes = 8 if args.quick else args.passes
    print(f"{args.models} GPU models x {NODES_PER_MODEL} nodes x {GPUS_PER_NODE} GPUs; "
          f"{args.changes} submissions and {args.changes} finishes between passes, "
          f"{args.spread:.0%} of a tenant's jobs on a second model, "
          f"decisions carried out; {passes} passes per row (the full engine on at most 5 "
          f"of them past 10k jobs)")
    if not args.tenants_only:
        rows = []
        for size in sizes:
            full = passes if size <= 10000 else min(passes, 5)
            rows.append((size, measure(size, 1000, args.models, passes, args.changes, full,
                                       args.spread)))
        table("decide() per pass against jobs in view (1,000 tenants)", "jobs", rows)
    if not args.jobs_only:
        rows = []
        for tenants in tenant_counts:
            rows.append((tenants, measure(10000, tenants, args.models, passes, args.changes,
                                          passes, args.spread)))
        table("decide() per pass against tenants (10,000 jobs)", "tenants", rows)


if __name__ == "__main__":
    main()
