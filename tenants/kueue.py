"""The plain input of Kueue mode's objects, read from tenants' state (a selector).

``kueue_spec()`` gathers what ``k8s_sync.kueue.desired_kueue_objects`` renders: for each
pool of every tenant that has namespaces, its effective grants (a loan moves nominal quota
from the lender's pool to the borrower's, ``selectors.effective_grants``), the elastic
ceiling above them (``tenants.demand.elastic_ceiling``, the tenant's factor) and the batch
ceiling (``tenants.demand.batch_ceiling``), the tiers and the policy's topology levels.
A suspended tenant's queues have no quota at all; a pool never reconciled yet (no
namespace) has no queues yet. Read by ``tenants.tasks.reconcile_kueue``.
"""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings

from core.choices import PoolKind
from core.models import Policy
from k8s_sync.kueue import KueueSpec, QueueSpec, counted
from k8s_sync.specs import default_tiers
from tenants.choices import TenantStatus
from tenants.demand import batch_ceiling, elastic_ceiling
from tenants.quota import overcommit_factor
from tenants.selectors import effective_grants, pools_to_sync, topology_levels


def kueue_on() -> bool:
    """Whether Kueue admits jobs (``TRAINYARD_ADMISSION_BACKEND=kueue``)."""
    return getattr(settings, "TRAINYARD_ADMISSION_BACKEND", "trainyard") == "kueue"


def kueue_spec() -> KueueSpec:
    factors = Policy.current().overcommit_factors or {}
    queues: list[QueueSpec] = []
    # Pools reconciled at least once: their namespace exists for the LocalQueues (a new
    # pool's reconcile asks for this sync again once it has made the namespace).
    for pool in pools_to_sync().filter(synced_version__gt=0).order_by("tenant__slug", "kind"):
        tenant = pool.tenant
        active = tenant.status == TenantStatus.ACTIVE
        grants = {key: Decimal(amount) for key, amount in effective_grants(pool).items()
                  if counted(key)} if active else {}
        borrow = {key: max(Decimal(0), elastic_ceiling(key, amount, tenant.ceiling_factor)
                           - amount) for key, amount in grants.items()}
        batch = {key: batch_ceiling(key, amount, tenant_factor=tenant.ceiling_factor,
                                    overcommit_factor=overcommit_factor(key, factors))
                 for key, amount in grants.items()}
        kind = PoolKind(pool.kind)
        queues.append(QueueSpec(tenant_slug=tenant.slug, pool=pool.kind,  # type: ignore[arg-type]
                                role="prod" if kind == PoolKind.PROD else "dev",
                                nominal=grants, borrowing=borrow))
        queues.append(QueueSpec(tenant_slug=tenant.slug, pool=pool.kind,  # type: ignore[arg-type]
                                role="batch", nominal={}, borrowing=batch))
    return KueueSpec(queues=tuple(queues), tiers=default_tiers(),
                     topology_levels=tuple(topology_levels()))
