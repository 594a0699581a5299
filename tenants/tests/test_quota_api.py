"""The quota workflow through the REST API."""

import datetime as dt

import pytest
from django.utils import timezone

from tenants import services
from tenants.models import Membership, QuotaGrant, QuotaLoan, QuotaRequest

H800 = "gpu:NVIDIA-H800"
ENDPOINTS = ["/api/v1/tenants/acme/quota-requests/", "/api/v1/tenants/acme/loans/",
             "/api/v1/tenants/acme/quota/"]


@pytest.mark.parametrize("url", [*ENDPOINTS, "/api/v1/quota-requests/", "/api/v1/policy/",
                                 "/api/v1/notifications/"])
def test_anonymous_gets_401(api, tenant_a, url):
    assert api().get(url).status_code == 401


@pytest.mark.parametrize("url", ENDPOINTS)
def test_outsiders_get_404(api, charlie, tenant_a, tenant_b, url):
    assert api(charlie).get(url).status_code == 404


def test_request_and_decide_through_the_api(api, alice, bob, platform_admin, tenant_a):
    created = api(alice).post("/api/v1/tenants/acme/quota-requests/", {
        "pool": "prod", "amounts": {H800: "8", "cpu": "32"},
        "justification": "new project"}, format="json")
    assert created.status_code == 201, created.json()
    pk = created.json()["id"]
    assert api(alice).get("/api/v1/quota-requests/").status_code == 404  # admins only
    queue = api(platform_admin).get("/api/v1/quota-requests/").json()["results"]
    assert [r["id"] for r in queue] == [pk]
    detail = api(platform_admin).get(f"/api/v1/quota-requests/{pk}/").json()
    assert {f["resource"] for f in detail["facts"]} == {H800, "cpu"}
    approved = api(platform_admin).post(f"/api/v1/quota-requests/{pk}/approve/", {
        "amended": {H800: "4"}, "note": "half now"}, format="json")
    assert approved.status_code == 200 and approved.json()["status"] == "approved"
    again = api(platform_admin).post(f"/api/v1/quota-requests/{pk}/approve/", {},
                                     format="json")
    assert again.status_code == 409
    overview = api(bob).get("/api/v1/tenants/acme/quota/").json()
    prod = next(p for p in overview["pools"] if p["pool"] == "prod")
    assert {r["key"]: r["granted"] for r in prod["resources"]} == {H800: "4", "cpu": "32"}
    notes = api(alice).get("/api/v1/notifications/").json()["results"]
    assert "approved" in notes[0]["message"]
    assert api(alice).post("/api/v1/notifications/read-all/").status_code == 204


def test_api_errors_are_clear(api, alice, platform_admin, tenant_a):
    bad = api(alice).post("/api/v1/tenants/acme/quota-requests/", {
        "pool": "prod", "amounts": {"cpu": "-3"}, "justification": "x"}, format="json")
    assert bad.status_code == 400 and "zero or more" in bad.json()["message"]
    request = services.quota_request_submit(
        access=__import__("tenants.access", fromlist=["x"]).access_for(alice, tenant_a),
        actor=alice, pool=tenant_a.pools.get(kind="prod"), amounts={"cpu": 8},
        justification="x")
    unknown = api(platform_admin).post(f"/api/v1/quota-requests/{request.pk}/approve/", {
        "amended": {"memory": "8"}}, format="json")
    assert unknown.status_code == 400 and "Only requested resources" in unknown.json()["message"]
    no_reason = api(platform_admin).post(f"/api/v1/quota-requests/{request.pk}/reject/", {},
                                         format="json")
    assert no_reason.status_code == 400
    assert api(platform_admin).post("/api/v1/quota-requests/99999/approve/", {},
                                    format="json").status_code == 404
    cancelled = api(alice).post(f"/api/v1/tenants/acme/quota-requests/{request.pk}/cancel/")
    assert cancelled.json()["status"] == "cancelled"
    assert QuotaRequest.objects.get(pk=request.pk).status == "cancelled"


def test_loans_through_the_api_are_visible_to_both_tenants(api, alice, charlie, platform_admin,
                                                            tenant_a, tenant_b):
    Membership.objects.filter(user=charlie).update(role="admin")
    services.quota_set(actor=platform_admin, pool=tenant_a.pools.get(kind="prod"),
                       amounts={H800: 8}, reason="t")
    offer = api(alice).post("/api/v1/tenants/acme/loans/", {
        "pool": "prod", "borrower": "globex", "borrower_pool": "dev", "resource": H800,
        "amount": "2", "ends_at": (timezone.now() + dt.timedelta(days=3)).isoformat()},
        format="json")
    assert offer.status_code == 201, offer.json()
    loan_id = offer.json()["id"]
    assert [x["id"] for x in api(charlie).get("/api/v1/tenants/globex/loans/").json()[
        "results"]] == [loan_id]
    assert api(alice).post(f"/api/v1/tenants/acme/loans/{loan_id}/accept/").status_code == 403
    accepted = api(charlie).post(f"/api/v1/tenants/globex/loans/{loan_id}/accept/")
    assert accepted.json()["status"] == "active"
    assert api(alice).post(f"/api/v1/tenants/acme/loans/{loan_id}/end/").json()[
        "status"] == "ended"
    assert QuotaLoan.objects.get().status == "ended"
    assert QuotaGrant.objects.get(superseded_at__isnull=True).amount == 8


def test_policy_is_readable_by_all_and_changed_by_platform_admins(api, alice, platform_admin):
    assert api(alice).get("/api/v1/policy/").json()["eviction_watermark"] == "0.850"
    assert api(alice).patch("/api/v1/policy/", {"eviction_watermark": "0.9"},
                            format="json").status_code == 403
    changed = api(platform_admin).patch("/api/v1/policy/", {
        "overcommit_factors": {"gpu": 1.5}}, format="json")
    assert changed.status_code == 200 and changed.json()["overcommit_factors"] == {"gpu": 1.5}
    bad = api(platform_admin).patch("/api/v1/policy/", {"eviction_watermark": "0.1"},
                                    format="json")
    assert bad.status_code == 400


def test_the_catalog_lists_observed_resources_with_capacity(api, login, bob, platform_admin,
                                                            tenant_a):
    from django.utils import timezone

    from k8s_sync.models import ObservedNode, ObservedStorageClass

    now = timezone.now()
    ObservedNode.objects.create(name="n1", uid="1", resource_version="1", observed_at=now,
                                gpu_model="NVIDIA-A100-SXM4-80GB", gpu_count=8,
                                gpu_memory_mib=81920, ready=True, mig_strategy="mixed",
                                allocatable={"cpu": "96", "memory": "1Ti",
                                             "nvidia.com/gpu": "6", "nvidia.com/mig-1g.10gb": "7"})
    ObservedStorageClass.objects.create(name="fast-ssd", uid="2", resource_version="1",
                                        observed_at=now, provisioner="x")
    services.quota_set(actor=platform_admin, pool=tenant_a.pools.get(kind="prod"),
                       amounts={"cpu": 48}, reason="t")
    rows = {r["key"]: r for r in api(bob).get("/api/v1/catalog/").json()}
    assert rows["gpu:NVIDIA-A100-SXM4-80GB"]["capacity"] == "6"
    assert rows["mig:1g.10gb"]["capacity"] == "7"
    assert rows["cpu"]["capacity"] == "96" and rows["cpu"]["granted"] == "48"
    assert rows["memory"]["capacity"] == "1024" and rows["memory"]["unit"] == "GiB"
    assert {"storage:fast-ssd", "iops:fast-ssd"} <= set(rows)
    page = login(bob).get("/catalog/").content.decode()
    assert "NVIDIA-A100-SXM4-80GB" in page and "0.50" in page
