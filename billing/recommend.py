"""The quarterly quota recommendation (pure): lower a GPU grant when it sat idle.

The idle rate given is the share of the quota held that was not busy (``tenants.utilisation.
idle_against_quota``: 1 - quota use x (1 - idle rate)), for every GPU kind (whole cards,
MIG profiles, shared GPUs) of tenants in every quota mode.

Rule (configurable through settings, see ``IdleRule``): when the quarter's idle rate is
above ``threshold``, propose the busy share of the grant plus ``headroom``, never
cutting more than ``max_cut`` of it at once, rounded up to whole cards. Nothing is
proposed for a grant at or below the threshold, or when the proposal would not lower it.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal

from django.conf import settings


@dataclass(frozen=True)
class IdleRule:
    threshold: Decimal = Decimal("0.4")
    headroom: Decimal = Decimal("0.2")
    max_cut: Decimal = Decimal("0.5")

    @classmethod
    def from_settings(cls) -> IdleRule:
        return cls(Decimal(str(settings.TRAINYARD_IDLE_THRESHOLD)),
                   Decimal(str(settings.TRAINYARD_IDLE_HEADROOM)),
                   Decimal(str(settings.TRAINYARD_IDLE_MAX_CUT)))


def _n(value: Decimal) -> str:
    return f"{value.normalize():f}"


def recommend_gpu_quota(*, current: Decimal, idle_rate: Decimal | None, rule: IdleRule
                        ) -> tuple[Decimal, str] | None:
    """(proposed amount, formula shown to the admin), or None to keep the grant."""
    if idle_rate is None or current <= 0 or idle_rate <= rule.threshold:
        return None
    busy = 1 - idle_rate
    target = current * busy * (1 + rule.headroom)
    floor = current * (1 - min(rule.max_cut, Decimal(1)))
    amount = max(target, floor).to_integral_value(rounding=ROUND_CEILING)
    if amount >= current:
        return None
    formula = (f"quarter idle rate {idle_rate:.0%} above {rule.threshold:.0%}: "
               f"{_n(current)} x {_n(busy)} busy x (1 + headroom {_n(rule.headroom)}) = "
               f"{_n(target.quantize(Decimal('0.01')))}; at most {rule.max_cut:.0%} cut "
               f"(floor {_n(floor.quantize(Decimal('0.01')))}); rounded up: {_n(amount)}")
    return amount, formula
