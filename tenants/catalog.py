"""The resource catalog: what a quota can be granted for, in the units people count in.

A resource is named by a key: ``cpu`` (cores), ``memory`` (GiB), ``gpu:<model>`` (whole
cards of one GPU model, e.g. ``gpu:NVIDIA-A100-SXM4-80GB``), ``mig:<profile>`` (MIG
instances, e.g. ``mig:1g.10gb``), ``gpu-memory`` (GiB of the cards and slices
allocated), ``gpu-shared`` (shares of time-sliced or MPS GPUs), ``storage:<class>`` (GiB
of one StorageClass), ``iops:<class>`` (IOPS of one StorageClass) and ``pvcs`` (count).
Pure: no database, no cluster.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from django.db import models
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext


class ResourceKind(models.TextChoices):
    CPU = "cpu", _("CPU")
    MEMORY = "memory", _("Memory")
    GPU = "gpu", _("GPUs")
    MIG = "mig", _("MIG instances")
    GPU_MEMORY = "gpu-memory", _("GPU memory")
    GPU_SHARED = "gpu-shared", _("Shared GPUs")
    STORAGE = "storage", _("Storage")
    IOPS = "iops", _("Storage IOPS")
    PVCS = "pvcs", _("Volume claims")


UNITS = {
    ResourceKind.CPU: _("cores"), ResourceKind.MEMORY: _("GiB"), ResourceKind.GPU: _("cards"),
    ResourceKind.MIG: _("instances"), ResourceKind.GPU_MEMORY: _("GiB"),
    ResourceKind.GPU_SHARED: _("shares"), ResourceKind.STORAGE: _("GiB"),
    ResourceKind.IOPS: _("IOPS"), ResourceKind.PVCS: _("claims"),
}
# amounts counted in GiB: written with at most one decimal (core.numbers' memory rule)
GIB_KINDS = {str(kind) for kind in (ResourceKind.MEMORY, ResourceKind.GPU_MEMORY,
                                    ResourceKind.STORAGE)}
QUALIFIED = {ResourceKind.GPU, ResourceKind.MIG, ResourceKind.STORAGE, ResourceKind.IOPS}
INTEGRAL = {ResourceKind.GPU, ResourceKind.MIG, ResourceKind.GPU_SHARED, ResourceKind.IOPS,
            ResourceKind.PVCS}
_QUALIFIER = {
    ResourceKind.GPU: re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"),
    ResourceKind.MIG: re.compile(r"^[0-9]+g\.[0-9]+gb$"),
    ResourceKind.STORAGE: re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"),
    ResourceKind.IOPS: re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"),
}


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
        n = int(amount) if amount == int(amount) else 2
        if self.kind == ResourceKind.GPU:
            return ngettext("card", "cards", n)
        if self.kind == ResourceKind.MIG:
            return ngettext("instance", "instances", n)
        if self.kind == ResourceKind.CPU:
            return ngettext("core", "cores", n)
        if self.kind == ResourceKind.GPU_SHARED:
            return ngettext("share", "shares", n)
        if self.kind == ResourceKind.PVCS:
            return ngettext("claim", "claims", n)
        return self.unit

    @property
    def integral(self) -> bool:
        return self.kind in INTEGRAL

    def label(self) -> str:
        """Human name, e.g. ``GPUs · NVIDIA-H800`` or ``Memory``."""
        name = str(ResourceKind(self.kind).label)
        return f"{name} · {self.qualifier}" if self.qualifier else name

    @classmethod
    def parse(cls, key: str) -> Resource:
        """Parse a key; raises ValueError with a readable message when it is not one."""
        kind_part, _sep, qualifier = (key or "").strip().partition(":")
        try:
            kind = ResourceKind(kind_part)
        except ValueError:
            raise ValueError(_("unknown resource %(k)s") % {"k": repr(key)}) from None
        if kind in QUALIFIED:
            if not _QUALIFIER[kind].match(qualifier):
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
