"""Periodic billing work (entries in portal/schedules.py, queue "billing").

Every task is idempotent: the ledger is keyed and recomputed, drafts are rewritten,
alerts are sent once per threshold and month.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.utils import timezone

from billing import budgets, services
from k8s_sync.metrics import MetricsSource, MetricsUnavailable

log = logging.getLogger(__name__)


@shared_task(name="billing.ingest_ledger", queue="billing")
def ingest_ledger() -> int:
    """GPU-seconds of jobs that ran in an open month, and PVC size changes; then every
    tenant's draft of this month from the fresh ledger (so the drafts' totals and the
    utilisation figures on one page read the same ingest) and every budget evaluated on
    them, so an alert comes within the ingest period."""
    now = timezone.now()
    written = services.ledger_ingest_gpu(now=now) + services.storage_snapshots_record(now=now)
    services.drafts_refresh(now=now, ingest=False)
    budgets.budget_alerts_check(now=now, refresh=False)
    return written


@shared_task(name="billing.record_egress", queue="billing")
def record_egress() -> int:
    """One reading of every pod's egress counters by destination, from the metric family
    ``TRAINYARD_EGRESS_METRICS`` names. Not configured (no Prometheus, nothing to scrape,
    an unknown family): nothing is recorded; a transient outage is logged and the next
    reading catches up (the counters are cumulative)."""
    try:
        readings = MetricsSource.from_settings().pod_egress_bytes()
    except MetricsUnavailable as exc:
        log.info("egress not recorded: %s", exc)
        return 0
    return services.egress_record(readings=readings, at=timezone.now().replace(microsecond=0))


@shared_task(name="billing.refresh_drafts", queue="billing")
def refresh_drafts() -> int:
    """This month's draft invoice of every tenant, from the ledger."""
    return services.drafts_refresh()


@shared_task(name="billing.budget_alerts", queue="billing")
def budget_alerts() -> int:
    """Budget alerts at 50, 80 and 100% (each budgeted tenant's draft refreshed first).
    The ledger ingest runs the same check; this task stays callable by name."""
    return budgets.budget_alerts_check()


@shared_task(name="billing.quarterly_quota_recommendation", queue="billing")
def quarterly_quota_recommendation() -> int:
    """Lower GPU grants idle against quota, of tenants in every mode, as proposals."""
    return services.quota_recommend_quarterly()
