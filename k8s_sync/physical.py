"""Physical use per resource key, measured from what the cluster reports: the number the
admission engine holds against the eviction watermark and the cluster page shows.

Per *node group* (the nodes that carry one engine resource key: ``gpu:<model>`` for a GPU
model's cards, ``shared:<model>`` for its time-sliced/MPS shares), physical use is the
largest of:

* **cards**, on shared (time-slicing, MPS) and overcommitted (HAMi) cards only: the
  allocated share of the group's shares (HAMi vGPUs by the GPU memory their pods hold),
  and, where DCGM reports it, the framebuffer actually used (``DCGM_FI_DEV_FB_USED``) when
  it is more than what the pods' requests account for (``framebuffer``). Exclusive whole
  cards cannot be overloaded: how many are allocated is no pressure (``exclusive``), so
  work-conserving admission may fill every idle card;
* **cpu** and **memory**: what non-terminal pods bound to those nodes request over the
  nodes' allocatable.

Reads only the capacity report it is given, plus (for :func:`shared_framebuffer_mib`,
when shared or HAMi cards exist) one read of the metrics source. Imports no domain app.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal

from django.core.cache import cache

from k8s_sync.client import K8sError
from k8s_sync.metrics import MetricsSource
from k8s_sync.selectors import CapacityReport, NodeCapacity

__all__ = ["FRAMEBUFFER_CACHE_KEY", "PhysicalUse", "last_framebuffer_mib", "physical_use",
           "shared_framebuffer_mib"]

FRAMEBUFFER_CACHE_KEY = "k8s_sync:shared-framebuffer:v1"
"""The last framebuffer reading the admission loop took (the cluster page shows it)."""
FRAMEBUFFER_TTL = 300


@dataclass(frozen=True)
class PhysicalUse:
    """Physical use of one node group, each share 0..1; ``framebuffer`` is None where no
    shared or overcommitted card of the group was measured."""

    key: str
    gpu_model: str
    nodes: int
    cards: float
    framebuffer: float | None
    cpu: float
    memory: float
    exclusive: bool = False
    """Whole cards no job can overload (no sharing, no HAMi): their allocation is not
    physical pressure, so :attr:`use` leaves it out and preemptible work may fill every
    idle card (it is reclaimed with its grace when an owner needs its quota back)."""

    @property
    def use(self) -> float:
        """What the eviction watermark holds: the largest of the measured pressures, and on
        shared or overcommitted (HAMi) cards the share of them allocated."""
        cards = 0.0 if self.exclusive else self.cards
        return max(cards, self.framebuffer or 0.0, self.cpu, self.memory)

    @property
    def percent(self) -> int:
        return round(100 * self.use)

    @property
    def shared(self) -> bool:
        return self.key.startswith("shared:")


def _shared_cards(node: NodeCapacity) -> bool:
    return bool(node.sharing_strategy) or bool(getattr(node, "hami", False))


def shared_framebuffer_mib(report: CapacityReport, samples: Iterable | None = None,
                           ) -> dict[str, float] | None:
    """Node -> framebuffer MiB used on its shared or overcommitted (HAMi) cards, as DCGM
    reports it now; ``{}`` when the cluster has no such card (nothing is read), None when
    the metrics source cannot answer. ``samples`` (tests) bypasses the source.

    dcgm-exporter repeats a device's FB_USED on one series per pod sharing it, so each
    device (node, UUID or index, GPU instance) is counted once (its largest value).
    """
    nodes = {n.name for n in report.nodes if _shared_cards(n)}
    if not nodes:
        return {}
    if samples is None:
        try:
            samples = MetricsSource.from_settings().gpu_samples()
        except K8sError:
            return None
    per_device: dict[tuple[str, str, str], float] = {}
    for s in samples:
        if s.node not in nodes or s.mig_profile:
            continue
        device = (s.node, s.uuid or s.gpu, s.gpu_instance)
        per_device[device] = max(per_device.get(device, 0.0), float(s.fb_used_mib))
    out: dict[str, float] = defaultdict(float)
    for (node, _, _), mib in per_device.items():
        out[node] += mib
    result = {n: out.get(n, 0.0) for n in sorted(nodes)}
    cache.set(FRAMEBUFFER_CACHE_KEY, result, FRAMEBUFFER_TTL)
    return result


def last_framebuffer_mib() -> dict[str, float] | None:
    """The last reading :func:`shared_framebuffer_mib` took (the admission loop reads it
    every cycle), for pages that must not read the metrics source themselves."""
    return cache.get(FRAMEBUFFER_CACHE_KEY)


def _share(used: float | Decimal, total: float | Decimal) -> float:
    return min(1.0, max(0.0, float(used) / float(total))) if total else 0.0


def physical_use(report: CapacityReport,
                 framebuffer: Mapping[str, float] | None = None) -> dict[str, PhysicalUse]:
    """Resource key -> :class:`PhysicalUse` of its node group (see the module docstring).

    ``framebuffer``: node -> MiB used on its shared cards (:func:`shared_framebuffer_mib`);
    None or a missing node: not measured (the requests alone count).
    """
    groups: dict[str, list[NodeCapacity]] = defaultdict(list)
    for node in report.nodes:
        if not node.gpu_model:
            continue
        if node.whole_allocatable > 0:
            groups[f"gpu:{node.gpu_model}"].append(node)
        if node.shared_allocatable > 0:
            groups[f"shared:{node.gpu_model}"].append(node)
    out = {}
    for key, nodes in sorted(groups.items()):
        shared_group = key.startswith("shared:")
        held = measured = total = 0.0
        measured_any = False
        exclusive = not shared_group
        for node in nodes:
            hami = bool(getattr(node, "hami", False))
            exclusive = exclusive and not hami
            if shared_group:
                unit = float(node.share_memory_mib or 0) or 1.0
                part_total = node.shared_allocatable * unit
                part = node.shared_allocated * unit
            else:
                unit = float(node.card_memory_mib or 0) or 1.0
                part_total = node.whole_allocatable * unit
                part = (float(getattr(node, "hami_memory_allocated_mib", 0)) if hami
                        else node.whole_allocated * unit)
            total += part_total
            held += part
            fb = (framebuffer or {}).get(node.name) if (shared_group or hami) else None
            if fb is not None:
                measured_any = True
                measured += max(part, min(float(fb), part_total))
            else:
                measured += part
        cards = _share(held, total)
        cpu_used = sum((n.cpu_requested for n in nodes), Decimal(0))
        mem_used = sum((n.memory_requested for n in nodes), Decimal(0))
        cpu_total = sum((n.cpu_allocatable for n in nodes), Decimal(0))
        mem_total = sum((n.memory_allocatable for n in nodes), Decimal(0))
        out[key] = PhysicalUse(
            key=key, gpu_model=nodes[0].gpu_model, nodes=len(nodes), cards=cards,
            framebuffer=_share(measured, total) if measured_any else None,
            cpu=_share(cpu_used, cpu_total), memory=_share(mem_used, mem_total),
            exclusive=exclusive)
    return out
