"""Budgets (issue 30, item 8): a tenant's monthly budget, evaluated when it is saved and at
every ledger ingest (``billing.ingest_ledger``), so an alert at 50, 80 or 100% of it comes
within the ingest period; each threshold told once per tenant and month. Writes, as
``billing.services`` (split from it to keep both modules small)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _

from billing import selectors, texts
from billing.choices import BUDGET_MAX, BUDGET_THRESHOLDS
from billing.models import Budget, BudgetAlert
from billing.services import drafts_refresh, invoice_draft_refresh
from core.exceptions import ApplicationError
from core.texts import message
from tenants.access import AnyUser, TenantAccess
from tenants.audit import record_audit
from tenants.choices import MembershipRole, TenantStatus
from tenants.models import Membership
from tenants.services.notify import notify


@dataclass(frozen=True)
class BudgetCheck:
    """A budget evaluated against this month's spending (the draft's total)."""

    budget: Decimal
    spent: Decimal
    percent: int
    passed: int | None     # the highest threshold the spending has passed
    sent: int | None       # the threshold alerted by this evaluation (else told before)

    def summary(self) -> str:
        """What saving the budget says, on the page and in the API (``check``)."""
        spent = {"pct": self.percent}
        if self.sent is not None:
            return _("%(pct)s%% of this month's budget is already spent; the %(t)s%% alert "
                     "was sent.") % {**spent, "t": self.sent}
        if self.passed is not None:
            return _("%(pct)s%% of this month's budget is already spent; the %(t)s%% alert "
                     "was sent earlier this month.") % {**spent, "t": self.passed}
        return _("%(pct)s%% of this month's budget is spent so far.") % spent


def budget_set(*, access: TenantAccess, actor: AnyUser, amount: Decimal | None,
               now: dt.datetime | None = None) -> BudgetCheck | None:
    """A tenant admin sets (or with None/0 removes) the tenant's monthly budget. The budget
    is evaluated at once (the draft refreshed from the ledger first): a threshold already
    passed is alerted now, and the answer says how much is spent (None: removed)."""
    access.require_admin()
    tenant = access.tenant
    with transaction.atomic():
        if not amount:
            Budget.objects.filter(tenant=tenant).delete()
            record_audit(actor=actor, action="billing.budget", tenant=tenant,
                         text=message(texts.AUDIT_BUDGET_REMOVED))
            return None
        if amount < 0:
            raise ApplicationError(_("A budget cannot be negative."), field="amount")
        if amount > BUDGET_MAX:
            raise ApplicationError(_("A budget is at most %(max)s a month.")
                                   % {"max": f"{BUDGET_MAX:,}"}, field="amount")
        budget, _created = Budget.objects.update_or_create(
            tenant=tenant, defaults={"monthly_amount": amount, "updated_by": actor})
        record_audit(actor=actor, action="billing.budget", tenant=tenant,
                     text=message(texts.AUDIT_BUDGET_SET, amount=str(amount)))
    now = now or timezone.now()
    invoice_draft_refresh(tenant=tenant, now=now)
    return _budget_evaluate(budget, now)


def budget_alerts_check(*, now: dt.datetime | None = None, refresh: bool = True) -> int:
    """Tell tenant admins (in the portal and by e-mail) when this month's spending passes
    50, 80 and 100% of their budget; each threshold once per tenant and month. Run at
    every ledger ingest (``billing.ingest_ledger``), so an alert comes within the ingest
    period; ``refresh``: the budgeted tenants' drafts are recomputed from the ledger first
    (the spending is the draft's total). Returns the alerts sent."""
    now = now or timezone.now()
    budgets = list(Budget.objects.select_related("tenant").exclude(
        tenant__status=TenantStatus.DELETED).exclude(monthly_amount=0))
    if not budgets:
        return 0
    if refresh:
        drafts_refresh(now=now, tenant_ids=[b.tenant_id for b in budgets], ingest=False)
    return sum(1 for budget in budgets if _budget_evaluate(budget, now).sent is not None)


def _budget_evaluate(budget: Budget, now: dt.datetime) -> BudgetCheck:
    """One budget against its tenant's spending now: the highest threshold newly passed
    is alerted (every passed threshold is recorded, so each is told once a month)."""
    period = selectors.current_period(now)
    status = selectors.budget_status(budget.tenant, now)
    amount = budget.monthly_amount
    crossed = [t for t in BUDGET_THRESHOLDS if status.spent * 100 >= amount * t]
    done = set(BudgetAlert.objects.filter(tenant=budget.tenant, period=period)
               .values_list("threshold", flat=True))
    fresh = [t for t in crossed if t not in done]
    sent = None
    if fresh and max(crossed) not in done:
        with transaction.atomic():
            BudgetAlert.objects.bulk_create(
                [BudgetAlert(tenant=budget.tenant, period=period, threshold=t,
                             spent=status.spent, sent_at=now) for t in fresh],
                ignore_conflicts=True)
            # a concurrent evaluation that recorded them first has told the admins
            if BudgetAlert.objects.filter(tenant=budget.tenant, period=period,
                                          threshold=max(crossed), sent_at=now).exists():
                sent = max(crossed)
                admins = [m.user for m in Membership.objects.filter(
                    tenant=budget.tenant, role=MembershipRole.ADMIN).select_related("user")]
                notify(users=admins, tenant=budget.tenant, email=True,
                       link=reverse("billing:tenant_invoices",
                                    kwargs={"slug": budget.tenant.slug}),
                       text=message(texts.BUDGET_ALERT, tenant=budget.tenant.name, pct=sent,
                                    spent=str(status.spent), budget=str(amount),
                                    cur=settings.TRAINYARD_CURRENCY,
                                    forecast=str(status.forecast)))
    return BudgetCheck(budget=amount, spent=status.spent,
                       percent=int(status.spent * 100 / amount),
                       passed=max(crossed, default=None), sent=sent)
