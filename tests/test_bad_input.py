"""Bad input the crawl (tests/test_crawl.py) found answered with a 500, one test each: every
answer is now a clear 4xx that changes nothing."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest
from django.utils import timezone

from billing import selectors as billing_selectors
from billing.models import Budget, MonthClose
from core.exceptions import ApplicationError
from core.texts import english
from jobs.models import TrainingJob
from jobs.tests.conftest import submission
from tenants import services as tenant_services
from tenants.access import access_for
from tenants.models import AuditEvent, QuotaRequest, Tenant

DEEP = 50_000


def _json(response) -> dict:
    assert "json" in response["Content-Type"], response["Content-Type"]
    return json.loads(response.content)


def test_delete_on_the_tenant_list_is_405_and_the_delete_action_still_works(api, platform_admin,
                                                                             tenant_a):
    client = api(platform_admin)
    assert client.delete("/api/v1/tenants/").status_code == 405
    assert client.delete("/api/v1/tenants/acme/").status_code == 405
    wrong = client.post("/api/v1/tenants/acme/delete/", {"confirm": "nope"}, format="json")
    assert wrong.status_code == 400 and _json(wrong)["field"] == "confirm"
    assert Tenant.objects.get(slug="acme").status != "deleted"


def test_options_on_a_list_level_action_describes_it(api, alice, tenant_a):
    response = api(alice).options("/api/v1/tenants/acme/invoices/budget/")
    assert response.status_code == 200
    assert "monthly_amount" in _json(response)["actions"]["PUT"]
    # and a page of HTML documentation answers OPTIONS with a 405, not a missing template
    assert api(alice).options("/api/docs/").status_code == 405


def test_a_job_whose_env_nests_50000_lists_is_a_400(api, bob, tenant_a):
    body = json.dumps({**submission(), "pool": "dev", "env": "__ENV__"})
    body = body.replace('"__ENV__"', "[" * DEEP + "]" * DEEP)
    response = api(bob).generic("POST", "/api/v1/tenants/acme/jobs/", body,
                                content_type="application/json")
    assert response.status_code == 400 and "nested too deeply" in _json(response)["detail"]
    assert not TrainingJob.objects.exists()


def test_a_10_mb_body_gets_a_json_413(api, bob, tenant_a):
    body = json.dumps({**submission(), "pool": "dev", "image": "x" * 10_000_000})
    response = api(bob).generic("POST", "/api/v1/tenants/acme/jobs/", body,
                                content_type="application/json")
    assert response.status_code == 413 and "too large" in _json(response)["message"]
    assert not TrainingJob.objects.exists()


@pytest.mark.parametrize("month", ["9999-12", "2026-1", "2026-13", "0000-00", "1969-12",
                                   "２０２６-01", "2026-01x"])
def test_a_month_that_is_not_yyyy_mm_in_range_is_refused(api, login, finance_user, month):
    client = api(finance_user)
    for response in [client.get(f"/api/v1/billing/months/{month}/"),
                     client.post(f"/api/v1/billing/months/{month}/close/"),
                     client.get(f"/api/v1/billing/invoices/?month={month}")]:
        assert response.status_code == 400 and _json(response)["field"] == "month", month
    assert not MonthClose.objects.exists()
    with pytest.raises(ApplicationError):
        billing_selectors.parse_period(month)
    page = login(finance_user)
    assert page.get(f"/billing/months/{month}.csv").status_code == 404
    shown = page.get(f"/billing/?month={month}")  # this month's page, with the error above
    assert shown.status_code == 200 and "is not a month" in shown.content.decode()
    assert page.post("/billing/close/", {"month": month}).status_code == 302
    assert not MonthClose.objects.exists()


def test_a_month_in_range_is_read_as_written():
    assert billing_selectors.parse_period("2026-01") == dt.date(2026, 1, 1)
    assert billing_selectors.parse_period("2999-12") == dt.date(2999, 12, 1)
    assert billing_selectors.parse_period("") == billing_selectors.current_period()


def test_a_huge_limit_or_offset_is_a_page_not_a_500(api, alice, tenant_a):
    client = api(alice)
    response = client.get("/api/v1/tenants/acme/members/?limit=9999999999999999999")
    assert response.status_code == 200 and _json(response)["count"] == 2
    assert len(_json(response)["results"]) == 2
    response = client.get("/api/v1/tenants/acme/members/?offset=99999999999999999999")
    assert response.status_code == 200 and _json(response)["results"] == []


@pytest.mark.parametrize("amount", ["1e12", "1E+400", "9999999999999999999", "NaN", "-1"])
def test_a_budget_out_of_range_is_refused_in_the_api_and_the_page(api, login, alice, tenant_a,
                                                                  amount):
    response = api(alice).put("/api/v1/tenants/acme/invoices/budget/",
                              {"monthly_amount": amount}, format="json")
    assert response.status_code == 400 and "monthly_amount" in _json(response)
    page = login(alice).post("/t/acme/invoices/budget/", {"amount": amount})
    assert page.status_code == 400 and 'role="alert"' in page.content.decode()
    assert not Budget.objects.exists()


def test_quota_amounts_never_come_back_as_exponents(api, login, platform_admin, alice,
                                                    tenant_a):
    pool = tenant_a.pools.get(kind="prod")
    tenant_services.quota_set(actor=platform_admin, pool=pool, reason="t",
                              amounts={"cpu": "1E+2", "memory": "1000"})
    request = tenant_services.quota_request_submit(
        access=access_for(alice, tenant_a), actor=alice, pool=pool, amounts={"cpu": "2E+2"},
        justification="x")
    grants = _json(api(alice).get("/api/v1/tenants/acme/pools/prod/"))["quota"]
    assert grants == {"cpu": "100", "memory": "1000"}
    pool_page = login(platform_admin).get("/t/acme/pools/prod/").content.decode()
    assert 'value="100"' in pool_page and "E+" not in pool_page  # the quota form's amount
    assert "E+" not in login(alice).get("/t/acme/quota/").content.decode()
    texts = [english(e.text) if e.text else e.summary for e in AuditEvent.objects.all()]
    assert any("cpu=100" in t for t in texts) and any("cpu=200" in t for t in texts)
    assert not any("E+" in t for t in texts)
    assert QuotaRequest.objects.get(pk=request.pk).items.get().requested_amount == 200


def test_a_bogus_quota_request_id_is_a_404(api, platform_admin):
    client = api(platform_admin)
    for pk in ["999999", "9223372036854775808", "abc"]:
        assert client.get(f"/api/v1/quota-requests/{pk}/").status_code == 404
        assert client.post(f"/api/v1/quota-requests/{pk}/reject/", {"reason": "x"},
                           format="json").status_code == 404


def test_the_job_form_refuses_a_clone_that_is_not_a_job_id(login, bob, tenant_a):
    client = login(bob)
    for clone in ["abc", "-1", "1e3", "٣"]:
        assert client.get(f"/t/acme/jobs/new/?clone={clone}").status_code == 404


def test_the_defrag_page_refuses_a_node_count_that_is_not_a_whole_number(login, platform_admin):
    client = login(platform_admin)
    for wanted in ["abc", "1.5", "-Infinity"]:
        response = client.get(f"/platform/defrag/?nodes_wanted={wanted}")
        assert response.status_code == 400 and "whole number" in response.content.decode()
    now = timezone.now()
    response = client.post("/platform/defrag/", {
        "gpu_model": "x", "nodes_wanted": "many", "starts_at": now.isoformat(),
        "ends_at": (now + dt.timedelta(hours=1)).isoformat()})
    assert response.status_code == 400 and "whole number" in response.content.decode()


def test_decimal_amounts_in_messages_are_plain():
    from tenants.catalog import fmt_amount

    assert fmt_amount(Decimal("100.000")) == "100"
    assert fmt_amount(Decimal("1E+2")) == "100"
    assert fmt_amount(Decimal("0.250")) == "0.25"


def test_a_nul_character_in_a_typed_reason_is_refused_before_the_database(login, platform_admin,
                                                                         bob, tenant_a):
    """Postgres holds no NUL in text or JSON: the services refuse it (SQLite would store it)."""
    from jobs import services as job_services

    job = TrainingJob.objects.create(
        tenant=tenant_a, pool=tenant_a.pools.get(kind="dev"), name="j", image="i:1",
        tier="development", max_run_seconds=3600, workers=1, gpus_per_worker=1,
        gpu_model="NVIDIA-H800")
    client = login(platform_admin)
    for action in ("hold", "priority"):
        response = client.post(f"/t/acme/jobs/{job.pk}/{action}/",
                               {"reason": "evil\x00nul", "priority": "5"}, follow=True)
        assert "NUL character" in response.content.decode()
    job.refresh_from_db()
    assert not job.held and job.priority == 0
    with pytest.raises(ApplicationError, match="NUL"):
        job_services.job_hold(actor=platform_admin, job=job, held=True, reason="a\x00")
    with pytest.raises(ApplicationError, match="NUL"):
        tenant_services.node_dedicate(access=access_for(platform_admin, tenant_a),
                                      actor=platform_admin, node_name="n1", reason="\x00")
    assert job_services.job_hold(actor=platform_admin, job=job, held=True,
                                 reason="  maintenance  ").hold_reason == "maintenance"


def test_a_job_action_goes_back_only_to_a_path_of_this_site(login, platform_admin, tenant_a):
    job = TrainingJob.objects.create(
        tenant=tenant_a, pool=tenant_a.pools.get(kind="dev"), name="j", image="i:1",
        tier="development", max_run_seconds=3600, workers=1, gpus_per_worker=1,
        gpu_model="NVIDIA-H800")
    client = login(platform_admin)
    detail = f"/t/acme/jobs/{job.pk}/"
    for back, expected in [("[]", detail), ("9999-12-31T23:59:59", detail), ("jobs:list", detail),
                           ("https://evil.example.org/", detail), ("//evil.example.org/", detail),
                           ("/platform/queue/?page=2", "/platform/queue/?page=2")]:
        response = client.post(f"{detail}hold/", {"reason": "r", "next": back})
        assert response.status_code == 302 and response["Location"] == expected, back


def test_a_nul_character_in_the_address_is_a_400(login, api, alice, tenant_a):
    """Postgres holds no NUL: a filter or search with one would be a database error."""
    client = login(alice)
    for url in ["/t/acme/jobs/?q=%00", "/t/acme/jobs/?state=a%00b", "/t/acme/pools/%00/",
                "/platform/people/?q=x%00"]:
        response = client.get(url)
        assert response.status_code == 400 and "NUL" in response.content.decode(), url
    response = api(alice).get("/api/v1/tenants/acme/jobs/?state=%00")
    assert response.status_code == 400 and "NUL" in _json(response)["message"]
    assert client.get("/t/acme/jobs/?q=plain").status_code == 200
