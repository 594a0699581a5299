"""How often the admission loop explains the queue.

Every pass decides admissions and preemptions; only some also explain every waiting job
(positions, ETA p50/p90 from the simulation, final reasons: step 5 of
:mod:`jobs.admission.engine`), which on a long queue costs most of a pass. A pass explains
when the last explanation is older than the configured interval, and never more often than
keeps explaining under :data:`EXPLAIN_SHARE` of the loop's time: an explanation that took
0.4 s waits at least 2 s for the next. What a person reads on a queued job is then at most
that old, and a submission's first position comes with the next explaining pass.
"""

from __future__ import annotations

from datetime import datetime

EXPLAIN_SHARE = 0.2
"""The most of the loop's time explanations take (cost / interval)."""


def explain_due(now: datetime, explained_at: datetime | None, explain_ms: float,
                every_seconds: float) -> bool:
    """Whether the pass at ``now`` explains the queue: never explained yet, the clock went
    back, or the last explanation (at ``explained_at``, costing ``explain_ms``) is at least
    ``every_seconds`` old and at least its cost / :data:`EXPLAIN_SHARE`. ``every_seconds``
    0 explains on every pass."""
    if every_seconds <= 0 or explained_at is None:
        return True
    age = (now - explained_at).total_seconds()
    return age < 0 or age >= max(every_seconds, explain_ms / 1000 / EXPLAIN_SHARE)
