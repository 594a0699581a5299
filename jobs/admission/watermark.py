"""The eviction watermark alone (step 4 of :mod:`jobs.admission.engine`), for a backend
that does not admit jobs itself: Kueue mode (``jobs.backends.kueue_watermark``).

:func:`watermark_plan` runs the engine's own rule (:meth:`Reclaim.watermark`,
:meth:`QuotaRules.gated`) on the jobs that hold capacity, with the same inputs as a pass
(``jobs.selectors.admission_inputs``): one rule, one place. It returns

* the **evictions** the engine would make now, in its order (batch, then development of
  pools above their nominal quota, then of pools above their guarantee; most recently
  admitted first; never production, never work within its pool's guarantee), each with
  the engine's reason (``jobs.preempt.watermark_use``) and its tier's grace; and
* the **gated** queued jobs: preemptible work beyond its pool's guarantee that admitting
  would take above the watermark, with the engine's wait reason
  (``jobs.wait.watermark``), counting this plan's evictions as gone. Each queued job is
  judged alone against the use now (Kueue, not this plan, chooses which of them it
  admits): a job admitted by Kueue that still takes use above the line is evicted by the
  next plan, and gated from then on, so no job is admitted and evicted in a loop.

Pure: reads only its arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from jobs.choices import JobState

from .reclaim import Reclaim
from .types import History, JobView, NodeView, Policy, PoolQuota, Preemption, Text


@dataclass(frozen=True)
class WatermarkPlan:
    """What the watermark asks of a backend now: ``evict`` in the engine's order, and the
    queued jobs it keeps out (``gated``: job id -> why, the engine's words)."""

    evict: tuple[Preemption, ...] = ()
    gated: Mapping[int, Text] = field(default_factory=dict)


def watermark_plan(*, nodes: Sequence[NodeView], jobs: Sequence[JobView],
                   quotas: Sequence[PoolQuota], policy: Policy, history: History,
                   now: datetime, physical: Mapping[str, float] | None = None,
                   ) -> WatermarkPlan:
    """The engine's watermark on these inputs (module docstring); queued jobs are judged,
    never admitted (``physical``: measured use per resource key, as ``decide`` takes)."""
    holding = [j for j in jobs if j.state != JobState.QUEUED]
    state = Reclaim(nodes, holding, quotas, policy, history, now, physical, explaining=False)
    state.watermark()   # victims in the engine's order (a dict keeps it)
    gated: dict[int, Text] = {}
    for job in sorted((j for j in jobs if j.state == JobState.QUEUED and not j.held),
                      key=lambda j: j.id):
        key = job.resource_key
        if key and state.gated(job, key):
            gated[job.id] = state.watermark_wait(job, key)
    return WatermarkPlan(evict=tuple(state.victims.values()), gated=gated)
