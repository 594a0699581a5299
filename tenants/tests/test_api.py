"""The tenants REST API: anonymous 401, outsider 404, token auth, clear errors."""

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tenants.api.base import TenantScopedViewSet
from tenants.models import Membership, Tenant

TENANT_ENDPOINTS = [
    "/api/v1/tenants/acme/",
    "/api/v1/tenants/acme/members/",
    "/api/v1/tenants/acme/pools/",
    "/api/v1/tenants/acme/pools/prod/",
]


@pytest.mark.parametrize("url", ["/api/v1/me/", "/api/v1/tenants/", *TENANT_ENDPOINTS])
def test_anonymous_gets_401(api, tenant_a, url):
    assert api().get(url).status_code == 401


@pytest.mark.parametrize("url", TENANT_ENDPOINTS)
def test_an_outsider_gets_404(api, charlie, tenant_a, tenant_b, url):
    assert api(charlie).get(url).status_code == 404


def test_an_outsider_gets_404_on_another_tenants_membership_even_by_id(api, charlie, tenant_a,
                                                                       tenant_b):
    alices = Membership.objects.get(tenant=tenant_a, user__username="alice")
    client = api(charlie)
    # Through tenant B's own URL, tenant A's membership id does not exist either.
    assert client.get(f"/api/v1/tenants/globex/members/{alices.pk}/").status_code == 404
    assert client.delete(f"/api/v1/tenants/globex/members/{alices.pk}/").status_code == 404
    assert client.delete(f"/api/v1/tenants/acme/members/{alices.pk}/").status_code == 404
    assert Membership.objects.filter(pk=alices.pk).exists()


def test_token_authentication_works(bob, tenant_a):
    token = Token.objects.create(user=bob)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    body = client.get("/api/v1/me/").json()
    assert body["username"] == "bob"
    assert body["tenants"] == [{"slug": "acme", "name": "Acme Vision", "status": "active",
                                "role": "member"}]


def test_list_shows_my_tenants_with_my_role_and_pools(api, bob, tenant_a, tenant_b):
    body = api(bob).get("/api/v1/tenants/").json()
    assert [t["slug"] for t in body] == ["acme"]
    assert body[0]["my_role"] == "member"
    assert {p["namespace"] for p in body[0]["pools"]} == {"ty-acme-prod", "ty-acme-dev"}


def test_platform_admin_creates_a_tenant_and_a_duplicate_is_409(api, platform_admin):
    client = api(platform_admin)
    payload = {"slug": "robotics", "name": "Robotics", "cost_center": "CC-7",
               "contact_email": "r@example.org"}
    created = client.post("/api/v1/tenants/", payload, format="json")
    assert created.status_code == 201 and created.json()["slug"] == "robotics"
    again = client.post("/api/v1/tenants/", payload, format="json")
    assert again.status_code == 409
    assert again.json()["field"] == "slug" and "already exists" in again.json()["message"]
    assert Tenant.objects.filter(slug="robotics").count() == 1


def test_an_invalid_slug_is_400_with_the_reason(api, platform_admin):
    response = api(platform_admin).post("/api/v1/tenants/", {
        "slug": "Bad_Slug", "name": "X", "cost_center": "X", "contact_email": "x@example.org",
    }, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "slug"
    assert not Tenant.objects.exists()


def test_members_cannot_create_tenants(api, alice):
    response = api(alice).post("/api/v1/tenants/", {
        "slug": "mine", "name": "X", "cost_center": "X", "contact_email": "x@example.org"},
        format="json")
    assert response.status_code == 403
    assert not Tenant.objects.exists()


def test_suspend_and_reactivate_through_the_api(api, platform_admin, bob, tenant_a):
    client = api(platform_admin)
    assert client.post("/api/v1/tenants/acme/suspend/", {}, format="json").status_code == 400
    response = client.post("/api/v1/tenants/acme/suspend/", {"reason": "audit"}, format="json")
    assert response.json()["status"] == "suspended"
    assert api(bob).post("/api/v1/tenants/acme/reactivate/").status_code == 403
    assert client.post("/api/v1/tenants/acme/reactivate/").json()["status"] == "active"


def test_tenant_admin_manages_members(api, alice, charlie, tenant_a, tenant_b):
    client = api(alice)
    added = client.post("/api/v1/tenants/acme/members/", {"user": "charlie"}, format="json")
    assert added.status_code == 201 and added.json()["role"] == "member"
    member_id = added.json()["id"]
    changed = client.patch(f"/api/v1/tenants/acme/members/{member_id}/", {"role": "admin"},
                           format="json")
    assert changed.json()["role"] == "admin"
    assert client.delete(f"/api/v1/tenants/acme/members/{member_id}/").status_code == 204
    assert [m["username"] for m in client.get("/api/v1/tenants/acme/members/").json()[
        "results"]] == ["alice", "bob"]


def test_member_management_errors_are_clear(api, alice, bob, tenant_a):
    client = api(alice)
    unknown = client.post("/api/v1/tenants/acme/members/", {"user": "ghost"}, format="json")
    assert unknown.status_code == 400 and "ghost" in unknown.json()["message"]
    bad_role = client.post("/api/v1/tenants/acme/members/", {"user": "bob", "role": "owner"},
                           format="json")
    assert bad_role.status_code == 400
    admin = Membership.objects.get(user=alice, tenant=tenant_a)
    last = client.delete(f"/api/v1/tenants/acme/members/{admin.pk}/")
    assert last.status_code == 409 and "last admin" in last.json()["message"]
    assert api(bob).post("/api/v1/tenants/acme/members/", {"user": "alice"},
                         format="json").status_code == 403


def test_pools_are_listed_with_namespaces(api, bob, tenant_a):
    body = api(bob).get("/api/v1/tenants/acme/pools/").json()
    assert [(p["kind"], p["namespace"]) for p in body] == [("prod", "ty-acme-prod"),
                                                           ("dev", "ty-acme-dev")]


def test_the_base_class_cannot_be_bypassed_by_a_subclass():
    for method in ("get_queryset", "get_object", "initial"):
        with pytest.raises(TypeError, match="scope_queryset"):
            type("Leaky", (TenantScopedViewSet,), {method: lambda self: None})


def test_scope_queryset_cannot_widen_to_other_tenants(rf, bob, tenant_a, tenant_b):
    from rest_framework import mixins

    from tenants.api.serializers import MembershipSerializer

    class Widening(mixins.ListModelMixin, TenantScopedViewSet):
        queryset = Membership.objects.all()
        serializer_class = MembershipSerializer
        pagination_class = None

        def scope_queryset(self, queryset):
            return Membership.objects.all()  # tries to return every tenant's rows

    request = rf.get("/")
    request.user = bob
    request._dont_enforce_csrf_checks = True
    from rest_framework.test import force_authenticate

    force_authenticate(request, user=bob)
    response = Widening.as_view({"get": "list"})(request, tenant_slug="acme")
    assert sorted(m["username"] for m in response.data) == ["alice", "bob"]


def test_openapi_schema_and_local_docs(api, bob):
    client = api(bob)
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert schema.status_code == 200
    body = schema.json()
    assert body["openapi"].startswith("3.")
    assert "/api/v1/tenants/{tenant_slug}/members/" in body["paths"]
    docs = client.get("/api/docs/").content.decode()
    assert "swagger-ui" in docs
    assert "http://" not in docs.replace("http://testserver", "") and "https://" not in docs
