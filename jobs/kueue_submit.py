"""What Kueue cannot count, checked when a job is submitted in Kueue mode.

The pool's GPU-memory grant (``gpu-memory``: a whole card consumes its model's memory, a
MIG instance its slice's, a HAMi card its limit; ``tenants.demand``) binds admission in
the engine. Kueue cannot express it: a resource transformation's outputs do not depend on
the flavor (the GPU model), so no ClusterQueue quota can count a whole card's memory
(Kueue v0.19 ``resources.transformations``; ``deploy/kueue/`` transforms HAMi's
``nvidia.com/gpumem`` away). In Kueue mode Trainyard refuses at submission a job whose GPU
memory, with what the pool's admitted and running jobs hold, exceeds what the pool may
hold of it (its grant for production, its ceiling for development and batch), naming the
field to change. The engine, in Trainyard mode, would queue it instead.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.utils.translation import gettext as _

from core.choices import Tier
from core.exceptions import ApplicationError
from jobs import selectors
from jobs.choices import JobState
from jobs.models import TrainingJob
from tenants.catalog import fmt_amount
from tenants.demand import pool_ceiling
from tenants.kueue import kueue_on
from tenants.models import Pool

__all__ = ["check_gpu_memory"]

HOLDING = (JobState.ADMITTED, JobState.RUNNING, JobState.PREEMPTING)


def check_gpu_memory(pool: Pool, clean: dict[str, Any], snap: Any) -> None:
    if not kueue_on():
        return
    grants = snap.effective_grants(pool)
    if "gpu-memory" not in grants:
        return
    facts = snap.card_facts()
    want = selectors.job_demand_of(clean, facts).get("gpu-memory") or Decimal(0)
    if not want:
        return
    granted = Decimal(grants["gpu-memory"])
    if clean.get("tier") == Tier.PRODUCTION:
        ceiling: Decimal | None = granted
    else:
        ceiling = pool_ceiling("gpu-memory", granted, pool.tenant.borrowing_factor(snap.policy))
    if ceiling is None:
        return
    held = sum((selectors.job_demand_of(job, facts).get("gpu-memory") or Decimal(0)
                for job in TrainingJob.objects.filter(pool=pool, state__in=HOLDING)),
               Decimal(0))
    if held + want <= ceiling:
        return
    field = "gpu_memory_gib_per_card" if clean.get("gpu_memory_gib_per_card") else \
        "gpus_per_worker"
    raise ApplicationError(
        _("Kueue admits this cluster's jobs and cannot count GPU memory, so Trainyard checks "
          "it when you submit: this job needs %(w)s GiB of GPU memory and the %(p)s pool's "
          "admitted and running jobs hold %(h)s GiB, more than the %(c)s GiB it may hold. "
          "Submit it when some of them end, or use fewer or smaller GPUs.")
        % {"w": fmt_amount(want), "p": pool.kind, "h": fmt_amount(held),
           "c": fmt_amount(ceiling)}, field=field)
