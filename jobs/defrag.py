"""Defragmentation for a maintenance window: which preemptible jobs to move so that whole
nodes of one GPU model free up for large distributed jobs. Pure: plain data in and out.

A node can be emptied only if none of its GPUs belong to a production job (production is
never preempted) and every job that must move fits, whole, on the nodes that stay. Jobs
move by the usual path: preempted with their tier's grace, then re-admitted elsewhere,
resuming from their checkpoints.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from django.utils.translation import gettext_noop

from core.choices import Tier
from jobs.admission import JobView, NodeView
from jobs.choices import JobState


@dataclass
class DefragPlan:
    gpu_model: str
    wanted: int
    nodes: list[str] = field(default_factory=list)          # nodes that end up empty
    moves: list[int] = field(default_factory=list)          # job ids to preempt
    gpus_moved: int = 0
    blocked: dict[str, str] = field(default_factory=dict)   # node -> why it cannot be emptied

    @property
    def complete(self) -> bool:
        return len(self.nodes) >= self.wanted


def plan_defrag(*, nodes: Sequence[NodeView], jobs: Sequence[JobView], gpu_model: str,
                wanted: int, min_gpus: int = 0) -> DefragPlan:
    """Pick up to ``wanted`` nodes of ``gpu_model`` to empty, cheapest first (fewest GPUs
    to move), keeping every moved job placeable on the remaining nodes. ``min_gpus``: only
    nodes with at least that many cards (a target job's cards per worker) are emptied."""
    plan = DefragPlan(gpu_model=gpu_model, wanted=wanted)
    model_nodes = [n for n in nodes if n.gpu_model == gpu_model and n.schedulable]
    free_on = {n.name: n.gpus - n.gpus_used for n in model_nodes}
    free = free_on
    on_node: dict[str, list[JobView]] = defaultdict(list)
    for job in jobs:
        if job.state in (JobState.RUNNING, JobState.ADMITTED) and job.gpu_model == gpu_model:
            for node_name in set(job.placement):
                on_node[node_name].append(job)
    order = sorted((n for n in model_nodes if n.gpus >= min_gpus),
                   key=lambda n: (n.gpus_used, n.name))
    moving: dict[int, JobView] = {}
    chosen: list[str] = []
    for node in order:
        if len(chosen) >= wanted:
            break
        residents = on_node.get(node.name, [])
        if any(j.tier == Tier.PRODUCTION for j in residents):
            plan.blocked[node.name] = gettext_noop("runs a production job")  # shown translated
            continue
        trial = {**moving, **{j.id: j for j in residents}}
        if _relocatable(trial.values(), free, excluded={*chosen, node.name}):
            moving, chosen = trial, [*chosen, node.name]
        else:
            plan.blocked[node.name] = gettext_noop("its jobs would not fit on the remaining nodes")
    plan.nodes = chosen
    plan.moves = sorted(moving)
    plan.gpus_moved = sum(j.replicas * j.gpus_per_replica for j in moving.values())
    return plan


def _relocatable(jobs: Iterable[JobView], free: dict[str, int], excluded: set[str]) -> bool:
    """First-fit decreasing of every replica onto nodes not being emptied, counting the
    GPUs the moved jobs release on the nodes that stay."""
    movers = list(jobs)
    room = dict(free)
    for job in movers:
        for node in job.placement:
            if node in room:
                room[node] += job.gpus_per_replica
    for node in excluded:
        room.pop(node, None)
    replicas = sorted((j.gpus_per_replica for j in movers for _ in range(j.replicas)),
                      reverse=True)
    for need in replicas:
        target = next((n for n in sorted(room, key=lambda x: (room[x], x)) if room[n] >= need),
                      None)
        if target is None:
            return False
        room[target] -= need
    return True
