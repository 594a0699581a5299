"""One resource model: how a job consumes every catalog dimension it can be granted.

The submission check (``jobs.services._check_ceiling``), the admission engine (through
``jobs.selectors.admission_inputs``), the preview and the job spec's requests count a job
with :func:`job_demand`; the gauges (``tenants.usage``) derive the same amounts from the
observed pods' requests (tests hold the two equal), and the ResourceQuota backstop bounds
the same requests, so a job the portal admits is a job the cluster accepts, and the
gauges show what admission counts. Gang: the demand is the whole job's (every worker,
the master included).

What counts against quota (decided once, here):

* ``cpu`` and ``memory`` count the pods' **requests** (:func:`cpu_request`,
  :func:`memory_request_gib`): the ResourceQuota bounds ``requests.cpu`` /
  ``requests.memory`` and the gauges sum the observed pods' requests, so admission counts
  the same thing. The job spec asks for these requests (``jobs.selectors.job_spec``).
* ``gpu:<model>`` whole cards, ``mig:<profile>`` MIG instances, ``gpu-shared`` shares of
  a time-sliced/MPS GPU (``gpu_shared``: ``gpus_per_worker`` are shares).
* ``gpu-memory`` is derived: a whole card consumes its memory, a MIG instance its
  profile's memory, a share its slice of the card; an explicit HAMi limit per card
  (``gpu_memory_gib_per_card``, ``nvidia.com/gpumem``) replaces the card's memory. When
  the memory of the job's model is not known (no node of it observed) it counts 0 (such a
  job cannot be placed anyway).

What is not granted is zero for ``cpu``, ``memory`` and every GPU key a job needs; the
derived ``gpu-memory`` binds only pools that were granted it (a pool's GPU grants already
bound the memory of its cards).

Pure: no database (the admission engine imports :data:`MILLI`); the kinds come from the
dimension registry (``core.resources``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from types import MappingProxyType

from core.resources import kinds

__all__ = [
    "JOB_KINDS", "MILLI", "UNLIMITED", "CardFacts", "borrowing_factor", "card_facts",
    "cpu_request", "dimension_only_when_granted", "elastic_ceiling", "engine_amount",
    "engine_demand", "from_engine", "job_demand", "memory_request_gib",
    "mig_profile_memory_gib", "pool_ceiling", "pool_limits", "quota_limits",
]

MILLI: frozenset[str] = kinds(lambda d: d.milli)
"""Keys the admission engine counts in thousandths of their catalog unit (millicores,
1/1000 GiB); every other key in whole units (cards, instances, shares)."""

_OPTIONAL = kinds(lambda d: d.only_when_granted)
_MIG_NAME = re.compile(r"^(\d+)g\.(\d+)gb$")
_THOUSAND = Decimal(1000)
_MILLI_STEP = Decimal("0.001")
_MIB = Decimal(1) / 1024


def cpu_request(cpu_per_worker: Decimal | int | float) -> Decimal:
    """The CPU a worker's pod requests (and quota counts): half the limit from one core up
    (idle headroom is shared), the whole limit below one core."""
    cpu = Decimal(str(cpu_per_worker))
    return (cpu / 2).quantize(Decimal("0.001"), rounding=ROUND_CEILING) if cpu >= 1 else cpu


def memory_request_gib(memory_gib_per_worker: Decimal | int | float) -> Decimal:
    """The memory a worker's pod requests (and quota counts): 90% of the limit, rounded
    down to a MiB, the step a quantity carries (``k8s_sync.specs.JobSpec`` rounds so too),
    so the pod's ``requests.memory`` is exactly this: 64 GiB -> 58982 MiB (57.6 GiB)."""
    memory = Decimal(str(memory_gib_per_worker))
    return (memory * 9 / 10 / _MIB).to_integral_value(rounding=ROUND_FLOOR) * _MIB


def mig_profile_memory_gib(profile: str) -> Decimal | None:
    """GPU memory of one MIG instance from its profile name: ``3g.40gb`` -> 40 GiB."""
    match = _MIG_NAME.match(profile or "")
    return Decimal(match.group(2)) if match else None


def dimension_only_when_granted(key: str) -> bool:
    """Keys that bind only pools granted them (``gpu-memory``); the rest: not granted is 0."""
    return key in _OPTIONAL


def quota_limits(key: str, granted: bool) -> bool:
    """Whether a pool's quota limits ``key`` at all (``granted``: the pool holds a grant
    or a loan of it). Every key is limited (not granted is 0, used above it is
    borrowed) but those that bind only where granted, which a pool without a grant uses
    without limit. The quota page, the dashboard's gauges and the API say "not limited"
    from this one answer, as admission and the submission check act on it."""
    return granted or not dimension_only_when_granted(key)


@dataclass(frozen=True)
class CardFacts:
    """What the cluster says a card holds: GiB per whole card and per share, by GPU model
    (the catalog's model name, e.g. ``NVIDIA-L40S``), from the observed nodes."""

    card_memory_gib: Mapping[str, Decimal] = field(
        default_factory=lambda: MappingProxyType({}))
    share_memory_gib: Mapping[str, Decimal] = field(
        default_factory=lambda: MappingProxyType({}))


def job_demand(*, workers: int, cpu_per_worker: Decimal | int | float = 0,
               memory_gib_per_worker: Decimal | int | float = 0, gpus_per_worker: int = 0,
               gpu_model: str = "", mig_profile: str = "", gpu_shared: bool = False,
               gpu_memory_gib_per_card: Decimal | int | float | None = None,
               facts: CardFacts | None = None,
               extended: Mapping[str, int] | None = None) -> dict[str, Decimal]:
    """The whole job's demand per catalog key, in catalog units (cores, GiB, cards ...).

    ``extended``: per worker, the job's amount of each extended-resource dimension
    (``core.resources.Dimension.extended``, by kind: ``{"rdma": 1}``); a worker's pod
    requests it, so the whole job demands ``workers x`` that.
    Only the dimensions it consumes (non-zero amounts) are in the result.
    """
    n = max(int(workers or 0), 0)
    per = max(int(gpus_per_worker or 0), 0)
    facts = facts or CardFacts()
    out: dict[str, Decimal] = {}
    cpu = cpu_request(cpu_per_worker or 0) * n
    if cpu > 0:
        out["cpu"] = cpu
    memory = memory_request_gib(memory_gib_per_worker or 0) * n
    if memory > 0:
        out["memory"] = memory
    for kind, per_worker in (extended or {}).items():
        if int(per_worker or 0) > 0 and n:
            out[kind] = Decimal(int(per_worker) * n)
    if not per or not n:
        return out
    units = n * per
    explicit = (Decimal(str(gpu_memory_gib_per_card))
                if gpu_memory_gib_per_card not in (None, "") else None)
    each: Decimal | None
    if mig_profile:
        out[f"mig:{mig_profile}"] = Decimal(units)
        each = mig_profile_memory_gib(mig_profile)
    elif gpu_shared:
        out["gpu-shared"] = Decimal(units)
        each = facts.share_memory_gib.get(gpu_model)
    else:
        out[f"gpu:{gpu_model}"] = Decimal(units)
        each = facts.card_memory_gib.get(gpu_model)
    if explicit is not None and explicit > 0 and not mig_profile:
        each = explicit  # HAMi's nvidia.com/gpumem: the limit per card is what it holds
    if each:
        out["gpu-memory"] = (each * units).quantize(Decimal("0.001"))
    return out


def engine_amount(key: str, amount: Decimal | int | float, *, demand: bool = True) -> int:
    """An amount in the engine's integer units (see :data:`MILLI`). A demand rounds up, a
    quota down, so rounding never lets a job past its quota."""
    value = Decimal(str(amount))
    if key.partition(":")[0] in MILLI:
        value = value * _THOUSAND
    rounding = ROUND_CEILING if demand else ROUND_FLOOR
    return int(value.to_integral_value(rounding=rounding))


def engine_demand(demand: Mapping[str, Decimal]) -> dict[str, int]:
    """:func:`job_demand` in the engine's units (``JobView.resources``)."""
    return {k: engine_amount(k, v) for k, v in demand.items() if v > 0}


def from_engine(key: str, amount: int) -> int | float:
    """An engine amount back in catalog units, as a JSON number (``12``, ``12.5``)."""
    if key.partition(":")[0] in MILLI:
        if amount % 1000 == 0:
            return amount // 1000
        return round(amount / 1000, 3)
    return int(amount)



JOB_KINDS: frozenset[str] = kinds(lambda d: d.job)
"""The catalog kinds a job consumes (storage, IOPS and claims are the volumes'), from the
dimension registry (``core.resources``)."""


UNLIMITED: int = 1 << 62
"""A ceiling that does not bind, in engine units: development and batch work of a pool
with no borrowing cap may hold any idle capacity (as a Kueue ClusterQueue without a
``borrowingLimit``)."""


def borrowing_factor(tenant_factor: Decimal | float | None,
                     policy_factor: Decimal | float | None) -> Decimal | None:
    """The borrowing cap of a tenant's pools, as a factor of its grants: the tenant's own
    cap (``Tenant.borrowing_cap``) where a platform admin set one, else the policy's
    (``Policy.borrowing_cap``), else None: no cap, development and batch work may borrow
    any idle capacity of the cluster. A factor below 1 is 1 (the grant itself)."""
    for factor in (tenant_factor, policy_factor):
        if factor not in (None, ""):
            return max(Decimal(str(factor)), Decimal(1))
    return None


def elastic_ceiling(key: str, amount: Decimal | int | float,
                    factor: Decimal | float | None) -> Decimal:
    """``amount x factor`` of one granted ``amount`` of ``key``, in catalog units: what a
    pool's development and batch work may hold of it under a borrowing cap of ``factor``
    (see :func:`pool_ceiling`, which also knows "no cap"):

    * a job dimension (:data:`JOB_KINDS`) reaches ``amount x factor``, rounded down to
      the unit the engine counts (whole cards, instances and shares; 0.001 of a core or
      GiB), so the ceiling never lets a job past ``factor x`` its grant;
    * none, or a factor below 1, is 1 (the ceiling is the grant);
    * storage, IOPS and volume claims are not elastic: their ceiling is the grant.
    """
    value = Decimal(str(amount))
    kind = key.partition(":")[0]
    if kind not in JOB_KINDS:
        return value
    scale = max(Decimal(str(factor)) if factor else Decimal(1), Decimal(1))
    step = _MILLI_STEP if kind in MILLI else Decimal(1)
    return (value * scale).quantize(step, rounding=ROUND_FLOOR)


def pool_ceiling(key: str, amount: Decimal | int | float,
                 factor: Decimal | float | None) -> Decimal | None:
    """What a pool's development and batch work may hold of ``key`` (granted ``amount``),
    in catalog units; None: no limit (any idle capacity). The one rule of borrowing
    (admission, the submission check, the ResourceQuota backstop, Kueue's
    ``borrowingLimit`` and the quota page all call it):

    * **production never borrows**: its limit is the grant (callers apply this);
    * development and batch borrow idle capacity beyond the grant, reclaimed with their
      tier's grace when an owner needs its quota back: up to ``amount x factor`` under a
      borrowing cap (``factor`` from :func:`borrowing_factor`), without limit when there
      is none (``factor`` None);
    * storage, IOPS and volume claims never borrow: their ceiling is the grant.
    """
    if key.partition(":")[0] not in JOB_KINDS:
        return Decimal(str(amount))
    if factor is None:
        return None
    return elastic_ceiling(key, amount, factor)


def pool_limits(grants: Mapping[str, Decimal], *, factor: Decimal | float | None
                ) -> tuple[dict[str, int], dict[str, int], int | None]:
    """A pool's (nominal, ceiling, default ceiling) per job dimension in engine units,
    from its effective grants and its borrowing ``factor`` (:func:`borrowing_factor`;
    None: no cap). The ceiling is what development and batch work may hold
    (:func:`pool_ceiling`; :data:`UNLIMITED` without a cap); the default ceiling is that
    of a key the pool was not granted (``PoolQuota.ceiling_default``): :data:`UNLIMITED`
    without a cap, None (0, its nominal) under one."""
    nominal: dict[str, int] = {}
    ceiling: dict[str, int] = {}
    for key, amount in grants.items():
        if key.partition(":")[0] not in JOB_KINDS:
            continue
        value = Decimal(str(amount))
        nominal[key] = engine_amount(key, value, demand=False)
        limit = pool_ceiling(key, value, factor)
        ceiling[key] = UNLIMITED if limit is None else max(
            nominal[key], engine_amount(key, limit, demand=False))
    return nominal, ceiling, (UNLIMITED if factor is None else None)


def card_facts(nodes: object) -> CardFacts:
    """Per-card memory by GPU model from ``k8s_sync.selectors.NodeCapacity`` rows (the
    ``nvidia.com/gpu.memory`` label; per share: the node's share memory)."""
    cards: dict[str, Decimal] = {}
    shares: dict[str, Decimal] = {}
    for node in nodes:  # type: ignore[attr-defined]
        model = getattr(node, "gpu_model", "")
        if not model:
            continue
        card = getattr(node, "card_memory_mib", None)
        if card:
            gib = Decimal(card) / 1024
            cards[model] = min(cards.get(model, gib), gib)
        share = getattr(node, "shared_memory_mib", None) or getattr(node, "share_memory_mib",
                                                                    None)
        if share and getattr(node, "shared_allocatable", 0):
            gib = Decimal(share) / 1024
            shares[model] = min(shares.get(model, gib), gib)
    return CardFacts(card_memory_gib=MappingProxyType(cards),
                     share_memory_gib=MappingProxyType(shares))
