"""Idle rate per tenant, the quarterly quota recommendation filed as a proposal, the
periodic tasks, and the query budget of the per-job cost selector."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from billing import selectors, services, tasks
from billing.recommend import IdleRule
from billing.tests.conftest import A100, at, make_job, run
from core.exceptions import ApplicationError
from tenants import services as tenant_services
from tenants.models import QuotaRequest, UsageDaily


def _usage(pool, day, allocated, utilised, resource=f"gpu:{A100}"):
    UsageDaily.objects.create(pool=pool, resource=resource, day=day, peak=allocated,
                              total=Decimal(allocated) * 288, samples=288,
                              utilised_total=Decimal(utilised) * 288, utilised_samples=288)


def test_idle_rate_monthly_and_quarterly(tenant_a, tenant_b):
    """Billed GPU-hours (the ledger) against the utilisation sampled on the same days."""
    pool = tenant_a.pools.get(kind="prod")
    make_job(tenant_a, run(at("2026-10-10"), at("2026-10-11")), gpus=8)  # 192 GPU-h billed
    make_job(tenant_a, run(at("2026-11-10"), at("2026-11-11")), gpus=8)  # 192 billed
    make_job(tenant_a, run(at("2026-11-12"), at("2026-11-12", "12:00")), gpus=2)  # 24, unsampled
    make_job(tenant_a, run(at("2026-11-13"), at("2026-11-13", "01:00")), gpus=1,
             mig="1g.10gb")                                                 # MIG: not cards
    services.ledger_ingest_gpu(now=at("2026-11-14"))
    _usage(pool, dt.date(2026, 10, 10), 8, 2)   # 48 of the 192 busy
    _usage(pool, dt.date(2026, 11, 10), 8, 6)   # 144 of the 192 busy
    _usage(pool, dt.date(2026, 11, 11), 4, 0, resource="cpu")  # not a GPU: ignored
    november = selectors.idle_rates(dt.date(2026, 11, 1), dt.date(2026, 12, 1))
    assert november[tenant_a.pk].rate == Decimal("0.25")
    assert november[tenant_a.pk].billed_hours == Decimal("216.00")
    assert november[tenant_a.pk].measured_hours == Decimal("192.00")
    assert november[tenant_a.pk].allocated_hours == november[tenant_a.pk].billed_hours
    quarter = selectors.tenant_idle(tenant_a, today=dt.date(2026, 11, 30))["quarter"]
    assert quarter.rate == Decimal("0.5") and quarter.utilised_hours == Decimal("192.00")
    assert tenant_b.pk not in november


def test_quarterly_recommendation_files_a_lower_proposal(tenant_a, platform_admin):
    tenant_a.quota_mode = "dynamic"
    tenant_a.save()
    pool = tenant_a.pools.get(kind="prod")
    tenant_services.quota_set(actor=platform_admin, pool=pool, reason="test",
                              amounts={f"gpu:{A100}": 16, "cpu": 64})
    for day in range(1, 31):  # 60% idle through Q3... only September is enough
        _usage(pool, dt.date(2026, 9, day), 10, 4)
    rule = IdleRule(Decimal("0.4"), Decimal("0.2"), Decimal("0.5"))
    assert services.quota_recommend_quarterly(today=dt.date(2026, 10, 2), rule=rule) == 1
    request = QuotaRequest.objects.get(pool=pool, status="pending")
    item = request.items.get()
    # 16 x 0.4 busy x 1.2 = 7.68; at most half cut: 8
    assert item.resource == f"gpu:{A100}" and item.requested_amount == 8
    assert "quarterly" in request.formula and "60%" in request.formula
    # static-mode tenants and busy grants get nothing
    assert services.quota_recommend_quarterly(today=dt.date(2026, 7, 2), rule=rule) == 0


def test_tasks_run_end_to_end(tenant_a, rate_card, settings):
    from django.utils import timezone

    make_job(tenant_a, run(timezone.now() - dt.timedelta(hours=1)))
    assert tasks.ingest_ledger() >= 1
    assert tasks.refresh_drafts() == 1
    assert tasks.budget_alerts() == 0
    settings.PROMETHEUS_URL = ""
    settings.TRAINYARD_DCGM_URLS = []
    assert tasks.record_egress() == 0  # no metrics source configured: nothing recorded
    assert tasks.quarterly_quota_recommendation() == 0


def test_job_costs_query_budget(tenant_a, rate_card, django_assert_max_num_queries):
    jobs = [make_job(tenant_a, run(at(f"2026-11-0{i + 1}", "10:00"),
                                   at(f"2026-11-0{i + 1}", "11:00"))) for i in range(5)]
    with django_assert_max_num_queries(4):
        costs = selectors.job_costs(jobs, now=at("2026-12-01"))
    assert set(costs.values()) == {Decimal("1.65")}


@pytest.mark.parametrize("month", ["2026-10", ""])
def test_parse_period(month):
    assert selectors.parse_period(month).day == 1


def test_parse_period_refuses_what_is_not_a_month():
    with pytest.raises(ApplicationError, match="not a month"):
        selectors.parse_period("bogus")
