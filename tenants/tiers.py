"""The tier table: what each tier gets from the policy, in one place.

Admission (its preemption grace), the job spec (the pods' termination grace and the
checkpoint interval they are told) and the checkpoint guide read it here.

* ``preemption_grace_seconds``: how long a preempted job may run on to checkpoint before
  it is suspended. Production is never preempted (``Policy.production_grace_seconds``,
  0); development and batch come from the policy (300 s and 30 s by default).
* ``termination_grace_seconds``: the pods' ``terminationGracePeriodSeconds``, the time
  between SIGTERM and SIGKILL whenever a pod stops (preemption, cancel, node drain). A
  preemptible tier gets its preemption grace; production gets at least
  :data:`PRODUCTION_TERMINATION_SECONDS` (kubelet's default) to save on SIGTERM.
* ``checkpoint_interval_seconds``: how often the job is asked to save
  (``TRAINYARD_CHECKPOINT_INTERVAL_SECONDS``): rarely for production, which is never
  preempted, every 5 minutes for the preemptible tiers, whose grace may be short.

Pure: the policy row comes in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.choices import Tier

PRODUCTION_TERMINATION_SECONDS = 30
CHECKPOINT_INTERVAL_SECONDS: Mapping[Tier, int] = {
    Tier.PRODUCTION: 1800, Tier.DEVELOPMENT: 300, Tier.BATCH: 300}


@dataclass(frozen=True)
class TierRules:
    preemption_grace_seconds: int
    termination_grace_seconds: int
    checkpoint_interval_seconds: int


def tier_rules(policy: Any) -> dict[Tier, TierRules]:
    """The rules of every tier under ``policy`` (a ``core.models.Policy``)."""
    graces = {Tier.PRODUCTION: int(policy.production_grace_seconds),
              Tier.DEVELOPMENT: int(policy.development_grace_seconds),
              Tier.BATCH: int(policy.batch_grace_seconds)}
    return {tier: TierRules(
        preemption_grace_seconds=grace,
        termination_grace_seconds=max(grace, PRODUCTION_TERMINATION_SECONDS)
        if tier == Tier.PRODUCTION else grace,
        checkpoint_interval_seconds=CHECKPOINT_INTERVAL_SECONDS[tier])
        for tier, grace in graces.items()}


def reclaim_grace_seconds(tier: str, borrowing: bool, policy: Any) -> int | None:
    """How long a job may run on to checkpoint when the capacity it uses is reclaimed, or
    None when it runs on its own quota (it is not reclaimed as borrowed work): a batch
    job always runs on idle capacity, a development job when it was admitted borrowing
    (above its pool's quota). Production never borrows. The job page and the API say it."""
    if tier == Tier.BATCH or (tier == Tier.DEVELOPMENT and borrowing):
        return tier_rules(policy)[Tier(tier)].preemption_grace_seconds
    return None
