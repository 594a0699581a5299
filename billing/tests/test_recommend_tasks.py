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
from tenants.models import QuotaGrant, QuotaRequest, UsageDaily


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


def _held_since(pool, amounts, since, platform_admin):
    """Grant ``amounts`` to ``pool`` as if granted at ``since`` (the grant table is the
    history the quota held is read from)."""
    tenant_services.quota_set(actor=platform_admin, pool=pool, reason="test", amounts=amounts)
    QuotaGrant.objects.filter(pool=pool, superseded_at__isnull=True).update(created_at=since)


def test_idle_kpi_against_quota_and_the_quarterly_proposal_by_hand(tenant_a, tenant_b,
                                                                    platform_admin):
    """Issue 17's hand-computed case. acme (static mode) held 100 A100 cards of quota all
    through Q3 2026 (92 days: 100 x 92 x 24 = 220,800 GPU-hours), ran 60 of them all the
    time (132,480 billed GPU-hours) at 30% utilisation (18 busy cards: 39,744 used
    GPU-hours). Quota held but not allocated: 1 - 132,480 / 220,800 = 40%; allocated but
    idle: 1 - 39,744 / 132,480 = 70%; used of quota: 39,744 / 220,800 = 18% (= 0.3 x 0.6),
    so 82% idle against quota. The rule (threshold 40%, headroom 20%, at most 50% cut):
    100 x 0.18 x 1.2 = 21.6, but at most half is cut: 50 cards proposed."""
    pool = tenant_a.pools.get(kind="prod")
    _held_since(pool, {f"gpu:{A100}": 100, "cpu": 64}, at("2026-06-15"), platform_admin)
    make_job(tenant_a, run(at("2026-07-01"), at("2026-10-01")), gpus=60)
    services.ledger_ingest_gpu(now=at("2026-10-02"))
    first = dt.date(2026, 7, 1)
    for offset in range(92):
        _usage(pool, first + dt.timedelta(days=offset), 60, 18)
    q3 = selectors.idle_kpi(dt.date(2026, 7, 1), dt.date(2026, 10, 1), [tenant_a.pk])
    kpi = q3[tenant_a.pk][A100]
    assert (kpi.quota_hours, kpi.billed_hours, kpi.used_hours) == (
        Decimal("220800.00"), Decimal("132480.00"), Decimal("39744.00"))
    assert kpi.quota_idle == Decimal("0.4") and kpi.rate == Decimal("0.7")
    assert kpi.used_of_quota == Decimal("0.18") and kpi.idle_of_quota == Decimal("0.82")
    # the tenant total (finance, the invoices page) is the same computation
    assert selectors.idle_rates(dt.date(2026, 7, 1), dt.date(2026, 10, 1))[
        tenant_a.pk].used_of_quota == Decimal("0.18")

    # globex, overcommitted, held 8 cards through Q3 and never used them: 100% idle
    tenant_b.quota_mode = "overcommitted"
    tenant_b.save()
    _held_since(tenant_b.pools.get(kind="dev"), {f"gpu:{A100}": 8}, at("2026-06-15"),
                platform_admin)
    rule = IdleRule(Decimal("0.4"), Decimal("0.2"), Decimal("0.5"))
    assert services.quota_recommend_quarterly(today=dt.date(2026, 10, 2), rule=rule) == 2
    request = QuotaRequest.objects.get(pool=pool, status="pending")
    item = request.items.get()
    assert item.resource == f"gpu:{A100}" and item.requested_amount == 50
    assert item.current_amount == 100
    for figure in ("quota held 220800", "allocated 132480", "used 39744", "quota idle 40%",
                   "allocated idle 70%", "used 18% of quota", "idle against quota 82%",
                   "Static quota mode", "(floor 50)"):
        assert figure in request.formula, figure
    assert QuotaRequest.objects.get(pool__tenant=tenant_b).items.get().requested_amount == 4
    # applied only through approval, as any proposal
    assert QuotaGrant.objects.get(pool=pool, resource=f"gpu:{A100}",
                                  superseded_at__isnull=True).amount == 100
    tenant_services.quota_request_approve(actor=platform_admin, request=request)
    assert QuotaGrant.objects.get(pool=pool, resource=f"gpu:{A100}",
                                  superseded_at__isnull=True).amount == 50
    # a quarter before the grants held no quota: no rate, no proposal
    assert services.quota_recommend_quarterly(today=dt.date(2026, 4, 2), rule=rule) == 0


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


def test_the_invoice_and_the_dashboard_show_the_idle_kpi_with_its_formula(
        tenant_a, platform_admin, login, bob):
    """October 2026 as in the hand-computed case: 100 cards of quota held all month, 60
    allocated at 30% utilisation. The invoice shows 40% / 70% / 18% with the figures the
    formulas use; the dashboard shows this quarter's KPI from the same selector."""
    import re

    from django.urls import reverse

    pool = tenant_a.pools.get(kind="prod")
    _held_since(pool, {f"gpu:{A100}": 100}, at("2026-10-01"), platform_admin)
    make_job(tenant_a, run(at("2026-10-01"), at("2026-11-01")), gpus=60)
    for offset in range(31):
        _usage(pool, dt.date(2026, 10, 1) + dt.timedelta(days=offset), 60, 18)
    invoice = services.invoice_draft_refresh(tenant=tenant_a, period=dt.date(2026, 10, 1))
    body = login(bob).get(reverse("billing:invoice", kwargs={
        "slug": "acme", "pk": invoice.pk})).content.decode()

    def cell(html, field):
        found = re.search(rf'<tr data-model="{A100}">.*?data-field="{field}">(.*?)</td>',
                          html, re.S)
        assert found, field
        return " ".join(found.group(1).split())

    assert cell(body, "quota_hours") == "74,400"        # 100 x 31 x 24
    assert cell(body, "allocated_hours") == "44,640"    # 60 x 31 x 24
    assert cell(body, "used_hours") == "13,392"         # x 0.3
    assert cell(body, "quota_idle").startswith("40% <small")
    assert "(1 − 44,640 ÷ 74,400)" in cell(body, "quota_idle")
    assert cell(body, "allocated_idle").startswith("70% <small")
    assert cell(body, "used_of_quota").startswith("18% <small")
    assert "Quota held but not allocated = 1 − allocated ÷ quota held." in body

    page = login(bob).get(reverse("tenant_dashboard", kwargs={"slug": "acme"}))
    html = page.content.decode()
    kpi = {r.gpu_model: r for r in page.context["idle_kpi"]}[A100]
    assert kpi.quota_hours > kpi.billed_hours == Decimal("44640.00")
    assert cell(html, "allocated_hours") == "44,640"
    assert f"{int(kpi.quota_idle * 100 + Decimal('0.5'))}%" in cell(html, "quota_idle")
