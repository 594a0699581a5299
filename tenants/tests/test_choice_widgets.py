"""Choices instead of free text: a loan's borrower is a select of tenants by name, its
resource a select from the catalog; a value that is not offered is refused and changes
nothing."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from core.tests.html import form_values
from tenants.models import Membership, QuotaLoan
from tenants.services import quota_set


def test_the_loan_form_offers_other_tenants_by_name_and_refuses_others(
        login, alice, tenant_a, tenant_b, platform_admin):
    quota_set(actor=platform_admin, pool=tenant_a.pools.get(kind="prod"),
              amounts={"cpu": 8}, reason="t")
    Membership.objects.filter(user=alice).update(role="admin")
    client = login(alice)
    page = client.get("/t/acme/quota/").content.decode()
    assert '<option value="globex">Globex NLP</option>' in page
    assert '<option value="acme">' not in page  # not to itself
    values = form_values(page, "/t/acme/loans/")
    until = (timezone.localdate() + dt.timedelta(days=3)).isoformat()
    offer = {**values, "pool": "prod", "borrower_pool": "dev", "resource": "cpu",
             "amount": "2", "ends_at": until}
    for bad in ({"borrower": "acme"}, {"borrower": "nobody"}, {"resource": "gpu:H999"},
                {"borrower": ""}):
        response = client.post("/t/acme/loans/", {**offer, "borrower": "globex", **bad},
                               follow=True)
        assert "Select a valid choice" in response.content.decode() or \
            "This field is required" in response.content.decode()
    assert not QuotaLoan.objects.exists()
    client.post("/t/acme/loans/", {**offer, "borrower": "globex"})
    assert QuotaLoan.objects.get().borrower.tenant.slug == "globex"
