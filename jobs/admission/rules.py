"""How a job would be admitted against its pool's quota (nominal, borrowing, batch, over),
in every dimension, and the eviction watermark (steps 3 and 4 of
:mod:`jobs.admission.engine`): :class:`QuotaRules`, a layer of the pass.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.choices import Tier
from core.resources import extended
from tenants.demand import dimension_only_when_granted

from . import text
from .explain import _BATCH, _BORROW, _NOMINAL, _OVER
from .state import _UNBOUNDED, PassState
from .types import JobView, Text

_DimShort = tuple[str, int, int, int, int]
_EXTENDED = frozenset(d.kind for d in extended())
"""The dimension a job is over: (key, wanted, used, nominal, ceiling)."""


def _worst(a: str, b: str) -> str:
    """The combined mode of two dimensions: over beats borrow beats nominal/batch."""
    if _OVER in (a, b):
        return _OVER
    if _BORROW in (a, b):
        return _BORROW
    return a


def _mode(batch: bool, units: int, use_nb: int, use_all: int, nominal: int,
          ceiling: int) -> str:
    """How a job would be admitted given its pool's use: within nominal, borrowing, batch,
    or not at all (over). A non-batch job does not count the pool's batch jobs: they yield
    to it (its own pool's batch jobs are reclaimed when the room is needed)."""
    if batch:
        return _BATCH if use_all + units <= ceiling else _OVER
    if use_nb + units <= nominal and use_nb + units <= ceiling:
        return _NOMINAL
    if ceiling > nominal and use_nb + units <= ceiling:
        return _BORROW
    return _OVER


class QuotaRules(PassState):
    """Quota modes, the other dimensions and the watermark."""

    # -- the watermark (step 4 of the module docstring) --------------------------------

    def wm_capacity(self, key: str) -> int:
        cached = self._wm_capacity.get(key)
        if cached is None:
            cached = self._wm_capacity[key] = self.cap.capacity_total(key)
        return cached

    def wm_limit(self, key: str) -> float:
        return self.policy.watermark * self.wm_capacity(key)

    def wm_use(self, key: str) -> float:
        """Projected physical use of ``key`` in units (step 4 of the module docstring). On
        devices no job can overload (``Policy.exclusive_keys``) only the measured pressure
        counts, not what is allocated, this pass's admissions included."""
        exclusive = key in self.policy.exclusive_keys
        base = self._wm_base.get(key)
        if base is None:
            capacity = self.wm_capacity(key)
            measured = min(max(float(self.physical.get(key, 0.0)), 0.0), 1.0) * capacity
            allocated = 0.0 if exclusive else float(self.alloc_start.get(key, 0))
            base = self._wm_base[key] = max(allocated, measured)
        taken = 0 if exclusive else (self.new_alloc.get(key, 0)
                                     + self.promised_units.get(key, 0))
        return (base + taken - self.preempting_units.get(key, 0)
                - self.evicted_units.get(key, 0))

    def gated(self, job: JobView, key: str, freed: int = 0) -> bool:
        """Whether the watermark keeps the job out: preemptible work beyond its pool's
        guarantee that would take use above the watermark (``freed``: units of victims
        chosen for it, counted as gone)."""
        if job.tier == Tier.PRODUCTION or self.wm_capacity(key) <= 0:
            return False
        if self.policy.watermark >= 1.0 and not self.physical:
            return False   # allocation alone never exceeds the capacity
        if key in self.policy.exclusive_keys and not self.physical.get(key):
            return False   # no measured pressure on devices no job can overload
        if self.within_guarantee(job, key):
            return False
        return self.wm_use(key) - freed + job.demand > self.wm_limit(key) + 1e-9

    def _percent(self, units: float, key: str) -> int:
        capacity = self.wm_capacity(key)
        return round(100 * units / capacity) if capacity else 0

    def watermark_wait(self, job: JobView, key: str) -> Text:
        use = self.wm_use(key)
        return {"code": "jobs.wait.watermark",
                "args": {"resource": text.resource_name(key),
                         "use": self._percent(use, key),
                         "after": self._percent(use + job.demand, key),
                         "percent": round(self.policy.watermark * 100)}}

    # -- the other dimensions (cpu, memory, gpu-memory, gpu-shared) ------------------------

    def dim_limits(self, job: JobView, dim: str) -> tuple[int, int]:
        """(nominal, ceiling) of the job's pool for a dimension: what is not granted is
        zero, except the dimensions that bind only where granted (gpu-memory)."""
        tpk = (job.tenant, job.pool, dim, job.tier)
        cached = self._dim_limits.get(tpk)
        if cached is None:
            quota = self.quota.get((job.tenant, job.pool))
            if (quota is None or dim not in quota.nominal) and dimension_only_when_granted(dim):
                cached = (_UNBOUNDED, _UNBOUNDED)
            else:
                cached = self.limits(job, dim)
            self._dim_limits[tpk] = cached
        return cached

    def dims_mode(self, job: JobView, *, releasing: bool = False,
                  victims: Sequence[JobView] = ()) -> tuple[str, _DimShort | None]:
        """The worst mode over the job's other dimensions (nominal < borrow < over; batch
        when all fit a batch job) and, when over, the first dimension that is: a job is
        admitted only when every dimension fits. ``releasing``: count what preempting jobs
        and victims release as gone; ``victims``: also what these (of its pool) would."""
        batch = job.tier == Tier.BATCH
        worst = _BATCH if batch else _NOMINAL
        for dim, amount in job.dims:
            tpk = (job.tenant, job.pool, dim)
            nominal, ceiling = self.dim_limits(job, dim)
            nb, al = self.dim_nb[tpk], self.dim_all[tpk]
            if releasing:
                nb -= self.dim_rel_nb[tpk]
                al -= self.dim_rel_all[tpk]
            for v in victims:
                if v.tenant == job.tenant and v.pool == job.pool:
                    freed = dict(v.dims).get(dim, 0)
                    al -= freed
                    if v.tier != Tier.BATCH:
                        nb -= freed
            mode = _mode(batch, amount, nb, al, nominal, ceiling)
            if mode == _OVER:
                used = al if batch or ceiling > nominal or al + amount > ceiling else nb
                return _OVER, (dim, amount, used, nominal, ceiling)
            if mode == _BORROW:
                worst = _BORROW
        return worst, None

    def dims_never(self, job: JobView) -> Text | None:
        """Why the job could never start as it is: a dimension above what its pool may
        ever hold, or a worker's extended resource (RDMA NICs ...) more than any
        schedulable node advertises (None when every dimension could fit an idle pool)."""
        for dim, amount in job.dims:
            if dim in _EXTENDED and -(-amount // max(job.replicas, 1)) > \
                    self.cap.extended_max.get(dim, 0):
                return {"code": "jobs.never.no_node_has",
                        "args": {"resource": text.resource_name(dim)}}
            _nominal, ceiling = self.dim_limits(job, dim)
            if amount > ceiling:
                return self.never_text(job, dim, amount, ceiling)
        return None

    @staticmethod
    def never_text(job: JobView, key: str, amount: int, limit: int) -> Text:
        """Why a job asking for ``amount`` of ``key`` can never start under ``limit``, what
        its pool may ever hold: a production job its quota (production never borrows), a
        development or batch job the borrowing cap a platform admin set."""
        pool = text.pool(job.pool)
        capped = job.tier != Tier.PRODUCTION
        if limit == 0:
            return {"code": "jobs.never.no_quota_capped" if capped else "jobs.never.no_quota",
                    "args": {"pool": pool, "resource": text.resource_name(key)}}
        if capped:
            return {"code": "jobs.never.above_cap",
                    "args": {"amount": text.amount(amount, key), "pool": pool,
                             "limit": text.amount(limit, key)}}
        return {"code": "jobs.never.above_quota",
                "args": {"amount": text.amount(amount, key), "pool": pool,
                         "limit": text.amount(limit, key)}}

    def why_dim(self, job: JobView, short: _DimShort) -> Text:
        """"CPU: needs 12 cores, 8 of your dev quota of 16 in use"; for development and
        batch work, which borrow, the cap a platform admin set on borrowing."""
        dim, wanted, used, nominal, ceiling = short
        capped = job.tier != Tier.PRODUCTION
        return {"code": "jobs.wait.borrow_cap_dim" if capped else "jobs.wait.over_quota_dim",
                "args": {"resource": text.resource_name(dim), "pool": text.pool(job.pool),
                         "wanted": text.amount(wanted, dim), "used": text.amount(used, dim),
                         "quota": text.amount(ceiling if capped else nominal, dim)}}
