"""Security in the suite (issue 16): login throttling, Content-Security-Policy, private
answers never cached, API tokens shown once, password reset and change, permission
checked before validation, no open redirect after login."""

from __future__ import annotations

import re

import pytest
from django.core import mail
from django.urls import reverse
from rest_framework.authtoken.models import Token

from conftest import PASSWORD
from tenants.models import QuotaRequest


def _login(client, username, password):
    return client.post(reverse("login"), {"username": username, "password": password},
                       REMOTE_ADDR="203.0.113.7")


# --- login throttling (django-axes) ---------------------------------------------------------


def test_wrong_passwords_lock_the_username_out_even_for_the_right_one(client, alice, settings):
    limit = settings.AXES_FAILURE_LIMIT
    for _ in range(limit - 1):
        answer = _login(client, "alice", "wrong")
        assert answer.status_code == 200  # the form again, with its error
        assert "didn" in answer.content.decode()
    locked = _login(client, "alice", "wrong")
    assert locked.status_code == 429
    assert "Too many failed logins" in locked.content.decode()
    assert reverse("password_reset") in locked.content.decode()
    # the right password does not get in while the lock lasts
    assert _login(client, "alice", PASSWORD).status_code == 429
    assert "_auth_user_id" not in client.session


def test_a_good_login_resets_the_count(client, alice, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        _login(client, "alice", "wrong")
    assert _login(client, "alice", PASSWORD).status_code == 302
    client.logout()
    assert _login(client, "alice", "wrong").status_code == 200  # counting starts again


def test_a_lockout_is_per_username_and_address(client, alice, bob, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        _login(client, "alice", "wrong")
    assert _login(client, "bob", PASSWORD).status_code == 302


# --- headers --------------------------------------------------------------------------------


def test_pages_carry_a_content_security_policy_that_allows_only_this_origin(login, alice,
                                                                            tenant_a):
    answer = login(alice).get(reverse("tenants:detail", kwargs={"slug": tenant_a.slug}))
    policy = answer["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";") if part.strip())
    assert directives["default-src"] == "'self'"
    assert directives["script-src"] == "'self'"  # no inline scripts, no other origin
    assert directives["object-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    assert "http" not in policy


@pytest.mark.parametrize("name", ["home", "account", "login", "password_reset"])
def test_pages_have_no_inline_script_or_handler(client, alice, tenant_a, name):
    """The CSP forbids inline scripts: a page with one would break in the browser."""
    if name in ("home", "account"):
        client.force_login(alice)
    html = client.get(reverse(name)).content.decode()
    inline = [m for m in re.findall(r"<script([^>]*)>", html)
              if "src=" not in m and "application/json" not in m]
    assert inline == []
    assert re.search(r"\son[a-z]+=\"", html) is None


def test_signed_in_answers_are_private_and_never_stored(login, api, alice, tenant_a):
    page = login(alice).get(reverse("tenants:detail", kwargs={"slug": tenant_a.slug}))
    assert "no-store" in page["Cache-Control"] and "private" in page["Cache-Control"]
    token = Token.objects.create(user=alice)
    from rest_framework.test import APIClient
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    answer = client.get("/api/v1/tenants/")
    assert answer.status_code == 200
    assert "no-store" in answer["Cache-Control"] and "private" in answer["Cache-Control"]


# --- API tokens are shown once -------------------------------------------------------------


def test_the_api_token_is_shown_in_full_only_once(login, alice):
    client = login(alice)
    client.post(reverse("account_token"))
    key = Token.objects.get(user=alice).key
    first = client.get(reverse("account")).content.decode()
    assert key in first
    second = client.get(reverse("account")).content.decode()
    assert key not in second
    assert key[:6] in second  # enough to tell which token it is
    client.post(reverse("account_token"))  # rotate: the new one is shown once
    new_key = Token.objects.get(user=alice).key
    assert new_key != key
    assert new_key in client.get(reverse("account")).content.decode()


# --- password reset and change --------------------------------------------------------------


def test_password_reset_by_email_sets_a_new_password(client, alice):
    sent = client.post(reverse("password_reset"), {"email": alice.email})
    assert sent.status_code == 302
    assert len(mail.outbox) == 1
    link = re.search(r"https?://[^/]+(/password/reset/[^\s]+/)", mail.outbox[0].body).group(1)
    form = client.get(link, follow=True)
    assert form.status_code == 200
    assert "new_password1" in form.content.decode()
    done = client.post(form.redirect_chain[-1][0] if form.redirect_chain else link, {
        "new_password1": "a-new-long-passphrase-42", "new_password2": "a-new-long-passphrase-42"})
    assert done.status_code == 302
    assert _login(client, "alice", "a-new-long-passphrase-42").status_code == 302
    # the link works once
    again = client.get(link, follow=True).content.decode()
    assert "invalid" in again


def test_password_reset_for_an_unknown_address_says_the_same_and_sends_nothing(client, alice):
    answer = client.post(reverse("password_reset"), {"email": "nobody@example.org"})
    assert answer.status_code == 302
    assert answer["Location"] == reverse("password_reset_done")
    assert mail.outbox == []


def test_password_change_needs_the_old_password(login, alice):
    client = login(alice)
    wrong = client.post(reverse("password_change"), {
        "old_password": "nope", "new_password1": "another-long-pass-77",
        "new_password2": "another-long-pass-77"})
    assert wrong.status_code == 200
    assert "errorlist" in wrong.content.decode()
    right = client.post(reverse("password_change"), {
        "old_password": PASSWORD, "new_password1": "another-long-pass-77",
        "new_password2": "another-long-pass-77"})
    assert right.status_code == 302
    alice.refresh_from_db()
    assert alice.check_password("another-long-pass-77")


# --- permission before validation, 404 where the schema says so ------------------------------


def test_a_member_learns_nothing_from_admin_only_endpoints(api, alice, bob, tenant_a):
    request = QuotaRequest.objects.create(tenant=tenant_a, pool=tenant_a.pools.get(kind="dev"),
                                          requested_by=alice, justification="more")
    client = api(bob)
    for url in (f"/api/v1/platform/quota-requests/{request.pk}/approve/",
                f"/api/v1/platform/quota-requests/{request.pk}/reject/",
                "/api/v1/platform/quota-requests/999999/approve/",
                "/api/v1/platform/quota-requests/x/approve/"):
        for body in ({}, {"reason": "no", "note": ""}):
            assert client.post(url, body, format="json").status_code == 404, (url, body)
    # admin-only writes answer 403 whatever the body, never a field list
    for method, url in (("post", "/api/v1/tenants/"),
                        ("patch", "/api/v1/policy/"),
                        ("put", f"/api/v1/tenants/{tenant_a.slug}/pools/dev/quota/"),
                        ("post", f"/api/v1/tenants/{tenant_a.slug}/members/")):
        for body in ({}, {"bogus": "x"}):
            answer = getattr(client, method)(url, body, format="json")
            assert answer.status_code == 403, (method, url, body, answer.content)
    request.refresh_from_db()
    assert request.status == "pending"


def test_login_does_not_redirect_to_another_site(client, alice):
    answer = client.post(reverse("login") + "?next=https://evil.example/x", {
        "username": "alice", "password": PASSWORD, "next": "https://evil.example/x"})
    assert answer.status_code == 302
    assert "evil.example" not in answer["Location"]


def test_metrics_and_admin_are_not_open(client, settings):
    settings.TRAINYARD_METRICS_TOKEN = ""
    settings.TRAINYARD_METRICS_ALLOW = []
    assert client.get("/metrics").status_code == 404
    admin = client.get("/admin/")
    assert admin.status_code == 302 and "/admin/login/" in admin["Location"]
