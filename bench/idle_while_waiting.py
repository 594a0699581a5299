"""GPU capacity idle while work that fits it waits: the OLD quota policy beside the NEW one.

A demo-like workload is replayed for several simulated hours through the pure engine
(``jobs.admission.decide``) twice, on the same arrivals and run times, once per policy;
the policies differ only in the PoolQuota values the engine receives:

* OLD: static tenants (today): every pool's ceiling and batch ceiling equal its grant
  (no borrowing; batch capped at the grant);
* NEW (issue 27, as ``jobs.selectors`` builds it): development and batch borrow any idle
  capacity: every pool's ceiling unbounded (``tenants.demand.UNLIMITED``), a key not
  granted too (``ceiling_default``); the engine holds production to its grant; and the
  watermark counts measured pressure, not allocation, on exclusive whole cards and MIG
  instances (``Policy.exclusive_keys``), so borrowed and batch work may fill every idle
  card. OLD keeps the watermark on allocation.

The cluster: 64 whole A100s (8 nodes of 8, two switches), 32 H800s (4 nodes of 8, one
switch), a MIG node (28 ``1g.10gb`` instances) and a time-sliced L40S node (16 shares).
Four tenants with a prod and a dev pool each, grants well below capacity (about half).
Arrivals are Poisson (``--every`` seconds on average): a random tenant, the dev pool two
times in three (development, or batch one time in three), the prod pool otherwise
(production); a GPU key among the pool's grants; 1, 2, 4 or 8 GPUs on one node or a gang
of 2 x 8 under one switch (never more than the pool's grant of the key, as the submission
check refuses), 1 to 2 MIG instances or 1 to 4 shares. Run times are log-normal (medians
20 min for small jobs, 45 min for a node, 90 min for a gang, sigma 0.8, at most 6 h).

The loop passes every 5 simulated seconds (``TRAINYARD_EXPLAIN_SECONDS`` is 2 and the beat
5: every pass here explains); a pass with nothing new since the last one is skipped for up
to a minute (its decisions would be the same) and the last figure stands for it. Admissions
and preemptions take effect at once; a preempted job stops after its tier's grace and
queues again with the run time it has left. After every pass the waste figure
(``jobs.admission.waste.idle_while_waiting``) is taken on the pass's inputs and decisions
and multiplied by the seconds to the next pass.

Printed per policy: idle-while-waiting as a share of capacity-units x time, by cause
(GPU keys, MIG instances and shares each count as units), the idle share, the mean time
to first admission by tier (and jobs never admitted), passes, and CPU and wall seconds.

    .venv/bin/python bench/idle_while_waiting.py [--hours 8] [--every 45] [--seed 1]
"""

from __future__ import annotations

import argparse
import heapq
import math
import os
import random
import statistics
import sys
import time
from collections import defaultdict
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
from jobs.admission.waste import CAUSES, idle_while_waiting  # noqa: E402
from tenants.demand import UNLIMITED  # noqa: E402

EPOCH = datetime(2026, 3, 2, tzinfo=UTC)
A100, H800, L40S = "NVIDIA-A100-SXM4-80GB", "NVIDIA-H800", "NVIDIA-L40S"
MIG = "1g.10gb"
UNBOUNDED = UNLIMITED
PASS_SECONDS = 5.0
QUIET_PASS_SECONDS = 60.0
MAX_RUN = 6 * 3600.0
GRACE = {"production": 0, "development": 300, "batch": 30}

KEYS = (f"gpu:{A100}", f"gpu:{H800}", f"mig:{MIG}", "gpu-shared")
"""The GPU quota keys of the cluster (shares bind through ``gpu-shared``)."""

GRANTS: dict[str, dict[str, dict[str, int]]] = {   # tenant -> pool -> quota key -> units
    "vision": {"prod": {f"gpu:{A100}": 8, f"gpu:{H800}": 8},
               "dev": {f"gpu:{A100}": 4, f"mig:{MIG}": 2, "gpu-shared": 2}},
    "nlp": {"prod": {f"gpu:{A100}": 8}, "dev": {f"gpu:{A100}": 8, f"gpu:{H800}": 4,
                                               f"mig:{MIG}": 2, "gpu-shared": 2}},
    "speech": {"prod": {f"gpu:{A100}": 4}, "dev": {f"gpu:{A100}": 4, f"mig:{MIG}": 2,
                                                  "gpu-shared": 2}},
    "robotics": {"prod": {f"gpu:{H800}": 4}, "dev": {f"gpu:{A100}": 4, f"mig:{MIG}": 2,
                                                    "gpu-shared": 2}},
}


def cluster() -> list[NodeView]:
    nodes = [NodeView(f"a100-{i}", A100, "sw-a1" if i < 4 else "sw-a2", 8, 0, {}, {}, True)
             for i in range(8)]
    nodes += [NodeView(f"h800-{i}", H800, "sw-b1", 8, 0, {}, {}, True) for i in range(4)]
    nodes.append(NodeView("a100-mig-0", A100, "sw-a3", 0, 0, {MIG: 28}, {}, True))
    nodes.append(NodeView("l40s-shared-0", L40S, "sw-c1", 0, 0, {}, {}, True, shared=16))
    return nodes


def quotas(policy: str) -> list[PoolQuota]:
    out = []
    for tenant, pools in GRANTS.items():
        for pool, grants in pools.items():
            nominal = {key: grants.get(key, 0) for key in KEYS}
            if policy == "NEW":
                out.append(PoolQuota(tenant, pool, nominal, dict.fromkeys(KEYS, UNBOUNDED),
                                     ceiling_default=UNBOUNDED))
            else:
                out.append(PoolQuota(tenant, pool, nominal, dict(nominal),
                                     batch_ceiling=dict(nominal)))
    return out


@dataclass(frozen=True)
class Arrival:
    id: int
    at: float
    tenant: str
    pool: str
    tier: str
    key: str
    replicas: int
    per: int
    run: float


def make_workload(hours: float, every: float, seed: int) -> list[Arrival]:
    rng = random.Random(seed)
    out: list[Arrival] = []
    t = 0.0
    while True:
        t += rng.expovariate(1 / every)
        if t > hours * 3600:
            return out
        tenant = rng.choice(sorted(GRANTS))
        pool = "dev" if rng.random() < 2 / 3 else "prod"
        tier = "production" if pool == "prod" else (
            "batch" if rng.random() < 1 / 3 else "development")
        grants = GRANTS[tenant][pool]
        key = rng.choice(sorted(grants))
        grant = grants[key]
        if key.startswith("gpu:"):
            replicas, per, median = rng.choices(
                [(1, 1, 1200.0), (1, 2, 1200.0), (1, 4, 1800.0), (1, 8, 2700.0),
                 (2, 8, 5400.0)], weights=[35, 15, 15, 25, 10])[0]
            while replicas * per > grant:   # the submission check refuses more
                replicas, per = (1, 8) if replicas > 1 else (1, per // 2)
        else:
            replicas, per, median = 1, rng.randint(1, min(grant, 2 if key.startswith("mig")
                                                           else 4)), 1200.0
        run = min(rng.lognormvariate(math.log(median), 0.8), MAX_RUN)
        out.append(Arrival(len(out) + 1, t, tenant, pool, tier, key, replicas, per, run))


def view_of(a: Arrival) -> JobView:
    kind, _, name = a.key.partition(":")
    shared = a.key == "gpu-shared"
    resources = {"gpu-shared": a.replicas * a.per} if shared else {}
    return JobView(id=a.id, tenant=a.tenant, pool=a.pool, tier=a.tier,
                   gpu_model=L40S if shared else (name if kind == "gpu" else ""),
                   mig_profile=name if kind == "mig" else "", replicas=a.replicas,
                   gpus_per_replica=a.per, state="queued",
                   submitted_at=EPOCH + timedelta(seconds=a.at), gpu_shared=shared,
                   resources=resources, max_run_seconds=MAX_RUN, template=f"{a.replicas}x{a.per}")


@dataclass
class Result:
    policy: str
    waiting: dict[str, float] = field(default_factory=lambda: dict.fromkeys(CAUSES, 0.0))
    idle: float = 0.0
    capacity: float = 0.0
    admission_waits: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    never: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    passes: int = 0
    decided: int = 0
    preempted: int = 0
    cpu: float = 0.0
    wall: float = 0.0
    soft_limit_passes: int = 0   # passes after which soft limits kept fitting work idle


def replay(workload: list[Arrival], policy_name: str, hours: float) -> Result:
    result = Result(policy_name)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    pool_quotas = quotas(policy_name)
    policy = Policy(grace_seconds=GRACE, exclusive_keys=frozenset(
        {f"gpu:{A100}", f"gpu:{H800}", f"mig:{MIG}"} if policy_name == "NEW" else ()))
    base = cluster()
    views: dict[int, JobView] = {}
    by_id = {a.id: a for a in workload}
    used: dict[tuple[str, str], int] = defaultdict(int)   # (node, key) -> units bound
    run_left = {a.id: a.run for a in workload}
    started: dict[int, float] = {}
    epoch_of: dict[int, int] = defaultdict(int)
    events: list[tuple[float, int, int]] = []   # (time, epoch or -1 for a grace end, id)
    durations: dict[tuple[str, ...], list[float]] = defaultdict(list)
    first_admitted: dict[int, float] = {}
    nxt, last_decide, changed = 0, -1e9, True
    figure = None
    t = 0.0
    end = hours * 3600

    def place_key(v: JobView) -> str:
        return v.resource_key

    def bind(v: JobView, sign: int) -> None:
        for node in v.placement:
            used[(node, place_key(v))] += sign * v.gpus_per_replica

    while t <= end:
        while events and events[0][0] <= t:
            _, kind, job_id = heapq.heappop(events)
            v = views.get(job_id)
            if v is None:
                continue
            if kind < 0:
                if v.state != "preempting":
                    continue
                bind(v, -1)
                run_left[job_id] -= t - started.pop(job_id)
                epoch_of[job_id] += 1
                views[job_id] = replace(v, state="queued", placement=(), borrowing=False,
                                        admitted_at=None, started_at=None,
                                        preempt_deadline=None)
            elif kind == epoch_of[job_id] and v.state in ("running", "preempting"):
                bind(v, -1)
                del views[job_id]
                started.pop(job_id, None)
                a = by_id[job_id]
                for k in ((a.tenant, a.tier, v.template, v.gpu_model),
                          (a.tenant, a.tier, v.gpu_model), (a.tenant, a.tier)):
                    durations[k].append(a.run)
                    del durations[k][:-200]
            else:
                continue
            changed = True
        while nxt < len(workload) and workload[nxt].at <= t:
            views[workload[nxt].id] = view_of(workload[nxt])
            nxt += 1
            changed = True
        if changed or t - last_decide >= QUIET_PASS_SECONDS:
            nodes = [replace(n, gpus_used=used[(n.name, f"gpu:{n.gpu_model}")],
                             mig_used={p: used[(n.name, f"mig:{p}")] for p in n.mig},
                             shared_used=used[(n.name, f"shared:{n.gpu_model}")])
                     for n in base]
            jobs = list(views.values())
            history = History(durations={k: tuple(sorted(v)) for k, v in durations.items()})
            d = decide(nodes=nodes, jobs=jobs, quotas=pool_quotas, policy=policy,
                       history=history, now=EPOCH + timedelta(seconds=t))
            result.decided += 1
            figure = idle_while_waiting(nodes=nodes, jobs=jobs, decisions=d)
            for p in d.preempt:
                v = views[p.job_id]
                views[p.job_id] = replace(v, state="preempting",
                                          preempt_deadline=EPOCH + timedelta(
                                              seconds=t + p.grace_seconds))
                heapq.heappush(events, (t + p.grace_seconds, -1, p.job_id))
                result.preempted += 1
            for adm in d.admit:
                v = replace(views[adm.job_id], state="running", placement=adm.placement,
                            borrowing=adm.borrowing, loan=adm.loan,
                            admitted_at=EPOCH + timedelta(seconds=t),
                            started_at=EPOCH + timedelta(seconds=t))
                views[adm.job_id] = v
                bind(v, +1)
                started[adm.job_id] = t
                first_admitted.setdefault(adm.job_id, t)
                heapq.heappush(events, (t + run_left[adm.job_id], epoch_of[adm.job_id],
                                        adm.job_id))
            last_decide, changed = t, False
        result.passes += 1
        assert figure is not None
        # OLD has no cap a platform admin set: every ceiling is the grant, which the engine
        # now words as a cap; before issue 27 those were the soft limits
        soft = {"soft_limit", "cap"} if policy_name == "OLD" else {"soft_limit"}
        if any(k.waiting.get(c) for k in figure.values() for c in soft):
            result.soft_limit_passes += 1
        for k in figure.values():
            result.capacity += k.capacity * PASS_SECONDS
            result.idle += k.free * PASS_SECONDS
            for cause, units in k.waiting.items():
                cause = "soft_limit" if cause in soft else cause
                result.waiting[cause] += units * PASS_SECONDS
        t += PASS_SECONDS
    for a in workload:
        if a.at > end:
            continue
        if a.id in first_admitted:
            result.admission_waits[a.tier].append(first_admitted[a.id] - a.at)
        else:
            result.never[a.tier] += 1
    result.cpu = time.process_time() - cpu0
    result.wall = time.perf_counter() - wall0
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=8.0)
    parser.add_argument("--every", type=float, default=45.0,
                        help="mean seconds between submissions")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="2 simulated hours")
    args = parser.parse_args()
    hours = 2.0 if args.quick else args.hours
    workload = make_workload(hours, args.every, args.seed)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    units = sum(n.gpus + sum(n.mig.values()) + n.shared for n in cluster())
    print(f"Idle while waiting: {len(workload)} jobs over {hours:g} simulated h (one every "
          f"{args.every:g} s on average), {units} GPU units, passes every {PASS_SECONDS:g} s; "
          f"load average {load:.1f}")
    results = [replay(workload, name, hours) for name in ("OLD", "NEW")]
    print(f"{'':34}" + "".join(f"{r.policy:>12}" for r in results))

    def row(label: str, values: list[str]) -> None:
        print(f"{label:34}" + "".join(f"{v:>12}" for v in values))

    row("idle while waiting, % of capacity",
        [f"{100 * sum(r.waiting.values()) / r.capacity:.2f}%" for r in results])
    for cause in CAUSES:
        row(f"  {cause}", [f"{100 * r.waiting[cause] / r.capacity:.2f}%" for r in results])
    row("passes with soft-limit waste", [f"{r.soft_limit_passes}/{r.passes}" for r in results])
    row("idle (all free units), % of cap.", [f"{100 * r.idle / r.capacity:.1f}%"
                                               for r in results])
    for tier in ("production", "development", "batch"):
        row(f"mean time to admission, {tier}",
            [f"{statistics.fmean(r.admission_waits[tier]) / 60:.1f} min"
             if r.admission_waits[tier] else "-" for r in results])
        row(f"  never admitted ({tier})", [str(r.never[tier]) for r in results])
    row("preemptions", [str(r.preempted) for r in results])
    row("decide() calls", [str(r.decided) for r in results])
    row("CPU seconds", [f"{r.cpu:.1f}" for r in results])
    row("wall seconds", [f"{r.wall:.1f}" for r in results])


if __name__ == "__main__":
    main()
