"""How far to believe Kueue mode's ETAs: ``eta_accuracy.py``'s workload admitted by Kueue.

The same day of the demo's workload as ``bench/eta_accuracy.py`` (its arrivals, run
times, submitter's estimates, the day before's History, seed_demo's grants), but admitted
by kubesim's Kueue controller (``kubesim/sim/kueue.py``, in-process on its simulated
clock, as ``bench/kueue_baseline.py --backend kueue`` drives it): the demo's GPU nodes
(kubesim profile ``default``'s A100, A100-MIG and H800 pools), Trainyard's own Kueue
objects (``k8s_sync.kueue.desired_kueue_objects`` of the queues ``tenants.kueue`` would
write for these grants: ``queue_limits`` and ``pool_ceiling``; the tiers'
WorkloadPriorityClasses; topology-aware placement of multi-node jobs under one switch)
and Trainyard's PyTorchJobs (``build_pytorchjob`` + ``kueue_job``, suspended, labelled),
created at their arrival times. A run that Kueue preempts resumes with what it had left
(its pods' run time is set to the remainder before Kueue admits it again), as the
engine's replay does.

At every instant where a Workload changed (an arrival, an admission, an eviction, a
finish), each queued job's ETA is computed the way Kueue mode computes it
(``jobs.backends.kueue.waiting_info``): positions from kubesim's visibility API
(``pendingworkloads``, parsed by ``jobs.backends.kueue._positions`` and mapped by
``jobs.kueue_eta.positions_by_job``), the engine run as a forecaster over the observed
cluster (pods' nodes) with the queued jobs in Kueue's order
(``jobs.kueue_eta.in_kueue_order`` then ``jobs.admission.decide``, its decisions not
applied), bounded by each ClusterQueue's admission rate (``jobs.kueue_eta.rate_eta`` and
``combine``; the rate counted as ``admission_rates`` counts it, each job's last
admission within ``RATE_WINDOW``, from the run's own record instead of the database).
The actual start is Kueue's admission (the Workload's ``QuotaReserved``).

Printed: ``eta_accuracy.py``'s measures for Kueue mode, the naive FIFO baseline against
Kueue's starts, and the engine's own figures and naive baseline from ``eta_accuracy``'s
replay of the same workload (the existing path). Simulated time only.

    .venv/bin/python bench/eta_accuracy_kueue.py [--hours 24] [--every 240] [--seed 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import eta_accuracy as base  # noqa: E402  (after the sys.path lines, as a script)

CPU, MEMORY = Decimal(1000), Decimal(10000)
"""Each pool's CPU and memory grant (its jobs are never short of them: GPUs decide)."""
POOLS = ("a100", "a100-mig", "h800")
"""kubesim's ``default`` profile pools of the demo's GPU nodes (``eta_accuracy.NODES``)."""


def django_ready() -> None:
    """Django's apps loaded (``jobs.kueue_eta`` and the backend import models); no
    database is used."""
    from django.apps import apps

    if apps.ready:
        return
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings_test")
    os.environ.setdefault("TRAINYARD_VAR_DIR", tempfile.mkdtemp(prefix="trainyard-etak-"))
    import django

    django.setup()


def kueue_objects() -> list[dict]:
    """The Kueue objects Trainyard's Kueue mode writes for seed_demo's grants
    (``tenants.kueue.kueue_spec``'s rules, the grants given here instead of read)."""
    from k8s_sync.kueue import KueueSpec, QueueSpec, desired_kueue_objects
    from k8s_sync.placement import DEFAULT_TOPOLOGY_LEVELS
    from tenants.demand import pool_ceiling
    from tenants.kueue import queue_limits

    queues = []
    for tenant, pools in base.QUOTA.items():
        for pool, grants in pools.items():
            amounts = {f"gpu:{m}": Decimal(n) for m, n in grants.items()}
            amounts.update(cpu=CPU, memory=MEMORY)
            factor = Decimal(str(base.FACTOR[tenant]))
            nominal, borrow = queue_limits(amounts, amounts, role=pool, factor=factor)
            queues.append(QueueSpec(tenant_slug=tenant, pool=pool,  # type: ignore[arg-type]
                                    role=pool, nominal=nominal,  # type: ignore[arg-type]
                                    borrowing=borrow))
            queues.append(QueueSpec(tenant_slug=tenant, pool=pool,  # type: ignore[arg-type]
                                    role="batch", nominal={}, borrowing={
                                        k: pool_ceiling(k, a, factor) or a
                                        for k, a in amounts.items()}))
    capacity: dict[str, Decimal] = defaultdict(Decimal)
    for name, model, _switch in base.NODES:
        capacity[f"gpu:{model}"] += base.NODE_GPUS[name]
    capacity.update(cpu=CPU * 5, memory=MEMORY * 5)
    return desired_kueue_objects(KueueSpec(queues=tuple(queues), capacity=capacity,
                                           topology_levels=DEFAULT_TOPOLOGY_LEVELS))


def profile() -> dict:
    """kubesim's ``default`` profile with only the demo's GPU pools, pods Running at
    binding, no failures."""
    from kubesim.sim import load_profile

    prof = load_profile("default")
    prof["pools"] = [p for p in prof["pools"] if p["name"] in POOLS]
    prof["simulation"] = {**prof.get("simulation", {}), "startup_seconds": 0.0,
                          "failure_rate": 0.0}
    return load_profile(prof)


def pytorchjob(a: base.Arrival) -> dict:
    """The job as Kueue mode creates it (``KueueBackend.sync_job``)."""
    from core.choices import Tier
    from k8s_sync import manifests
    from k8s_sync.kueue import kueue_job
    from k8s_sync.placement import DEFAULT_TOPOLOGY_LEVELS
    from k8s_sync.specs import JobSpec

    spec = JobSpec(job_id=a.id, tenant_slug=a.tenant, pool=a.pool, tier=Tier(a.tier),
                   image="bench/trainer:1", max_run_seconds=int(base.MAX_RUN) + 60,
                   grace_seconds=base.GRACE[a.tier], checkpoint_interval_seconds=600,
                   name_hint=a.template, worker_replicas=a.replicas - 1,
                   gpus_per_replica=a.per, gpu_product=a.model,
                   annotations={RUN_SECONDS: f"{a.run:.3f}"})
    return kueue_job(manifests.build_pytorchjob(spec), tier=a.tier,
                     required_topology=DEFAULT_TOPOLOGY_LEVELS[-1] if a.replicas > 1 else "")


RUN_SECONDS = "kubesim.trainyard.io/run-seconds"


class Visibility:
    """What ``jobs.backends.kueue._positions`` asks of the cluster client, answered by
    kubesim's visibility API in-process (``KueueController.pending_workloads``)."""

    def __init__(self, sim: Any) -> None:
        self.sim = sim

    def kueue_pending_workloads(self, queue: str) -> list[dict]:
        return list(self.sim.kueue.pending_workloads(cq=queue)["items"])


@dataclass
class Run:
    """Kueue mode's predictions and starts, and what the run saw."""

    kueue: list[base.Prediction] = field(default_factory=list)
    naive: list[base.Prediction] = field(default_factory=list)
    starts: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    finished: dict[int, float] = field(default_factory=dict)
    passes: int = 0
    evictions: int = 0
    by_rate: int = 0          # predictions whose p90 the admission rate widened
    positioned: int = 0       # predictions of a job the visibility API listed
    unstarted: int = 0
    max_queue: int = 0
    sim_seconds: float = 0.0


def run_kueue(workload: Sequence[base.Arrival], seed: int, *, step: float = 60.0,
              settle: int = 8, max_days: float = 4.0) -> Run:
    """Replay ``workload`` through kubesim's Kueue controller and score Kueue mode's ETAs."""
    django_ready()
    from jobs import kueue_eta
    from jobs.admission import History, JobView, NodeView, Policy, decide
    from jobs.backends.kueue import _positions, cluster_queue_of
    from k8s_sync import naming
    from k8s_sync.kueue import workloads_by_job
    from k8s_sync.manifests import desired_cluster_objects
    from kubesim.clock import Clock
    from kubesim.sim import Simulation
    from kubesim.sim.kueue import WORKLOADS
    from kubesim.store import Store

    clock = Clock(deterministic=True, start=base.EPOCH)
    store = Store(clock, seed=seed)
    sim = Simulation(store, profile=profile(), seed=seed)
    sim.bootstrap()
    sim.tick()
    origin = sim.now()
    by_id = {a.id: a for a in workload}
    jobs = {a.id: SimpleNamespace(
        pk=a.id, tier=a.tier, k8s_name=naming.job_name(a.id, a.template),
        pool=SimpleNamespace(namespace=naming.namespace_name(a.tenant, a.pool), kind=a.pool))
        for a in workload}
    by_name = {(j.pool.namespace, j.k8s_name): i for i, j in jobs.items()}
    history = base.prior_history(seed)
    policy = Policy(grace_seconds=base.GRACE)
    quotas = base.quotas()
    result = Run()
    holding: dict[int, float] = {}           # job -> when its quota was reserved
    last_admitted: dict[int, float] = {}     # job -> its latest admission (the rate's)
    run_left = {a.id: a.run for a in workload}
    resume: list[int] = []                   # evicted jobs whose run time to set
    arrived: set[int] = set()
    finished: set[int] = set()
    seen: set[int] = set()
    changed = False
    model_of = {name: model for name, model, _s in base.NODES}
    switch_of = {name: switch for name, _m, switch in base.NODES}

    def now_s() -> float:
        return sim.now() - origin

    def at(seconds: float) -> datetime:
        return base.EPOCH + timedelta(seconds=seconds)

    def on_event(etype: str, rt: Any, obj: dict) -> None:
        nonlocal changed
        if rt.key != WORKLOADS or etype == "DELETED":
            return
        meta = obj["metadata"]
        owner = (meta.get("ownerReferences") or [{}])[0].get("name", "")
        job_id = by_name.get((meta.get("namespace", ""), owner))
        if job_id is None or job_id in finished:
            return
        conds = {c["type"]: c.get("status") for c in
                 (obj.get("status") or {}).get("conditions") or []}
        done = conds.get("Finished") == "True"
        holds = conds.get("QuotaReserved") == "True" and not done
        t = now_s()
        changed = True
        if holds and job_id not in holding:
            holding[job_id] = last_admitted[job_id] = t
            result.starts[job_id].append(t)
        elif not holds and job_id in holding:
            run_left[job_id] -= t - holding.pop(job_id)
            if done:
                finished.add(job_id)
                result.finished[job_id] = t
                a = by_id[job_id]
                base.record(history, a.tenant, a.tier, a.template, a.model, a.run)
            else:
                result.evictions += 1
                resume.append(job_id)

    store.subscribe_raw(on_event)
    for ns in sorted({naming.namespace_name(t, p) for t, pools in base.QUOTA.items()
                      for p in pools}):
        store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": ns}})
        store.create("serviceaccounts", {"apiVersion": "v1", "kind": "ServiceAccount",
                                         "metadata": {"name": naming.SERVICE_ACCOUNT_NAME,
                                                      "namespace": ns},
                                         "automountServiceAccountToken": False}, namespace=ns)
    for obj in desired_cluster_objects():
        store.create("priorityclasses.scheduling.k8s.io", obj)
    plural = {"ResourceFlavor": "resourceflavors", "Cohort": "cohorts",
              "ClusterQueue": "clusterqueues", "LocalQueue": "localqueues",
              "WorkloadPriorityClass": "workloadpriorityclasses", "Topology": "topologies"}
    for obj in kueue_objects():
        group = obj["apiVersion"].split("/")[0]
        store.create(f"{plural[obj['kind']]}.{group}", obj,
                     namespace=obj["metadata"].get("namespace"))
    visibility = Visibility(sim)
    nxt = 0
    limit = max_days * 86400

    def set_remaining(job_id: int) -> None:
        """The resumed run's pods run what is left (the checkpoint's resume)."""
        job = jobs[job_id]
        left = max(1.0, run_left[job_id])
        obj = store.get("pytorchjobs.kubeflow.org", job.k8s_name,
                        namespace=job.pool.namespace)
        body = {"spec": {"pytorchReplicaSpecs": {
            kind: {"template": {"metadata": {"annotations": {RUN_SECONDS: f"{left:.3f}"}}}}
            for kind in obj["spec"]["pytorchReplicaSpecs"]}}}
        store.patch("pytorchjobs.kubeflow.org", job.k8s_name, body,
                    namespace=job.pool.namespace)

    def forecast(t: float) -> None:
        """Each queued job's ETA as ``jobs.backends.kueue.waiting_info`` computes it."""
        pods = [p for p in store.list("pods") if (p.get("spec") or {}).get("nodeName")
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        used = dict.fromkeys(model_of, 0)
        placed: dict[int, list[str]] = defaultdict(list)
        for p in pods:
            node = p["spec"]["nodeName"]
            job_id = int(p["metadata"]["labels"].get(naming.LABEL_JOB, 0))
            if node in used and job_id in by_id:
                used[node] += by_id[job_id].per
                placed[job_id].append(node)
        views: list[JobView] = []
        queued = []
        running: dict[int, tuple[float, int, str]] = {}
        for job_id in sorted(arrived - finished):
            a = by_id[job_id]
            kw: dict[str, Any] = {}
            if job_id in holding:
                state = "running"
                kw.update(admitted_at=at(holding[job_id]), started_at=at(holding[job_id]),
                          placement=tuple(sorted(placed[job_id])))
                running[job_id] = (holding[job_id], a.replicas * a.per, a.model)
            elif placed[job_id]:   # evicted, its pods in their grace
                state = "preempting"
                kw.update(placement=tuple(sorted(placed[job_id])),
                          preempt_deadline=at(t + base.GRACE[a.tier]))
            else:
                state = "queued"
                queued.append(jobs[job_id])
            views.append(JobView(
                id=a.id, tenant=a.tenant, pool=a.pool, tier=a.tier, gpu_model=a.model,
                mig_profile="", replicas=a.replicas, gpus_per_replica=a.per, state=state,
                submitted_at=at(a.at), expected_seconds=a.estimate,
                max_run_seconds=base.MAX_RUN, template=a.template, **kw))
        if not queued:
            return
        result.max_queue = max(result.max_queue, len(queued))
        wls = workloads_by_job(store.list(WORKLOADS))
        queues = {cluster_queue_of(j) for j in queued}   # type: ignore[arg-type]
        found: dict[tuple[str, str], tuple[int, int]] = {}
        for read in _positions(visibility, queues).values():
            found.update(read)
        order = kueue_eta.positions_by_job(queued, wls, found, cluster_queue_of)
        nodes = [NodeView(name, model, switch_of[name], base.NODE_GPUS[name], used[name],
                          {}, {}, True) for name, model in model_of.items()]
        hist = History(durations={k: tuple(sorted(v)) for k, v in history.items()})
        now = at(t)
        d = decide(nodes=nodes, jobs=kueue_eta.in_kueue_order(views, order), quotas=quotas,
                   policy=policy, history=hist, now=now)
        admitted: dict[str, int] = defaultdict(int)
        for job_id, when in last_admitted.items():
            if when >= t - kueue_eta.RATE_WINDOW.total_seconds():
                admitted[cluster_queue_of(jobs[job_id])] += 1   # type: ignore[arg-type]
        window = kueue_eta.RATE_WINDOW.total_seconds()
        rates = {q: n / window for q, n in admitted.items() if n >= kueue_eta.RATE_MIN}
        all_runs = sorted(s for k, v in history.items() if len(k) == 2 for s in v)
        naive = base.naive_etas(t, [v for v in views if v.state == "queued"], running,
                                statistics.fmean(all_runs),
                                all_runs[int(0.9 * (len(all_runs) - 1))])
        for job in queued:
            first = job.pk not in seen
            seen.add(job.pk)
            engine = d.waiting.get(job.pk)
            in_cq = order[job.pk][1] if job.pk in order else None
            by_rate = kueue_eta.rate_eta(now, in_cq, rates.get(cluster_queue_of(job)))
            p50, p90 = kueue_eta.combine(
                (engine.eta_p50, engine.eta_p90) if engine is not None else (None, None),
                by_rate)
            if p50 is not None and p90 is not None:
                result.positioned += in_cq is not None
                if engine is not None and engine.eta_p90 is not None and p90 > engine.eta_p90:
                    result.by_rate += 1
                result.kueue.append(base.Prediction(
                    job.pk, t, (p50 - base.EPOCH).total_seconds(),
                    (p90 - base.EPOCH).total_seconds(), first))
            if job.pk in naive:
                n50, n90 = naive[job.pk]
                result.naive.append(base.Prediction(job.pk, t, n50, n90, first))
        result.passes += 1

    while len(finished) < len(workload) and now_s() <= limit:
        t = now_s()
        while nxt < len(workload) and workload[nxt].at <= t + 1e-9:
            a = workload[nxt]
            nxt += 1
            arrived.add(a.id)
            job = pytorchjob(a)
            store.create("pytorchjobs.kubeflow.org", job,
                         namespace=job["metadata"]["namespace"])
            changed = True
        for _ in range(settle):
            before = store.resource_version
            sim.tick()
            while resume:
                set_remaining(resume.pop())
            if store.resource_version == before:
                break
        if changed:
            changed = False
            forecast(t)
        candidates = [t + step]
        if nxt < len(workload):
            candidates.append(workload[nxt].at)
        due = sim.kubelet.next_due()
        if due is not None:
            candidates.append(due - origin + 1e-6)
        clock.advance(max(1e-6, min(candidates) - t))
    result.sim_seconds = now_s()
    result.unstarted = sum(1 for a in workload if not result.starts.get(a.id))
    return result


def figures(run: Run, engine: base.Result) -> dict[str, dict[str, float]]:
    return {"Kueue mode, every pass": base.score(run.kueue, run.starts),
            "Kueue mode, at submission": base.score(run.kueue, run.starts, True),
            "naive vs Kueue, every pass": base.score(run.naive, run.starts),
            "naive vs Kueue, at submission": base.score(run.naive, run.starts, True),
            **base.figures(engine)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--every", type=float, default=240.0,
                        help="mean seconds between submissions")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--step", type=float, default=60.0,
                        help="the longest simulated step between two events (s)")
    args = parser.parse_args()
    workload = base.make_workload(args.hours, args.every, args.seed)
    print(f"ETA accuracy, Kueue mode: {len(workload)} jobs over {args.hours:g} h of the demo's "
          f"workload (one every {args.every:g} s on average, seed {args.seed}), admitted by "
          f"kubesim's Kueue controller on simulated time; the engine's replay beside it")
    run = run_kueue(workload, args.seed, step=args.step)
    engine = base.replay(workload, args.seed)
    print(f"{'':31}{'predictions':>12}{'median |p50 err|':>17}{'median wait':>12}"
          f"{'err/wait':>9}{'(each)':>8}{'p90 coverage':>13}")
    print(f"{'goal':31}{'':>12}{'':>17}{'':>12}{f'<={base.GOAL_RELATIVE:.0%}':>9}{'':>8}"
          f"{f'>={base.GOAL_COVERAGE:.0%}':>13}")
    for name, f in figures(run, engine).items():
        met = ("meets both goals" if f["relative"] <= base.GOAL_RELATIVE
               and f["coverage"] >= base.GOAL_COVERAGE else "")
        print(f"{name:31}{int(f['n']):>12}{f['mae']:>13.1f} min{f['wait']:>8.1f} min"
              f"{f['relative']:>9.0%}{f['per_prediction']:>8.0%}{f['coverage']:>13.1%}  {met}")
    print(f"Kueue: {run.passes} passes with a queue, longest queue {run.max_queue} jobs, "
          f"{run.positioned} of {len(run.kueue)} predictions with a visibility-API position, "
          f"{run.evictions} evictions, p90 widened by the admission rate in {run.by_rate} "
          f"predictions, never started {run.unstarted}, {run.sim_seconds / 3600:.1f} "
          f"simulated h; engine: longest queue {engine.max_queue}, never started "
          f"{engine.unstarted}, {engine.calls} passes")


if __name__ == "__main__":
    main()
