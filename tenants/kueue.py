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

**Guarantees below a grant** (issue 31): an overcommitted-mode tenant's queue has as
``nominalQuota`` only the guaranteed part of its grant (``tenants.quota.guaranteed_amount``,
the number its quota page shows and the engine protects); the rest of the grant is
reachable by borrowing (:func:`queue_limits`). So the nominal quotas of the cohort add up
to no more than the cluster (static grants are backed first, the guaranteed shares split
what is left), a job within its guarantee is within its queue's nominal quota and
reclaims from queues above theirs (``reclaimWithinCohort: Any``), and the overcommitted
part, used beyond the guarantee, is what Kueue reclaims. No ``lendingLimit``: Kueue keeps
``nominalQuota - lendingLimit`` of a queue invisible to its cohort (``localQuota`` in
Kueue's ``pkg/cache/scheduler/resource_node.go``), so idle guaranteed cards would sit idle
while others' jobs that fit them wait; without it the cohort lends them and the owner
reclaims them with the borrowers' grace (docs/architecture.md).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.conf import settings

from core.choices import PoolKind
from core.models import Policy
from k8s_sync.kueue import KueueSpec, QueueRole, QueueSpec, counted
from k8s_sync.kueue_hold import HoldSpec, held_capacity
from k8s_sync.specs import default_tiers
from tenants.capacity import capacity_by_resource
from tenants.choices import QuotaMode, TenantStatus
from tenants.demand import pool_ceiling
from tenants.quota import guaranteed_amount
from tenants.selectors import (
    effective_grants,
    guaranteed_shares,
    pools_to_sync,
    topology_levels,
)
from tenants.signals import kueue_holds

Amounts = dict[str, Decimal]


def kueue_on() -> bool:
    """Whether Kueue admits jobs (``TRAINYARD_ADMISSION_BACKEND=kueue``)."""
    return getattr(settings, "TRAINYARD_ADMISSION_BACKEND", "trainyard") == "kueue"


def guaranteed_part(grants: Amounts, shares: dict[str, Decimal]) -> Amounts:
    """The guaranteed part of an overcommitted-mode pool's (effective) grants per key: the
    grant times its key's guaranteed share (1 where none is known), as the engine's
    ``PoolQuota.guaranteed`` (``jobs.selectors.admission._with_guarantees``). Pure."""
    return {key: min(amount, guaranteed_amount(key, amount, shares.get(key, Decimal(1))))
            for key, amount in grants.items()}


def queue_limits(grants: Amounts, guaranteed: Amounts, *, role: str,
                 factor: Decimal | None) -> tuple[Amounts, Amounts | None]:
    """(``nominalQuota``, ``borrowingLimit``) per key of a pool's own ClusterQueue (role
    ``prod`` or ``dev``) from its effective ``grants``, their ``guaranteed`` part (the
    grants themselves for a static-mode tenant) and its borrowing ``factor`` (None: no
    cap). Pure.

    * nominal is the guaranteed part: what Kueue never lends without reclaiming it;
    * production never borrows beyond its grant: ``borrowingLimit`` = grant - guaranteed
      (0 for a static tenant);
    * development borrows up to its ceiling (``tenants.demand.pool_ceiling``): under a
      cap, ``borrowingLimit`` = ceiling - guaranteed; without one, None (no limit).
    """
    nominal = {key: guaranteed.get(key, amount) for key, amount in grants.items()}
    if role == "prod":
        return nominal, {key: max(Decimal(0), amount - nominal[key])
                         for key, amount in grants.items()}
    if factor is None:
        return nominal, None
    return nominal, {key: max(Decimal(0), (pool_ceiling(key, amount, factor) or amount)
                              - nominal[key]) for key, amount in grants.items()}


def kueue_spec() -> KueueSpec:
    policy = Policy.current()
    queues: list[QueueSpec] = []
    shares: dict[str, Decimal] | None = None   # read once, if any tenant is overcommitted
    # Pools reconciled at least once: their namespace exists for the LocalQueues (a new
    # pool's reconcile asks for this sync again once it has made the namespace).
    for pool in pools_to_sync().filter(synced_version__gt=0).order_by("tenant__slug", "kind"):
        tenant = pool.tenant
        active = tenant.status == TenantStatus.ACTIVE
        grants = {key: Decimal(amount) for key, amount in effective_grants(pool).items()
                  if counted(key)} if active else {}
        factor = tenant.borrowing_factor(policy) if active else Decimal(1)
        guaranteed = grants
        if tenant.quota_mode == QuotaMode.OVERCOMMITTED and grants:
            if shares is None:
                shares = guaranteed_shares()
            guaranteed = guaranteed_part(grants, shares)
        role: QueueRole = "prod" if PoolKind(pool.kind) == PoolKind.PROD else "dev"
        # development borrows up to the cap (None: no borrowingLimit, any idle capacity);
        # production never beyond its grant; the overcommitted part of a grant is borrowed
        nominal, borrow = queue_limits(grants, guaranteed, role=role, factor=factor)
        queues.append(QueueSpec(tenant_slug=tenant.slug, pool=pool.kind,  # type: ignore[arg-type]
                                role=role, nominal=nominal, borrowing=borrow))
        # batch: no nominal quota, borrows up to the pool's ceiling (none without a cap)
        queues.append(QueueSpec(tenant_slug=tenant.slug, pool=pool.kind,  # type: ignore[arg-type]
                                role="batch", nominal={}, borrowing=None if factor is None
                                else {key: pool_ceiling(key, amount, factor) or amount
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
