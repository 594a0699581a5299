"""The admission engine's inputs and outputs: plain frozen dataclasses, no database
(the tiers and their order come from ``core.choices.Tier``).

The admission loop (``jobs/tasks.py``) builds these from the database and the observed
cluster, calls :func:`jobs.admission.decide`, and applies the returned decisions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from types import MappingProxyType
from typing import Any

from core.choices import DEFAULT_GRACE_SECONDS, Tier
from jobs.choices import JobState

TIERS: tuple[str, ...] = tuple(Tier.values)
"""Tiers in order of precedence (``core.choices.Tier``'s order): production first, batch
last."""

TIER_RANK: Mapping[str, int] = MappingProxyType({tier: rank for rank, tier in enumerate(TIERS)})

ACTIVE_STATES: frozenset[str] = frozenset({JobState.ADMITTED, JobState.RUNNING,
                                           JobState.PREEMPTING})
"""Job states that hold quota and GPUs."""

Text = dict[str, Any] | list[Any] | str
"""A stored text (see ``core.texts``): ``{"code": ..., "args": {...}}``, a list of them
(shown joined by "; "), or a plain string. The engine builds these as plain literals (it
translates nothing); pages render them in the reader's language."""


_EMPTY: Mapping[str, int] = MappingProxyType({})


def _frozen(mapping: Mapping[str, int] | None = None) -> Mapping[str, int]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class NodeView:
    """One node as observed now.

    ``gpus_used``/``mig_used`` count what pods bound to the node hold (any pods), so
    running and preempting jobs are already in them; admitted jobs whose pods are not
    bound yet are not (the engine subtracts their ``placement``).
    """

    name: str
    gpu_model: str
    """e.g. "NVIDIA-H800"; "" for CPU-only nodes."""
    switch: str
    """Label ``trainyard.io/switch``; "" when unknown (unlabelled nodes form one group)."""
    gpus: int
    gpus_used: int
    mig: Mapping[str, int]
    mig_used: Mapping[str, int]
    schedulable: bool
    dedicated_to: str = ""
    """Tenant slug when the node is dedicated: only that tenant's jobs may use it."""
    shared: int = 0
    """Shares of time-sliced/MPS GPUs (``nvidia.com/gpu.shared``), placement key
    ``shared:<gpu_model>``; ``shared_used`` what bound pods hold."""
    shared_used: int = 0
    cpu: int = 0
    """Allocatable CPU in millicores (0: not reported, not checked); ``cpu_used`` what
    bound pods request. ``memory``/``memory_used`` the same in 1/1000 GiB."""
    cpu_used: int = 0
    memory: int = 0
    memory_used: int = 0
    extended: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    """Per extended-resource dimension (``core.resources``, by kind: ``rdma``), what the
    node advertises; ``extended_used`` what bound pods hold. A map keyed by dimension: a
    new extended dimension needs no new field here."""
    extended_used: Mapping[str, int] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True)
class JobView:
    """One job that is queued, admitted, running or preempting.

    ``placement``: for ``admitted`` jobs (pods not bound yet) the node of each replica;
    their GPUs are not yet in ``NodeView.gpus_used`` and the engine reserves them. For
    ``running`` and ``preempting`` jobs, pass the node of each replica's pod as observed
    (their GPUs are already in ``gpus_used``, so nothing is subtracted twice): the engine
    uses it to know which nodes a preemption frees. Without it the engine can only prove
    room in aggregate per GPU model, so a reclaim may free GPUs on the wrong nodes for a
    gang that needs whole nodes (it then reclaims again on a later pass).
    """

    id: int
    tenant: str
    pool: str
    tier: str
    gpu_model: str
    mig_profile: str
    replicas: int
    gpus_per_replica: int
    state: str
    submitted_at: datetime
    admitted_at: datetime | None = None
    started_at: datetime | None = None
    expected_seconds: float | None = None
    """The submitter's estimate of the run time (None: none given). An estimate, not a
    promise: the ETA takes it as the median and spreads p90 around it."""
    priority: int = 0
    held: bool = False
    borrowing: bool = False
    loan: int | None = None
    """The quota loan (``tenants.QuotaLoan`` id) the job was admitted on: part of its pool's
    use was above the pool's own grant and within what the pool borrows (marked at
    admission by :func:`jobs.admission.decide`)."""
    loan_lender: str = ""
    """Who lent that loan ("tenant/pool"), for the preemption reason."""
    loan_ended: bool = False
    """That loan has ended (or expired): the job runs on quota its pool no longer has, so
    a job that needs the room may reclaim it (with its tier's grace), as borrowed work."""
    placement: tuple[str, ...] = ()
    preempt_deadline: datetime | None = None
    gpu_shared: bool = False
    """The ``gpus_per_replica`` are shares of a time-sliced/MPS GPU of ``gpu_model``."""
    resources: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    """The whole gang's demand per catalog key (``tenants.demand.engine_demand``: cpu,
    memory and gpu-memory in thousandths of a core / GiB, the rest in units). Its GPU key
    (``gpu:``/``mig:``) is ``demand`` under another name; every other key is checked
    against the pool's quota as well (see :attr:`dims`)."""
    max_run_seconds: float | None = None
    """The longest the job may run (it is stopped then): caps every run-time estimate."""
    template: str = ""
    """The job template it came from ("" for none): History keys durations by it."""
    reported_remaining_seconds: float | None = None
    """A running job's own report of the seconds it had left, made at ``reported_at``
    (``jobs.progress``: a TrainJob's ``trainerStatus``, or the progress line of its log);
    None without a fresh one. The run-time estimate takes it over History's
    (:meth:`jobs.admission.eta.RunTimes.remaining`)."""
    reported_at: datetime | None = None
    scope: str = ""
    """The dedication it is placed under instead of its tenant's: ``window:<id>`` for the
    target job of an open maintenance window, whose freed nodes are dedicated to it alone
    (``NodeView.dedicated_to``); "" for every other job."""

    @property
    def place_as(self) -> str:
        """Whose dedicated nodes it may use (``Capacity.eligible``): its scope or tenant."""
        return self.scope or self.tenant

    @cached_property
    def resource_key(self) -> str:
        """"gpu:<model>", "mig:<profile>", "shared:<model>" (placement of shares, counted
        against the quota key ``gpu-shared``), or "" for a CPU-only job."""
        if self.gpus_per_replica <= 0:
            return ""
        if self.mig_profile:
            return f"mig:{self.mig_profile}"
        if self.gpu_shared:
            return f"shared:{self.gpu_model}"
        return f"gpu:{self.gpu_model}"

    @cached_property
    def dims(self) -> tuple[tuple[str, int], ...]:
        """The quota dimensions beyond the placement key: (key, amount), by key."""
        own = self.resource_key
        return tuple(sorted((k, v) for k, v in self.resources.items()
                            if v > 0 and k != own))

    @cached_property
    def demand(self) -> int:
        """Whole GPUs or MIG instances the whole gang needs."""
        return max(self.replicas, 0) * max(self.gpus_per_replica, 0)

    @cached_property
    def queue_key(self) -> tuple[int, float, int]:
        """Where the job stands in its tenant's queue: (-priority, submission time as a
        timestamp, id); computed once per view (``jobs.admission.order``)."""
        return (-self.priority, self.submitted_at.timestamp(), self.id)


@dataclass(frozen=True)
class PoolQuota:
    """A tenant pool's quota per resource key ("gpu:<model>", "mig:<profile>", and the
    other catalog keys a job consumes: "cpu", "memory", "gpu-memory" in thousandths,
    "gpu-shared" in shares). A key not in ``nominal`` is zero, except "gpu-memory",
    which binds only when present (``tenants.demand``)."""

    tenant: str
    pool: str
    nominal: Mapping[str, int]
    ceiling: Mapping[str, int]
    """What the pool's development and batch work may hold per key (>= nominal): the
    grant plus what it may borrow of idle capacity (``tenants.demand.pool_limits``; no cap:
    ``tenants.demand.UNLIMITED``). Production never borrows: its limit is ``nominal``."""
    ceiling_default: int | None = None
    """The ceiling of a key the pool was not granted: ``UNLIMITED`` when the pool's
    borrowing is not capped (development and batch work may borrow any idle capacity, as
    a Kueue ClusterQueue without a ``borrowingLimit``); None: its nominal quota (0)."""
    guaranteed: Mapping[str, int] | None = None
    """The part of ``nominal`` backed by physical capacity (<= nominal), per key; None or a
    missing key: all of ``nominal``. For an overcommitted-mode tenant it is its grant times
    the guaranteed share (``tenants.quota.guaranteed_amount``, the number its quota pages
    show); the rest of its quota is reclaimable by pools within their own guarantee."""
    batch_ceiling: Mapping[str, int] | None = None
    """What the pool's batch jobs may hold per key when it differs from ``ceiling`` (the
    benchmarks replay older policies with it); None or a missing key: ``ceiling``."""
    loans_in: Mapping[str, tuple[tuple[int, int], ...]] | None = None
    """Per key, the active loans the pool borrows, as (loan id, units), in the order they
    stack on top of the pool's own grant (included in ``nominal``): a job admitted with
    the pool's use above ``nominal`` minus all of them runs on the loan its top unit falls
    in (:attr:`Admission.loan`)."""

    def limits(self, key: str, tier: str) -> tuple[int, int]:
        """(nominal, ceiling) of ``key`` for a job of ``tier``, the one rule: production
        never borrows (its ceiling is its nominal quota, the pool's effective grant, loans
        included); development and batch work may hold up to :attr:`ceiling` (a key not
        granted: :attr:`ceiling_default`), a batch job the :attr:`batch_ceiling` where one
        is given. The engine (``PassState.limits``) and the job form's preview call it."""
        nominal = self.nominal.get(key, 0)
        if tier == Tier.PRODUCTION:
            return nominal, nominal
        ceiling = self.ceiling.get(
            key, nominal if self.ceiling_default is None else self.ceiling_default)
        if tier == Tier.BATCH and self.batch_ceiling is not None:
            ceiling = self.batch_ceiling.get(key, ceiling)
        return nominal, max(nominal, ceiling)


@dataclass(frozen=True)
class Policy:
    """Cluster policy knobs the engine reads.

    ``preempt_lower_priority_within_tenant`` (added): when True, a job within its nominal
    quota may also preempt jobs of the same tenant, pool and tier with a lower
    ``priority`` (Kueue's ``withinClusterQueue: LowerPriority``). Off by default.
    ``default_duration_seconds`` (added): assumed run time for ETA when neither the job
    nor History knows one; p90 is twice that.
    """

    watermark: float = 0.85
    """The eviction watermark: the share of a resource key's physical capacity above which
    no preemptible work beyond its pool's guarantee starts, and such work is evicted (see
    :func:`jobs.admission.decide`, step 4)."""
    grace_seconds: Mapping[str, int] = field(
        default_factory=lambda: _frozen(DEFAULT_GRACE_SECONDS))
    fair_share_half_life_seconds: float = 7 * 86400
    preempt_lower_priority_within_tenant: bool = False
    default_duration_seconds: float = 3600.0
    exclusive_keys: frozenset[str] = frozenset()
    """Resource keys of devices no job can overload (exclusive whole cards, MIG instances):
    their allocation is not physical use, so the watermark holds them to the measured
    pressure alone (``physical``: CPU and memory requested on their nodes) and borrowing or
    batch work may fill every idle one. The admission loop passes them
    (``k8s_sync.physical.PhysicalUse.exclusive``); empty: allocation counts everywhere."""


@dataclass(frozen=True)
class History:
    """What the engine knows of the past: decayed usage (the caller decays it) and durations."""

    usage: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    """tenant -> decayed GPU-seconds."""
    durations: Mapping[tuple[str, ...], tuple[float, ...]] = field(
        default_factory=lambda: MappingProxyType({}))
    """Recent run durations in seconds, keyed from the most to the least specific:
    (tenant, tier, template, gpu model), (tenant, tier, gpu model), (tenant, tier). The
    engine uses the most specific key with enough samples (``MIN_SAMPLES``)."""


@dataclass(frozen=True)
class Admission:
    """Admit ``job_id`` now: one node per replica (in replica order: master first)."""

    job_id: int
    placement: tuple[str, ...]
    borrowing: bool
    loan: int | None = None
    """The quota loan the job runs on (see :attr:`PoolQuota.loans_in`), None for none."""


@dataclass(frozen=True)
class Preemption:
    """Preempt ``job_id``: suspend after ``grace_seconds`` and re-queue it.

    ``for_job`` is the queued job the room is made for (None for watermark eviction).
    """

    job_id: int
    reason: Text
    grace_seconds: int
    for_job: int | None


@dataclass(frozen=True)
class WaitInfo:
    """Where a queued job stands.

    Positions are 1-based in the order the engine would admit (held jobs come last).
    ``eta_p50``/``eta_p90`` are None when the job cannot start in the simulated future
    (held, too large for any node or switch, above its ceiling).
    """

    position_in_pool: int
    position_in_model: int
    eta_p50: datetime | None
    eta_p90: datetime | None
    reason: Text


@dataclass
class Decisions:
    """The outcome of one :func:`decide` call; at most one decision per job.

    ``waiting`` holds every queued job that is not admitted by this call.
    """

    admit: list[Admission] = field(default_factory=list)
    preempt: list[Preemption] = field(default_factory=list)
    waiting: dict[int, WaitInfo] = field(default_factory=dict)
