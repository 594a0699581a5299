"""The jobs app's answer to ``tenants.usage.pools_in_use``: the demand of each pool's
admitted, running and preempting jobs (``jobs.selectors.in_use_by_pool``), the job part
of the one "in use" number the quota pages and the gauges show."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.dispatch import receiver

from jobs.selectors import in_use_by_pool
from tenants.usage import pools_in_use


@receiver(pools_in_use, dispatch_uid="jobs.pools_in_use")
def jobs_in_use(sender: Any, pools: list[Any], within_quota: bool = False, **kwargs: Any
                ) -> dict[int, dict[str, Decimal]]:
    """Pool pk -> resource key -> what its jobs holding quota demand (``within_quota``:
    not batch nor borrowing work), and the provisioned IOPS of their new checkpoint
    volumes the cluster does not show yet (``jobs.volume_iops.unobserved_iops``)."""
    return in_use_by_pool(pools, within_quota=within_quota)
