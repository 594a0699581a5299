"""The pure admission engine: ``decide()`` and its plain-data inputs and outputs.

No database, no cluster, no I/O, no wall clock: time comes in as ``now``. Of Django
only the tiers' enumeration (``core.choices.Tier``) is imported; nothing is translated.
See :mod:`jobs.admission.engine` for the algorithm and docs/architecture.md ("The life
of a job", the admission loop) for how it is fed and applied.
"""

from .engine import decide
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
    WaitInfo,
)

__all__ = [
    "ACTIVE_STATES",
    "TIERS",
    "TIER_RANK",
    "Admission",
    "Decisions",
    "History",
    "JobView",
    "NodeView",
    "Policy",
    "PoolQuota",
    "Preemption",
    "WaitInfo",
    "decide",
]
