"""Tenant pages: every page gets the anonymous and the outsider check."""

import pytest
from django.test import Client
from django.urls import reverse

from conftest import PASSWORD
from tenants.models import AuditEvent, Membership, Tenant

TENANT_PAGES = ["tenants:detail", "tenants:members", "tenants:edit"]
PLATFORM_PAGES = ["tenants:platform_tenants", "tenants:people", "tenants:audit"]


@pytest.mark.parametrize("name", TENANT_PAGES)
def test_anonymous_is_sent_to_login(client, tenant_a, name):
    response = client.get(reverse(name, kwargs={"slug": "acme"}))
    assert response.status_code == 302 and response.url.startswith(reverse("login"))


@pytest.mark.parametrize("name", ["home", "account", *PLATFORM_PAGES])
def test_anonymous_is_sent_to_login_everywhere(client, db, name):
    response = client.get(reverse(name))
    assert response.status_code == 302 and response.url.startswith(reverse("login"))


@pytest.mark.parametrize("name", TENANT_PAGES)
def test_an_outsider_gets_404_on_another_tenants_pages(login, charlie, tenant_a, tenant_b, name):
    response = login(charlie).get(reverse(name, kwargs={"slug": "acme"}))
    assert response.status_code == 404


@pytest.mark.parametrize("name,kwargs", [
    ("tenants:member_change", {"slug": "acme", "pk": 1}),
    ("tenants:status", {"slug": "acme"}),
])
def test_an_outsider_cannot_post_to_another_tenant(login, charlie, tenant_a, tenant_b, name,
                                                   kwargs):
    member = Membership.objects.filter(tenant=tenant_a).first()
    if "pk" in kwargs:
        kwargs["pk"] = member.pk
    response = login(charlie).post(reverse(name, kwargs=kwargs), {"action": "remove"})
    assert response.status_code == 404
    assert Membership.objects.filter(pk=member.pk).exists()


@pytest.mark.parametrize("name", PLATFORM_PAGES)
def test_platform_pages_are_invisible_to_tenant_users(login, alice, tenant_a, name):
    assert login(alice).get(reverse(name)).status_code == 404


def test_home_lists_only_my_tenants(login, bob, tenant_a, tenant_b):
    body = login(bob).get(reverse("home") + "?all=1").content.decode()
    assert "Acme Vision" in body and "Globex NLP" not in body
    assert "ty-acme-prod" in body


def test_a_member_of_one_tenant_lands_on_its_page_and_can_still_list(login, bob, tenant_a,
                                                                        tenant_b):
    """A list of one card is a click for nothing: bob (acme only) lands on acme's page,
    from the home page and from signing in; the switcher still links the list."""
    client = login(bob)
    response = client.get(reverse("home"))
    assert response.status_code == 302 and response.url == "/t/acme/"
    page = client.get(response.url).content.decode()
    assert 'href="/?all=1"' in page   # the list stays one click away
    listed = client.get("/?all=1")
    assert listed.status_code == 200 and "tenant-card" in listed.content.decode()
    fresh = Client()
    signed_in = fresh.post(reverse("login"), {"username": "bob", "password": PASSWORD},
                           follow=True)
    assert signed_in.redirect_chain[-1][0] == "/t/acme/"
    # a member of two tenants gets the list
    Membership.objects.create(user=bob, tenant=tenant_b, role="member")
    body = login(bob).get(reverse("home"))
    assert body.status_code == 200 and body.content.decode().count("tenant-card") == 2


def test_finance_lands_on_billing_and_nobody_sees_deleted_tenants_at_home(
        login, finance_user, platform_admin, bob, tenant_a, tenant_b):
    response = login(finance_user).get(reverse("home"))
    assert response.status_code == 302 and response.url == reverse("billing:month")
    Tenant.objects.filter(pk=tenant_b.pk).update(status="deleted")
    body = login(platform_admin).get(reverse("home") + "?all=1").content.decode()
    assert "Acme Vision" in body and "Globex NLP" not in body
    me = login(platform_admin).get("/api/v1/me/").json()
    assert [t["slug"] for t in me["tenants"]] == ["acme"]


def test_platform_admin_creates_a_tenant_adds_a_member_who_then_sees_it(
        client, platform_admin, charlie, tenant_b):
    from conftest import PASSWORD

    response = client.post(reverse("login"), {"username": "pat", "password": PASSWORD})
    assert response.status_code == 302
    response = client.post(reverse("tenants:platform_tenants"), {
        "slug": "robotics", "name": "Robotics", "cost_center": "CC-77",
        "contact_email": "r@example.org", "contact_name": "Rob"})
    assert response.status_code == 302 and response.url == "/t/robotics/"
    response = client.post(reverse("tenants:members", kwargs={"slug": "robotics"}),
                           {"user": "charlie", "role": "admin"})
    assert response.status_code == 302
    client.post(reverse("logout"))
    assert client.get(reverse("home")).status_code == 302
    client.post(reverse("login"), {"username": "charlie", "password": PASSWORD})
    body = client.get(reverse("home")).content.decode()
    assert "Robotics" in body and "Globex NLP" in body
    assert client.get("/t/robotics/members/").status_code == 200


def test_a_duplicate_slug_shows_an_error_on_the_form(login, platform_admin, tenant_a):
    response = login(platform_admin).post(reverse("tenants:platform_tenants"), {
        "slug": "acme", "name": "Again", "cost_center": "X", "contact_email": "a@example.org"})
    assert response.status_code == 400
    assert "already exists" in response.content.decode()
    assert Tenant.objects.filter(slug="acme").get().name == "Acme Vision"


def test_an_invalid_slug_shows_an_error_on_the_form(login, platform_admin):
    response = login(platform_admin).post(reverse("tenants:platform_tenants"), {
        "slug": "Bad Slug!", "name": "X", "cost_center": "X", "contact_email": "a@example.org"})
    assert response.status_code == 400
    assert not Tenant.objects.exists()


def test_adding_an_unknown_user_shows_an_error(login, alice, tenant_a):
    response = login(alice).post(reverse("tenants:members", kwargs={"slug": "acme"}),
                                 {"user": "nobody", "role": "member"})
    assert response.status_code == 400
    assert "There is no user" in response.content.decode()


def test_removing_the_last_admin_shows_an_error_and_keeps_them(login, alice, tenant_a):
    admin = Membership.objects.get(user=alice, tenant=tenant_a)
    client = login(alice)
    response = client.post(reverse("tenants:member_change", kwargs={"slug": "acme",
                                                                    "pk": admin.pk}),
                           {"action": "remove"}, follow=True)
    assert "last admin" in response.content.decode()
    assert Membership.objects.filter(pk=admin.pk).exists()


def test_members_see_the_member_list_but_no_management_controls(login, bob, tenant_a):
    body = login(bob).get(reverse("tenants:members", kwargs={"slug": "acme"})).content.decode()
    assert "alice" in body and "Add a member" not in body


def test_a_suspended_tenant_says_why_on_its_pages(login, platform_admin, bob, tenant_a):
    client = login(platform_admin)
    client.post(reverse("tenants:status", kwargs={"slug": "acme"}),
                {"action": "suspend", "reason": "Budget exhausted"})
    client.force_login(bob)
    for name in ("tenants:detail", "tenants:members"):
        body = client.get(reverse(name, kwargs={"slug": "acme"})).content.decode()
        assert "suspended" in body and "Budget exhausted" in body


def test_tenant_admins_cannot_suspend(login, alice, tenant_a):
    login(alice).post(reverse("tenants:status", kwargs={"slug": "acme"}),
                      {"action": "suspend", "reason": "x"})
    tenant_a.refresh_from_db()
    assert tenant_a.is_active


def test_platform_admin_edits_a_tenant(login, platform_admin, tenant_a):
    client = login(platform_admin)
    assert 'name="billing_address"' in client.get(
        reverse("tenants:edit", kwargs={"slug": "acme"})).content.decode()
    response = client.post(reverse("tenants:edit", kwargs={"slug": "acme"}), {
        "name": "Acme Robotics", "cost_center": "CC-9", "contact_email": "x@example.org",
        "contact_name": "", "billing_address": "1 Dock Road\nLeith EH6"})
    assert response.status_code == 302
    tenant_a.refresh_from_db()
    assert (tenant_a.name, tenant_a.cost_center) == ("Acme Robotics", "CC-9")
    # the bill-to address of its invoices (issue 30), shown on the tenant's page
    assert tenant_a.billing_address == "1 Dock Road\nLeith EH6"
    assert "1 Dock Road<br>Leith EH6" in client.get(
        reverse("tenants:detail", kwargs={"slug": "acme"})).content.decode()


def test_people_page_creates_accounts_and_grants_roles(login, platform_admin, bob):
    client = login(platform_admin)
    response = client.post(reverse("tenants:people"), {
        "username": "dana", "email": "dana@example.org", "password": "a-long-enough-pass-9"})
    assert response.status_code == 302
    client.post(reverse("tenants:people_role", kwargs={"user_id": bob.pk}),
                {"role": "finance", "granted": "1"})
    assert list(bob.platform_roles.values_list("role", flat=True)) == ["finance"]
    assert "dana" in client.get(reverse("tenants:people")).content.decode()


def test_audit_log_filters_by_tenant_and_action(login, platform_admin, tenant_a, tenant_b):
    AuditEvent.objects.create(tenant=tenant_a, action="x.a", summary="in acme")
    AuditEvent.objects.create(tenant=tenant_b, action="x.b", summary="in globex")
    body = login(platform_admin).get(reverse("tenants:audit") + "?tenant=acme").content.decode()
    assert "in acme" in body and "in globex" not in body


def test_finance_sees_every_tenant_read_only(login, finance_user, tenant_a, tenant_b):
    client = login(finance_user)
    assert client.get("/t/acme/").status_code == 200
    client.post(reverse("tenants:members", kwargs={"slug": "acme"}), {"user": "charlie"})
    assert not Membership.objects.filter(tenant=tenant_a, user__username="charlie").exists()


def test_the_delete_page_names_what_will_be_lost_and_needs_the_slug(login, platform_admin,
                                                                   alice, tenant_a):
    client = login(platform_admin)
    body = client.get("/t/acme/delete/").content.decode()
    assert "ty-acme-prod" in body and "ty-acme-dev" in body and "2 members" in body
    wrong = client.post("/t/acme/delete/", {"confirm": "acm"})
    assert wrong.status_code == 400 and "to confirm" in wrong.content.decode()
    tenant_a.refresh_from_db()
    assert tenant_a.status == "active"
    assert client.post("/t/acme/delete/", {"confirm": "acme"}).status_code == 302
    tenant_a.refresh_from_db()
    assert tenant_a.status == "deleting"
    assert login(alice).get("/t/acme/delete/").status_code == 404


def test_the_api_deletes_only_with_confirmation(api, platform_admin, alice, tenant_a):
    assert api(platform_admin).post("/api/v1/tenants/acme/delete/", {"confirm": "x"},
                                    format="json").status_code == 400
    assert api(alice).post("/api/v1/tenants/acme/delete/", {"confirm": "acme"},
                           format="json").status_code == 403
    done = api(platform_admin).post("/api/v1/tenants/acme/delete/", {"confirm": "acme"},
                                    format="json")
    assert done.status_code == 202 and done.json()["status"] == "deleting"
