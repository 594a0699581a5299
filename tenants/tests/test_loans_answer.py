"""Loans that answer (issue 30, item 7): the offer is checked as acceptance checks it and
says what it leaves the lender, batch and borrowed work does not count against the lender
(and the words say so), an offer that can no longer be accepted says why on both sides
and tells the lender, and offers expire after their term with both sides told."""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone

from core.exceptions import Conflict
from core.texts import render
from jobs.models import TrainingJob
from tenants import services
from tenants.access import access_for
from tenants.loans import lender_terms
from tenants.models import Membership, Notification, QuotaLoan

MODEL = "NVIDIA-H800"
H800 = f"gpu:{MODEL}"


@pytest.fixture
def lender(platform_admin, tenant_a, tenant_b, charlie):
    Membership.objects.filter(user=charlie, tenant=tenant_b).update(role="admin")
    pool = tenant_a.pools.get(kind="prod")
    services.quota_set(actor=platform_admin, pool=pool, amounts={H800: 8}, reason="t")
    return pool


def _job(pool, gpus: int, *, tier: str = "production", borrowing: bool = False) -> None:
    name = f"j{TrainingJob.objects.count()}"
    TrainingJob.objects.create(tenant=pool.tenant, pool=pool, name=name, image="trainer:1",
                               tier=tier, max_run_seconds=3600, workers=1,
                               gpus_per_worker=gpus, gpu_model=MODEL, state="running",
                               borrowing=borrowing)


def _offer(alice, tenant_a, lender, amount=2):
    return services.loan_propose(
        access=access_for(alice, tenant_a), actor=alice, lender_pool=lender, borrower="globex",
        borrower_pool="prod", resource=H800, amount=amount,
        ends_at=timezone.now() + dt.timedelta(days=7))


def test_the_offer_says_what_it_leaves_and_batch_does_not_count(alice, tenant_a, lender):
    _job(lender, 5)
    _job(lender, 4, tier="batch")
    _job(lender, 2, borrowing=True)  # 11 in use, 5 of them within the quota
    terms = lender_terms(lender, H800, 2)
    assert (terms.used, terms.beyond, terms.keeps, terms.ok) == (5, 6, 6, True)
    loan = _offer(alice, tenant_a, lender)
    assert render(loan.terms) == (
        "acme/prod uses 5 of its 8 NVIDIA-H800 GPUs within its quota; lending 2 leaves 6. "
        "Its batch and borrowed work (6 more) runs on idle capacity, gives way when the "
        "quota is needed, and does not count.")
    with pytest.raises(Conflict, match="at most 1 can be lent now"):  # 5 + 2 lent = 7
        _offer(alice, tenant_a, lender, amount=2)


def test_an_offer_that_cannot_be_accepted_says_why_on_both_sides(alice, charlie, tenant_a,
                                                                 tenant_b, lender, login):
    _job(lender, 5)
    loan = _offer(alice, tenant_a, lender)
    _job(lender, 2)  # the lender's own work grew: 7 within its quota, it would keep 6
    for _attempt in range(2):
        with pytest.raises(Conflict, match="uses 7 of its 8 NVIDIA-H800 GPUs"):
            services.loan_decide(access=access_for(charlie, tenant_b), actor=charlie,
                                 loan=loan, accept=True)
    loan.refresh_from_db()
    assert loan.status == "proposed" and "uses 7" in render(loan.problem)
    told = Notification.objects.filter(user=alice, message__contains="could not accept")
    assert told.count() == 1  # the lender is told once per reason
    for user, slug in ((alice, "acme"), (charlie, "globex")):
        page = login(user).get(reverse("tenants:quota", kwargs={"slug": slug})).content.decode()
        loans = page[page.index('id="loans"'):]
        assert 'data-field="blocked"' in loans and "would keep only 6" in loans
        assert "2 NVIDIA-H800 GPUs" in loans and ">gpu:NVIDIA-H800" not in loans  # names


def test_offers_expire_after_their_term_and_both_sides_are_told(alice, charlie, tenant_a,
                                                                tenant_b, lender, settings,
                                                                api):
    settings.TRAINYARD_LOAN_OFFER_HOURS = 24
    loan = _offer(alice, tenant_a, lender)
    assert api(alice).get(f"/api/v1/tenants/acme/loans/{loan.pk}/").json()["acceptable"]
    made = loan.created_at
    assert services.loans_expire(now=made + dt.timedelta(hours=23)) == 0
    assert services.loans_expire(now=made + dt.timedelta(hours=24, seconds=1)) == 1
    assert services.loans_expire(now=made + dt.timedelta(hours=25)) == 0
    loan = QuotaLoan.objects.get(pk=loan.pk)
    assert loan.status == "expired"
    for user in (alice, charlie):
        assert Notification.objects.filter(
            user=user, message__contains="expired: it was not accepted within 24 hours"
        ).count() == 1
    with pytest.raises(Conflict, match="expired"):
        services.loan_decide(access=access_for(charlie, tenant_b), actor=charlie, loan=loan,
                             accept=True)


def test_the_offer_page_says_what_the_loan_leaves(alice, tenant_a, tenant_b, platform_admin,
                                                 login):
    services.quota_set(actor=platform_admin, pool=tenant_a.pools.get(kind="prod"),
                       amounts={"cpu": 16}, reason="t")
    until = (timezone.now() + dt.timedelta(days=3)).date().isoformat()
    page = login(alice).post(reverse("tenants:loan_offer", kwargs={"slug": "acme"}), {
        "pool": "prod", "borrower": "globex", "borrower_pool": "dev", "resource": "cpu",
        "amount": "4", "ends_at": until, "note": ""}, follow=True).content.decode()
    assert "acme/prod uses 0 of its 16 CPU cores within its quota; lending 4 leaves 12." in page
    assert "must accept it by" in page


def test_the_lender_sees_what_each_pool_could_lend(alice, tenant_a, lender, login):
    _job(lender, 5)
    _job(lender, 3, tier="batch")
    _offer(alice, tenant_a, lender, amount=1)
    page = login(alice).get(reverse("tenants:quota", kwargs={"slug": "acme"})).content.decode()
    table = page[page.index('id="lendable"'):page.index("</table>", page.index('id="lendable"'))]
    row = table[table.index(f'data-resource="{H800}"'):]
    cells = [c.split(">", 1)[1].split("<", 1)[0] for c in row.split("<td")[1:7]]
    # holds 8 - 1 offered = 7, 5 within its quota, 3 batch, so 2 more could be lent
    assert cells == ["acme/prod", "NVIDIA-H800 GPUs", "7", "5", "3", "2"]
