"""The resource catalog: what a quota can be granted for, in the units people count in.

A resource is named by a key: ``cpu`` (cores), ``memory`` (GiB), ``gpu:<model>`` (whole
cards of one GPU model, e.g. ``gpu:NVIDIA-A100-SXM4-80GB``), ``mig:<profile>`` (MIG
instances, e.g. ``mig:1g.10gb``), ``gpu-memory`` (GiB of the cards and slices
allocated), ``gpu-shared`` (shares of time-sliced or MPS GPUs), ``storage:<class>`` (GiB
of one StorageClass), ``iops:<class>`` (IOPS of one StorageClass) and ``pvcs`` (count).
Pure: no database, no cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.db import models
from django.utils.translation import gettext_lazy as _

from core.resources import REGISTRY, by_kind, kinds


class ResourceKind(models.TextChoices):
    CPU = "cpu", by_kind("cpu").name
    MEMORY = "memory", by_kind("memory").name
    GPU = "gpu", by_kind("gpu").name
    MIG = "mig", by_kind("mig").name
    GPU_MEMORY = "gpu-memory", by_kind("gpu-memory").name
    GPU_SHARED = "gpu-shared", by_kind("gpu-shared").name
    RDMA = "rdma", by_kind("rdma").name
    STORAGE = "storage", by_kind("storage").name
    IOPS = "iops", by_kind("iops").name
    PVCS = "pvcs", by_kind("pvcs").name


# Everything else of a kind comes from its entry in the dimension registry
# (``core.resources``): the class above only names the kinds for the code that refers to
# one (``core/tests/test_dimension_registry.py`` holds the two equal).
UNITS = {ResourceKind(d.kind): d.unit for d in REGISTRY}
# amounts counted in GiB: written with at most one decimal (core.numbers' memory rule)
GIB_KINDS = set(kinds(lambda d: d.gib))
QUALIFIED = {ResourceKind(k) for k in kinds(lambda d: d.qualifier is not None)}
INTEGRAL = {ResourceKind(k) for k in kinds(lambda d: d.integral)}
_QUALIFIER = {ResourceKind(d.kind): d.qualifier for d in REGISTRY if d.qualifier is not None}


@dataclass(frozen=True, order=True)
class Resource:
    """One catalog resource; ``qualifier`` is the GPU model, MIG profile or StorageClass."""

    kind: ResourceKind
    qualifier: str = ""

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.qualifier}" if self.qualifier else str(self.kind)

    @property
    def unit(self) -> str:
        return str(UNITS[self.kind])

    def unit_for(self, amount: Decimal | float) -> str:
        """The unit for ``amount``: "1 card", "2 cards"; uncounted units as they are."""
        return by_kind(self.kind).unit_for(float(amount))

    @property
    def integral(self) -> bool:
        return self.kind in INTEGRAL

    def label(self) -> str:
        """Human name, e.g. ``GPUs · NVIDIA-H800`` or ``Memory``."""
        name = str(by_kind(self.kind).name)
        return f"{name} · {self.qualifier}" if self.qualifier else name

    @classmethod
    def parse(cls, key: str) -> Resource:
        """Parse a key; raises ValueError with a readable message when it is not one."""
        kind_part, _sep, qualifier = (key or "").strip().partition(":")
        try:
            kind = ResourceKind(kind_part)
        except ValueError:
            raise ValueError(_("unknown resource %(k)s") % {"k": repr(key)}) from None
        pattern = _QUALIFIER.get(kind)
        if pattern is not None:
            if not pattern.match(qualifier):
                raise ValueError(_("resource %(k)s needs a valid %(kind)s qualifier")
                                 % {"k": repr(key), "kind": kind})
        elif qualifier:
            raise ValueError(_("resource %(kind)s takes no qualifier, got %(k)s")
                             % {"kind": kind, "k": repr(key)})
        return cls(kind, qualifier)

    def check_amount(self, amount: Decimal) -> Decimal:
        """Validate an amount for this resource; returns it normalised."""
        if not amount.is_finite() or amount < 0:
            raise ValueError(_("%(r)s: the amount must be zero or more") % {"r": self.label()})
        if amount > MAX_AMOUNT:
            raise ValueError(_("%(r)s: the amount must be at most %(n)s") % {
                "r": self.label(), "n": fmt_amount(MAX_AMOUNT)})
        if self.integral and amount != amount.to_integral_value():
            raise ValueError(_("%(r)s: the amount must be a whole number") % {"r": self.label()})
        if amount != amount.quantize(Decimal("0.001")):
            raise ValueError(_("%(r)s: at most three decimals") % {"r": self.label()})
        return amount.quantize(Decimal("0.001"))


#: The largest amount of any resource a grant, request or loan may name (a billion cores,
#: GiB or cards: more than any cluster has, and it fits the amount columns).
MAX_AMOUNT = Decimal(10**9)


def fmt_amount(value: Decimal | None) -> str | None:
    """An amount as people write it: ``Decimal("48.000")`` -> ``"48"``, 0.5 -> ``"0.5"``."""
    if value is None:
        return None
    text = f"{Decimal(value).normalize():f}"
    return text
