"""Pure quota decisions: from granted amounts to the cluster's ResourceQuota spec.

No database, no cluster: the selector gathers the rows, this decides the numbers.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal

from core.resources import extended, quota_hard
from k8s_sync.specs import QuotaSpec, StorageClassQuota
from tenants.catalog import Resource, ResourceKind

__all__ = ["OverCap", "over_cap", "overcommit_limited", "quota_spec_for"]


def quota_spec_for(grants: Mapping[str, Decimal], *, storage_classes: Iterable[str] = (),
                   mig_profiles: Iterable[str] = (),
                   compute_unlimited: bool = False) -> QuotaSpec:
    """The ResourceQuota limits for one pool's current grants.

    ``compute_unlimited``: the pool's development and batch work may borrow any idle
    capacity (no borrowing cap, ``tenants.demand.pool_ceiling``), so CPU, memory, whole,
    shared and MIG GPUs get no hard limit (admission and the nodes bound them); storage
    and volume claims keep their grants.

    What is not granted is zero, never unlimited: CPU, memory, whole and shared GPUs,
    every known MIG profile and every known StorageClass (so a namespace can create PVCs
    only of the classes it was granted). ``requests.nvidia.com/gpu`` is the total over
    GPU models; the per-model split and GPU memory are enforced by Trainyard's admission,
    not by Kubernetes. IOPS have no ResourceQuota key and no part here: an IOPS grant is
    the sum of the provisioned IOPS of the pool's volumes, held at submission (a new
    volume that would take the sum over the grant is refused, ``jobs.services``) and set
    on each volume by its VolumeAttributesClass (``tenants.storage``); a storage grant
    stays on its StorageClass whatever IOPS the class's volumes have.
    """
    parsed = {Resource.parse(key): Decimal(amount) for key, amount in grants.items()}

    def total(kind: ResourceKind) -> Decimal:
        return sum((a for r, a in parsed.items() if r.kind == kind), Decimal(0))

    def by_qualifier(kind: ResourceKind) -> dict[str, Decimal]:
        return {r.qualifier: a for r, a in parsed.items() if r.kind == kind}

    mig = {} if compute_unlimited else dict.fromkeys(mig_profiles, 0)
    if not compute_unlimited:
        mig.update({profile: int(amount)
                    for profile, amount in by_qualifier(ResourceKind.MIG).items()})
    storage = dict.fromkeys(storage_classes, Decimal(0))
    storage.update(by_qualifier(ResourceKind.STORAGE))
    pvcs = int(total(ResourceKind.PVCS)) if any(r.kind == ResourceKind.PVCS for r in parsed) \
        else None
    # the extended-resource dimensions (RDMA NICs ...): not granted is 0, as for GPUs; no
    # limit where compute borrows without a cap (core.resources declares their keys)
    extra = {} if compute_unlimited else quota_hard(
        (d.kind, total(ResourceKind(d.kind))) for d in extended())
    return QuotaSpec(
        cpu_cores=None if compute_unlimited else _plain(total(ResourceKind.CPU)),
        memory_gib=None if compute_unlimited else _plain(total(ResourceKind.MEMORY)),
        gpus=None if compute_unlimited else int(total(ResourceKind.GPU)),
        shared_gpus=None if compute_unlimited else int(total(ResourceKind.GPU_SHARED)),
        mig=mig,
        storage_gib=_plain(sum(storage.values(), Decimal(0))),
        pvc_count=pvcs,
        storage_classes=tuple(
            StorageClassQuota(name, storage_gib=_plain(amount),
                              pvc_count=None if amount else 0)
            for name, amount in sorted(storage.items())
        ),
        extra=extra,
    )


def _plain(amount: Decimal) -> Decimal:
    """Drop trailing zeros so 16.000 renders as "16", not "16000m"."""
    return amount.normalize() if amount else Decimal(0)


# --- overcommit --------------------------------------------------------------------------


def overcommit_factor(resource_key: str, factors: Mapping[str, object]) -> Decimal:
    """The factor for a resource: its full key wins over its kind; default 1."""
    kind = resource_key.partition(":")[0]
    raw = factors.get(resource_key, factors.get(kind, 1))
    return Decimal(str(raw))


def overcommit_violation(*, resource_key: str, capacity: Decimal | None,
                         granted_elsewhere: Decimal, new_amount: Decimal,
                         factor: Decimal) -> str | None:
    """Why approving ``new_amount`` would break the overcommit limit, or None.

    The limit: the sum of every pool's grant of the resource may reach
    ``factor x capacity``. Resources with no known capacity (storage, IOPS) are not
    limited here. The message gives the numbers.
    """
    if capacity is None:
        return None
    limit = factor * capacity
    total = granted_elsewhere + new_amount
    if total <= limit:
        return None
    room = max(Decimal(0), limit - granted_elsewhere)
    return (f"{resource_key}: approving {_n(new_amount)} would bring total grants to "
            f"{_n(total)}, above the limit of {_n(limit)} ({_n(factor)} x capacity "
            f"{_n(capacity)}); at most {_n(room)} can be granted to this pool.")


def overcommit_limited(resource_key: str, capacity: Mapping[str, Decimal]) -> bool:
    """Whether the overcommit limit binds ``resource_key``: a resource with a capacity,
    and every GPU model and MIG profile (one no node has counts a capacity of 0)."""
    return resource_key in capacity or resource_key.startswith(("gpu:", "mig:"))


@dataclass(frozen=True)
class OverCap:
    """A resource whose grants add up to more than ``factor x capacity`` (the limit):
    ``tenants`` holds each tenant's grant of it, the largest first."""

    key: str
    factor: Decimal
    capacity: Decimal
    limit: Decimal
    granted: Decimal
    tenants: tuple[tuple[str, Decimal], ...]


def over_cap(*, factors: Mapping[str, object], capacity: Mapping[str, Decimal],
             grants: Mapping[str, Mapping[str, Decimal]]) -> list[OverCap]:
    """Which resources, and whose grants, ``factors`` put over the overcommit limit
    (:func:`overcommit_violation`'s: total grants may reach ``factor x capacity``).

    ``grants``: resource key -> {tenant: its current grants of it, all pools}. Existing
    grants stay when a factor is lowered; while a resource is over, no grant of it can be
    raised (``tenants.services.quota``). The policy page's preview and its message on
    save both read this. Nothing observed (empty ``capacity``): nothing to compare with,
    as the approval check says."""
    if not capacity:
        return []
    out = []
    for key in sorted(grants):
        if not overcommit_limited(key, capacity):
            continue
        holders = {t: a for t, a in grants[key].items() if a > 0}
        total = sum(holders.values(), Decimal(0))
        factor = overcommit_factor(key, factors)
        cap = capacity.get(key, Decimal(0))
        if total > factor * cap:
            out.append(OverCap(key=key, factor=factor, capacity=cap, limit=factor * cap,
                               granted=total, tenants=tuple(sorted(
                                   holders.items(), key=lambda ta: (-ta[1], ta[0])))))
    return out


def _n(value: Decimal) -> str:
    text = f"{value.quantize(Decimal('0.001')).normalize():f}"
    return text


def guaranteed_share(*, capacity: Decimal | None, granted_static: Decimal,
                     granted_overcommitted: Decimal) -> Decimal:
    """The fraction (0..1) of an overcommitted-mode quota backed by physical capacity.

    Static-mode quotas are backed first; overcommitted-mode quotas share what is left
    pro rata. The rest of their quota is the overcommitted part, reclaimed by priority
    when everyone uses what they were granted (its size is the reclaim risk).
    """
    if capacity is None or granted_overcommitted <= 0:
        return Decimal(1)
    left = max(Decimal(0), capacity - granted_static)
    return min(Decimal(1), left / granted_overcommitted)


def guaranteed_amount(resource_key: str, amount: Decimal, share: Decimal) -> Decimal:
    """The guaranteed part of an overcommitted-mode quota of ``amount``: ``amount x share``
    (:func:`guaranteed_share`), whole units (rounded down) for resources counted in whole
    units (cards, MIG instances, shares), to 0.001 otherwise. The one number the quota
    pages show and admission protects (``jobs.admission.PoolQuota.guaranteed``): a job
    within it reclaims from pools above theirs."""
    value = (Decimal(amount) * Decimal(share)).quantize(Decimal("0.001"))  # 12 x 2/3 = 8
    try:
        integral = Resource.parse(resource_key).integral
    except ValueError:
        integral = False
    if integral:
        return value.to_integral_value(rounding="ROUND_FLOOR")
    return value


# --- dynamic proposals -------------------------------------------------------------------


def percentile(values: list[Decimal], pct: float) -> Decimal:
    """Nearest-rank percentile (``pct`` in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * pct // 100))  # ceil
    return ordered[int(rank) - 1]


def propose_amount(*, daily_peaks: list[Decimal], current: Decimal, idle_rate: float | None,
                   headroom: Decimal, idle_threshold: Decimal
                   ) -> tuple[Decimal, str] | None:
    """A dynamic-mode proposal: 30-day p95 of daily peaks plus headroom, lowered for a
    high idle rate, rounded up to whole units (cores, GiB, cards). Returns (amount,
    formula shown to the admin), or None when there is no history or the change is
    below 5% of the current quota and below one unit."""
    if not daily_peaks:
        return None
    p95 = percentile(daily_peaks, 95)
    amount = p95 * (1 + headroom)
    formula = (f"p95 of {len(daily_peaks)} daily peaks = {_n(p95)}; "
               f"x (1 + headroom {_n(headroom)}) = {_n(amount)}")
    if idle_rate is not None and Decimal(str(idle_rate)) > idle_threshold:
        busy = 1 - Decimal(str(idle_rate))
        amount = amount * (busy + idle_threshold)
        formula += (f"; idle rate {idle_rate:.0%} above {_n(idle_threshold * 100)}%: "
                    f"x ({_n(busy)} busy + {_n(idle_threshold)}) = {_n(amount)}")
    amount = amount.to_integral_value(rounding="ROUND_CEILING")
    formula += f"; rounded up: {_n(amount)} (now {_n(current)})"
    if abs(amount - current) < max(Decimal(1), current * Decimal("0.05")):
        return None
    return amount, formula


# --- dev volume reclaim ----------------------------------------------------------------


def volumes_to_reclaim(*, volumes: Mapping[str, object], in_use: set[str],
                       last_used: Mapping[str, object], now, days: int) -> list[str]:  # type: ignore[no-untyped-def]
    """Names of volumes not mounted by any pod for ``days`` days.

    ``volumes``: name -> creation time; ``last_used``: name -> last time a pod mounted it.
    A volume never seen mounted counts from its creation.
    """
    cutoff = now - dt.timedelta(days=days)
    return sorted(name for name, created in volumes.items()
                  if name not in in_use and (last_used.get(name) or created) < cutoff)
