"""The utilisation figures per tenant and GPU kind, the quarterly quota recommendation
filed as a proposal, the periodic tasks, and the query budget of the per-job cost
selector."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from billing import selectors, services, tasks
from billing.recommend import IdleRule
from billing.tests.conftest import A100, at, make_job, run
from core.exceptions import ApplicationError
from jobs.models import TrainingJob
from tenants import services as tenant_services
from tenants.models import JobUtilisation, QuotaGrant, QuotaRequest
from tenants.utilisation import idle_against_quota


def _measured(job, mean):
    """The minute sampler's record of ``job``: its mean GPU utilisation, ``mean`` %."""
    JobUtilisation.objects.create(
        namespace=job.pool.namespace, job=str(job.pk), gpu_samples=600,
        util_sum=600 * mean, last_util=mean, first_sampled_at=at("2026-06-01"),
        last_sampled_at=at("2026-11-15"))
    return job


def test_figures_monthly_and_quarterly_every_gpu_kind(tenant_a, tenant_b):
    """Allocated GPU-hours from the ledger, busy from each job's measured utilisation, per
    GPU kind (whole cards, MIG instances, shared GPUs), within quota and borrowed."""
    _measured(make_job(tenant_a, run(at("2026-10-10"), at("2026-10-11")), gpus=8), 25)  # 192
    _measured(make_job(tenant_a, run(at("2026-11-10"), at("2026-11-11")), gpus=8), 75)  # 192
    make_job(tenant_a, run(at("2026-11-12"), at("2026-11-12", "12:00")), gpus=2)  # 24, unsampled
    _measured(make_job(tenant_a, run(at("2026-11-13"), at("2026-11-13", "01:00")), gpus=1,
                       mig="1g.10gb"), 50)                                   # 1 MIG-hour
    shared = make_job(tenant_a, run(at("2026-11-13"), at("2026-11-13", "02:00")), gpus=3)
    TrainingJob.objects.filter(pk=shared.pk).update(gpu_shared=True)          # 6 share-hours
    borrowed = _measured(make_job(tenant_a, run(at("2026-11-14"), at("2026-11-14", "10:00"))),
                         100)                                                # 10, borrowed
    TrainingJob.objects.filter(pk=borrowed.pk).update(borrowing=True)
    services.ledger_ingest_gpu(now=at("2026-11-15"))
    november = selectors.utilisation_figures(dt.date(2026, 11, 1), dt.date(2026, 12, 1))
    cards = november[tenant_a.pk][f"gpu:{A100}"]
    assert (cards.allocated_hours, cards.within_quota_hours, cards.borrowed_hours) == (
        Decimal("226.00"), Decimal("216.00"), Decimal("10.00"))
    assert (cards.measured_hours, cards.busy_hours) == (Decimal("202.00"), Decimal("154.00"))
    assert cards.idle_rate == Decimal("0.2376")       # 1 - 154 / 202
    assert cards.quota_use is None                    # no quota held
    mig = november[tenant_a.pk]["mig:1g.10gb"]
    assert (mig.allocated_hours, mig.busy_hours, mig.idle_rate) == (
        Decimal("1.00"), Decimal("0.50"), Decimal("0.5000"))
    assert november[tenant_a.pk]["gpu-shared"].allocated_hours == Decimal("6.00")
    assert november[tenant_a.pk]["gpu-shared"].idle_rate is None      # never measured
    total = selectors.utilisation_totals(dt.date(2026, 11, 1), dt.date(2026, 12, 1))[
        tenant_a.pk]
    assert total.allocated_hours == Decimal("233.00") and total.busy_hours == Decimal("154.50")
    quarter = selectors.tenant_utilisation(tenant_a, today=dt.date(2026, 11, 30))["quarter"]
    assert quarter.busy_hours == Decimal("202.50")    # 48 + 144 + 10 + 0.5
    assert tenant_b.pk not in november


def _held_since(pool, amounts, since, platform_admin):
    """Grant ``amounts`` to ``pool`` as if granted at ``since`` (the grant table is the
    history the quota held is read from)."""
    tenant_services.quota_set(actor=platform_admin, pool=pool, reason="test", amounts=amounts)
    QuotaGrant.objects.filter(pool=pool, superseded_at__isnull=True).update(created_at=since)


def test_figures_against_quota_and_the_quarterly_proposal_by_hand(tenant_a, tenant_b,
                                                                  platform_admin):
    """Issue 17's hand-computed case. acme (static mode) held 100 A100 cards of quota all
    through Q3 2026 (92 days: 100 x 92 x 24 = 220,800 GPU-hours), ran 60 of them all the
    time within quota (132,480 GPU-hours) at 30% utilisation (39,744 busy GPU-hours).
    Quota use: 132,480 / 220,800 = 60%; idle rate: 1 - 39,744 / 132,480 = 70%; so the
    share of the quota held that was not busy is 1 - 0.6 x 0.3 = 82%. The rule
    (threshold 40%, headroom 20%, at most 50% cut): 100 x 0.18 x 1.2 = 21.6, but at most
    half is cut: 50 cards proposed. Its 14 MIG instances sat idle too: 7 proposed."""
    pool = tenant_a.pools.get(kind="prod")
    _held_since(pool, {f"gpu:{A100}": 100, "mig:1g.10gb": 14, "cpu": 64}, at("2026-06-15"),
                platform_admin)
    _measured(make_job(tenant_a, run(at("2026-07-01"), at("2026-10-01")), gpus=60), 30)
    services.ledger_ingest_gpu(now=at("2026-10-02"))
    q3 = selectors.utilisation_figures(dt.date(2026, 7, 1), dt.date(2026, 10, 1),
                                       [tenant_a.pk])
    cards = q3[tenant_a.pk][f"gpu:{A100}"]
    assert (cards.quota_held_hours, cards.allocated_hours, cards.busy_hours) == (
        Decimal("220800.00"), Decimal("132480.00"), Decimal("39744.00"))
    assert cards.quota_use == Decimal("0.6") and cards.idle_rate == Decimal("0.7")
    assert idle_against_quota(cards) == Decimal("0.82")
    assert q3[tenant_a.pk]["mig:1g.10gb"].quota_held_hours == Decimal("30912.00")
    # the tenant total (finance, the invoices page) is the same computation
    assert selectors.utilisation_totals(dt.date(2026, 7, 1), dt.date(2026, 10, 1))[
        tenant_a.pk].busy_hours == Decimal("39744.00")

    # globex, overcommitted, held 8 cards through Q3 and never used them: 100% idle
    tenant_b.quota_mode = "overcommitted"
    tenant_b.save()
    _held_since(tenant_b.pools.get(kind="dev"), {f"gpu:{A100}": 8, "gpu-shared": 4},
                at("2026-06-15"), platform_admin)
    rule = IdleRule(Decimal("0.4"), Decimal("0.2"), Decimal("0.5"))
    assert services.quota_recommend_quarterly(today=dt.date(2026, 10, 2), rule=rule) == 2
    request = QuotaRequest.objects.get(pool=pool, status="pending")
    items = {i.resource: i for i in request.items.all()}
    assert set(items) == {f"gpu:{A100}", "mig:1g.10gb"}
    assert items[f"gpu:{A100}"].requested_amount == 50
    assert items[f"gpu:{A100}"].current_amount == 100
    assert items["mig:1g.10gb"].requested_amount == 7
    for figure in ("quota held 220800", "allocated 132480", "busy 39744", "quota use 60%",
                   "idle rate 70%", "idle against quota", "= 82%", "Static quota mode",
                   "(floor 50)"):
        assert figure in request.formula, figure
    globex = {i.resource: i.requested_amount for i in QuotaRequest.objects.get(
        pool__tenant=tenant_b).items.all()}
    assert globex == {f"gpu:{A100}": 4, "gpu-shared": 2}   # shared GPUs reviewed too
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
    # the rate cards, their GPU, storage and device prices, the nodes' device facts, and
    # the transitions: whatever the number of jobs
    with django_assert_max_num_queries(6):
        costs = selectors.job_costs(jobs, now=at("2026-12-01"))
    assert set(costs.values()) == {Decimal("1.65")}


@pytest.mark.parametrize("month", ["2026-10", ""])
def test_parse_period(month):
    assert selectors.parse_period(month).day == 1


def test_parse_period_refuses_what_is_not_a_month():
    with pytest.raises(ApplicationError, match="not a month"):
        selectors.parse_period("bogus")


def test_the_invoice_and_the_dashboard_show_the_figures_with_their_definitions(
        tenant_a, platform_admin, login, bob):
    """October 2026 as in the hand-computed case: 100 cards of quota held all month, 60
    allocated at 30% utilisation. The invoice shows quota use 60% and idle rate 70% with
    the hours behind them and the definitions; the dashboard shows this quarter's
    figures from the same selector."""
    import re

    from django.urls import reverse

    pool = tenant_a.pools.get(kind="prod")
    _held_since(pool, {f"gpu:{A100}": 100}, at("2026-10-01"), platform_admin)
    _measured(make_job(tenant_a, run(at("2026-10-01"), at("2026-11-01")), gpus=60), 30)
    invoice = services.invoice_draft_refresh(tenant=tenant_a, period=dt.date(2026, 10, 1))
    body = login(bob).get(reverse("billing:invoice", kwargs={
        "slug": "acme", "pk": invoice.pk})).content.decode()

    def cell(html, field):
        found = re.search(rf'<tr data-kind="gpu:{A100}">.*?data-field="{field}">(.*?)</td>',
                          html, re.S)
        assert found, field
        return " ".join(found.group(1).split())

    assert cell(body, "quota_held") == "74,400"         # 100 x 31 x 24
    assert cell(body, "allocated") == "44,640"          # 60 x 31 x 24
    assert cell(body, "within_quota") == "44,640"
    assert cell(body, "borrowed") == "0"
    assert cell(body, "busy") == "13,392"               # x 0.3
    assert cell(body, "quota_use") == "60%"
    assert cell(body, "idle_rate") == "70%"
    assert "Allocated within quota ÷ quota held." in body
    assert 'title="Allocated but not busy: 1 − busy ÷ allocated GPU-hours' in body

    page = login(bob).get(reverse("tenant_dashboard", kwargs={"slug": "acme"}))
    html = page.content.decode()
    figure = {f.kind: f for f in page.context["utilisation"]}[f"gpu:{A100}"]
    assert figure.quota_held_hours > figure.allocated_hours == Decimal("44640.00")
    assert cell(html, "allocated") == "44,640"
    assert cell(html, "idle_rate") == "70%"
    assert cell(html, "quota_use") == f"{int(figure.quota_use * 100 + Decimal('0.5'))}%"
