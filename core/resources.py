"""The dimension registry: every resource a quota can be granted for, declared once.

A *dimension* is a kind of resource a pool's quota counts (``cpu``, ``gpu:<model>``,
``rdma`` ...). Each is declared here once, with everything the rest of Trainyard needs to
know of it:

* its **key** (``kind``, or ``kind:<qualifier>`` when it is qualified: a GPU model, a MIG
  profile, a StorageClass), its **unit** and its **display name** (English, and Simplified
  Chinese through the catalog);
* how a **job demands** it (``job_field``: the job's per-worker amount, e.g.
  ``rdma_per_worker``; "" when the demand is derived, as a GPU's from the job's GPU fields);
* how its **capacity** is read from a node's allocatable (``node_resource``, the extended
  resource name; ``{q}`` stands for the qualifier);
* its **ResourceQuota** keys (``quota_keys``);
* its **Kueue** resource and flavor (``kueue_resource``, ``kueue_flavor``; "" for a
  dimension Kueue does not count);
* its **DRA device class**, if any (``device_class``; None: device plugin only);
* how it is **priced** (``price``: the billing rate it is charged at, "" for unpriced);
* whether development and batch work **borrow** it beyond the grant (``borrows``).

The modules that act on dimensions read these entries (``tenants.catalog``,
``tenants.demand``, ``tenants.capacity``, ``tenants.quota``, ``k8s_sync.kueue``,
``k8s_sync.selectors``, ``jobs.admission.text``); ``core/tests/test_dimension_registry.py``
fails when a module outside its allow-list names a dimension key by hand.

Adding a dimension: one entry in :data:`REGISTRY` (plus, for an extended resource a job
asks for per worker, its job field). Pure: no database; imports nothing of the apps.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

__all__ = ["REGISTRY", "Dimension", "by_kind", "extended", "kinds", "node_extended",
           "quota_hard"]

_DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


@dataclass(frozen=True)
class Dimension:
    """One quota dimension (see the module's docstring for each field)."""

    kind: str
    name: Any
    """Display name (lazy translation)."""
    unit: Any
    """The unit as the catalog shows it (lazy translation)."""
    unit_counted: Callable[[int], str] | None = None
    """The counted unit for n (``ngettext``: "1 card", "2 cards"); None: uncounted."""
    qualifier: re.Pattern[str] | None = None
    """The qualifier's pattern when the key is ``kind:<qualifier>``; None: a plain key."""
    integral: bool = False
    milli: bool = False
    """The admission engine counts it in thousandths of its unit (cores, GiB)."""
    gib: bool = False
    """Counted in GiB (written with at most one decimal)."""
    job: bool = False
    """A job consumes it (storage, IOPS and claims are the volumes')."""
    borrows: bool = False
    """Development and batch work may hold more than the grant (idle capacity)."""
    only_when_granted: bool = False
    """Binds only pools granted it (``gpu-memory``); every other key: not granted is 0."""
    always_offered: bool = False
    """A quota may name it whatever the nodes say."""
    job_field: str = ""
    """The job's per-worker demand field ("" when derived from other fields)."""
    job_label: Any = None
    """The job form's label of ``job_field`` (lazy translation)."""
    job_help: Any = ""
    max_per_worker: int = 0
    """The most of it one worker may ask for (the form's and the API's bound)."""
    node_resource: str = ""
    """The extended resource in a node's allocatable (``{q}``: the qualifier)."""
    quota_keys: tuple[str, ...] = ()
    """ResourceQuota ``spec.hard`` keys (``{q}``: the qualifier)."""
    kueue_resource: str = ""
    kueue_flavor: str = ""
    """The ResourceFlavor of a plain dimension (a qualified one's is named per qualifier,
    ``k8s_sync.kueue``)."""
    node_label: str = ""
    """The node label whose value is the qualifier (a GPU model's product label): a
    qualified dimension's flavor selects its nodes by it."""
    device_class: str | None = None
    price: str = ""
    """The billing rate it is charged at (``billing.pricebook``), "" for none."""

    def unit_for(self, amount: float) -> str:
        """The unit for ``amount`` ("1 card", "2 cards"); uncounted units as they are."""
        if self.unit_counted is None:
            return str(self.unit)
        n = int(amount) if amount == int(amount) else 2
        return self.unit_counted(n)

    @property
    def extended(self) -> bool:
        """A plain (unqualified) dimension a job asks for per worker as an extended
        resource of its pods, counted per node (``NodeView.extended``)."""
        return bool(self.job_field and self.node_resource and self.qualifier is None)


_GPU_MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_MIG_PROFILE = re.compile(r"^[0-9]+g\.[0-9]+gb$")

#: Every dimension, in the catalog's order.
REGISTRY: tuple[Dimension, ...] = (
    Dimension(
        "cpu", _("CPU"), _("cores"), lambda n: ngettext("core", "cores", n),
        milli=True, job=True, borrows=True, always_offered=True, node_resource="cpu",
        quota_keys=("requests.cpu",), kueue_resource="cpu",
        kueue_flavor="trainyard-default", price="cpu"),
    Dimension(
        "memory", _("Memory"), _("GiB"),
        milli=True, gib=True, job=True, borrows=True, always_offered=True,
        node_resource="memory", quota_keys=("requests.memory",), kueue_resource="memory",
        kueue_flavor="trainyard-default", price="memory"),
    Dimension(
        "gpu", _("GPUs"), _("cards"), lambda n: ngettext("card", "cards", n),
        qualifier=_GPU_MODEL, integral=True, job=True, borrows=True,
        node_resource="nvidia.com/gpu", quota_keys=("requests.nvidia.com/gpu",),
        kueue_resource="nvidia.com/gpu", node_label="nvidia.com/gpu.product",
        price="card"),
    Dimension(
        "mig", _("MIG instances"), _("instances"),
        lambda n: ngettext("instance", "instances", n),
        qualifier=_MIG_PROFILE, integral=True, job=True, borrows=True,
        node_resource="nvidia.com/mig-{q}", quota_keys=("requests.nvidia.com/mig-{q}",),
        kueue_resource="nvidia.com/mig-{q}", price="mig"),
    Dimension(
        "gpu-memory", _("GPU memory"), _("GiB"),
        milli=True, gib=True, job=True, borrows=True, only_when_granted=True,
        always_offered=True),
    Dimension(
        "gpu-shared", _("Shared GPUs"), _("shares"), lambda n: ngettext("share", "shares", n),
        integral=True, job=True, borrows=True, always_offered=True,
        node_resource="nvidia.com/gpu.shared",
        quota_keys=("requests.nvidia.com/gpu.shared",),
        kueue_resource="nvidia.com/gpu.shared", kueue_flavor="trainyard-gpu-shared",
        price="share"),
    # RDMA NICs (InfiniBand/RoCE HCAs) as Mellanox/k8s-rdma-shared-dev-plugin advertises
    # them: its default config (README and deployment/k8s/base/config) names the resource
    # "hca_shared_devices_a" under the prefix "rdma", up to rdmaHcaMax (1000) pods per HCA;
    # a worker's pod asks for it in its requests/limits, so quota counts pods using a NIC.
    Dimension(
        "rdma", _("RDMA NICs"), _("NICs"), lambda n: ngettext("NIC", "NICs", n),
        integral=True, job=True, borrows=True, job_field="rdma_per_worker",
        job_label=_("RDMA NICs per worker"),
        job_help=_("The RDMA network devices (InfiniBand or RoCE) each worker's pod asks "
                   "for; your quota counts workers times this. 0: none."),
        max_per_worker=8, node_resource="rdma/hca_shared_devices_a",
        quota_keys=("requests.rdma/hca_shared_devices_a",),
        kueue_resource="rdma/hca_shared_devices_a", kueue_flavor="trainyard-rdma"),
    Dimension(
        "storage", _("Storage"), _("GiB"), qualifier=_DNS_NAME, gib=True,
        quota_keys=("{q}.storageclass.storage.k8s.io/requests.storage",)),
    Dimension("iops", _("Storage IOPS"), _("IOPS"), qualifier=_DNS_NAME, integral=True),
    Dimension(
        "pvcs", _("Volume claims"), _("claims"), lambda n: ngettext("claim", "claims", n),
        integral=True, always_offered=True, quota_keys=("persistentvolumeclaims",)),
)

_BY_KIND = MappingProxyType({d.kind: d for d in REGISTRY})


def by_kind(kind: str) -> Dimension:
    """The dimension of ``kind`` (``gpu``) or of a key (``gpu:H800``); KeyError if none."""
    return _BY_KIND[kind.partition(":")[0]]


def kinds(test: Callable[[Dimension], bool] = lambda d: True) -> frozenset[str]:
    """The kinds of the dimensions ``test`` holds for, e.g. ``kinds(lambda d: d.milli)``."""
    return frozenset(d.kind for d in REGISTRY if test(d))


def extended() -> tuple[Dimension, ...]:
    """The per-worker extended-resource dimensions (:attr:`Dimension.extended`)."""
    return tuple(d for d in REGISTRY if d.extended)


def node_extended(allocatable: dict[str, Any] | None,
                  parse: Callable[[Any], Any]) -> dict[str, int]:
    """Per extended dimension (by kind), what a node's ``allocatable`` (or a pod's
    requests) holds of it; ``parse`` reads a quantity. Missing or unreadable: left out."""
    out: dict[str, int] = {}
    for dim in extended():
        raw = (allocatable or {}).get(dim.node_resource)
        if raw in (None, ""):
            continue
        try:
            value = int(parse(raw))
        except (TypeError, ValueError):
            continue
        if value > 0:
            out[dim.kind] = value
    return out


def quota_hard(grants: Iterable[tuple[str, Any]]) -> dict[str, str]:
    """ResourceQuota ``hard`` entries of the extended dimensions: (kind, count) pairs ->
    ``{"requests.rdma/hca_shared_devices_a": "8"}``."""
    hard: dict[str, str] = {}
    for kind, count in grants:
        for key in by_kind(kind).quota_keys:
            hard[key] = str(int(count))
    return hard
