"""Free GPUs per node and resource key, and gang placement (one node, or one switch)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from .types import NodeView


class Slot:
    """One node's capacity for one resource key; ``free`` changes as the engine decides."""

    __slots__ = ("cap", "dedicated", "free", "name", "schedulable", "switch")

    def __init__(self, name: str, switch: str, dedicated: str, cap: int, free: int,
                 schedulable: bool) -> None:
        self.name = name
        self.switch = switch
        self.dedicated = dedicated
        self.cap = cap
        self.free = free
        self.schedulable = schedulable


Plan = list[tuple[Slot, int]]
"""A placement: (slot, replicas on it), replicas in the order of the list."""


class Capacity:
    """Every node's free whole GPUs (``gpu:<model>``), MIG instances (``mig:<profile>``)
    and shares of time-sliced/MPS GPUs (``shared:<model>``).

    Only schedulable nodes are offered for placement; all nodes are indexed so that the
    GPUs of a job placed on an unschedulable node can still be accounted.
    """

    def __init__(self, nodes: Sequence[NodeView]) -> None:
        self.slots: dict[str, list[Slot]] = {}
        self.index: dict[tuple[str, str], Slot] = {}
        self.cpu_nodes: list[NodeView] = []
        # per extended dimension (rdma ...): the most one schedulable node advertises
        self.extended_max: dict[str, int] = {}
        for node in sorted(nodes, key=lambda n: n.name):
            if node.schedulable:
                self.cpu_nodes.append(node)
                for kind, count in node.extended.items():
                    self.extended_max[kind] = max(self.extended_max.get(kind, 0), count)
            entries: list[tuple[str, int, int]] = []
            if node.gpu_model and node.gpus > 0:
                entries.append((f"gpu:{node.gpu_model}", node.gpus, node.gpus - node.gpus_used))
            shared = getattr(node, "shared", 0)
            if node.gpu_model and shared > 0:
                entries.append((f"shared:{node.gpu_model}", shared,
                                shared - getattr(node, "shared_used", 0)))
            for profile, count in sorted(node.mig.items()):
                if count > 0:
                    entries.append((f"mig:{profile}", count,
                                    count - node.mig_used.get(profile, 0)))
            for key, cap, free in entries:
                slot = Slot(node.name, node.switch, node.dedicated_to, cap, free,
                            node.schedulable)
                self.index[(key, node.name)] = slot
                if node.schedulable:
                    self.slots.setdefault(key, []).append(slot)
        self._eligible: dict[tuple[str, str], list[Slot]] = {}
        self._version: dict[str, int] = {}
        self._free: dict[tuple[str, str], tuple[int, int]] = {}

    def copy_key(self, key: str, free: Mapping[str, int] | None = None) -> Capacity:
        """A new Capacity of ``key``'s schedulable slots alone (for simulating the future):
        each slot's ``free`` from ``free`` by node name, else as it is now."""
        other = Capacity(())
        slots = []
        for s in self.slots.get(key, []):
            copy = Slot(s.name, s.switch, s.dedicated, s.cap,
                        free[s.name] if free is not None and s.name in free else s.free,
                        True)
            slots.append(copy)
            other.index[(key, s.name)] = copy
        other.slots[key] = slots
        return other

    def version(self, key: str) -> int:
        """A counter that changes whenever a ``free`` of ``key`` changes."""
        return self._version.get(key, 0)

    def changed(self, key: str) -> None:
        """Call after changing any ``free`` of ``key`` (invalidates the free totals)."""
        self._version[key] = self._version.get(key, 0) + 1

    def eligible(self, key: str, tenant: str) -> list[Slot]:
        """Schedulable slots of ``key`` the tenant may use: its dedicated ones first."""
        cached = self._eligible.get((key, tenant))
        if cached is None:
            slots = self.slots.get(key, [])
            own = [s for s in slots if s.dedicated == tenant and tenant]
            shared = [s for s in slots if not s.dedicated]
            cached = own + shared
            self._eligible[(key, tenant)] = cached
        return cached

    def scope(self, key: str, tenant: str) -> str:
        """The tenant when it has dedicated nodes of ``key``, else "" (shared nodes only)."""
        slots = self.eligible(key, tenant)
        return tenant if slots and slots[0].dedicated else ""

    def take(self, key: str, nodes: Iterable[str], per_replica: int) -> None:
        """Subtract ``per_replica`` on each named node (an admitted job's unbound pods)."""
        for name in nodes:
            slot = self.index.get((key, name))
            if slot is not None:
                slot.free -= per_replica
                self.changed(key)

    def capacity_total(self, key: str) -> int:
        return sum(s.cap for s in self.slots.get(key, []))

    def free_total(self, key: str, tenant: str) -> int:
        """Free units of ``key`` on the nodes the tenant may use."""
        scope = self.scope(key, tenant)
        version = self._version.get(key, 0)
        cached = self._free.get((key, scope))
        if cached is not None and cached[0] == version:
            return cached[1]
        total = sum(max(s.free, 0) for s in self.eligible(key, tenant))
        self._free[(key, scope)] = (version, total)
        return total

    def largest(self, key: str, tenant: str) -> tuple[int, int]:
        """(largest node capacity, largest switch capacity) the tenant may use, empty cluster."""
        node_max = 0
        per_switch: dict[str, int] = {}
        for s in self.eligible(key, tenant):
            node_max = max(node_max, s.cap)
            per_switch[s.switch] = per_switch.get(s.switch, 0) + s.cap
        return node_max, max(per_switch.values(), default=0)

    def fits_empty(self, key: str, tenant: str, replicas: int, per: int) -> bool:
        """Whether the gang could ever be placed (every eligible node empty)."""
        slots = self.eligible(key, tenant)
        if any(s.cap >= replicas * per for s in slots):
            return True
        per_switch: dict[str, int] = {}
        for s in slots:
            per_switch[s.switch] = per_switch.get(s.switch, 0) + s.cap // per
        return any(v >= replicas for v in per_switch.values())

    def place(self, key: str, tenant: str, replicas: int, per: int,
              extra: Mapping[Slot, int] | None = None) -> Plan | None:
        """Place a gang of ``replicas`` × ``per`` on free capacity (+ ``extra`` per slot).

        The whole gang on one node when one has room (best fit: the fullest node that
        fits, the tenant's dedicated nodes first); otherwise all replicas under one switch
        (the switch with the least room that fits, filled from its freest nodes). None
        when it does not fit. Deterministic: ties break by name.
        """
        slots = self.eligible(key, tenant)
        if not slots:
            return None
        need = replicas * per
        best: Slot | None = None
        best_key: tuple[int, int] | None = None
        for s in slots:
            avail = s.free + (extra.get(s, 0) if extra else 0)
            if avail >= need:
                k = (0 if s.dedicated else 1, avail)
                if best_key is None or k < best_key:
                    best, best_key = s, k
        if best is not None:
            return [(best, replicas)]
        if replicas == 1:
            return None
        room: dict[str, int] = {}
        for s in slots:
            avail = s.free + (extra.get(s, 0) if extra else 0)
            if avail >= per:
                room[s.switch] = room.get(s.switch, 0) + avail // per
        fitting = sorted((v, sw) for sw, v in room.items() if v >= replicas)
        if not fitting:
            return None
        switch = fitting[0][1]
        members = [s for s in slots if s.switch == switch]
        members.sort(key=lambda s: (-(s.free + (extra.get(s, 0) if extra else 0)), s.name))
        plan: Plan = []
        left = replicas
        for s in members:
            n = min(left, (s.free + (extra.get(s, 0) if extra else 0)) // per)
            if n > 0:
                plan.append((s, n))
                left -= n
            if left == 0:
                break
        return plan


def plan_nodes(plan: Plan) -> tuple[str, ...]:
    """The node of each replica, in replica order."""
    return tuple(s.name for s, n in plan for _ in range(n))
