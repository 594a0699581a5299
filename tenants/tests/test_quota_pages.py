"""Quota pages end to end: request, approve with an amendment, the cluster changes, the
member sees the new quota and a notification, the audit log shows each step."""

import pytest
from django.utils import timezone
from kubernetes import client as k8s

from core.models import Policy
from core.tests.html import form_values
from k8s_sync.models import ObservedNode
from tenants import services
from tenants.models import AuditEvent, Notification, QuotaRequest

H800 = "gpu:NVIDIA-H800"


@pytest.fixture
def h800(db):
    """The cluster reports an H800 node: its GPU model is in the catalog's select."""
    ObservedNode.objects.create(name="h800-0", gpu_product="NVIDIA-H800",
                                gpu_model="NVIDIA-H800", gpu_count=8, gpu_memory_mib=81920,
                                allocatable={"nvidia.com/gpu": "8"}, observed_at=timezone.now())


def test_request_approve_amended_cluster_changes_member_sees_it(
        client, alice, bob, platform_admin, tenant_a, cluster, h800,
        django_capture_on_commit_callbacks):
    tenant_a.members_may_request_quota = True
    tenant_a.save()
    client.force_login(bob)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/t/acme/quota/", {
            "pool": "prod", "resource_0": H800, "amount_0": "8",
            "justification": "fine-tune the 70B model"})
    assert response.status_code == 302
    request = QuotaRequest.objects.get()
    client.force_login(platform_admin)
    queue = client.get("/platform/quota-requests/").content.decode()
    assert f"/platform/quota-requests/{request.pk}/" in queue and "fine-tune" not in queue
    detail = client.get(f"/platform/quota-requests/{request.pk}/").content.decode()
    assert "fine-tune the 70B model" in detail and "30-day peak" in detail
    item = request.items.get()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/platform/quota-requests/{request.pk}/", {
            "decision": "approve", f"amount_{item.pk}": "6", "note": "6 for now"})
    assert response.status_code == 302
    hard = k8s.CoreV1Api(cluster.api_client).read_namespaced_resource_quota(
        "trainyard-production-quota", "ty-acme-prod").spec.hard
    assert hard["requests.nvidia.com/gpu"] == "6"   # production never borrows
    client.force_login(bob)
    page = client.get("/t/acme/quota/").content.decode()
    assert "gpu:NVIDIA-H800" in page and "6 for now" in page
    assert client.get("/?all=1").content.decode().count('class="count"') == 1  # the bell
    notes = client.get("/notifications/").content.decode()
    assert "was approved" in notes
    client.post("/notifications/")
    assert not Notification.objects.filter(user=bob, read_at__isnull=True).exists()
    client.force_login(platform_admin)
    audit = client.get("/platform/audit/?tenant=acme").content.decode()
    for action in ("quota_request.submit", "quota_request.approve", "quota.set"):
        assert action in audit


def test_the_request_form_shows_clear_errors_and_changes_nothing(login, alice, tenant_a, h800):
    client = login(alice)
    for amounts, message in [({"resource_0": H800, "amount_0": "-2"}, "zero or more"),
                             ({"resource_0": "gpus", "amount_0": "2"}, "Select a valid choice"),
                             ({"resource_0": "gpu:A100", "amount_0": "2"},
                              "Select a valid choice"),
                             ({"resource_0": "cpu", "amount_0": "lots"}, "not a number"),
                             ({"resource_0": "cpu", "amount_0": ""}, "Give an amount")]:
        response = client.post("/t/acme/quota/", {"pool": "prod", "justification": "x",
                                                   **amounts})
        assert response.status_code == 400 and message in response.content.decode()
    assert not QuotaRequest.objects.exists()


def test_members_see_quota_but_cannot_request_unless_allowed(login, bob, tenant_a):
    page = login(bob).get("/t/acme/quota/").content.decode()
    assert "Ask for quota" not in page
    response = login(bob).post("/t/acme/quota/", {"pool": "prod", "resource_0": "cpu",
                                                  "amount_0": "4", "justification": "x"})
    assert response.status_code == 400 and "Only a tenant admin" in response.content.decode()


@pytest.mark.parametrize("url", ["/t/acme/quota/", "/t/acme/quota/requests/1/cancel/",
                                 "/t/acme/loans/", "/t/acme/loans/1/accept/"])
def test_outsiders_get_404_on_quota_pages(login, charlie, tenant_a, tenant_b, url):
    client = login(charlie)
    response = client.post(url) if "cancel" in url or "loans" in url else client.get(url)
    assert response.status_code == 404


@pytest.mark.parametrize("url", ["/platform/quota-requests/", "/platform/policy/"])
def test_platform_quota_pages_are_for_platform_admins(login, client, alice, tenant_a, url):
    assert client.get(url).status_code == 302  # anonymous: to the login page
    assert login(alice).get(url).status_code == 404


def test_rejecting_from_the_page_needs_a_reason(login, alice, platform_admin, tenant_a):
    request = services.quota_request_submit(
        access=__import__("tenants.access", fromlist=["x"]).access_for(alice, tenant_a),
        actor=alice, pool=tenant_a.pools.get(kind="dev"), amounts={"cpu": 4},
        justification="x")
    client = login(platform_admin)
    response = client.post(f"/platform/quota-requests/{request.pk}/", {"decision": "reject"})
    assert response.status_code == 400 and "reason" in response.content.decode()
    client.post(f"/platform/quota-requests/{request.pk}/", {"decision": "reject",
                                                            "note": "not now"})
    assert QuotaRequest.objects.get(pk=request.pk).status == "rejected"


def test_the_policy_page_saves_and_validates(login, platform_admin):
    client = login(platform_admin)
    form = {"overcommit_factors.gpu": "1.2", "overcommit_factors.cpu": "2",
            "eviction_watermark": "90",
            "development_grace_seconds": "300", "batch_grace_seconds": "30",
            "default_quota": "dev cpu = 8", "dynamic_headroom": "20",
            "dynamic_idle_threshold": "50"}
    assert client.post("/platform/policy/", form).status_code == 302
    policy = Policy.current()
    assert policy.overcommit_factors == {"gpu": 1.2, "cpu": 2.0}
    assert str(policy.eviction_watermark) == "0.900"
    assert policy.default_quota == {"dev": {"cpu": "8"}}
    page = client.get("/platform/policy/").content.decode()
    assert form_values(page)["overcommit_factors.gpu"] == "1.2"  # one number per resource
    bad = client.post("/platform/policy/", {**form, "overcommit_factors.gpu": "0.5"})
    assert bad.status_code == 400 and "between 1 and 10" in bad.content.decode()
    assert 'id="id_overcommit_factors.gpu_error"' in bad.content.decode()  # at the field
    assert client.post("/platform/policy/", {**form, "overcommit_factors.gpu": "lots"}
                       ).status_code == 400
    assert Policy.current().overcommit_factors == {"gpu": 1.2, "cpu": 2.0}
    assert AuditEvent.objects.filter(action="policy.update").count() == 1


def test_the_tenant_settings_form(login, platform_admin, alice, tenant_a):
    login(platform_admin).post("/t/acme/quota/settings/", {
        "quota_mode": "overcommitted", "borrowing_cap": "1.5",
        "members_may_request_quota": "on"})
    tenant_a.refresh_from_db()
    assert (tenant_a.quota_mode, str(tenant_a.borrowing_cap),
            tenant_a.members_may_request_quota) == ("overcommitted", "1.50", True)
    page = login(alice).get("/t/acme/quota/").content.decode()
    assert "Guaranteed" in page and "Reclaim risk" in page
    assert login(alice).post("/t/acme/quota/settings/", {
        "quota_mode": "static", "borrowing_cap": "1"}).status_code == 404


def test_the_policy_page_saves_its_own_values_unchanged(login, platform_admin):
    """What the page shows is what it accepts back: 85.000% stored as 0.850 renders as 85
    and saves again with nothing changed."""

    client = login(platform_admin)
    before = Policy.current()
    before.refresh_from_db()
    values = form_values(client.get("/platform/policy/").content.decode(), "")
    assert values["eviction_watermark"] == "85"
    response = client.post("/platform/policy/", values)
    assert response.status_code == 302, response.content.decode()[:2000]
    after = Policy.current()
    assert (after.eviction_watermark, after.dynamic_headroom, after.dynamic_idle_threshold,
            after.development_grace_seconds) == (
        before.eviction_watermark, before.dynamic_headroom, before.dynamic_idle_threshold,
        before.development_grace_seconds)


def test_borrowing_caps_on_the_policy_and_tenant_pages_and_the_quota_page(
        login, api, platform_admin, alice, tenant_a):
    """Issue 27: no cap by default (development and batch borrow any idle capacity, and
    the quota page says so); a platform admin caps it for everyone on the policy page or
    the API, or per tenant (which wins); a bad value is refused at its field, changing
    nothing."""
    from decimal import Decimal

    services.quota_set(actor=platform_admin, pool=tenant_a.pools.get(kind="dev"),
                       reason="t", amounts={"gpu:NVIDIA-H800": 4})
    page = login(alice).get("/t/acme/quota/").content.decode()
    assert "development and batch jobs may borrow any idle capacity" in page
    assert "any idle capacity</td>" in page.replace("\n", "")
    assert api(alice).get("/api/v1/tenants/acme/quota/").json()["borrowing_factor"] is None
    client = login(platform_admin)
    form = {"eviction_watermark": "85", "development_grace_seconds": "300",
            "batch_grace_seconds": "30", "dynamic_headroom": "20",
            "dynamic_idle_threshold": "50"}
    bad = client.post("/platform/policy/", {**form, "borrowing_cap": "0.5"})
    assert bad.status_code == 400 and 'id="id_borrowing_cap_error"' in bad.content.decode()
    assert Policy.current().borrowing_cap is None
    assert client.post("/platform/policy/", {**form, "borrowing_cap": "2"}).status_code == 302
    assert Policy.current().borrowing_cap == Decimal(2)
    overview = api(alice).get("/api/v1/tenants/acme/quota/").json()
    assert overview["borrowing_factor"] == "2" and overview["borrowing_cap"] is None
    dev = next(p for p in overview["pools"] if p["pool"] == "dev")
    assert {r["key"]: r["ceiling"] for r in dev["resources"]}["gpu:NVIDIA-H800"] == "8"
    page = login(alice).get("/t/acme/quota/").content.decode()
    assert "may borrow idle capacity up to 2 × the quota" in page
    # the tenant's own cap wins; blank goes back to the policy's
    client = login(platform_admin)
    client.post("/t/acme/quota/settings/", {"quota_mode": "static", "borrowing_cap": "1"})
    tenant_a.refresh_from_db()
    assert tenant_a.borrowing_cap == 1 and tenant_a.borrowing_factor() == 1
    client.post("/t/acme/quota/settings/", {"quota_mode": "static", "borrowing_cap": ""})
    tenant_a.refresh_from_db()
    assert tenant_a.borrowing_cap is None and tenant_a.borrowing_factor() == 2
    # the API: null lifts the platform's cap; out of range is a 400 naming the field
    assert api(platform_admin).patch("/api/v1/policy/", {"borrowing_cap": "0"},
                                     format="json").status_code == 400
    lifted = api(platform_admin).patch("/api/v1/policy/", {"borrowing_cap": None},
                                       format="json")
    assert lifted.status_code == 200 and lifted.json()["borrowing_cap"] is None


def test_a_platform_admin_sets_a_tenants_borrowing_cap_through_the_api(api, platform_admin,
                                                                       alice, tenant_a):
    url = "/api/v1/tenants/acme/"
    assert api(alice).patch(url, {"borrowing_cap": "2"}, format="json").status_code in (403,
                                                                                        404)
    bad = api(platform_admin).patch(url, {"borrowing_cap": "0.5"}, format="json")
    assert bad.status_code == 400 and "borrowing_cap" in bad.content.decode()
    tenant_a.refresh_from_db()
    assert tenant_a.borrowing_cap is None
    done = api(platform_admin).patch(url, {"borrowing_cap": "2", "quota_mode": "dynamic"},
                                     format="json")
    assert done.status_code == 200, done.content
    assert (done.json()["borrowing_cap"], done.json()["quota_mode"]) == ("2.00", "dynamic")
    lifted = api(platform_admin).patch(url, {"borrowing_cap": None}, format="json")
    assert lifted.json()["borrowing_cap"] is None
    assert AuditEvent.objects.filter(action="tenant.update").count() == 2


def test_the_request_form_names_resources_with_units_and_shows_the_current_amount(
        client, login, alice, platform_admin, tenant_a, h800):
    """Options read "GPUs · NVIDIA-H800 (cards)" (the value stays the key); a row shows
    the chosen pool's current amount and the unit beside the new amount; the script's
    data has every key's amount per pool; in English and Chinese."""
    import json
    from html import unescape

    from django.conf import settings

    services.quota_set(actor=platform_admin, pool=tenant_a.pools.get(kind="prod"),
                       amounts={"cpu": 128, H800: 4}, reason="start")
    page = login(alice).get("/t/acme/quota/").content.decode()
    assert f'<option value="{H800}">GPUs · NVIDIA-H800 (cards)</option>' in page
    assert '<option value="cpu">CPU (cores)</option>' in page
    assert f"({H800})</option>" not in page   # no raw key in what people read
    data = json.loads(unescape(page.split('id="quota-request-data"')[1]
                               .split(">", 1)[1].split("</script>")[0]))
    assert data["current"]["prod"]["cpu"] == "128" and data["current"]["dev"]["cpu"] == "0"
    assert data["current"]["prod"][H800] == "4" and data["units"][H800] == "cards"
    # a refused request keeps the rows, each with its current amount and unit
    response = client.post("/t/acme/quota/", {"pool": "prod", "justification": "",
                                               "resource_0": "cpu", "amount_0": "192",
                                               "resource_1": H800, "amount_1": "6"})
    assert response.status_code == 400
    rows = response.content.decode().split("data-request-row")[1:]
    assert '<td data-field="current">128 cores</td>' in rows[0]
    assert '<td data-field="current">4 cards</td>' in rows[1]
    assert '<td data-field="current">—</td>' in rows[2]   # no resource chosen
    assert not QuotaRequest.objects.exists()
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    chinese = client.get("/t/acme/quota/").content.decode()
    assert "当前数量" in chinese and "新数量" in chinese
    assert '<option value="cpu">CPU (核)</option>' in chinese
