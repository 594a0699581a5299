"""**The utilisation figures**, defined once (pure; issue 27, item 4).

One family of numbers, per tenant or pool, per GPU kind, per period, in GPU-hours: one
device of the kind (a whole card for ``gpu:<model>``, a MIG instance for
``mig:<profile>``, a share for ``gpu-shared``) held for one hour.

* **Quota held**: the grant over time: each QuotaGrant row times the hours it was in
  force within the period (the table is the history), plus what the pool borrowed and
  minus what it lent through QuotaLoans, up to now for a running period.
* **Allocated**: what the jobs held on the days of the period, the billing ledger's hours
  (``GpuUsage``: devices x seconds run), 2 decimals. Not an invoice's *GPU-hours billed*
  (``billing.selectors.gpu_hours_billed``: its GPU lines, by the month that bills them,
  4 decimals), which differ where usage of a closed month was billed late. Split into
  **within quota** and **borrowed** (the jobs the engine admitted above their pool's
  quota, ``TrainingJob.borrowing``, and batch work, which runs on idle capacity outside
  the quota). A job admitted on a loan is within quota:
  the loan is part of the quota held.
* **Busy**: the allocated hours weighted by each job's DCGM GPU utilisation, as the
  minute sampler measured it (``JobUtilisation``: the job's mean); ``measured`` is the
  part of the allocated hours whose job was sampled at all.
* **Quota use** = allocated within quota / quota held.
* **Idle rate** = allocated but not busy: 1 - busy / measured allocated hours.

Every page, the API and ``/metrics`` show these (``FIGURES`` names each once, with its
definition); the inputs are read by ``billing.selectors.utilisation``, reached from below
through ``tenants.usage.utilisation_by_pool``. This module reads nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, NamedTuple

from django.utils.translation import gettext_lazy as _

HOURS = Decimal("0.01")
SHARE = Decimal("0.0001")
#: the prefixes (and the key) of the GPU kinds the figures cover
GPU_KIND_PREFIXES = ("gpu:", "mig:")
GPU_SHARED = "gpu-shared"


def is_gpu_kind(key: str) -> bool:
    """Whole cards, MIG instances and shared GPUs: the kinds with utilisation figures."""
    return key.startswith(GPU_KIND_PREFIXES) or key == GPU_SHARED


def job_kind(gpu_model: str, mig_profile: str, gpu_shared: bool) -> str:
    """A job's GPU kind (its quota key), as ``tenants.demand.job_demand`` names it."""
    if mig_profile:
        return f"mig:{mig_profile}"
    if gpu_shared:
        return GPU_SHARED
    return f"gpu:{gpu_model}"


class Figure(NamedTuple):
    label: Any        # the name every page shows (lazy translation)
    definition: Any   # the tooltip and the definition under the table


#: Each figure's one name and definition, on every page (``{% figure_th %}``).
FIGURES: dict[str, Figure] = {
    "quota_held": Figure(
        _("Quota held"),
        _("GPU-hours of quota held over the period: each grant times the hours it was in "
          "force, plus quota borrowed and minus quota lent through loans.")),
    "allocated": Figure(
        _("Allocated"),
        _("GPU-hours the jobs held on the days of the period (devices × hours run), within "
          "quota and borrowed. An invoice's GPU-hours billed differ where usage of a "
          "closed month is billed late, on the next open invoice.")),
    "within_quota": Figure(
        _("Allocated within quota"),
        _("Allocated GPU-hours of jobs admitted within their pool's quota (loans "
          "included).")),
    "borrowed": Figure(
        _("Borrowed"),
        _("Allocated GPU-hours of jobs admitted above their pool's quota, and of batch "
          "jobs on idle capacity.")),
    "busy": Figure(
        _("Busy"),
        _("Allocated GPU-hours weighted by each job's measured GPU utilisation (DCGM).")),
    "quota_use": Figure(
        _("Quota use"),
        _("Allocated within quota ÷ quota held.")),
    "idle_rate": Figure(
        _("Idle rate"),
        _("Allocated but not busy: 1 − busy ÷ allocated GPU-hours (of the jobs whose "
          "utilisation was measured).")),
}


class JobHours(NamedTuple):
    """One job's allocated hours of one kind in the period (an input of :func:`figures`)."""
    hours: Decimal
    borrowed: bool
    utilisation: float | None   # the job's mean GPU utilisation, 0..100; None: not sampled


@dataclass(frozen=True)
class Utilisation:
    """The figures of one tenant or pool, one GPU kind (``kind``; "" for all kinds), one
    period. Hours are GPU-hours (2 decimals), rates shares (4 decimals) or None."""

    kind: str = ""
    quota_held_hours: Decimal = Decimal(0)
    within_quota_hours: Decimal = Decimal(0)
    borrowed_hours: Decimal = Decimal(0)
    measured_hours: Decimal = Decimal(0)
    busy_hours: Decimal = Decimal(0)

    @property
    def allocated_hours(self) -> Decimal:
        return self.within_quota_hours + self.borrowed_hours

    @property
    def quota_use(self) -> Decimal | None:
        """Allocated within quota / quota held; None without quota held."""
        if self.quota_held_hours <= 0:
            return None
        return (self.within_quota_hours / self.quota_held_hours).quantize(SHARE)

    @property
    def idle_rate(self) -> Decimal | None:
        """1 - busy / measured allocated hours; None when nothing allocated was measured."""
        if self.measured_hours <= 0:
            return None
        return max(Decimal(0), 1 - self.busy_hours / self.measured_hours).quantize(SHARE)

    def __add__(self, other: Utilisation) -> Utilisation:
        return Utilisation(self.kind if self.kind == other.kind else "",
                           self.quota_held_hours + other.quota_held_hours,
                           self.within_quota_hours + other.within_quota_hours,
                           self.borrowed_hours + other.borrowed_hours,
                           self.measured_hours + other.measured_hours,
                           self.busy_hours + other.busy_hours)

    def as_api(self) -> dict[str, str | None]:
        """The figures as the API and its schema name them (plain decimal strings)."""
        def text(value: Decimal | None) -> str | None:
            return None if value is None else format(value, "f")
        return {"kind": self.kind, "quota_held_gpu_hours": text(self.quota_held_hours),
                "allocated_gpu_hours": text(self.allocated_hours),
                "within_quota_gpu_hours": text(self.within_quota_hours),
                "borrowed_gpu_hours": text(self.borrowed_hours),
                "busy_gpu_hours": text(self.busy_hours),
                "measured_gpu_hours": text(self.measured_hours),
                "quota_use": text(self.quota_use), "idle_rate": text(self.idle_rate)}


def total(figures: Iterable[Utilisation]) -> Utilisation:
    """All kinds together ("" kind): hours summed, rates from the sums."""
    out = Utilisation()
    for each in figures:
        out = out + each
    return Utilisation("", *(getattr(out, f) for f in (
        "quota_held_hours", "within_quota_hours", "borrowed_hours", "measured_hours",
        "busy_hours")))


def held_hours(amount: Decimal, since: dt.datetime | None, until: dt.datetime | None,
               lo: dt.datetime, hi: dt.datetime) -> Decimal:
    """``amount`` devices held from ``since`` to ``until`` (None: open), within [lo, hi):
    device-hours."""
    a, b = max(since or lo, lo), min(until or hi, hi)
    return Decimal(amount) * Decimal(max(0, int((b - a).total_seconds()))) / 3600


def figures(kind: str, *, quota_held: Decimal, jobs: Iterable[JobHours]) -> Utilisation:
    """The figures of one kind from the quota held and the jobs' hours (see the module)."""
    within = borrowed = measured = busy = Decimal(0)
    for job in jobs:
        if job.borrowed:
            borrowed += job.hours
        else:
            within += job.hours
        if job.utilisation is not None:
            measured += job.hours
            share = min(Decimal(1), max(Decimal(0), Decimal(str(job.utilisation)) / 100))
            busy += job.hours * share
    return Utilisation(kind, max(Decimal(0), quota_held).quantize(HOURS),
                       within.quantize(HOURS), borrowed.quantize(HOURS),
                       measured.quantize(HOURS), busy.quantize(HOURS))


def idle_against_quota(figure: Utilisation) -> Decimal | None:
    """The quarterly review's measure, from two of the figures: the share of the quota held
    that was not busy, 1 - quota use x (1 - idle rate); 1 when nothing was allocated on a
    quota held, None without quota or when the allocated hours were never measured."""
    use = figure.quota_use
    if use is None:
        return None
    if not figure.allocated_hours:
        return Decimal(1)
    idle = figure.idle_rate
    if idle is None:
        return None
    return max(Decimal(0), 1 - min(Decimal(1), use) * (1 - idle)).quantize(SHARE)
