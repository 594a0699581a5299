"""The plain input of Kueue mode's objects, read from tenants' state (a selector).

``kueue_spec()`` gathers what ``k8s_sync.kueue.desired_kueue_objects`` renders: for each
pool of every tenant that has namespaces, its effective grants (a loan moves nominal quota
from the lender's pool to the borrower's, ``selectors.effective_grants``) and what its
development and batch work may borrow above them (``tenants.demand.pool_ceiling`` under
the tenant's borrowing cap; no cap: no ``borrowingLimit``, as the engine's "any idle
capacity"; production never borrows: ``k8s_sync.kueue`` gives it ``borrowingLimit: 0``),
the tiers, the policy's topology levels and the cluster's physical capacity per catalog
key (``tenants.capacity.capacity_by_resource``, from the observed nodes): what no queue
was granted becomes the cohort's own quota, so borrowers may use any idle card, granted or
not, as in the engine (``k8s_sync.kueue.cohort_quota``).
Nodes held for one job (``signals.kueue_holds``: a maintenance window's target) leave
the cohort's capacity and get their own queue (``k8s_sync.kueue_hold``).
A suspended tenant's queues have no quota at all and borrow nothing; a pool never
reconciled yet (no namespace) has no queues yet. Read by ``tenants.tasks.reconcile_kueue``.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.conf import settings

from core.choices import PoolKind
from core.models import Policy
from k8s_sync.kueue import KueueSpec, QueueSpec, counted
from k8s_sync.kueue_hold import HoldSpec, held_capacity
from k8s_sync.specs import default_tiers
from tenants.capacity import capacity_by_resource
from tenants.choices import TenantStatus
from tenants.demand import pool_ceiling
from tenants.selectors import effective_grants, pools_to_sync, topology_levels
from tenants.signals import kueue_holds


def kueue_on() -> bool:
    """Whether Kueue admits jobs (``TRAINYARD_ADMISSION_BACKEND=kueue``)."""
    return getattr(settings, "TRAINYARD_ADMISSION_BACKEND", "trainyard") == "kueue"


def kueue_spec() -> KueueSpec:
    policy = Policy.current()
    queues: list[QueueSpec] = []
    # Pools reconciled at least once: their namespace exists for the LocalQueues (a new
    # pool's reconcile asks for this sync again once it has made the namespace).
    for pool in pools_to_sync().filter(synced_version__gt=0).order_by("tenant__slug", "kind"):
        tenant = pool.tenant
        active = tenant.status == TenantStatus.ACTIVE
        grants = {key: Decimal(amount) for key, amount in effective_grants(pool).items()
                  if counted(key)} if active else {}
        factor = tenant.borrowing_factor(policy)
        # development and batch borrow up to the cap (None: no borrowingLimit, any idle
        # capacity); production never borrows (k8s_sync.kueue: borrowingLimit 0)
        borrow: dict[str, Decimal] | None = None if factor is None and active else {
            key: max(Decimal(0), (pool_ceiling(key, amount, factor) or amount) - amount)
            for key, amount in grants.items()}
        kind = PoolKind(pool.kind)
        queues.append(QueueSpec(tenant_slug=tenant.slug, pool=pool.kind,  # type: ignore[arg-type]
                                role="prod" if kind == PoolKind.PROD else "dev",
                                nominal=grants, borrowing=borrow))
        queues.append(QueueSpec(tenant_slug=tenant.slug, pool=pool.kind,  # type: ignore[arg-type]
                                role="batch", nominal={}, borrowing=None if borrow is None
                                else {key: amount + borrow.get(key, Decimal(0))
                                      for key, amount in grants.items()}))
    capacity = {key: amount for key, amount in capacity_by_resource().items() if counted(key)}
    # nodes held for one job (a maintenance window's target) leave the cohort's capacity
    answers: list[Any] = [found for _receiver, found in kueue_holds.send(sender=KueueSpec)]
    holds: tuple[HoldSpec, ...] = tuple(hold for found in answers for hold in found or ())
    for key, amount in held_capacity(holds).items():
        if key in capacity:
            capacity[key] = max(Decimal(0), capacity[key] - amount)
    return KueueSpec(queues=tuple(queues), tiers=default_tiers(),
                     topology_levels=tuple(topology_levels()), capacity=capacity, holds=holds)
