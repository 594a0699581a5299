"""The incremental engine (``jobs.admission.incremental.Engine``) decides exactly as the
full recomputation (``jobs.admission.decide``), the checker, on random histories.

A history is a list of events on a small random cluster: submissions (GPU, MIG, shared,
CPU-only; held or not; with CPU and memory dimensions or not), the engine's decisions
applied (admission, pods bound, preemption, the preempted job stopping and re-queued),
finishes, cancellations, quota changes, node changes (cordon, dedication, pods outside the
jobs), decayed usage, measured use, policy changes and the clock. After every event both
engines decide on the same inputs and must return equal ``Decisions`` (admissions,
preemptions, and every waiting job's positions, ETA and reason).
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.admission import Decisions, History, JobView, NodeView, Policy, PoolQuota, decide
from jobs.admission.incremental import Engine

from .test_admission_helpers import NOW

MODELS = ("A", "B", "C")
MIG = "1g.10gb"
TENANTS = ("t0", "t1", "t2", "t3", "t4")
POOLS = ("prod", "dev")
TIER_OF = {"prod": ("production", "batch"), "dev": ("development", "batch")}

EVENTS = ("submit", "submit", "submit", "submit", "apply", "apply", "bind", "finish",
          "stop", "cancel", "quota", "node", "usage", "physical", "policy", "tick", "hold",
          "succeeded")


@dataclass
class World:
    """The cluster and the jobs as the admission loop would see them."""

    rng: random.Random
    now: datetime = NOW
    nodes: dict[str, dict] = field(default_factory=dict)
    jobs: dict[int, JobView] = field(default_factory=dict)
    quotas: dict[tuple[str, str], PoolQuota] = field(default_factory=dict)
    usage: dict[str, float] = field(default_factory=dict)
    physical: dict[str, float] = field(default_factory=dict)
    policy: Policy = field(default_factory=Policy)
    history: History = field(default_factory=History)
    next_id: int = 1
    last: Decisions | None = None

    @classmethod
    def make(cls, seed: int) -> World:
        rng = random.Random(seed)
        world = cls(rng)
        for i in range(rng.randint(3, 9)):
            model = rng.choice(MODELS)
            world.nodes[f"n{i:02d}"] = {
                "model": model, "switch": f"s{rng.randint(0, 1)}", "gpus": rng.choice((4, 8)),
                "mig": {MIG: 7} if rng.random() < 0.2 else {},
                "shared": rng.choice((0, 0, 0, 8)), "cpu": rng.choice((0, 64000)),
                "memory": 256000, "schedulable": rng.random() > 0.1,
                "dedicated": rng.choice(("",) * 6 + ("t0",)), "outside": 0}
        for tenant in TENANTS:
            for pool in POOLS:
                world.quotas[(tenant, pool)] = world.random_quota(tenant, pool)
        world.history = History(
            durations={("t1", "development"): (60.0, 120.0, 600.0, 900.0, 1800.0)})
        return world

    def random_quota(self, tenant: str, pool: str) -> PoolQuota:
        rng = self.rng
        nominal = {f"gpu:{m}": rng.choice((0, 4, 8, 16)) for m in MODELS}
        nominal[f"mig:{MIG}"] = rng.choice((0, 2, 7))
        nominal["gpu-shared"] = rng.choice((0, 4, 8))
        nominal["cpu"] = rng.choice((16000, 64000))
        nominal["memory"] = 128000
        ceiling = {k: v + rng.choice((0, 0, 4, 16)) for k, v in nominal.items()}
        guaranteed = ({k: v // 2 for k, v in nominal.items()}
                      if rng.random() < 0.3 else None)
        batch = {k: v + 8 for k, v in ceiling.items()} if rng.random() < 0.3 else None
        return PoolQuota(tenant, pool, nominal, ceiling, guaranteed=guaranteed,
                         batch_ceiling=batch)

    # -- inputs --------------------------------------------------------------------------

    def node_views(self) -> list[NodeView]:
        used: dict[tuple[str, str], int] = defaultdict(int)
        cpu: dict[str, int] = defaultdict(int)
        for job in self.jobs.values():
            if job.state in ("running", "preempting"):
                for name in job.placement:
                    used[(name, job.resource_key)] += job.gpus_per_replica
                    cpu[name] += dict(job.dims).get("cpu", 0) // max(job.replicas, 1)
        out = []
        for name, n in self.nodes.items():
            model = n["model"]
            out.append(NodeView(
                name=name, gpu_model=model, switch=n["switch"], gpus=n["gpus"],
                gpus_used=used[(name, f"gpu:{model}")] + n["outside"], mig=n["mig"],
                mig_used={p: used[(name, f"mig:{p}")] for p in n["mig"]},
                schedulable=n["schedulable"], dedicated_to=n["dedicated"],
                shared=n["shared"], shared_used=used[(name, f"shared:{model}")],
                cpu=n["cpu"], cpu_used=cpu[name] if n["cpu"] else 0,
                memory=n["memory"] if n["cpu"] else 0))
        return out

    def inputs(self) -> dict:
        return {"nodes": self.node_views(), "jobs": list(self.jobs.values()),
                "quotas": list(self.quotas.values()), "policy": self.policy,
                "history": replace(self.history, usage=dict(self.usage)), "now": self.now,
                "physical": dict(self.physical)}

    # -- events --------------------------------------------------------------------------

    def event(self, name: str, param: int) -> None:
        rng = random.Random(param)
        getattr(self, f"on_{name}")(rng)

    def on_submit(self, rng: random.Random) -> None:
        tenant, pool = rng.choice(TENANTS), rng.choice(POOLS)
        tier = rng.choice(TIER_OF[pool])
        kind = rng.choice(("gpu", "gpu", "gpu", "mig", "shared", "cpu"))
        model, mig, shared = rng.choice(MODELS), "", False
        replicas, per = rng.choice(((1, 1), (1, 2), (1, 4), (2, 4), (1, 8), (3, 2), (2, 8)))
        if kind == "mig":
            model, mig, per = "", MIG, rng.choice((1, 2))
        elif kind == "shared":
            shared, replicas, per = True, 1, rng.choice((1, 2))
        elif kind == "cpu":
            per = 0
        resources: dict[str, int] = {}
        if kind == "shared":
            resources["gpu-shared"] = replicas * per
        if kind == "cpu" or rng.random() < 0.3:
            resources["cpu"] = replicas * rng.choice((2000, 8000))
            resources["memory"] = replicas * 16000
        job = JobView(
            id=self.next_id, tenant=tenant, pool=pool, tier=tier, gpu_model=model,
            mig_profile=mig, replicas=replicas, gpus_per_replica=per, state="queued",
            submitted_at=self.now - timedelta(seconds=rng.randint(0, 5)),
            expected_seconds=rng.choice((None, 30.0, 600.0, 3600.0)),
            priority=rng.choice((0, 0, 1, 2)), held=rng.random() < 0.1, gpu_shared=shared,
            resources=resources, max_run_seconds=rng.choice((None, 7200.0)),
            template=rng.choice(("", "llm")))
        self.next_id += 1
        self.jobs[job.id] = job

    def on_apply(self, rng: random.Random) -> None:
        """Carry out the last decisions (all, or a random part of them)."""
        if self.last is None:
            return
        share = rng.choice((1.0, 1.0, 0.5))
        for a in self.last.admit:
            job = self.jobs.get(a.job_id)
            if job is None or job.state != "queued" or rng.random() > share:
                continue
            self.jobs[a.job_id] = replace(job, state="admitted", placement=a.placement,
                                          borrowing=a.borrowing, loan=a.loan,
                                          admitted_at=self.now)
        for p in self.last.preempt:
            job = self.jobs.get(p.job_id)
            if job is None or job.state not in ("running", "admitted") or rng.random() > share:
                continue
            if job.state == "admitted":   # never bound: re-queued at once
                self.jobs[p.job_id] = self.requeued(job)
                continue
            self.jobs[p.job_id] = replace(
                job, state="preempting",
                preempt_deadline=self.now + timedelta(seconds=p.grace_seconds),
                placement=job.placement if rng.random() < 0.8 else ())
        self.last = None

    @staticmethod
    def requeued(job: JobView) -> JobView:
        return replace(job, state="queued", placement=(), borrowing=False, loan=None,
                       admitted_at=None, started_at=None, preempt_deadline=None)

    def pick(self, rng: random.Random, *states: str) -> JobView | None:
        found = sorted(j.id for j in self.jobs.values() if j.state in states)
        return self.jobs[rng.choice(found)] if found else None

    def on_bind(self, rng: random.Random) -> None:
        job = self.pick(rng, "admitted")
        if job is not None:
            self.jobs[job.id] = replace(job, state="running", started_at=self.now)

    def on_finish(self, rng: random.Random) -> None:
        job = self.pick(rng, "running", "running", "admitted")
        if job is not None:
            del self.jobs[job.id]

    def on_stop(self, rng: random.Random) -> None:
        job = self.pick(rng, "preempting")
        if job is not None:
            self.jobs[job.id] = self.requeued(job)

    def on_cancel(self, rng: random.Random) -> None:
        job = self.pick(rng, "queued")
        if job is not None:
            del self.jobs[job.id]

    def on_hold(self, rng: random.Random) -> None:
        job = self.pick(rng, "queued")
        if job is not None:
            self.jobs[job.id] = replace(job, held=not job.held)

    def on_quota(self, rng: random.Random) -> None:
        self.rng = rng
        tenant, pool = rng.choice(TENANTS), rng.choice(POOLS)
        self.quotas[(tenant, pool)] = self.random_quota(tenant, pool)

    def on_node(self, rng: random.Random) -> None:
        node = self.nodes[rng.choice(sorted(self.nodes))]
        what = rng.choice(("schedulable", "dedicated", "outside", "switch"))
        if what == "schedulable":
            node["schedulable"] = not node["schedulable"]
        elif what == "dedicated":
            node["dedicated"] = rng.choice(("", "t0", "t2"))
        elif what == "outside":
            node["outside"] = rng.choice((0, 1, 2))
        else:
            node["switch"] = rng.choice(("s0", "s1", "s2"))

    def on_succeeded(self, rng: random.Random) -> None:
        """A run of a tenant's ends: its run times (History) move."""
        tenant, tier = rng.choice(TENANTS), rng.choice(("development", "production", "batch"))
        durations = dict(self.history.durations)
        for found in ((tenant, tier), (tenant, tier, rng.choice(MODELS)),
                      (tenant, tier, "llm", rng.choice(MODELS))):
            durations[found] = tuple(sorted((*durations.get(found, ()),
                                             float(rng.choice((20, 300, 4000))))))
        self.history = replace(self.history, durations=durations)

    def on_usage(self, rng: random.Random) -> None:
        self.usage[rng.choice(TENANTS)] = rng.choice((0.0, 3600.0, 86400.0, 1e6))

    def on_physical(self, rng: random.Random) -> None:
        key = rng.choice([f"gpu:{m}" for m in MODELS] + [f"mig:{MIG}"])
        self.physical[key] = rng.choice((0.0, 0.5, 0.9, 1.0))

    def on_policy(self, rng: random.Random) -> None:
        self.policy = Policy(watermark=rng.choice((0.85, 0.7, 1.0)),
                             preempt_lower_priority_within_tenant=rng.random() < 0.5)

    def on_tick(self, rng: random.Random) -> None:
        self.now += timedelta(seconds=rng.choice((1, 5, 60, 900)))


def check(world: World, engine: Engine) -> Decisions:
    inputs = world.inputs()
    full = decide(**inputs)
    incremental = engine.decide(**inputs)
    assert incremental.admit == full.admit
    assert incremental.preempt == full.preempt
    assert incremental.waiting == full.waiting
    world.last = full
    return full


def play(seed: int, events: list[tuple[str, int]], engine: Engine) -> World:
    world = World.make(seed)
    for _ in range(world.rng.randint(3, 12)):
        world.on_submit(world.rng)
    check(world, engine)
    for name, param in events:
        world.event(name, param)
        check(world, engine)
    return world


event_lists = st.lists(st.tuples(st.sampled_from(EVENTS), st.integers(0, 2**31)),
                       min_size=1, max_size=40)


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31), events=event_lists)
def test_incremental_decides_as_the_full_engine(seed, events):
    """max_age=0: a group decided at another instant is decided again, so every pass
    must equal the full engine's, whatever was reused."""
    play(seed, events, Engine(max_age=0))


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31),
       events=st.lists(st.tuples(st.sampled_from([e for e in EVENTS if e != "tick"]),
                                 st.integers(0, 2**31)), min_size=1, max_size=40))
def test_incremental_decides_as_the_full_engine_while_time_stands(seed, events):
    """With the default max_age and the clock still, only changes make a group decide
    again: reuse must be exact."""
    play(seed, events, Engine())


def test_long_seeded_histories():
    """A few long histories (hundreds of events each), the same every run."""
    for seed in range(4):
        rng = random.Random(seed)
        events = [(rng.choice(EVENTS), rng.randrange(2**31)) for _ in range(250)]
        play(seed, events, Engine(max_age=0))


def test_unchanged_groups_are_reused_and_changed_ones_decided_again():
    """Two GPU models with disjoint tenants are two groups: a submission on one decides
    that group again and reuses the other (and the result still equals the full one)."""
    world = World.make(7)
    world.nodes = {
        "a1": {"model": "A", "switch": "s0", "gpus": 8, "mig": {}, "shared": 0, "cpu": 0,
               "memory": 0, "schedulable": True, "dedicated": "", "outside": 0},
        "b1": {"model": "B", "switch": "s0", "gpus": 8, "mig": {}, "shared": 0, "cpu": 0,
               "memory": 0, "schedulable": True, "dedicated": "", "outside": 0}}
    for i, (tenant, model) in enumerate((("t0", "A"), ("t1", "A"), ("t2", "B")) * 3):
        world.jobs[i + 1] = JobView(
            id=i + 1, tenant=tenant, pool="dev", tier="development", gpu_model=model,
            mig_profile="", replicas=1, gpus_per_replica=4, state="queued",
            submitted_at=NOW - timedelta(seconds=100 - i))
    world.next_id = 100
    engine = Engine()
    check(world, engine)
    assert engine.stats["groups_decided"] == 2
    world.on_apply(random.Random(0))
    world.jobs[100] = replace(world.jobs[1], id=100, tenant="t2", gpu_model="B")
    check(world, engine)
    assert engine.stats["groups_decided"] == 4   # both changed: admissions applied on both
    world.jobs[101] = replace(world.jobs[1], id=101, tenant="t0", gpu_model="A")
    check(world, engine)
    assert engine.stats["groups_decided"] == 5
    assert engine.stats["groups_reused"] == 1


def test_a_restarted_engine_and_a_reset_one_decide_the_same():
    """State is rebuilt from the inputs: a fresh engine (a restarted process), a reset or a
    new generation decide like the one that saw every pass."""
    world = play(3, [("submit", i) for i in range(8)] + [("apply", 1), ("bind", 2)],
                 Engine(max_age=0))
    inputs = world.inputs()
    seen = Engine(max_age=0)
    for _ in range(2):
        seen.decide(**inputs)
    fresh = Engine(max_age=0).decide(**inputs)
    assert fresh == decide(**inputs) == seen.decide(**inputs)
    seen.decide(**inputs, generation=1)
    assert seen.stats["groups_reused"] > 0
    before = seen.stats["groups_decided"]
    seen.decide(**inputs, generation=2)   # another counter: everything decided again
    assert seen.stats["groups_decided"] > before
    seen.reset()
    assert seen.decide(**inputs) == decide(**inputs)


def test_a_group_older_than_max_age_is_decided_again():
    world = World.make(11)
    for _ in range(6):
        world.on_submit(world.rng)
    engine = Engine(max_age=30)
    check(world, engine)
    decided = engine.stats["groups_decided"]
    world.now += timedelta(seconds=10)
    engine.decide(**world.inputs())
    assert engine.stats["groups_decided"] == decided   # within max_age: reused
    world.now += timedelta(seconds=60)
    check(world, engine)
    assert engine.stats["groups_decided"] > decided


def test_a_change_of_usage_alone_keeps_the_outcome_when_the_order_stays():
    """The decayed usage moves on every pass (the loop decays it to now): a group whose
    order it does not change is not decided again; one whose order it changes is."""
    world = World.make(5)
    world.nodes = {"a1": {"model": "A", "switch": "s0", "gpus": 4, "mig": {}, "shared": 0,
                          "cpu": 0, "memory": 0, "schedulable": True, "dedicated": "",
                          "outside": 0}}
    for i, tenant in enumerate(("t0", "t1") * 3):
        world.jobs[i + 1] = JobView(
            id=i + 1, tenant=tenant, pool="dev", tier="development", gpu_model="A",
            mig_profile="", replicas=1, gpus_per_replica=4, state="queued",
            submitted_at=NOW - timedelta(seconds=100 - i))
    world.quotas = {(t, "dev"): PoolQuota(t, "dev", {"gpu:A": 4}, {"gpu:A": 8})
                    for t in ("t0", "t1")}
    world.usage = {"t0": 100.0, "t1": 0.0}
    engine = Engine()
    check(world, engine)
    world.usage["t0"] = 110.0   # still ahead of t1 in share: the same order
    check(world, engine)
    assert engine.stats["groups_reordered"] == 1
    assert engine.stats["groups_decided"] == 1
    world.usage["t1"] = 1e9     # t1 now far behind: its jobs move back
    first = check(world, engine)
    assert engine.stats["groups_decided"] == 2
    assert min(first.waiting, key=lambda i: first.waiting[i].position_in_pool) % 2 == 1


def test_verification_decides_reused_groups_again_and_counts_a_difference():
    """A reused group that differs from a new decision at its own instant (here: a result
    tampered with, as a bug would) is caught by the periodic check and replaced."""
    world = World.make(2)
    for _ in range(8):
        world.on_submit(world.rng)
    engine = Engine(verify_every=3)
    inputs = world.inputs()
    engine.decide(**inputs)
    engine.decide(**inputs)
    assert engine.stats["mismatches"] == 0
    for group in engine._groups.values():   # a wrong reason kept for a reused group
        group.ordered = [(e, j, a, "tampered", b, eta) for e, j, a, _r, b, eta in group.ordered]
    got = engine.decide(**inputs)
    assert engine.stats["mismatches"] == len(engine._groups) > 0
    assert got == decide(**inputs)
    world.now += timedelta(seconds=10)   # reused groups are checked at their own instant
    for _ in range(3):
        engine.decide(**world.inputs())
    assert engine.stats["mismatches"] == len(engine._groups)
