"""Pages, API and admin: who sees what, finance closes a month and downloads it, issued
invoices never change (UI, API, admin, model), credit notes correct them."""

from __future__ import annotations

import datetime as dt
import io
import re
import shutil
import subprocess
import zipfile
from decimal import Decimal
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone
from pypdf import PdfReader

from billing import budgets, services
from billing.choices import BUDGET_MAX
from billing.models import Budget, Invoice, InvoiceLine, IssuedInvoiceError, MonthClose
from billing.tests.conftest import A100, at, make_job, run
from core.exceptions import ApplicationError
from core.tests.html import form_values
from k8s_sync.models import ObservedNode, ObservedStorageClass
from tenants.access import access_for
from tenants.models import Notification

OCT = dt.date(2026, 10, 1)


@pytest.fixture
def october(tenant_a, tenant_b, rate_card):
    """Usage in October 2026 (an ended month): acme 8 GPUs x 3 h, globex 1 GPU x 2 h."""
    make_job(tenant_a, run(at("2026-10-05", "10:00"), at("2026-10-05", "13:00")), workers=2,
             gpus=4, name="resnet-big")
    make_job(tenant_b, run(at("2026-10-06", "10:00"), at("2026-10-06", "12:00")), name="bert")
    services.ledger_ingest_gpu(now=at("2026-11-01", "00:30"))
    return OCT


@pytest.fixture
def issued(october, finance_user, tenant_a):
    services.month_close(actor=finance_user, period=OCT)
    return Invoice.objects.get(tenant=tenant_a, period=OCT)


def _pages(invoice):
    slug = invoice.tenant.slug
    return [reverse("billing:tenant_invoices", kwargs={"slug": slug}),
            reverse("billing:invoice", kwargs={"slug": slug, "pk": invoice.pk}),
            reverse("billing:download", kwargs={"slug": slug, "pk": invoice.pk, "fmt": "csv"}),
            reverse("billing:download", kwargs={"slug": slug, "pk": invoice.pk, "fmt": "pdf"})]


STAFF_PAGES = [reverse("billing:month"), reverse("billing:rates"),
               reverse("billing:month_download", kwargs={"month": "2026-10", "fmt": "zip"})]


def test_anonymous_is_sent_to_login_and_gets_401(client, api, issued):
    for url in _pages(issued) + STAFF_PAGES:
        response = client.get(url)
        assert response.status_code == 302 and "/login/" in response["Location"], url
    for url in [f"/api/v1/tenants/acme/invoices/{issued.pk}/", "/api/v1/billing/invoices/",
                "/api/v1/billing/months/2026-10/", "/api/v1/billing/rate-cards/",
                "/api/v1/tenants/acme/invoices/budget/"]:
        assert api().get(url).status_code == 401, url


def test_outsiders_get_404_everywhere(login, api, issued, charlie, bob):
    client = login(charlie)
    for url in _pages(issued) + STAFF_PAGES:
        assert client.get(url).status_code == 404, url
    assert api(charlie).get(f"/api/v1/tenants/acme/invoices/{issued.pk}/").status_code == 404
    assert api(charlie).get(f"/api/v1/tenants/acme/invoices/{issued.pk}/pdf/").status_code == 404
    # charlie's own tenant cannot reach acme's invoice by id either
    assert api(charlie).get(f"/api/v1/tenants/globex/invoices/{issued.pk}/").status_code == 404
    for url in STAFF_PAGES:  # members see their tenant, not finance's pages
        assert login(bob).get(url).status_code == 404
    assert api(bob).get("/api/v1/billing/invoices/").status_code == 404
    assert api(bob).post("/api/v1/billing/months/2026-10/close/").status_code == 404


def test_members_finance_and_platform_admins_see_the_invoice(login, api, issued, bob,
                                                              finance_user, platform_admin):
    for user in (bob, finance_user, platform_admin):
        for url in _pages(issued):
            assert login(user).get(url).status_code == 200, (user, url)
        body = api(user).get("/api/v1/tenants/acme/invoices/").json()
        assert [i["number"] for i in body["results"]] == [issued.number]
    for user in (finance_user, platform_admin):
        assert login(user).get(STAFF_PAGES[0] + "?month=2026-10").status_code == 200
        assert api(user).get("/api/v1/billing/invoices/?month=2026-10").json()["count"] == 2


def test_finance_closes_the_month_and_downloads_csv_pdf_and_zip(login, october, finance_user,
                                                                tenant_a):
    client = login(finance_user)
    page = client.get(reverse("billing:month") + "?month=2026-10")
    assert b"Close 2026-10" in page.content
    response = client.post(reverse("billing:close"), {"month": "2026-10"}, follow=True)
    assert b"2 invoices issued" in response.content
    assert MonthClose.objects.filter(period=OCT).exists()
    invoice = Invoice.objects.get(tenant=tenant_a, period=OCT)
    # 24 GPU-hours x 1.65 = 39.60
    assert invoice.is_issued and invoice.total == Decimal("39.60")
    page = client.get(reverse("billing:month") + "?month=2026-10")
    assert invoice.number.encode() in page.content and b"CC-acme" in page.content
    assert b"42.90" in page.content  # 39.60 + globex 2 x 1.65

    csv = client.get(reverse("billing:download", kwargs={"slug": "acme", "pk": invoice.pk,
                                                          "fmt": "csv"}))
    assert csv["Content-Type"].startswith("text/csv")
    text = csv.content.decode()
    assert f"{invoice.number},invoice,issued,Acme Vision,CC-acme,2026-10,USD" in text
    assert ",24,GPU-hours,1.65,39.60" in text and text.strip().endswith("39.60")

    pdf = client.get(reverse("billing:download", kwargs={"slug": "acme", "pk": invoice.pk,
                                                          "fmt": "pdf"}))
    assert pdf["Content-Type"] == "application/pdf" and pdf.content.startswith(b"%PDF-")
    reader = PdfReader(io.BytesIO(pdf.content))
    content = "".join(page.extract_text() for page in reader.pages)
    for expected in (invoice.number, "CC-acme", "NVIDIA-A100-SXM4-80GB", "24", "1.65",
                     "39.60", "Total", "USD"):
        assert expected in content, expected
    artifacts = Path(settings.BASE_DIR) / "var" / "test-artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    (artifacts / "invoice.pdf").write_bytes(pdf.content)
    if shutil.which("pdftoppm"):
        subprocess.run(["pdftoppm", "-png", "-r", "60", "-singlefile",
                        str(artifacts / "invoice.pdf"), str(artifacts / "invoice")], check=True)
        assert (artifacts / "invoice.png").stat().st_size > 1000

    archive = client.get(reverse("billing:month_download", kwargs={"month": "2026-10",
                                                                   "fmt": "zip"}))
    names = zipfile.ZipFile(io.BytesIO(archive.content)).namelist()
    assert "invoices-2026-10.csv" in names and f"pdf/{invoice.number}.pdf" in names
    assert len([n for n in names if n.startswith("pdf/")]) == 2


def test_closing_needs_finance_an_ended_month_and_happens_once(api, october, finance_user,
                                                               platform_admin):
    assert api(platform_admin).post("/api/v1/billing/months/2026-10/close/").status_code == 403
    assert api(finance_user).post("/api/v1/billing/months/2026-11/close/").status_code == 400
    response = api(finance_user).post("/api/v1/billing/months/2026-10/close/")
    assert response.status_code == 201 and response.json()["invoices"] == 2
    assert api(finance_user).post("/api/v1/billing/months/2026-10/close/").status_code == 409
    month = api(finance_user).get("/api/v1/billing/months/2026-10/").json()
    assert month["closed"] and month["total"] == "42.90"


def test_issued_invoice_cannot_change_through_the_api(api, issued, platform_admin,
                                                      finance_user):
    url = f"/api/v1/tenants/acme/invoices/{issued.pk}/"
    for user in (platform_admin, finance_user):
        assert api(user).patch(url, {"total": "1.00"}, format="json").status_code == 405
        assert api(user).put(url, {"total": "1.00"}, format="json").status_code == 405
        assert api(user).delete(url).status_code == 405
        assert api(user).delete(f"/api/v1/billing/invoices/{issued.pk}/").status_code == 405
    issued.refresh_from_db()
    assert issued.total == Decimal("39.60")


def test_issued_invoice_cannot_change_through_the_ui(login, issued, finance_user, tenant_a):
    client = login(finance_user)
    response = client.post(reverse("billing:adjustment"), {
        "month": "2026-10", "tenant": "acme", "description": "late fee", "amount": "5"},
        follow=True)
    assert b"is closed" in response.content
    page = client.get(reverse("billing:invoice", kwargs={"slug": "acme", "pk": issued.pk}))
    assert b"Issued invoices never change" in page.content
    issued.refresh_from_db()
    assert issued.total == Decimal("39.60") and issued.lines.count() == 1


def test_issued_invoice_cannot_change_through_the_admin(client, django_user_model, issued):
    root = django_user_model.objects.create_superuser("root", "root@example.org", "x")
    client.force_login(root)
    change = reverse("admin:billing_invoice_change", args=[issued.pk])
    page = client.get(change)
    assert page.status_code == 200 and b'name="total"' not in page.content  # read-only
    assert client.post(change, {"total": "1.00", "cost_center": "X"}).status_code == 403
    delete = reverse("admin:billing_invoice_delete", args=[issued.pk])
    assert client.post(delete, {"post": "yes"}).status_code == 403
    assert client.post(reverse("admin:billing_invoice_changelist"), {
        "action": "delete_selected", "_selected_action": [issued.pk]}).status_code in (200, 302)
    issued.refresh_from_db()
    assert issued.total == Decimal("39.60") and Invoice.objects.filter(pk=issued.pk).exists()


def test_the_model_refuses_every_write_to_an_issued_invoice(issued):
    issued.total = Decimal("1")
    with pytest.raises(IssuedInvoiceError):
        issued.save()
    with pytest.raises(IssuedInvoiceError):
        Invoice.objects.filter(pk=issued.pk).update(total=1)
    with pytest.raises(IssuedInvoiceError):
        Invoice.objects.filter(pk=issued.pk).delete()
    line = InvoiceLine.objects.get(invoice=issued)
    line.amount = Decimal(0)
    with pytest.raises(IssuedInvoiceError):
        line.save()
    with pytest.raises(IssuedInvoiceError):
        line.delete()
    with pytest.raises(IssuedInvoiceError):
        InvoiceLine.objects.filter(invoice=issued).update(amount=0)


def test_a_credit_note_corrects_an_issued_invoice(login, api, issued, finance_user, bob):
    client = login(finance_user)
    response = client.post(reverse("billing:credit_note", kwargs={"slug": "acme",
                                                                  "pk": issued.pk}),
                           {"amount": "9.60", "reason": "GPU node fault on Oct 5"}, follow=True)
    note = Invoice.objects.get(credits=issued)
    assert note.kind == "credit_note" and note.total == Decimal("-9.60") and note.is_issued
    assert note.number.startswith("TYC-2026-") and note.cost_center == "CC-acme"
    assert note.number.encode() in response.content
    # bob (member) sees it; he cannot issue one
    assert login(bob).get(reverse("billing:invoice", kwargs={"slug": "acme",
                                                             "pk": note.pk})).status_code == 200
    assert api(bob).post(f"/api/v1/billing/invoices/{issued.pk}/credit-notes/",
                         {"amount": "1", "reason": "x"}).status_code == 404
    # at most what is left: 39.60 - 9.60 = 30.00
    over = api(finance_user).post(f"/api/v1/billing/invoices/{issued.pk}/credit-notes/",
                                  {"amount": "30.01", "reason": "too much"}, format="json")
    assert over.status_code == 400 and over.json()["field"] == "amount"
    ok = api(finance_user).post(f"/api/v1/billing/invoices/{issued.pk}/credit-notes/",
                                {"amount": "30.00", "reason": "rest"}, format="json")
    assert ok.status_code == 201 and ok.json()["credits"] == issued.number
    issued.refresh_from_db()
    assert issued.total == Decimal("39.60")


def test_drill_down_shows_the_jobs_behind_a_line(login, api, issued, bob):
    line = issued.lines.get()
    page = login(bob).get(reverse("billing:invoice", kwargs={"slug": "acme", "pk": issued.pk})
                          + f"?line={line.pk}")
    assert b"resnet-big" in page.content and b"bert" not in page.content
    details = api(bob).get(f"/api/v1/tenants/acme/invoices/{issued.pk}/lines/{line.pk}/details/")
    assert details.json() == [{"label": "resnet-big", "job_id": line.invoice.tenant.jobs.get().pk,
                               "quantity": "24", "amount": "39.60"}]


def test_tenant_page_shows_the_running_draft(login, tenant_a, rate_card, bob):
    from django.utils import timezone

    now = timezone.now()
    make_job(tenant_a, run(now - dt.timedelta(hours=2)), name="running-now")
    page = login(bob).get(reverse("billing:tenant_invoices", kwargs={"slug": "acme"}))
    assert page.status_code == 200
    draft = Invoice.objects.get(tenant=tenant_a, status="draft")
    assert draft.total >= Decimal("3.30") and b"Draft for" in page.content


def test_budget_set_by_tenant_admin_alerts_once_per_threshold(login, api, tenant_a, rate_card,
                                                              alice, bob):
    from django.utils import timezone

    assert api(bob).put("/api/v1/tenants/acme/invoices/budget/", {"monthly_amount": "5"},
                        format="json").status_code == 403
    login(alice).post(reverse("billing:budget", kwargs={"slug": "acme"}), {"amount": "10"})
    assert Budget.objects.get(tenant=tenant_a).monthly_amount == Decimal("10")
    now = timezone.now()
    # 1 GPU for 5 h 10 min this month = 8.53 (85% of 10)
    make_job(tenant_a, run(now - dt.timedelta(hours=5, minutes=10), now))
    services.drafts_refresh(now=now)
    assert budgets.budget_alerts_check(now=now) == 1
    assert budgets.budget_alerts_check(now=now) == 0
    messages = list(Notification.objects.filter(user=alice).values_list("message", flat=True))
    assert len(messages) == 1 and "80%" in messages[0] and "forecast" in messages[0]
    body = api(alice).get("/api/v1/tenants/acme/invoices/budget/").json()
    assert body["monthly_amount"] == "10.00" and body["percent"] == 85


def test_rate_card_page_and_api(login, api, platform_admin, finance_user):
    now = timezone.now()
    ObservedNode.objects.create(name="h100-0", gpu_product="H100", gpu_model="H100",
                                gpu_count=8, gpu_memory_mib=81920, observed_at=now)
    ObservedStorageClass.objects.create(name="fast-ssd", observed_at=now)
    client = login(platform_admin)
    values = form_values(client.get(reverse("billing:rates")).content.decode())
    assert values["gpus-0-gpu_model"] == "H100" and values["gpus-0-purchase_price"] == ""
    response = client.post(reverse("billing:rates"), {
        **values, "effective_from": "2026-12-01", "mig_pricing": "memory",
        "egress_gib": "0.05", "gpus-0-memory_gib": "80", "gpus-0-purchase_price": "26280",
        "gpus-0-depreciation_months": "36", "gpus-0-power_watts": "500", "gpus-0-pue": "1.5",
        "gpus-0-electricity_kwh": "0.20", "gpus-0-operations_month": "365",
        "storage-0-storage_class": "fast-ssd", "storage-0-gib_month": "0.12"})
    assert response.status_code == 302
    page = client.get(reverse("billing:rates"))
    # the price and its breakdown, with the currency
    assert b'1.65&nbsp;<span translate="no">USD</span>' in page.content
    assert b">0.15&nbsp;" in page.content
    assert login(finance_user).get(reverse("billing:rates")).status_code == 200
    assert login(finance_user).post(reverse("billing:rates"), {}).status_code == 404
    payload = {"effective_from": "2027-01-01", "gpus": [
        {"gpu_model": "H100", "memory_gib": 80, "purchase_price": "26280",
         "depreciation_months": 36, "power_watts": "500", "pue": "1.5",
         "electricity_kwh": "0.2", "operations_month": "365"}]}
    assert api(finance_user).post("/api/v1/billing/rate-cards/", payload,
                                  format="json").status_code == 403
    created = api(platform_admin).post("/api/v1/billing/rate-cards/", payload, format="json")
    assert created.status_code == 201
    assert created.json()["gpu_prices"][0]["price_per_hour"] == "1.6500"
    again = api(platform_admin).post("/api/v1/billing/rate-cards/", payload, format="json")
    assert again.status_code == 409


def test_no_rate_card_in_a_closed_month(issued, platform_admin):
    from core.exceptions import Conflict

    with pytest.raises(Conflict):
        services.rate_card_create(actor=platform_admin, effective_from=dt.date(2026, 10, 15),
                                  gpus=[])


def test_query_budgets(login, api, issued, finance_user, bob, django_assert_max_num_queries):
    client = login(finance_user)
    with django_assert_max_num_queries(20):
        assert client.get(reverse("billing:month") + "?month=2026-10").status_code == 200
    with django_assert_max_num_queries(12):
        assert api(bob).get("/api/v1/tenants/acme/invoices/").status_code == 200


def _measured(job, mean):
    from tenants.models import JobUtilisation

    JobUtilisation.objects.create(namespace=job.pool.namespace, job=str(job.pk),
                                  gpu_samples=100, util_sum=100 * mean, last_util=mean,
                                  first_sampled_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
                                  last_sampled_at=dt.datetime(2026, 12, 1, tzinfo=dt.UTC))


def test_utilisation_in_finance_view_and_on_the_tenant_page(login, issued, finance_user, bob,
                                                            tenant_a):
    from jobs.models import TrainingJob

    # acme ran 8 cards x 3 h on Oct 5 (24 GPU-hours billed); the sampler measured its job
    # at 50% utilisation: 12 busy GPU-hours of the 24, an idle rate of 50%
    for job in TrainingJob.objects.filter(tenant=tenant_a):
        _measured(job, 50)
    page = login(finance_user).get(reverse("billing:month") + "?month=2026-10")
    row = re.search(r'<tr data-tenant="acme">.*?</tr>', page.content.decode(), re.S).group(0)
    assert re.search(r'Idle rate</span> <span data-field="idle_rate">50%</span>', row)
    # the figures' hours with the digits the API sends (2 decimals: "12.00")
    assert re.search(r'data-field="busy">12.00</span>', row)
    page = login(bob).get(reverse("billing:tenant_invoices", kwargs={"slug": "acme"}))
    assert b"GPU utilisation" in page.content


def test_utilisation_api(api, tenant_a, bob, charlie):
    from django.utils import timezone

    now = timezone.now()   # the frozen clock: 12:00
    job = make_job(tenant_a, run(now - dt.timedelta(hours=4), now), gpus=4)  # 16 GPU-hours
    services.ledger_ingest_gpu(now=now)
    _measured(job, 75)
    body = api(bob).get("/api/v1/tenants/acme/invoices/idle/").json()
    assert body["month"] == {"kind": "", "quota_held_gpu_hours": "0.00",
                             "allocated_gpu_hours": "16.00", "within_quota_gpu_hours": "16.00",
                             "borrowed_gpu_hours": "0.00", "busy_gpu_hours": "12.00",
                             "measured_gpu_hours": "16.00", "quota_use": None,
                             "idle_rate": "0.2500"}
    assert body["quarter"]["idle_rate"] == "0.2500"
    assert body["by_kind"][f"gpu:{A100}"]["idle_rate"] == "0.2500"
    assert body["by_kind_month"][f"gpu:{A100}"]["busy_gpu_hours"] == "12.00"
    assert api(charlie).get("/api/v1/tenants/acme/invoices/idle/").status_code == 404
    assert api().get("/api/v1/tenants/acme/invoices/idle/").status_code == 401


def test_every_post_needs_login_and_the_right_tenant(client, login, issued, charlie):
    posts = [reverse("billing:credit_note", kwargs={"slug": "acme", "pk": issued.pk}),
             reverse("billing:budget", kwargs={"slug": "acme"}),
             reverse("billing:close"), reverse("billing:adjustment"), reverse("billing:rates")]
    for url in posts:
        response = client.post(url, {"amount": "1", "reason": "x", "month": "2026-10"})
        assert response.status_code == 302 and "/login/" in response["Location"], url
    outsider = login(charlie)
    for url in posts:
        assert outsider.post(url, {"amount": "1", "reason": "x", "month": "2026-10"}
                             ).status_code == 404, url
    assert not Invoice.objects.filter(kind="credit_note").exists()
    assert not Budget.objects.exists()


def test_last_months_draft_is_listed_until_finance_closes_it(login, october, tenant_a, bob):
    services.invoice_draft_refresh(tenant=tenant_a, period=OCT, now=at("2026-11-01", "01:00"))
    draft = Invoice.objects.get(tenant=tenant_a, period=OCT)
    page = login(bob).get(reverse("billing:tenant_invoices", kwargs={"slug": "acme"}))
    assert reverse("billing:invoice", kwargs={"slug": "acme", "pk": draft.pk}).encode() \
        in page.content
    detail = login(bob).get(reverse("billing:invoice", kwargs={"slug": "acme", "pk": draft.pk}))
    assert b"A draft" in detail.content and b"39.60" in detail.content


@pytest.mark.parametrize("amount", ["1e12", "1000000000000", "1e40", "-5"])
def test_a_budget_out_of_range_is_refused_with_its_reason(login, api, alice, tenant_a, amount):
    """Form and API refuse it with the reason; nothing is stored and the invoices page,
    where the budget lives, still opens."""
    client = login(alice)
    response = client.post(reverse("billing:budget", kwargs={"slug": "acme"}),
                           {"amount": amount})
    assert response.status_code == 400
    page = response.content.decode()
    assert "Budget saved" not in page
    error = page[page.index('id="budget-error"'):]
    error = error[:error.index("</p>")]
    assert ("digits" in error or "greater than or equal to 0" in error
            or "cannot be negative" in error), error
    assert f'value="{amount}"' in page  # what was typed stays in the field
    answer = api(alice).put("/api/v1/tenants/acme/invoices/budget/",
                            {"monthly_amount": amount}, format="json")
    assert answer.status_code == 400 and "monthly_amount" in answer.json()
    assert not Budget.objects.exists()
    assert client.get(reverse("billing:tenant_invoices", kwargs={"slug": "acme"})
                      ).status_code == 200


def test_the_budget_service_bounds_the_amount(alice, tenant_a):
    access = access_for(alice, tenant_a)
    with pytest.raises(ApplicationError) as err:
        budgets.budget_set(access=access, actor=alice, amount=Decimal("1000000000000"))
    assert err.value.field == "amount"
    assert budgets.budget_set(access=access, actor=alice, amount=BUDGET_MAX).budget \
        == BUDGET_MAX


def test_the_month_lists_every_tenant_with_its_billed_gpu_hours(login, api, issued,
                                                                 finance_user):
    """Every tenant with a pool is a row, invoice or not; a deleted one only with an
    invoice or usage that month. Its GPU-hours billed are its invoice's GPU lines."""
    from tenants.models import Pool, Tenant

    quiet = Tenant.objects.create(slug="quiet", name="Quiet Labs", cost_center="CC-q",
                                  contact_email="q@example.org")
    Pool.objects.create(tenant=quiet, kind="prod")
    gone = Tenant.objects.create(slug="gone", name="Gone Inc", cost_center="CC-g",
                                 contact_email="g@example.org", status="deleted")
    Pool.objects.create(tenant=gone, kind="prod")
    page = login(finance_user).get(reverse("billing:month") + "?month=2026-10").content.decode()
    rows = dict(re.findall(r'<tr data-tenant="([^"]+)">.*?data-field="billed_hours">([^<]+)<',
                           page, re.S))
    assert rows == {"acme": "24", "globex": "2", "quiet": "0"}
    body = api(finance_user).get("/api/v1/billing/months/2026-10/").json()
    # the same digits as the page: one rule for a billed quantity (core.numbers)
    assert {t["tenant"]: t["billed_gpu_hours"] for t in body["tenants"]} == {
        "acme": "24", "globex": "2", "quiet": "0"}
