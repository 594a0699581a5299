"""What the cluster offers, as submission and the pages read it: the inventory of node
shapes, GPU kinds, storage left, card facts, and physical use now."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from decimal import Decimal
from typing import Any

from django.utils.translation import gettext as _

from jobs.validation import Inventory
from k8s_sync.models import (
    ObservedNode,
    ObservedQuota,
    ObservedStorageClass,
)
from k8s_sync.physical import last_framebuffer_mib, physical_use, shared_framebuffer_mib
from k8s_sync.placement import configured_topology_levels
from k8s_sync.quantity import parse_quantity
from k8s_sync.selectors import capacity_report, node_capacity
from k8s_sync.templatetags.k8s_sync import mib, sharing
from tenants.demand import (
    card_facts,
    engine_amount,
)
from tenants.storage import storage_class_owners

GIB = Decimal(1024**3)


def inventory() -> Inventory:
    """The largest node per GPU model and MIG profile, and the largest node's CPU/memory.

    Every submission checks against it: the nodes' part is computed again only when an
    observed node changed (its id, resourceVersion or observation time; one small query),
    so a burst of submissions does not re-read every node's labels each time."""
    signature = (configured_topology_levels(), *ObservedNode.objects.order_by("pk").values_list(
        "pk", "resource_version", "observed_at"))  # a switch: the last level in force
    cached = _NODE_SHAPES.get("last")
    if cached is None or cached[0] != signature:
        cached = (signature, _node_shapes())
        _NODE_SHAPES["last"] = cached
    classes = dict(ObservedStorageClass.objects.values_list("name", "is_default"))
    return replace(cached[1], storage_classes=classes,
                   storage_class_owners=storage_class_owners())


_NODE_SHAPES: dict[str, tuple[tuple[Any, ...], Inventory]] = {}


def _node_shapes() -> Inventory:
    gpus: dict[str, int] = defaultdict(int)
    mig: dict[str, int] = defaultdict(int)
    shared: dict[str, int] = defaultdict(int)
    share_mib: dict[str, int] = {}
    strategies: dict[str, set[str]] = defaultdict(set)
    hami: dict[str, int] = defaultdict(int)
    room: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    max_cpu, max_mem = Decimal(0), Decimal(0)
    levels = configured_topology_levels()  # the switch a gang must fit under, as admission
    for node in ObservedNode.objects.defer("raw", "capacity", "taints"):
        model, alloc = node.gpu_model, node.allocatable or {}
        cap = node_capacity(node, {}, levels)
        whole = cap.whole_allocatable  # HAMi: cards (its vGPUs of one pod are on distinct cards)
        if model and whole:
            gpus[model] = max(gpus[model], whole)
            room[f"gpu:{model}"][cap.switch].append(whole)
        if model and cap.hami and node.gpu_memory_mib:
            hami[model] = max(hami[model], node.gpu_memory_mib)
        if model and cap.shared_allocatable:
            shared[model] = max(shared[model], cap.shared_allocatable)
            share_mib[model] = min(share_mib.get(model, cap.shared_memory_mib),
                                   cap.shared_memory_mib)
            strategies[model].add(cap.sharing_strategy)
        for key, value in alloc.items():
            if key.startswith("nvidia.com/mig-"):
                profile = key.removeprefix("nvidia.com/mig-")
                mig[profile] = max(mig[profile], _int(value))
                room[f"mig:{profile}"][cap.switch].append(_int(value))
        max_cpu = max(max_cpu, _dec(alloc.get("cpu")))
        max_mem = max(max_mem, _dec(alloc.get("memory")) / GIB)
    return Inventory(dict(gpus), dict(mig), max_cpu, max_mem.quantize(Decimal("0.001")),
                     {}, shared_per_node=dict(shared), shared_memory_mib=share_mib,
                     shared_strategies={m: tuple(sorted(v)) for m, v in strategies.items()},
                     hami_memory_mib=dict(hami),
                     gang_room={key: {sw: tuple(caps) for sw, caps in by.items()}
                                for key, by in room.items()})


def gpu_kind_label(clean: Any, inv: Inventory | None = None) -> str:
    """The kind of GPU a job (or a cleaned submission) asks for, in words: whole cards, a
    MIG slice, shares of a time-sliced/MPS card with their memory, or HAMi-limited cards."""
    get = clean.get if isinstance(clean, dict) else lambda k: getattr(clean, k)
    gpus, model = get("gpus_per_worker") or 0, get("gpu_model") or ""
    if not gpus:
        return _("CPU only")
    if get("mig_profile"):
        return _("MIG slices %(p)s") % {"p": get("mig_profile")}
    if get("gpu_shared"):
        inv = inv or inventory()
        share = inv.shared_memory_mib.get(model)
        how = ", ".join(sharing(s) for s in inv.shared_strategies.get(model, ())) or "—"
        return _("shared %(model)s (%(how)s): %(n)s × %(share)s of GPU memory per worker") % {
            "model": model, "how": how, "n": gpus, "share": mib(share)}
    limit = get("gpu_memory_gib_per_card")
    if limit:
        return _("%(model)s vGPUs (HAMi), %(gib)s GiB of GPU memory per card") % {
            "model": model, "gib": format(Decimal(limit).normalize(), "f")}
    return _("whole %(model)s GPUs") % {"model": model}


def storage_left(pool: Any, storage_class: str) -> Decimal | None:
    """GiB a new claim of ``storage_class`` may still take in the pool's namespace, by its
    observed ResourceQuotas (the class's own limit, the total, and the claim counts);
    ``None`` when no quota has been observed there yet."""
    quotas = list(ObservedQuota.objects.filter(namespace=pool.namespace))
    if not quotas:
        return None
    prefix = f"{storage_class}.storageclass.storage.k8s.io/"
    left: Decimal | None = None
    for quota in quotas:
        hard, used = quota.hard or {}, quota.used or {}
        for key in (f"{prefix}persistentvolumeclaims", "persistentvolumeclaims"):
            if key in hard and _dec(hard[key]) - _dec(used.get(key)) < 1:
                return Decimal(0)
        for key in (f"{prefix}requests.storage", "requests.storage"):
            if key in hard:
                room = (_dec(hard[key]) - _dec(used.get(key))) / GIB
                left = room if left is None else min(left, room)
    return left.quantize(Decimal("0.001")) if left is not None else None


def _dec(value: object) -> Decimal:
    try:
        return parse_quantity(value or 0)  # type: ignore[arg-type]
    except ValueError:
        return Decimal(0)


def _int(value: object) -> int:
    return int(_dec(value))


def physical_use_now(report=None):  # type: ignore[no-untyped-def]
    """Physical use per resource key (``k8s_sync.physical``) as the engine holds it against
    the eviction watermark: the observed cluster, plus DCGM framebuffer on shared and
    HAMi cards read now, or the last reading (at most 5 minutes old) when the metrics
    source cannot answer; the cluster page shows the same last reading."""
    report = report or capacity_report()
    framebuffer = shared_framebuffer_mib(report)
    if framebuffer is None:
        framebuffer = last_framebuffer_mib()
    return physical_use(report, framebuffer)


def observed_card_facts():  # type: ignore[no-untyped-def]
    """Per-card GPU memory by model, from the observed nodes (``tenants.demand``); one
    query: the facts depend on what nodes offer, not on what pods hold."""
    return card_facts([node_capacity(n, {}, ()) for n in ObservedNode.objects.defer(
        "raw", "capacity", "taints")])


def _node_cpu_memory(node: Any) -> dict[str, int]:
    """A node's allocatable CPU (millicores) and memory (1/1000 GiB) and what its bound,
    unfinished pods request, as ``NodeView`` keyword arguments (none when the node does
    not report them: the engine then does not check its CPU)."""
    if node.cpu_allocatable <= 0 or node.memory_allocatable <= 0:
        return {}
    return {"cpu": engine_amount("cpu", node.cpu_allocatable, demand=False),
            "cpu_used": engine_amount("cpu", node.cpu_requested),
            "memory": engine_amount("memory", node.memory_allocatable / GIB, demand=False),
            "memory_used": engine_amount("memory", node.memory_requested / GIB)}
