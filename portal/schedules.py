"""Every periodic task of Trainyard, in one place.

Each entry has a stable name, a crontab, an explicit queue and ``expires`` of about 1.5x
its period, so a backlog never runs stale copies. Offsets are staggered. A one-line
comment says why the cadence is what it is. Later issues add their entries here.
"""

from __future__ import annotations

from celery.schedules import crontab

from jobs.health import ADMISSION_EVERY_SECONDS

BEAT_SCHEDULE: dict[str, dict] = {
    # every minute: opens maintenance windows (defragmentation) whose start has come,
    # keeps their freed nodes cordoned, and uncordons them when a window ends
    "jobs.apply_maintenance_windows": {
        "task": "jobs.apply_maintenance_windows",
        "schedule": crontab(minute="*"),
        "options": {"queue": "default", "expires": 90},
    },
    # every 5 s: the admission loop (also kicked on every submit, cancel and finish);
    # a level-triggered pass so nothing waits for an event that was lost
    "jobs.admission_cycle": {
        "task": "jobs.admission_cycle",
        "schedule": float(ADMISSION_EVERY_SECONDS),
        "options": {"queue": "default", "expires": 8},
    },
    # every minute: the running jobs' own progress reports (a TrainJob's trainerStatus as
    # recorded; else one tail of the rank-0 pod's log a job), for their pages and the ETAs
    # of the jobs behind them; a training loop reports every few minutes at most
    "jobs.read_progress": {
        "task": "jobs.read_progress",
        "schedule": crontab(minute="*"),
        "options": {"queue": "k8s", "expires": 90},
    },
    # every minute: proves the worker and the broker are alive (shown on the health page)
    "portal.heartbeat": {
        "task": "portal.heartbeat",
        "schedule": crontab(minute="*"),
        "options": {"queue": "default", "expires": 90},
    },
    # every minute: the progress watchdog retries jobs, pool syncs and month closes that
    # are overdue and flags those a retry did not move (health page, /metrics)
    "portal.watchdog": {
        "task": "portal.watchdog",
        "schedule": crontab(minute="*"),
        "options": {"queue": "default", "expires": 90},
    },
    # every 5 min (at :02, :07, ...): repairs drift and picks up syncs whose task was lost
    "tenants.resync_pools": {
        "task": "tenants.resync_pools",
        "schedule": crontab(minute="2-59/5"),
        "options": {"queue": "k8s", "expires": 450},
    },
    # every 5 min (at :03, :08, ...): dedicated nodes keep their label and taint
    "tenants.reconcile_nodes": {
        "task": "tenants.reconcile_nodes",
        "schedule": crontab(minute="3-59/5"),
        "options": {"queue": "k8s", "expires": 450},
    },
    # every 5 min (at :01, :06, ...): folds each pool's allocation into today's usage row
    "tenants.sample_usage": {
        "task": "tenants.sample_usage",
        "schedule": crontab(minute="1-59/5"),
        "options": {"queue": "default", "expires": 450},
    },
    # every 15 min: temporary quota ends within a quarter of an hour of its date
    "tenants.expire_temporary_quota": {
        "task": "tenants.expire_temporary_quota",
        "schedule": crontab(minute="7-59/15"),
        "options": {"queue": "default", "expires": 1350},
    },
    # every 15 min: loans end within a quarter of an hour of their date, and offers not
    # accepted within TRAINYARD_LOAN_OFFER_HOURS expire (acceptance refuses them at once)
    "tenants.expire_loans": {
        "task": "tenants.expire_loans",
        "schedule": crontab(minute="11-59/15"),
        "options": {"queue": "default", "expires": 1350},
    },
    # hourly at :37: dev-pool volumes unused for the policy's N days are deleted
    "tenants.reclaim_dev_volumes": {
        "task": "tenants.reclaim_dev_volumes",
        "schedule": crontab(minute=37),
        "options": {"queue": "k8s", "expires": 5400},
    },
    # daily at 05:20: dynamic-mode proposals from the last 30 days, for admins to decide
    "tenants.propose_dynamic_quotas": {
        "task": "tenants.propose_dynamic_quotas",
        "schedule": crontab(hour=5, minute=20),
        "options": {"queue": "default", "expires": 3600 * 12},
    },
    # every 15 min: the tiers' PriorityClasses exist and are unchanged
    "tenants.reconcile_cluster": {
        "task": "tenants.reconcile_cluster",
        "schedule": crontab(minute="4-59/15"),
        "options": {"queue": "k8s", "expires": 1350},
    },
    # every 10 min (at :03, :13, ...): relists what k8s_watch observes, in case a watch
    # event was lost or the watcher is down (the level-triggered safety net)
    "k8s_sync.relist": {
        "task": "k8s_sync.relist",
        "schedule": crontab(minute="3-59/10"),
        "options": {"queue": "k8s", "expires": 900},
    },
    # every minute: one sample of the usage time series (allocation, DCGM utilisation,
    # quota) per pool; the dashboards' one-minute resolution
    "tenants.sample_usage_series": {
        "task": "tenants.sample_usage_series",
        "schedule": crontab(minute="*"),
        "options": {"queue": "default", "expires": 90},
    },
    # hourly at :04: recompute the last hours and days of the rollups (repairs a lost
    # minute) and apply the retention policy (minute rows 2 days, hourly rows 35 days)
    "tenants.rollup_usage_series": {
        "task": "tenants.rollup_usage_series",
        "schedule": crontab(minute=4),
        "options": {"queue": "default", "expires": 5400},
    },
    # every 10 min (at :06, :16, ...): GPU-seconds of running and finished jobs and PVC
    # size changes into the billing ledger (idempotent: keyed rows, recomputed), every
    # tenant's draft of this month from it, then every budget evaluated on the drafts
    # (alerts at 50, 80 and 100%, once each a month)
    "billing.ingest_ledger": {
        "task": "billing.ingest_ledger",
        "schedule": crontab(minute="6-59/10"),
        "options": {"queue": "billing", "expires": 900},
    },
    # every 5 min (at :04, :09, ...): one reading of the pods' network counters (egress);
    # counters are cumulative, so a missed reading loses nothing
    "billing.record_egress": {
        "task": "billing.record_egress",
        "schedule": crontab(minute="4-59/5"),
        "options": {"queue": "billing", "expires": 450},
    },
    # quarterly, on the 2nd of Jan/Apr/Jul/Oct at 06:10: lower GPU grants that sat idle
    # last quarter (dynamic mode), as proposals for platform admins
    "billing.quarterly_quota_recommendation": {
        "task": "billing.quarterly_quota_recommendation",
        "schedule": crontab(minute=10, hour=6, day_of_month=2, month_of_year="1,4,7,10"),
        "options": {"queue": "billing", "expires": 3600 * 12},
    },
}
