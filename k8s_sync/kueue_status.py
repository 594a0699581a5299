"""What Kueue's Workload status says of requeues and evictions (Kueue v0.19): pure.

* :func:`evictions_of`: ``status.schedulingStats.evictions``, Kueue's count of every
  eviction it made of a Workload, per reason and underlying cause, counted when it makes
  it (``pkg/workload/evict/evict.go`` ``workloadEvictionStateInc``). A preemption that
  is undone before Trainyard's next pass still moves it: Kueue mode records each new
  eviction from it (``jobs.backends.kueue_evictions``).
* :func:`limit_exceeded`: Kueue gave up starting a Workload: it timed out waiting for
  its pods (``waitForPodsReady``) more than ``backoffLimitCount`` times and is (about to
  be) deactivated (``pkg/controller/core/workload_controller.go``
  ``triggerDeactivation``: ``DeactivationTarget`` reason ``RequeuingLimitExceeded``,
  then the eviction reason ``DeactivatedDueToRequeuingLimitExceeded``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

LIMIT_EXCEEDED = "RequeuingLimitExceeded"
DEACTIVATED_LIMIT = "DeactivatedDueToRequeuingLimitExceeded"  # patching.ReasonWithCause
PODS_READY_TIMEOUT = "PodsReadyTimeout"


#: pkg/scheduler/preemption/preemption.go HumanReadablePreemptionReasons, inverted: the
#: Preempted condition's reason is gone once the Workload is admitted again
#: (``QuotaReserved``, message ``Previously: ...``); its message still says why
_PREEMPTION_REASONS = (
    ("reclamation within the cohort while borrowing", "InCohortReclaimWhileBorrowing"),
    ("reclamation within the cohort", "InCohortReclamation"),
    ("prioritization in the ClusterQueue", "InClusterQueue"),
    ("Fair Sharing within the cohort", "InCohortFairSharing"),
)


def preemption_reason(message: str) -> str:
    """Kueue's preemption reason named in a ``Preempted`` condition's message, or ""."""
    for words, reason in _PREEMPTION_REASONS:
        if f"due to {words}" in message:
            return reason
    return ""


class _Cond(Protocol):
    @property
    def status(self) -> bool: ...
    @property
    def reason(self) -> str: ...


def evictions_of(items: Iterable[Any]) -> tuple[tuple[str, str, int], ...]:
    """``status.schedulingStats.evictions`` as sorted (reason, underlying cause, count)."""
    out = []
    for e in items:
        if isinstance(e, Mapping) and e.get("reason"):
            out.append((str(e["reason"]), str(e.get("underlyingCause") or ""),
                        int(e.get("count") or 0)))
    return tuple(sorted(out))


def eviction_key(reason: str, cause: str) -> str:
    return f"{reason}/{cause}"


def counts(evictions: Iterable[tuple[str, str, int]]) -> dict[str, int]:
    """Evictions per ``reason/underlyingCause`` (what a job keeps of what it saw)."""
    return {eviction_key(r, c): n for r, c, n in evictions}


def new_evictions(seen: Mapping[str, Any], now: Mapping[str, int]) -> list[str]:
    """The evictions counted since ``seen`` (one entry per eviction, by its key), in key
    order; a count that went down (a recreated Workload) counts from zero."""
    out: list[str] = []
    for key, n in sorted(now.items()):
        before = int(seen.get(key) or 0)
        out += [key] * (n - before if n >= before else n)
    return out


def limit_exceeded(active: bool, conditions: Mapping[str, _Cond]) -> bool:
    target = conditions.get("DeactivationTarget")
    if target is not None and target.status and target.reason == LIMIT_EXCEEDED:
        return True
    return not active and any(
        (c := conditions.get(kind)) is not None and c.reason == DEACTIVATED_LIMIT
        for kind in ("Evicted", "Requeued"))


#: One item of Kueue's flavor-assignment message that says only that a flavor is for
#: other nodes (``flavorassigner.go``: "flavor %s doesn't match node affinity"): every
#: other GPU model's flavor says it of every job, so it tells the job's owner nothing.
_OTHER_FLAVOR = re.compile(r"flavor \S+ doesn't match node affinity(, )?")


def concise_message(message: str) -> str:
    """Kueue's pending message without the flavors that are for other nodes (each pod
    set's ``couldn't assign flavors to pod set <ps>: ...``, joined by ``; ``, as
    ``flavorassigner.go`` ``Message`` writes it); the message as it is when nothing else
    would be left of a pod set's part (no flavor matches the job at all)."""
    parts = []
    for part in message.split("; "):
        head, sep, items = part.partition(": ")
        if not sep or not head.startswith("couldn't assign flavors"):
            parts.append(part)
            continue
        kept = _OTHER_FLAVOR.sub("", items).rstrip(", ").strip()
        if not kept:
            return message
        parts.append(f"{head}: {kept}")
    return "; ".join(parts)


def waits_for_quota(message: str) -> bool:
    """Whether Kueue's pending message says some pod set waits for unused quota
    (``insufficient unused quota for ...``, ``flavorassigner.go``): quota that frees when
    other work ends, not a request no flavor can ever hold."""
    return "insufficient unused quota for " in message
