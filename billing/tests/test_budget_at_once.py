"""Budget alerts at once (issue 30, item 8): a budget is evaluated when it is saved and at
every ledger ingest, saving one already passed says so on the spot (page and API), a GET
of the budget URL goes to its form, and each (tenant, month, threshold) is told once.
A100 at 1.65 per GPU-hour (billing/tests/conftest.py); the clock is mid-November 2026."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from django.urls import reverse
from django.utils import timezone

from billing import budgets, tasks
from billing.models import BudgetAlert
from billing.tests.conftest import make_job, run
from tenants.access import access_for
from tenants.models import Notification


def _spend(tenant, hours: float) -> None:
    """One A100 that ran ``hours`` this month, ended just now (1.65 per hour)."""
    now = timezone.now()
    make_job(tenant, run(now - dt.timedelta(hours=hours), now - dt.timedelta(seconds=1)))


def test_saving_a_budget_already_passed_alerts_on_the_spot(tenant_a, rate_card, alice, login,
                                                          api):
    _spend(tenant_a, 10)  # 16.50 spent
    client = login(alice)
    assert client.get(reverse("billing:budget", kwargs={"slug": "acme"})).url.endswith(
        "/invoices/#budget")
    page = client.post(reverse("billing:budget", kwargs={"slug": "acme"}), {"amount": "29"},
                       follow=True).content.decode()
    # 16.50 of 29 is 56%: the 50% alert goes out now, and the page says so
    assert "56% of this month&#x27;s budget is already spent; the 50% alert was sent." in page
    told = list(Notification.objects.filter(user=alice).values_list("message", flat=True))
    assert len(told) == 1 and "50%" in told[0]
    # saved again, or ingested: nothing is told twice
    body = api(alice).put("/api/v1/tenants/acme/invoices/budget/", {"monthly_amount": "30"},
                          format="json").json()
    assert body["alert_sent"] is None and body["percent"] == 55
    assert body["check"] == ("55% of this month's budget is already spent; the 50% alert was "
                             "sent earlier this month.")
    tasks.ingest_ledger()
    assert Notification.objects.filter(user=alice).count() == 1
    assert BudgetAlert.objects.filter(tenant=tenant_a).count() == 1


def test_the_ingest_evaluates_budgets(tenant_a, rate_card, alice):
    budgets.budget_set(access=access_for(alice, tenant_a), actor=alice, amount=Decimal("10"))
    assert not BudgetAlert.objects.exists()
    _spend(tenant_a, 5)  # 8.25 of 10: 82%, passed 50 and 80; the draft is stale
    tasks.ingest_ledger()  # the ledger's ingest refreshes the draft and tells at once
    assert sorted(BudgetAlert.objects.values_list("threshold", flat=True)) == [50, 80]
    told = list(Notification.objects.filter(user=alice).values_list("message", flat=True))
    assert len(told) == 1 and "80%" in told[0]
    assert budgets.budget_alerts_check() == 0


def test_budget_check_summary_words():
    check = budgets.BudgetCheck(budget=Decimal(700), spent=Decimal("400.24"), percent=57,
                                 passed=50, sent=50)
    assert check.summary() == ("57% of this month's budget is already spent; the 50% alert "
                               "was sent.")
    quiet = budgets.BudgetCheck(budget=Decimal(700), spent=Decimal(1), percent=0, passed=None,
                                 sent=None)
    assert quiet.summary() == "0% of this month's budget is spent so far."

