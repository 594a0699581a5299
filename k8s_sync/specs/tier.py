"""The scheduling tiers, rendered as cluster-wide PriorityClasses (``k8s_sync.specs``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from core.choices import Tier
from k8s_sync import naming

# --- tiers -----------------------------------------------------------------------------------

PreemptionPolicy = Literal["PreemptLowerPriority", "Never"]
_MAX_USER_PRIORITY = 1_000_000_000


@dataclass(frozen=True)
class TierSpec:
    """One scheduling tier, rendered as a cluster-wide PriorityClass.

    ``value`` and ``preemption_policy`` are immutable in Kubernetes: changing them for an
    existing class makes apply fail with a permanent 422; the caller must delete and
    recreate the class (running pods keep their resolved priority).
    """

    name: Tier
    value: int
    preemption_policy: PreemptionPolicy
    description: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", Tier(self.name))
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise ValueError(f"priority value must be an int, got {self.value!r}")
        if not -2_147_483_648 <= self.value <= _MAX_USER_PRIORITY:
            raise ValueError(f"priority value out of the user range: {self.value}")
        if self.preemption_policy not in ("PreemptLowerPriority", "Never"):
            raise ValueError(f"unknown preemptionPolicy {self.preemption_policy!r}")

    @property
    def priority_class_name(self) -> str:
        return naming.priority_class_name(self.name)


def default_tiers() -> tuple[TierSpec, ...]:
    """The three tiers, highest first.

    Trainyard's admission engine is the queue and the preemptor: it suspends victims
    after the tier's grace period so they can checkpoint, and resumes them later. The
    kube-scheduler must not race it by killing single pods of a gang, so:

    * production ``PreemptLowerPriority``: an admitted production job must start; if the
      engine's view was stale, evicting a lower-tier pod is the lesser harm, and lower
      tiers are preemptible by policy anyway (production is never preempted);
    * development ``Never``: dev work waits for the engine to free capacity the
      checkpoint-friendly way rather than killing batch pods behind its back;
    * batch ``Never``: runs only on idle capacity and must never displace anyone.

    None is ``globalDefault``: only one may exist cluster-wide and the cluster admin may
    already own it; Trainyard always sets ``priorityClassName`` on its own pods.
    """
    return (
        TierSpec(Tier.PRODUCTION, 100_000, "PreemptLowerPriority",
                 "Trainyard production training; never preempted by Trainyard."),
        TierSpec(Tier.DEVELOPMENT, 10_000, "Never",
                 "Trainyard development training; preemptible after a grace period."),
        TierSpec(Tier.BATCH, 1_000, "Never",
                 "Trainyard batch training on idle capacity; first to be preempted."),
    )
