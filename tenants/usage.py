"""What each pool has in use and allocated right now, per catalog resource.

**In use** (:func:`in_use_by_pool`) is the one number the quota page, the gauges, the
job form's preview, wait reasons and the API show for a pool: the demand
(``tenants.demand.job_demand``) of the pool's admitted, running and preempting jobs,
which is exactly what admission counts against the pool's quota, plus the storage,
provisioned IOPS and volume claims its observed PVCs hold (and the IOPS of the new
volumes of its jobs not observed yet, which the jobs app adds). The jobs app computes the job part
(``jobs.selectors.in_use_by_pool``) and answers :data:`pools_in_use`, a signal because
tenants ranks below jobs.

**Allocated** (:func:`allocation_by_namespace`) is what the cluster reports: what
running (bound, not finished) pods request: CPU cores, memory GiB, whole cards per GPU
model (the model of the node the pod is on), MIG instances, shared GPUs, GPU memory,
plus PVC storage per class. The usage series and daily peaks sample it (the trends'
"allocated" line); it lags "in use" while an admitted job's pods start. Reads only
k8s_sync's observed tables; never calls the cluster.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from contextlib import suppress
from decimal import Decimal
from typing import Any

from django.dispatch import Signal

from core.resources import extended
from k8s_sync.models import ObservedNode, ObservedPod, ObservedPVC
from k8s_sync.quantity import parse_quantity
from k8s_sync.selectors import (
    HAMI_MEMORY,
    LIVE_PHASES,
    mig_profile_memory_mib,
    share_memory_mib,
)
from k8s_sync.storage import iops_of_volume_class

GIB = Decimal(1024**3)
MIG_PREFIX = "nvidia.com/mig-"
#: a pod's extended resource -> the dimension it counts (core.resources)
_EXTENDED = {d.node_resource: d.kind for d in extended()}
VOLUME_KINDS = ("storage:", "pvcs")

# Sent by :func:`in_use_by_pool` with ``pools=[Pool, ...]``; a receiver returns
# ``{pool pk: {resource key: Decimal}}``, the demand of the pools' jobs that hold quota
# (the jobs app: ``jobs.selectors.in_use_by_pool``). A signal, because tenants ranks
# below jobs.
pools_in_use = Signal()


def in_use_by_pool(pools: list[Any], *, within_quota: bool = False
                   ) -> dict[int, dict[str, Decimal]]:
    """Pool pk -> resource key -> **in use** (see the module docstring): the jobs' demand
    that admission counts against the quota (from :data:`pools_in_use`), and for storage
    and claims what the pool's observed PVCs hold. Catalog units; keys without use are
    left out. ``within_quota``: without batch jobs and work admitted borrowing idle
    capacity (what runs beyond the quota and is reclaimed; loans count the rest)."""
    out: dict[int, dict[str, Decimal]] = {p.pk: defaultdict(Decimal) for p in pools}
    for _receiver, result in pools_in_use.send(sender=in_use_by_pool, pools=pools,
                                               within_quota=within_quota):
        answer: dict[int, dict[str, Decimal]] = result if isinstance(result, dict) else {}
        for pk, amounts in answer.items():
            if pk in out:
                for key, amount in amounts.items():
                    out[pk][key] += Decimal(amount)
    volumes = volumes_by_namespace([p.namespace for p in pools])
    for pool in pools:
        for key, amount in volumes.get(pool.namespace, {}).items():
            out[pool.pk][key] += amount
    return {pk: {k: v for k, v in used.items() if v} for pk, used in out.items()}


# Sent by :func:`utilisation_by_pool` with ``pools``, ``start``, ``end`` and ``now``; a
# receiver returns ``{pool pk: {GPU kind: tenants.utilisation.Utilisation}}`` (billing:
# ``billing.selectors.utilisation``, which reads the ledger). A signal, because tenants
# ranks below billing.
pools_utilisation = Signal()


def utilisation_by_pool(pools: list[Any], start: dt.date, end: dt.date,
                        now: dt.datetime | None = None) -> dict[int, dict[str, Any]]:
    """Pool pk -> GPU kind -> the utilisation figures (``tenants.utilisation``) over the
    days [start, end), as billing computes them for every page."""
    out: dict[int, dict[str, Any]] = {}
    for _receiver, result in pools_utilisation.send(sender=utilisation_by_pool, pools=pools,
                                                    start=start, end=end, now=now):
        if isinstance(result, dict):
            out.update(result)
    return out


def volumes_by_namespace(namespaces: list[str]) -> dict[str, dict[str, Decimal]]:
    """namespace -> ``storage:<class>`` GiB, ``iops:<class>`` provisioned IOPS (of the
    claims naming one of Trainyard's IOPS VolumeAttributesClasses, ``tenants.storage``)
    and ``pvcs`` count of its observed PVCs."""
    out: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for namespace, storage_class, size, vac in ObservedPVC.objects.filter(
            namespace__in=namespaces).values_list("namespace", "storage_class",
                                                  "requested_bytes", "volume_attributes_class"):
        if storage_class and size:
            out[namespace][f"storage:{storage_class}"] += Decimal(size) / GIB
            out[namespace]["pvcs"] += 1
        if storage_class and iops_of_volume_class(vac):
            out[namespace][f"iops:{storage_class}"] += iops_of_volume_class(vac)
    return {ns: {k: v.quantize(Decimal("0.001")) for k, v in used.items()}
            for ns, used in out.items()}


def allocation_by_namespace(namespaces: list[str] | None = None
                            ) -> dict[str, dict[str, Decimal]]:
    """namespace -> resource key -> allocated amount (three queries)."""
    nodes = {n.name: n for n in ObservedNode.objects.only(
        "name", "gpu_model", "gpu_memory_mib", "gpu_replicas", "labels")}
    pods = ObservedPod.objects.filter(phase__in=LIVE_PHASES).exclude(node_name="")
    pvcs = ObservedPVC.objects.all()
    if namespaces is not None:
        pods = pods.filter(namespace__in=namespaces)
        pvcs = pvcs.filter(namespace__in=namespaces)
    out: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for namespace, node_name, requests in pods.values_list("namespace", "node_name", "requests"):
        node = nodes.get(node_name)
        usage = out[namespace]
        requests = requests or {}
        for resource, raw in requests.items():
            try:
                amount = parse_quantity(raw)
            except ValueError:
                continue
            _add(usage, resource, amount, node, requests)
    for namespace, storage_class, size in pvcs.values_list("namespace", "storage_class",
                                                           "requested_bytes"):
        if storage_class and size:
            out[namespace][f"storage:{storage_class}"] += Decimal(size) / GIB
            out[namespace]["pvcs"] += 1
    return {ns: {k: v.quantize(Decimal("0.001")) for k, v in usage.items()}
            for ns, usage in out.items()}


def _add(usage: dict[str, Decimal], resource: str, amount: Decimal,
         node: ObservedNode | None, requests: dict) -> None:
    """Add one pod request; GPU memory is derived as ``tenants.demand`` derives a job's:
    a card's memory, HAMi's per-card limit (``nvidia.com/gpumem``, MiB) where the pod
    sets one, a share's slice, a MIG profile's memory."""
    card_gib = Decimal(node.gpu_memory_mib or 0) / 1024 if node else Decimal(0)
    if HAMI_MEMORY in requests:
        with suppress(ValueError):
            card_gib = parse_quantity(requests[HAMI_MEMORY]) / 1024
    if resource == "cpu":
        usage["cpu"] += amount
    elif resource == "memory":
        usage["memory"] += amount / GIB
    elif resource == "nvidia.com/gpu":
        if node and node.gpu_model:   # a card of no known model is no catalog resource
            usage[f"gpu:{node.gpu_model}"] += amount
        usage["gpu-memory"] += amount * card_gib
    elif resource == "nvidia.com/gpu.shared":
        usage["gpu-shared"] += amount
        share = share_memory_mib(node) if node else None
        if share:
            usage["gpu-memory"] += amount * Decimal(share) / 1024
    elif resource.startswith(MIG_PREFIX):
        profile = resource.removeprefix(MIG_PREFIX)
        usage[f"mig:{profile}"] += amount
        usage["gpu-memory"] += amount * Decimal(mig_profile_memory_mib(profile) or 0) / 1024
    elif resource in _EXTENDED:  # RDMA NICs ... (core.resources): counted as requested
        usage[_EXTENDED[resource]] += amount
