"""The progress watchdog: overdue items are retried, then flagged (health page, /metrics)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from portal import watchdog
from portal.watchdog import Item, Kind, Status, review

T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
MIN = dt.timedelta(minutes=1)


def pool(state: str = "pending:2", since: dt.datetime | None = None) -> Item:
    return Item(kind=Kind.POOL_SYNC, key="pool:1", label="acme/prod", state=state,
                reason=state.split(":")[0], since=since, deadline=10 * MIN)


def test_an_item_is_retried_after_its_deadline_then_flagged_when_the_retry_did_not_move_it():
    findings, memory = review([pool()], {}, now=T0)
    assert findings == [] and memory["pool:1"].since == T0   # first seen: the clock starts
    findings, memory = review([pool()], memory, now=T0 + 9 * MIN)
    assert findings == []
    (f,), memory = review([pool()], memory, now=T0 + 10 * MIN)
    assert (f.status, f.retry_now, f.retries, f.overdue_since) == (
        Status.RETRYING, True, 1, T0 + 10 * MIN)
    (f,), memory = review([pool()], memory, now=T0 + 12 * MIN)
    assert (f.status, f.retry_now, f.retries) == (Status.RETRYING, False, 1)   # its window
    (f,), memory = review([pool()], memory, now=T0 + 15 * MIN)
    assert (f.status, f.retry_now, f.retries) == (Status.FLAGGED, True, 2)
    (f,), memory = review([pool()], memory, now=T0 + 16 * MIN)
    assert (f.status, f.retry_now) == (Status.FLAGGED, False)


def test_progress_starts_an_item_afresh_and_a_gone_item_is_forgotten():
    _f, memory = review([pool()], {}, now=T0)
    (f,), memory = review([pool()], memory, now=T0 + 20 * MIN)
    assert f.status == Status.RETRYING
    # another change came and is pending: a new state, a new clock
    findings, memory = review([pool("pending:3")], memory, now=T0 + 21 * MIN)
    assert findings == [] and memory["pool:1"].retries == 0
    findings, memory = review([], memory, now=T0 + 22 * MIN)
    assert findings == [] and memory == {}


def test_a_known_start_counts_and_jobs_are_overdue_when_classified():
    (f,), _m = review([pool("error:2", since=T0 - 30 * MIN)], {}, now=T0)
    assert f.since == T0 - 30 * MIN and f.overdue_since == T0 - 20 * MIN
    job = Item(kind=Kind.JOB, key="job:7", label="acme: a", state="admitted:not_created",
               reason="not_created", since=T0 - 2 * MIN)
    month = Item(kind=Kind.MONTH_CLOSE, key="month:2026-02", label="2026-02", state="open",
                 reason="not_closed", since=T0 - dt.timedelta(days=1),
                 deadline=watchdog.MONTH_CLOSE_DEADLINE)
    findings, memory = review([job, month], {}, now=T0)
    assert [f.item.key for f in findings] == ["job:7"]   # the month has 4 days left
    (f,), _m = review([job], memory, now=T0 + 5 * MIN)
    assert f.status == Status.FLAGGED   # the job's retry window is 5 minutes


@pytest.fixture
def unreachable_cluster(settings):
    """Every call to the cluster is refused at once (nothing listens on port 9)."""
    from k8s_sync.client import reset_clients

    settings.TRAINYARD_CLUSTER = {"mode": "url", "url": "http://127.0.0.1:9",
                                  "request_timeout": 0.5}
    reset_clients()
    cache.delete(watchdog.CACHE_KEY)
    yield
    reset_clients()
    cache.delete(watchdog.CACHE_KEY)


@pytest.mark.django_db
def test_a_pool_whose_sync_keeps_failing_is_flagged_on_the_health_page_and_in_metrics(
        unreachable_cluster, tenant_a, platform_admin, login, client, settings):
    from tenants.models import Pool

    now = timezone.now()
    prod = tenant_a.pools.get(kind="prod")
    Pool.objects.filter(pk=prod.pk).update(
        sync_error="403 Forbidden: resourcequotas", last_attempt_at=now - dt.timedelta(hours=1),
        synced_version=prod.desired_version)
    page = reverse("platform_cluster")
    assert "The watchdog has not run yet" in login(platform_admin).get(page).content.decode()

    first = watchdog.run(now=now)
    assert [(f["key"], f["status"], f["retries"]) for f in first.findings] == [
        (f"pool:{prod.pk}", "retrying", 1)]   # the dev pool is pending, within its deadline
    prod.refresh_from_db()
    assert prod.last_attempt_at > now - MIN   # the retry ran (and failed: nothing listens)

    later = watchdog.run(now=now + 6 * MIN)
    (flagged,) = later.flagged
    assert (flagged["label"], flagged["reason"], flagged["retries"]) == ("acme/prod", "error", 2)
    assert flagged["detail"]   # the cluster's words

    body = login(platform_admin).get(page).content.decode()
    assert 'data-watchdog="flagged" data-kind="pool_sync" data-reason="error"' in body
    assert "acme/prod" in body and "The last sync failed." in body

    settings.TRAINYARD_METRICS_TOKEN = "t"
    text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    assert samples[("trainyard_watchdog_flagged", (
        ("kind", "pool_sync"), ("reason", "error"), ("subject", "acme/prod")))] == 1
    assert samples[("trainyard_watchdog_overdue", (
        ("kind", "pool_sync"), ("status", "flagged")))] == 1
    assert samples[("trainyard_watchdog_last_run_timestamp_seconds", ())] == pytest.approx(
        (now + 6 * MIN).timestamp())


@pytest.mark.django_db
def test_an_ended_month_with_charges_is_due_for_closing_until_it_is_closed(tenant_a, bob):
    from billing import ledger
    from billing.models import GpuUsage, MonthClose
    from jobs.models import TrainingJob

    now = timezone.now()
    last_month = ledger.month_start(ledger.month_start(now.date()) - dt.timedelta(days=1))
    assert watchdog.month_items(now) == []   # no charges: nothing to close
    prod = tenant_a.pools.get(kind="prod")
    job = TrainingJob.objects.create(tenant=tenant_a, pool=prod, name="j", image="x",
                                     tier="production", max_run_seconds=60, state="succeeded",
                                     workers=1, gpus_per_worker=1, submitted_by=bob)
    GpuUsage.objects.create(job=job, tenant=tenant_a, pool=prod, day=last_month, devices=1,
                            seconds=60, billed_period=last_month.replace(day=1))
    (item,) = watchdog.month_items(now)
    assert (item.label, item.reason) == (f"{last_month:%Y-%m}", "not_closed")
    assert item.since is not None and item.since <= now
    MonthClose.objects.create(period=last_month, closed_at=now)
    assert watchdog.month_items(now) == []
