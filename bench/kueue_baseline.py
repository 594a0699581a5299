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

Kueue mode (``--backend kueue``): the same workload admitted by kubesim's Kueue
controller (``kubesim/sim/kueue.py``, in-process on its simulated clock) instead of
Trainyard's engine: the ResourceFlavors, Cohort, ClusterQueues (one per tenant, nominal 20
and borrowing limit 80 of its model's flavor) and LocalQueues come from Trainyard's own
Kueue-mode builders (``k8s_sync.kueue.desired_kueue_objects``), the jobs are Trainyard's
PyTorchJobs (``k8s_sync.manifests.build_pytorchjob`` + ``kueue.kueue_job``: suspended, with
the queue label) created at their arrival times, and kubesim's operator, scheduler and
kubelet run their pods on 5 x 15 nodes of 8 GPUs. Two bench mappings, as the engine run has
its own: a WorkloadPriorityClass per class (``bench-small`` 50, ``bench-medium`` 100,
``bench-large`` 200) instead of the tier's, and the ClusterQueues' preemption of Kueue's
baseline (``reclaimWithinCohort: Any``, ``withinClusterQueue: LowerPriority``) instead of
Trainyard's (``withinClusterQueue: Never``, ``borrowWithinCohort`` for batch). The clock
jumps from event to event (arrivals, the kubelet's timers; at most ``--step`` s) and the
controllers run again at the same instant while they write (pods start in
``startup_seconds`` 0). A job's quota is held from its Workload's ``QuotaReserved`` to its
``Finished`` (or its eviction's release), which is what ``use`` counts in this mode. The
trainyard engine's figures (incremental engine, no baseline check) are printed beside.

Reusable parts for a through-the-stack mode: ``make_workload()`` (the jobs and when they
arrive) and ``summarise()`` (figures from per-job ``Record`` s, which any runner can fill
in from the times it observes).

    .venv/bin/python bench/kueue_baseline.py [--quick] [--scale 0.2] [--no-full]
    .venv/bin/python bench/kueue_baseline.py --backend kueue --scale 0.05
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
from jobs.admission.cadence import explain_due  # noqa: E402
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
    cpu: list[float] = field(default_factory=list)        # process time per call
    full_cpu: list[float] = field(default_factory=list)
    groups: dict[str, int] = field(default_factory=dict)
    explained: list[bool] = field(default_factory=list)   # per call: it also explained


def engine_policy() -> Policy:
    """Kueue's baseline settings mapped onto Trainyard's policy (printed by main())."""
    return Policy(watermark=1.0,
                  grace_seconds={"production": 0, "development": 0, "batch": 0},
                  preempt_lower_priority_within_tenant=True)


def run_engine(scenario: Scenario, workload: Sequence[WorkloadJob], full: bool = True,
               explain_every: float = 2.0) -> tuple[list[Record], EngineStats]:
    """Replay the workload on simulated time with the incremental engine alone (and, with
    ``full``, the full recomputation on the same inputs, timed and checked equal). A call
    explains the queue (positions, ETAs) when ``explain_every`` simulated seconds have
    passed since the last that did, as the admission loop does
    (``jobs.admission.cadence``; 0: every call)."""
    explained_at = None
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
            explain = explain_due(at(now_ms), explained_at, 0.0, explain_every)
            if explain:
                explained_at = at(now_ms)
            inputs = {"nodes": nodes(), "jobs": jobs, "quotas": quotas, "policy": policy,
                      "history": history, "now": at(now_ms), "explain": explain}
            stats.explained.append(explain)
            t0, c0 = time.perf_counter(), time.process_time()
            decisions = engine.decide(**inputs)
            elapsed = time.perf_counter() - t0
            stats.cpu.append(time.process_time() - c0)
            if full:
                t0, c0 = time.perf_counter(), time.process_time()
                baseline = decide(**inputs)
                stats.full_latencies.append(time.perf_counter() - t0)
                stats.full_cpu.append(time.process_time() - c0)
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


# --- Kueue mode: kubesim's Kueue controller admits -----------------------------------------

BENCH_PRIORITY = "bench-{}"
"""The WorkloadPriorityClass of a job class in Kueue mode (value: the class's priority)."""


def product(model: str) -> str:
    """The ``nvidia.com/gpu.product`` label of the scenario's GPU model on kubesim's nodes."""
    return f"NVIDIA-{model}"


def kubesim_profile(scenario: Scenario, startup_seconds: float = 0.05) -> dict:
    """kubesim's profile for the scenario: per GPU model one switch of nodes of
    ``gpus_per_node`` GPUs, no failures, pods Running ``startup_seconds`` after binding."""
    import yaml

    from kubesim.sim import load_profile

    profile = yaml.safe_load((ROOT / "kubesim" / "profiles" / "small.yaml").read_text())
    per_model = scenario.gpus_per_model // scenario.gpus_per_node
    profile["simulation"] = {**profile.get("simulation", {}), "startup_seconds": startup_seconds,
                             "failure_rate": 0.0}
    base = load_profile("small")["gpu_models"]["H800"]
    profile["gpu_models"] = {model: {**base, "product": product(model),
                                     "name": f"NVIDIA {model}"} for model in scenario.models}
    profile["pools"] = [{
        "name": model.lower(), "count": per_model, "prefix": f"{model.lower()}-",
        "zone": "zone-a", "racks": [f"rack-{model.lower()}"],
        "switches": [f"switch-{model.lower()}"], "cpu": "256", "memory": "2Ti",
        "instance_type": "bench", "gpu": {"model": model, "count": scenario.gpus_per_node},
    } for model in scenario.models]
    return load_profile(profile)


def bench_preemption() -> dict:
    """The ClusterQueues' preemption of Kueue's baseline configuration
    (``configs/baseline/generator.yaml``): what the engine run maps to
    ``preempt_lower_priority_within_tenant`` and its reclaim rule."""
    return {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}


def bench_priority_classes(scenario: Scenario) -> list[dict]:
    """One WorkloadPriorityClass per job class (not labelled as Trainyard's: a converge of
    Trainyard's Kueue objects leaves them alone)."""
    from k8s_sync.kueue import KUEUE_API

    return [{"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass",
             "metadata": {"name": BENCH_PRIORITY.format(k.name)},
             "value": k.priority, "description": f"kueue_baseline: {k.name} jobs"}
            for k in scenario.classes]


def class_of_gpus(scenario: Scenario, gpus: int) -> JobClass:
    """The scenario's class of a job by its GPUs (1, 5 and 20: one class each)."""
    return next(k for k in scenario.classes if k.gpus == gpus)


def kueue_objects(scenario: Scenario) -> list[dict]:
    """Trainyard's Kueue objects for the scenario (``desired_kueue_objects``): a
    development ClusterQueue per tenant (its model's quota and ceiling, CPU and memory
    enough for its jobs), no batch queues, then the bench's preemption and priority
    classes (see the module docstring)."""
    from decimal import Decimal

    from k8s_sync.kueue import KueueSpec, QueueSpec, desired_kueue_objects

    queues = tuple(QueueSpec(
        tenant_slug=tenant, pool="dev", role="dev",
        nominal={f"gpu:{product(m)}": Decimal(scenario.nominal), "cpu": Decimal(500),
                 "memory": Decimal(5000)},
        borrowing={f"gpu:{product(m)}": Decimal(scenario.ceiling - scenario.nominal)})
        for m in scenario.models for tenant in scenario.tenants(m))
    # the cohort's own quota: the physical cards no queue was granted (none when the
    # tenants' quotas add up to the cluster, as in Kueue's scenario)
    capacity = {f"gpu:{product(m)}": Decimal(scenario.gpus_per_model) for m in scenario.models}
    objects = desired_kueue_objects(KueueSpec(queues=queues, capacity=capacity))
    for obj in objects:
        if obj["kind"] == "ClusterQueue":
            obj["spec"]["preemption"] = bench_preemption()
    return objects + bench_priority_classes(scenario)


def kueue_pytorchjob(w: WorkloadJob) -> dict:
    """The job as Trainyard's Kueue mode creates it (``build_pytorchjob`` and
    ``kueue_job``: suspended, queue label), with the bench's priority class."""
    from core.choices import Tier
    from k8s_sync import manifests
    from k8s_sync.kueue import LABEL_PRIORITY_CLASS, kueue_job
    from k8s_sync.specs import JobSpec

    spec = JobSpec(job_id=w.id, tenant_slug=w.tenant, pool="dev", tier=Tier.DEVELOPMENT,
                   image="bench/trainer:1", max_run_seconds=3600, grace_seconds=0,
                   checkpoint_interval_seconds=600, name_hint=w.klass,
                   worker_replicas=w.replicas - 1, gpus_per_replica=w.gpus_per_replica,
                   gpu_product=product(w.model),
                   annotations={"kubesim.trainyard.io/run-seconds": str(w.run_ms / 1000)})
    job = kueue_job(manifests.build_pytorchjob(spec), tier="development")
    job["metadata"]["labels"][LABEL_PRIORITY_CLASS] = BENCH_PRIORITY.format(w.klass)
    return job


@dataclass
class KueueStats:
    ticks: int = 0
    events: int = 0
    passes: int = 0
    kueue_seconds: float = 0.0
    sim_seconds: float = 0.0
    wall: float = 0.0
    preempt_reasons: dict[str, int] = field(default_factory=dict)


def run_kueue(scenario: Scenario, workload: Sequence[WorkloadJob], step: float = 0.1,
              settle: int = 8) -> tuple[list[Record], KueueStats]:
    """Replay the workload through kubesim's Kueue controller on simulated time.

    The clock goes from event to event: the next arrival, the kubelet's next timer, or
    ``step`` s, whichever is first; at each instant the controllers tick until they stop
    writing (at most ``settle`` times). Each Workload's ``QuotaReserved`` (admission),
    its release without ``Finished`` (an eviction) and ``Finished`` are recorded at the
    simulated time the controller wrote them."""
    from k8s_sync.naming import SERVICE_ACCOUNT_NAME
    from kubesim.clock import Clock
    from kubesim.sim import Simulation
    from kubesim.sim.kueue import WORKLOADS
    from kubesim.store import Store

    plural = {"ResourceFlavor": "resourceflavors", "Cohort": "cohorts",
              "ClusterQueue": "clusterqueues", "LocalQueue": "localqueues",
              "WorkloadPriorityClass": "workloadpriorityclasses", "Topology": "topologies"}
    clock = Clock(deterministic=True, start=EPOCH)
    store = Store(clock, seed=1)
    sim = Simulation(store, profile=kubesim_profile(scenario, startup_seconds=0.0), seed=1)
    sim.bootstrap()
    sim.tick()
    origin = sim.now()
    records = {j.id: Record(j) for j in workload}
    by_name: dict[str, int] = {}
    held: dict[str, int] = {}    # workload name -> ms since its quota is held
    stats = KueueStats()
    finished = 0

    def now_ms() -> int:
        return round((sim.now() - origin) * 1000)

    def on_event(etype: str, rt, obj: dict) -> None:  # type: ignore[no-untyped-def]
        nonlocal finished
        if rt.key != WORKLOADS or etype == "DELETED":
            return
        meta = obj["metadata"]
        owner = (meta.get("ownerReferences") or [{}])[0].get("name", "")
        job_id = by_name.get(owner)
        if job_id is None:
            return
        conds = {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}
        is_true = {k for k, c in conds.items() if c.get("status") == "True"}
        holding = "QuotaReserved" in is_true and "Finished" not in is_true
        name, rec, at = meta["name"], records[job_id], now_ms()
        if holding and name not in held:
            held[name] = at
            rec.admissions_ms.append(at)
        elif not holding and name in held:
            rec.runs_ms.append((held.pop(name), at))
            if "Finished" in is_true:
                rec.finished_ms = at
                finished += 1
            else:
                rec.preemptions += 1
                why = conds.get("Preempted", conds.get("Evicted", {})).get("reason", "?")
                stats.preempt_reasons[why] = stats.preempt_reasons.get(why, 0) + 1
        elif "Finished" in is_true and rec.finished_ms is None and not holding:
            rec.finished_ms = at
            finished += 1

    store.subscribe_raw(on_event)
    for ns in sorted(naming_ns(t) for m in scenario.models for t in scenario.tenants(m)):
        store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": ns}})
        # the pods' identity (k8s_sync.manifests' pool ServiceAccount): kubesim refuses a
        # pod whose ServiceAccount is missing, as a real API server does
        store.create("serviceaccounts", {"apiVersion": "v1", "kind": "ServiceAccount",
                                         "metadata": {"name": SERVICE_ACCOUNT_NAME,
                                                      "namespace": ns},
                                         "automountServiceAccountToken": False},
                     namespace=ns)
    from k8s_sync.manifests import desired_cluster_objects

    for obj in desired_cluster_objects():  # the tiers' PriorityClasses the pods name
        store.create("priorityclasses.scheduling.k8s.io", obj)
    for obj in kueue_objects(scenario):
        group = obj["apiVersion"].split("/")[0]
        ns = obj["metadata"].get("namespace")
        store.create(f"{plural[obj['kind']]}.{group}", obj, namespace=ns)
    arrivals = list(workload)
    nxt = 0
    wall = time.perf_counter()
    while finished < len(records):
        at = now_ms()
        while nxt < len(arrivals) and arrivals[nxt].arrival_ms <= at:
            w = arrivals[nxt]
            nxt += 1
            job = kueue_pytorchjob(w)
            by_name[job["metadata"]["name"]] = w.id
            store.create("pytorchjobs.kubeflow.org", job, namespace=job["metadata"]["namespace"])
        for _ in range(settle):
            before = store.resource_version
            sim.tick()
            stats.ticks += 1
            if store.resource_version == before:
                break
        if finished >= len(records):
            break
        # the next instant: an arrival, a kubelet timer (1 µs past it), or ``step`` s on
        candidates = [(sim.now() - origin) + step]
        if nxt < len(arrivals):
            candidates.append(arrivals[nxt].arrival_ms / 1000)
        due = sim.kubelet.next_due()
        if due is not None:
            candidates.append(due - origin + 1e-6)
        target = min(candidates)
        clock.advance(max(1e-6, target - (sim.now() - origin)))
        stats.events += 1
        if sim.now() - origin > 3600:
            print("gave up after a simulated hour", file=sys.stderr)
            break
    stats.sim_seconds = sim.now() - origin
    stats.passes = sim.kueue.reconciles
    stats.kueue_seconds = sim.timings.get("kueue", 0.0)
    stats.wall = time.perf_counter() - wall
    return list(records.values()), stats


def naming_ns(tenant: str) -> str:
    from k8s_sync.naming import namespace_name

    return namespace_name(tenant, "dev")


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


def print_comparison(s: dict[str, float], scenario: Scenario, label: str = "Trainyard",
                     others: Sequence[tuple[str, dict[str, float]]] = ()) -> None:
    """The figures of ``summarise`` (column ``label``, then ``others``) beside Kueue's
    published averages."""
    columns = [(label, s), *others]
    width = max(12, *(len(name) + 2 for name, _ in columns))
    head = "".join(f"{name:>{width}}" for name, _ in columns)
    print(f"{'':34}{head}{'Kueue':>10}")

    def row(label: str, key: str, fmt: str, kueue: str) -> None:
        cells = "".join(f"{format(col[key], fmt):>{width}}" for _, col in columns)
        print(f"{label:34}{cells}{kueue:>10}")
    row("time to finish all jobs (s)", "finish_s", ".1f", f"{KUEUE['finish_s']:.1f}")
    row("lower bound: work / capacity (s)", "bound_s", ".1f", "")
    row("mean use of tenants quota", "use", ".1%", f"{KUEUE['use']:.1%}")
    for klass in scenario.classes:
        row(f"mean time to admission, {klass.name} (s)", klass.name, ".2f",
            f"{KUEUE[klass.name]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a 20%% run (--scale 0.2)")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of each class's count")
    parser.add_argument("--no-full", action="store_true",
                        help="the incremental engine alone (no baseline timing or check)")
    parser.add_argument("--explain-every", type=float, default=2.0,
                        help="simulated seconds between passes that explain the queue (the "
                             "admission loop's TRAINYARD_EXPLAIN_SECONDS; 0: every pass)")
    parser.add_argument("--scaling", action="store_true",
                        help="only print decide() latency against the number of jobs")
    parser.add_argument("--backend", choices=("trainyard", "kueue"), default="trainyard",
                        help="who admits: Trainyard's engine (default) or kubesim's Kueue "
                             "controller (then the engine's figures are printed beside)")
    parser.add_argument("--step", type=float, default=0.1,
                        help="Kueue mode: the longest simulated step between two events (s)")
    args = parser.parse_args()
    if args.scaling:
        scaling()
        return
    scale = 0.2 if args.quick else args.scale
    scenario = Scenario()
    workload = make_workload(scenario, scale)
    if args.backend == "kueue":
        main_kueue(scenario, workload, scale, args.step)
        return
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
    records, stats = run_engine(scenario, workload, full=not args.no_full,
                                explain_every=args.explain_every)
    wall = time.perf_counter() - wall
    s = summarise(records, scenario)
    lat = sorted(stats.latencies)
    p99 = lat[int(0.99 * (len(lat) - 1))]
    split = split_by_explain(stats.latencies, stats.cpu, stats.explained)
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
    print(f"  explaining the queue every {args.explain_every:g} s of simulated time: "
          + "; ".join(split))
    if stats.full_latencies:
        full = sorted(stats.full_latencies)
        full_p99 = full[int(0.99 * (len(full) - 1))]
        print(f"baseline, full recomputation on the same {len(full)} passes: "
              f"{stats.full_seconds:.1f} s, latency mean "
              f"{statistics.fmean(full) * 1000:.1f} ms, p99 {full_p99 * 1000:.1f} ms, max "
              f"{full[-1] * 1000:.1f} ms (same decisions on every pass)")
        print("  full recomputation, "
              + "; ".join(split_by_explain(stats.full_latencies, stats.full_cpu,
                                           stats.explained)))


def split_by_explain(latencies: Sequence[float], cpu: Sequence[float],
                     explained: Sequence[bool]) -> list[str]:
    """Pass times of the calls that decide only and of those that also explain: wall
    (mean, p50, p99) and CPU (process time, p50 and p99)."""
    split = []
    for label, wanted in (("deciding only", False), ("also explaining", True)):
        part = sorted(t for t, e in zip(latencies, explained, strict=True) if e == wanted)
        part_cpu = sorted(t for t, e in zip(cpu, explained, strict=True) if e == wanted)
        if part:
            split.append(f"{label} {len(part)} calls, mean "
                         f"{statistics.fmean(part) * 1000:.1f} ms, p50 "
                         f"{part[len(part) // 2] * 1000:.1f} ms, p99 "
                         f"{part[int(0.99 * (len(part) - 1))] * 1000:.1f} ms wall, CPU p50 "
                         f"{part_cpu[len(part_cpu) // 2] * 1000:.1f} ms, p99 "
                         f"{part_cpu[int(0.99 * (len(part_cpu) - 1))] * 1000:.1f} ms")
    return split


def main_kueue(scenario: Scenario, workload: Sequence[WorkloadJob], scale: float,
               step: float) -> None:
    print(f"Kueue baseline, kubesim's Kueue controller on simulated time: {len(workload)} jobs "
          f"(scale {scale}), {len(scenario.models)} GPU models x {scenario.gpus_per_model} GPUs "
          f"(nodes of {scenario.gpus_per_node}), {scenario.tenants_per_model} ClusterQueues per "
          f"model in cohort 'trainyard', nominal {scenario.nominal}, borrowing limit "
          f"{scenario.ceiling - scenario.nominal}")
    print("Mapping: Trainyard's Kueue-mode objects (k8s_sync.kueue) and PyTorchJobs, with "
          "WorkloadPriorityClasses bench-small/medium/large (50/100/200) and Kueue's baseline "
          "preemption (reclaimWithinCohort: Any, withinClusterQueue: LowerPriority); grace 0 s; "
          "a preempted job re-runs from the start; quota held from QuotaReserved to Finished.")
    records, stats = run_kueue(scenario, workload, step=step)
    s = summarise(records, scenario)
    engine_records, engine_stats = run_engine(scenario, workload, full=False)
    e = summarise(engine_records, scenario)
    print()
    print_comparison(s, scenario, label="kubesim Kueue", others=[("Trainyard engine", e)])
    print()
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(stats.preempt_reasons.items()))
    engine_kinds = ", ".join(f"{n} {kind}" for kind, n in
                             sorted(engine_stats.preempt_reasons.items()))
    print(f"preemptions: Kueue {int(s['preemptions'])} ({kinds or 'none'}), engine "
          f"{int(e['preemptions'])} ({engine_kinds or 'none'}); unfinished jobs: Kueue "
          f"{int(s['unfinished'])}, engine {int(e['unfinished'])}")
    per_pass = stats.kueue_seconds / max(stats.passes, 1) * 1000
    print(f"kubesim: {stats.sim_seconds:.1f} simulated s in {stats.wall:.1f} s wall "
          f"({stats.events} instants, {stats.ticks} ticks); Kueue controller {stats.passes} "
          f"passes, {stats.kueue_seconds:.1f} s ({per_pass:.1f} ms a pass); engine decide() "
          f"{engine_stats.calls} calls, {engine_stats.seconds:.1f} s")
    if scale < 1:
        print("At a scale below 1 the arrival pattern is shorter, so the figures compare with "
              "Kueue's only in shape; --scale 1 runs the full scenario.")


def engine_share(stats: EngineStats) -> str:
    decided, reused = stats.groups.get("groups_decided", 0), stats.groups.get("groups_reused", 0)
    return f"{decided / max(decided + reused, 1):.0%} ({decided} of {decided + reused})"


if __name__ == "__main__":
    main()
