"""The incremental admission engine: the decisions of :func:`jobs.admission.decide` from
work proportional to what changed between two passes.

:class:`Engine` keeps the last pass's inputs and results. Its ``decide()`` takes the same
arguments as :func:`jobs.admission.decide` and returns the same :class:`Decisions`; it
recomputes only the *groups* of resource keys whose inputs changed and reuses the rest.

**Groups.** A group is a set of resource keys (GPU models, MIG profiles, shared cards;
"" for CPU-only jobs) joined by the tenants that have jobs on several of them (a tenant's
fair share counts all its jobs) and, when CPU-only jobs wait, by the jobs whose CPU and
memory take room on the nodes they need. Nothing else of a pass crosses keys: capacity,
quota use, victims, reservations, the watermark and the ETA simulation are per key or
per tenant pool, and the per-pass outcome memo sees only the job's key and pool
(``_Pass.consider``). So a group decided on its own jobs, nodes and quotas decides exactly
as in the whole pass. The admission order is a merge of the tenants' own queues by an
entry that depends on the tenant alone (:mod:`jobs.admission.order`), so the whole order
is the merge of the groups' orders by that entry; positions in a pool (which count every
GPU model) and the queue-place part of the reasons are assembled from it on every pass.

**What makes a group change.** A job added, removed or changed in any way (state,
placement, hold, ...) on one of its keys; a node that carries one of its keys (any node
for CPU-only jobs); the quota of one of its tenants; the measured use (``physical``) of
one of its keys; a tenant's decayed usage or run-time history (History keys start with
the tenant); the policy (all groups); a change of the groups themselves (a tenant's first
job on another key); and
time: a group decided at another ``now`` is decided again when it is older than
``max_age`` seconds (0: whenever ``now`` moved; the default for the admission loop keeps
an unchanged group's decisions, reasons and ETAs, computed at that time, for at most
that long: ETAs are instants, and what only the passing of time changes (a running
job's expected end once it is overdue, which moves a reservation) waits that long).

**Restart and other processes.** The engine is a cache of its own inputs: it compares
each input with the one it last saw, whoever changed the database, so a restart (empty
state: the first pass decides everything) and another process's writes are both just
changes. ``reset()`` forgets everything; ``decide(generation=...)`` resets whenever the
caller's counter differs from the last one it passed.

The full recomputation (:func:`jobs.admission.decide`) stays the reference: the property
test ``jobs/tests/test_admission_incremental.py`` drives both through random histories
and requires identical decisions; ``bench/admission_scaling.py`` times both.
"""

from __future__ import annotations

import heapq
import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobs.choices import JobState

from . import text
from .engine import _Pass
from .explain import _CAPACITY, Overtaking
from .order import Entry, borrow_predicate, fair_order
from .types import (
    ACTIVE_STATES,
    TIER_RANK,
    TIERS,
    Admission,
    Decisions,
    History,
    JobView,
    NodeView,
    Policy,
    PoolQuota,
    Preemption,
    Text,
    WaitInfo,
)

_CPU = ""
"""The key of CPU-only jobs."""

_Eta = tuple[datetime | None, datetime | None]
_Item = tuple[Entry, JobView, bool, Text, bool, _Eta]
"""One job of a group's order: (merge entry, job, admitted, reason, capacity-bound, ETA)."""
_Held = tuple[tuple[int, datetime, int], JobView, Text]
_NO_ETA: _Eta = (None, None)


class _GroupPass(_Pass):
    """A pass over one group that keeps what the whole-cluster assembly needs: each job's
    merge entry, reason, capacity-bound flag and ETA (it builds no WaitInfo)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entries: dict[int, Entry] = {}
        self.ordered: list[JobView] = []
        self.eta_of: dict[int, _Eta] = {}

    def order(self, queued: list[JobView]) -> list[JobView]:
        self.ordered = fair_order(queued, self.tenant_use, self.nominal_total, self.history,
                                  self.policy, self.entries,
                                  borrow_predicate(self.active, self.quota.values()))
        return self.ordered

    def explain(self, waiting: list[JobView]) -> None:
        self.eta_of = self.etas(waiting)


@dataclass
class _Group:
    """One group's result, as decided at ``now``."""

    keys: frozenset[str]
    now: datetime
    admit: list[Admission]
    preempt: list[Preemption]
    ordered: list[_Item]
    held: list[_Held]
    explained: bool = True
    """Decided with its ETAs (``decide(explain=True)``); else ``ordered`` has none."""


def _node_keys(node: NodeView) -> tuple[str, ...]:
    """The resource keys a node carries (as :class:`jobs.admission.capacity.Capacity`)."""
    keys: list[str] = []
    if node.gpu_model and node.gpus > 0:
        keys.append(f"gpu:{node.gpu_model}")
    if node.gpu_model and node.shared > 0:
        keys.append(f"shared:{node.gpu_model}")
    keys.extend(f"mig:{p}" for p, n in node.mig.items() if n > 0)
    return tuple(keys)


def _shape(node: NodeView) -> tuple[object, ...]:
    """What of a node decides which gangs could ever run on it (not what is in use)."""
    return (node.gpu_model, node.switch, node.gpus, tuple(sorted(node.mig.items())),
            node.schedulable, node.dedicated_to, node.shared)


def _takes_cpu(job: JobView) -> bool:
    return any(dim in ("cpu", "memory") for dim, _ in job.dims)


class Engine:
    """Incremental :func:`jobs.admission.decide` (see the module docstring).

    ``max_age``: seconds of ``now`` a group's result is kept while nothing of it changes
    (0: decided again whenever ``now`` moves, exactly :func:`decide` at every pass).
    ``verify_every``: every so many passes, decide every reused group again, at the
    instant it was decided (its inputs are the same, or it would not be reused), and
    compare; on a difference (a bug), count it (``stats["mismatches"]``) and use the new
    result (0: never).
    """

    def __init__(self, *, max_age: float = 30.0, verify_every: int = 0) -> None:
        self.max_age = max_age
        self.verify_every = verify_every
        self._lock = threading.Lock()
        self.generation: object = None
        self.stats: dict[str, int] = defaultdict(int)
        """Counters: passes, groups decided and reused, jobs decided (for benches)."""
        self.reset()

    def reset(self) -> None:
        """Forget every input and result: the next pass decides everything."""
        self._jobs: dict[int, JobView] = {}
        self._nodes: dict[str, NodeView] = {}
        self._quotas: dict[tuple[str, str], PoolQuota] = {}
        self._policy: Policy | None = None
        self._history: History | None = None
        self._physical: dict[str, float] = {}
        self._tenant_keys: dict[str, set[str]] = {}
        self._groups: dict[frozenset[str], _Group] = {}
        self._durations: dict[int, tuple[float, float]] = {}
        """Per-job facts kept between passes: (p50, p90) run time by job id (a job that
        changed is forgotten; all of them when the policy or the run-time history did)."""
        self._verdicts: dict[str, dict[tuple[object, ...], Text | None]] = {}
        """Per key, whether jobs of a pool, tier and shape can never start
        (``_Pass.never_reason``): forgotten for a key when a node of it is added, removed
        or changes shape, all of them when a quota or the policy changes."""

    # -- the pass ------------------------------------------------------------------------

    def decide(self, *, nodes: Sequence[NodeView], jobs: Sequence[JobView],
               quotas: Sequence[PoolQuota], policy: Policy, history: History, now: datetime,
               physical: Mapping[str, float] | None = None,
               generation: object = None, explain: bool = True) -> Decisions:
        """:func:`jobs.admission.decide` on these inputs, reusing what did not change
        (one pass at a time: passes of two threads run one after the other).
        ``explain=False`` as there: no WaitInfo; a group decided so is decided again by
        the next pass that explains, even if nothing of it changed."""
        with self._lock:
            return self._decide(nodes=nodes, jobs=jobs, quotas=quotas, policy=policy,
                                history=history, now=now, physical=physical,
                                generation=generation, explain=explain)

    def _decide(self, *, nodes: Sequence[NodeView], jobs: Sequence[JobView],
                quotas: Sequence[PoolQuota], policy: Policy, history: History, now: datetime,
                physical: Mapping[str, float] | None, generation: object,
                explain: bool = True) -> Decisions:
        if generation is not None and generation != self.generation:
            self.reset()
            self.generation = generation
        self.stats["passes"] += 1
        verify = bool(self.verify_every) and self.stats["passes"] % self.verify_every == 0
        physical = dict(physical or {})
        every = False   # every group is decided again
        dirty_keys: set[str] = set()
        dirty_tenants: set[str] = set()
        usage_tenants: set[str] = set()   # only their decayed usage changed

        if self._policy is None or (policy is not self._policy and policy != self._policy):
            every = True
            self._durations.clear()
            self._verdicts.clear()
        old_history = self._history
        if old_history is None:
            every = True
        elif history is not old_history:
            old_durations = old_history.durations
            if history.durations is not old_durations and history.durations != old_durations:
                self._durations.clear()
                # run times are keyed (tenant, tier, ...): a job reads its own tenant's
                for found in set(old_durations) | set(history.durations):
                    if old_durations.get(found) != history.durations.get(found):
                        dirty_tenants.add(found[0] if found else "")
            old_usage = old_history.usage
            if history.usage is not old_usage and history.usage != old_usage:
                for tenant in set(old_usage) | set(history.usage):
                    if old_usage.get(tenant) != history.usage.get(tenant):
                        usage_tenants.add(tenant)
        if physical != self._physical:
            for key in set(physical) | set(self._physical):
                if physical.get(key) != self._physical.get(key):
                    dirty_keys.add(key)

        node_by_name: dict[str, NodeView] = {}
        key_nodes: dict[str, list[NodeView]] = defaultdict(list)
        old_nodes = self._nodes
        for node in nodes:
            node_by_name[node.name] = node
            node_keys = _node_keys(node)
            for key in node_keys:
                key_nodes[key].append(node)
            old = old_nodes.get(node.name)
            if old is None or (old is not node and old != node):
                dirty_keys.update(node_keys)
                dirty_keys.add(_CPU)
                if old is not None:
                    dirty_keys.update(_node_keys(old))
                if old is None or _shape(old) != _shape(node):
                    self._forget_verdicts(node_keys)
                    if old is not None:
                        self._forget_verdicts(_node_keys(old))
        for name, old in old_nodes.items():
            if name not in node_by_name:
                dirty_keys.update(_node_keys(old))
                dirty_keys.add(_CPU)
                self._forget_verdicts(_node_keys(old))

        quota_by: dict[tuple[str, str], PoolQuota] = {}
        tenant_quotas: dict[str, list[PoolQuota]] = defaultdict(list)
        old_quotas = self._quotas
        for q in quotas:
            quota_by[(q.tenant, q.pool)] = q
            tenant_quotas[q.tenant].append(q)
            old_q = old_quotas.get((q.tenant, q.pool))
            if old_q is None or (old_q is not q and old_q != q):
                dirty_tenants.add(q.tenant)
                self._verdicts.clear()
        for pair in old_quotas:
            if pair not in quota_by:
                dirty_tenants.add(pair[0])
                self._verdicts.clear()

        job_by_id: dict[int, JobView] = {}
        tenant_keys: dict[str, set[str]] = defaultdict(set)
        key_jobs: dict[str, list[JobView]] = defaultdict(list)
        old_jobs = self._jobs
        cpu_takers: list[JobView] = []
        for job in jobs:
            job_by_id[job.id] = job
            key = job.resource_key
            tenant_keys[job.tenant].add(key)
            key_jobs[key].append(job)
            if job.dims and key and _takes_cpu(job):
                cpu_takers.append(job)
            old_job = old_jobs.get(job.id)
            if old_job is None or (old_job is not job and old_job != job):
                self._durations.pop(job.id, None)
                dirty_keys.add(key)
                if old_job is not None:
                    dirty_keys.add(old_job.resource_key)
        for job_id, old_job in old_jobs.items():
            if job_id not in job_by_id:
                self._durations.pop(job_id, None)
                dirty_keys.add(old_job.resource_key)
        for tenant in dirty_tenants:
            dirty_keys.update(tenant_keys.get(tenant, ()))
            dirty_keys.update(self._tenant_keys.get(tenant, ()))
        usage_keys: set[str] = set()
        for tenant in usage_tenants:
            usage_keys.update(tenant_keys.get(tenant, ()))

        groups = self._group_keys(key_jobs, tenant_keys, cpu_takers)
        results: list[_Group] = []
        kept: dict[frozenset[str], _Group] = {}
        for keys in groups:
            previous = self._groups.get(keys)
            age = (now - previous.now).total_seconds() if previous is not None else 0.0
            stale = (previous is None or every or not dirty_keys.isdisjoint(keys)
                     or age < 0 or age > self.max_age or (explain and not previous.explained))
            members: list[JobView] = []
            group_quotas: list[PoolQuota] = []
            if stale or verify or not usage_keys.isdisjoint(keys):
                members = [j for key in keys for j in key_jobs[key]]
                tenants = {j.tenant for j in members}
                group_quotas = [q for t in tenants for q in tenant_quotas.get(t, ())]
            if not stale and previous is not None and not usage_keys.isdisjoint(keys):
                # only usage changed: the same order (then the same outcome), new entries?
                reordered = self._reorder(previous, members, group_quotas, history, policy)
                if reordered is None:
                    stale = True
                else:
                    previous = reordered
                    self.stats["groups_reordered"] += 1
            if stale or verify:
                if _CPU in keys:
                    group_nodes: Iterable[NodeView] = nodes
                else:
                    seen: dict[str, NodeView] = {}
                    for key in keys:
                        for node in key_nodes.get(key, ()):
                            seen[node.name] = node
                    group_nodes = list(seen.values())
            if stale:
                previous = self._decide_group(keys, group_nodes, members, group_quotas,
                                              policy, history, now, physical, explain)
                self.stats["groups_decided"] += 1
                self.stats["jobs_decided"] += len(members)
            else:
                self.stats["groups_reused"] += 1
                assert previous is not None
                if verify:
                    again = self._decide_group(keys, group_nodes, members, group_quotas,
                                               policy, history, previous.now, physical,
                                               previous.explained)
                    if (again.admit, again.preempt, again.ordered, again.held) != (
                            previous.admit, previous.preempt, previous.ordered, previous.held):
                        self.stats["mismatches"] += 1
                        previous = again
            assert previous is not None
            kept[keys] = previous
            results.append(previous)

        self._jobs = job_by_id
        self._nodes = node_by_name
        self._quotas = quota_by
        self._policy = policy
        self._history = history
        self._physical = physical
        self._tenant_keys = dict(tenant_keys)
        self._groups = kept
        return self._assemble(results, explain)

    def _forget_verdicts(self, keys: Iterable[str]) -> None:
        for key in keys:
            self._verdicts.pop(key, None)

    @staticmethod
    def _reorder(group: _Group, jobs: list[JobView], quotas: list[PoolQuota],
                 history: History, policy: Policy) -> _Group | None:
        """The group's result with the entries of its order under the new usage, when that
        order is the same (usage enters a pass through the order alone); None when not."""
        tenant_use: dict[str, int] = defaultdict(int)
        for job in jobs:
            if job.state in ACTIVE_STATES and job.resource_key:
                tenant_use[job.tenant] += job.demand
        nominal_total: dict[str, int] = defaultdict(int)
        for q in quotas:
            nominal_total[q.tenant] += sum(
                v for k, v in q.nominal.items() if k.startswith(("gpu:", "mig:"))
                or k == "gpu-shared")
        entries: dict[int, Entry] = {}
        order = fair_order([j for j in jobs if j.state == JobState.QUEUED and not j.held],
                           tenant_use, nominal_total, history, policy, entries,
                           borrow_predicate(jobs, quotas))
        if len(order) != len(group.ordered) or any(
                job.id != item[1].id for job, item in zip(order, group.ordered, strict=True)):
            return None
        ordered = [(entries[item[1].id], *item[1:]) for item in group.ordered]
        return _Group(group.keys, group.now, group.admit, group.preempt, ordered, group.held,
                      group.explained)

    @staticmethod
    def _group_keys(key_jobs: Mapping[str, list[JobView]], tenant_keys: Mapping[str, set[str]],
                    cpu_takers: list[JobView]) -> list[frozenset[str]]:
        """The groups: keys joined by a tenant's jobs and, when CPU-only jobs are in view,
        by the jobs that take CPU and memory on nodes."""
        parent: dict[str, str] = {key: key for key in key_jobs}

        def root(key: str) -> str:
            while parent[key] != key:
                parent[key] = parent[parent[key]]
                key = parent[key]
            return key

        def join(a: str, b: str) -> None:
            ra, rb = root(a), root(b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)

        for keys in tenant_keys.values():
            if len(keys) > 1:
                first, *rest = keys
                for key in rest:
                    join(first, key)
        if _CPU in parent:
            for job in cpu_takers:
                join(job.resource_key, _CPU)
        members: dict[str, set[str]] = defaultdict(set)
        for key in parent:
            members[root(key)].add(key)
        return [frozenset(keys) for keys in members.values()]

    def _decide_group(self, keys: frozenset[str], nodes: Iterable[NodeView],
                      jobs: list[JobView], quotas: list[PoolQuota], policy: Policy,
                      history: History, now: datetime,
                      physical: Mapping[str, float], explain: bool = True) -> _Group:
        group = _GroupPass(list(nodes), jobs, quotas, policy, history, now, physical,
                           explaining=explain, durations=self._durations,
                           verdicts=self._verdicts)
        decisions = group.run()
        entries, reasons, bound = group.entries, group.reasons, group.capacity_bound
        eta_of, admitted = group.eta_of, group.admitted
        ordered: list[_Item] = []
        for job in group.ordered:
            if job.id in admitted:
                ordered.append((entries[job.id], job, True, _CAPACITY, False, _NO_ETA))
            else:
                ordered.append((entries[job.id], job, False, reasons.get(job.id, _CAPACITY),
                                job.id in bound, eta_of.get(job.id, _NO_ETA)))
        held: list[_Held] = sorted(
            ((TIER_RANK.get(j.tier, len(TIERS)), j.submitted_at, j.id), j,
             reasons.get(j.id, _CAPACITY)) for j in group.queued if j.held)
        return _Group(keys, now, decisions.admit, decisions.preempt, ordered, held, explain)

    @staticmethod
    def _assemble(groups: list[_Group], explain: bool = True) -> Decisions:
        """The whole pass's decisions from the groups': admissions and preemptions by id,
        the waiting jobs in the merged order with their positions (a pool's position
        counts every key) and reasons (``Explainer.explain``; with ``explain`` only)."""
        out = Decisions()
        out.admit = list(heapq.merge(*(g.admit for g in groups), key=lambda a: a.job_id))
        out.preempt = list(heapq.merge(*(g.preempt for g in groups), key=lambda p: p.job_id))
        if not explain:
            return out
        waiting = out.waiting
        pool_pos: dict[str, int] = defaultdict(int)
        model_pos: dict[str, int] = defaultdict(int)
        pool_tenants: dict[str, set[str]] = defaultdict(set)
        overtaking = Overtaking()
        # entries are unique (they end with the job's id and tenant): items never compare
        # beyond them
        for _entry, job, admitted, reason, bound, eta in heapq.merge(
                *(g.ordered for g in groups)):
            if admitted:
                continue
            pool, key = job.pool, job.resource_key
            pool_pos[pool] += 1
            model_pos[key] += 1
            ahead = pool_tenants[pool]
            position = pool_pos[pool]
            base = reason
            if position > 1 and bound:
                reason = [reason, text.queue_place(position, pool,
                                                   behind_own=ahead == {job.tenant})]
            if len(ahead) < 2:
                ahead.add(job.tenant)
            reason = overtaking.note(job, position, eta[0], base, reason)
            waiting[job.id] = WaitInfo(position, model_pos[key], eta[0], eta[1], reason)
        for _key, job, reason in heapq.merge(*(g.held for g in groups)):
            pool, key = job.pool, job.resource_key
            pool_pos[pool] += 1
            model_pos[key] += 1
            ahead = pool_tenants[pool]
            if len(ahead) < 2:
                ahead.add(job.tenant)
            waiting[job.id] = WaitInfo(pool_pos[pool], model_pos[key], None, None, reason)
        return out


_LOOP_ENGINE: Engine | None = None
LOOP_VERIFY_EVERY = 720
"""The loop's engine checks its reuse once an hour at a pass every 5 s."""


def loop_engine() -> Engine:
    """The admission loop's engine in this process, made on first use (so a new or
    restarted worker process decides everything on its first pass). What other processes
    change reaches it as changed inputs; ``loop_engine().reset()`` forgets everything."""
    global _LOOP_ENGINE
    if _LOOP_ENGINE is None:
        _LOOP_ENGINE = Engine(verify_every=LOOP_VERIFY_EVERY)
    return _LOOP_ENGINE
