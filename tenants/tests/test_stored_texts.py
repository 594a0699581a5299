"""Text the system writes once and people read later (notifications, e-mails, the audit
log, quota-request notes) is stored as a code and arguments and shown in the reader's
language, whoever caused it and in whatever language they worked."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.core import mail
from django.urls import reverse
from django.utils import translation
from django.utils.translation import trans_real

from core import texts
from core.models import UserPreference
from tenants import services
from tenants.access import access_for
from tenants.choices import PlatformRoleName
from tenants.models import AuditEvent, Notification, PlatformRole, QuotaRequest
from tenants.services.notify import notify

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _english_afterwards():
    """A request in Chinese leaves Chinese active in this thread (LocaleMiddleware);
    the next test must not inherit it."""
    yield
    translation.deactivate()


def _page(client, user, url, language):
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = language
    client.force_login(user)
    return client.get(url).content.decode()


def _run_mail(callbacks):
    for callback in callbacks:
        if callback.__name__ == "send":
            callback()


def _submit(user, tenant, amounts, **kw):
    return services.quota_request_submit(
        access=access_for(user, tenant), actor=user, pool=tenant.pools.get(kind="prod"),
        amounts=amounts, justification="new model", **kw)


# --- notifications ----------------------------------------------------------------------


def test_a_rejection_reads_in_each_readers_language_and_keeps_the_reason(
        client, alice, platform_admin, tenant_a):
    """The admin decided in Chinese; alice reads it in English, then in Chinese. The reason
    a person typed is shown as typed."""
    request = _submit(alice, tenant_a, {"cpu": 8})
    with translation.override("zh-hans"):
        services.quota_request_reject(actor=platform_admin, request=request,
                                      reason="预算不足 / no budget")
    note = Notification.objects.get(user=alice)
    assert note.text["code"] == "tenants.quota_request.rejected"
    assert note.message == (f"Your quota request #{request.pk} for ty-acme-prod was rejected: "
                            "预算不足 / no budget")
    url = reverse("tenants:notifications")
    english = _page(client, alice, url, "en")
    assert "was rejected: 预算不足 / no budget" in english and "被拒绝" not in english
    chinese = _page(client, alice, url, "zh-hans")
    assert f"你对 ty-acme-prod 的配额申请 #{request.pk} 被拒绝：预算不足 / no budget" in chinese


def test_a_notification_written_in_chinese_is_english_for_an_english_reader(
        client, alice, bob, tenant_a, tenant_b, charlie):
    """A loan offered from a Chinese page is stored as a code, not as Chinese."""
    import datetime as dt

    from django.utils import timezone

    from tenants.models import Membership

    Membership.objects.filter(user=charlie).update(role="admin")
    services.quota_set(actor=_platform_admin(), pool=tenant_a.pools.get(kind="prod"),
                       amounts={"cpu": 16}, reason="start")
    with translation.override("zh-hans"):
        services.loan_propose(access=access_for(alice, tenant_a), actor=alice,
                              lender_pool=tenant_a.pools.get(kind="prod"), borrower="globex",
                              borrower_pool="dev", resource="cpu", amount="4",
                              ends_at=timezone.now() + dt.timedelta(days=3))
    url = reverse("tenants:notifications")
    # the resource by its name, in the reader's language (issue 30)
    assert "acme offers to lend you 4 CPU cores until" in _page(client, charlie, url, "en")
    assert "acme 提议借给你 4 CPU 核数，截止" in _page(client, charlie, url, "zh-hans")


def _platform_admin():
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user("root-admin", "root@example.org", "x")
    PlatformRole.objects.create(user=user, role=PlatformRoleName.PLATFORM_ADMIN)
    return user


def test_a_legacy_notification_is_shown_as_it_was_written(client, alice, api):
    old = "旧的通知 / old note"  # written in Chinese before stored texts existed
    Notification.objects.create(user=alice, message=old, text=old)
    Notification.objects.create(user=alice, message="before the text column")  # text empty
    for language in ("en", "zh-hans"):
        body = _page(client, alice, reverse("tenants:notifications"), language)
        assert "旧的通知 / old note" in body and "before the text column" in body
    rows = api(alice).get("/api/v1/notifications/", HTTP_ACCEPT_LANGUAGE="zh-hans").json()
    rows = rows["results"] if isinstance(rows, dict) else rows
    assert {r["message"] for r in rows} == {"旧的通知 / old note", "before the text column"}


def test_the_api_renders_a_notification_in_the_requests_language(api, alice):
    notify(users=[alice], tenant=None,
           text=texts.message("tenants.quota_request.approved", n=7, p="ty-acme-prod",
                              s="cpu=8"))
    for language, expected in [("en", "Your quota request #7 for ty-acme-prod was approved: "
                                      "cpu=8."),
                               ("zh-hans", "你对 ty-acme-prod 的配额申请 #7 已获批准：cpu=8。")]:
        body = api(alice).get("/api/v1/notifications/", HTTP_ACCEPT_LANGUAGE=language).json()
        row = (body["results"] if isinstance(body, dict) else body)[0]
        assert row["message"] == expected
        assert row["text"] == {"code": "tenants.quota_request.approved",
                               "args": {"n": 7, "p": "ty-acme-prod", "s": "cpu=8"}}


# --- e-mail -------------------------------------------------------------------------------


def test_each_recipient_gets_the_e_mail_in_their_language(alice, tenant_a,
                                                          django_capture_on_commit_callbacks):
    """Two platform admins, one reading Chinese and one English: the same event is one
    Chinese and one English e-mail, whatever language the requester used."""
    from django.contrib.auth import get_user_model

    zh_admin = _platform_admin()
    en_admin = get_user_model().objects.create_user("en-admin", "en@example.org", "x")
    PlatformRole.objects.create(user=en_admin, role=PlatformRoleName.PLATFORM_ADMIN)
    UserPreference.objects.create(user=zh_admin, language="zh-hans")
    UserPreference.objects.create(user=en_admin, language="en")
    mail.outbox.clear()
    with django_capture_on_commit_callbacks() as callbacks, translation.override("zh-hans"):
        request = _submit(alice, tenant_a, {"cpu": 8})
    _run_mail(callbacks)
    by_recipient = {m.to[0]: m for m in mail.outbox}
    assert set(by_recipient) == {"root@example.org", "en@example.org"}
    chinese, english = by_recipient["root@example.org"], by_recipient["en@example.org"]
    assert chinese.subject == "[Trainyard] acme 申请增加 prod 中的配额。"
    assert english.subject == "[Trainyard] acme asks for more quota in prod."
    assert f"/platform/quota-requests/{request.pk}/" in chinese.body
    assert "申请增加" not in english.body and "asks for more quota" in english.body


def test_each_recipient_gets_a_mail_of_their_own(alice, tenant_a,
                                                 django_capture_on_commit_callbacks):
    """Two admins of the same language: two messages, neither naming the other."""
    from django.contrib.auth import get_user_model

    _platform_admin()
    other = get_user_model().objects.create_user("other-admin", "other@example.org", "x")
    PlatformRole.objects.create(user=other, role=PlatformRoleName.PLATFORM_ADMIN)
    mail.outbox.clear()
    with django_capture_on_commit_callbacks() as callbacks:
        _submit(alice, tenant_a, {"cpu": 8})
    _run_mail(callbacks)
    assert sorted(m.to for m in mail.outbox) == [["other@example.org"], ["root@example.org"]]
    assert len({m.subject for m in mail.outbox}) == 1


def test_a_requester_is_answered_in_their_language_not_the_deciders(
        alice, platform_admin, tenant_a, django_capture_on_commit_callbacks):
    UserPreference.objects.create(user=alice, language="zh-hans")
    request = _submit(alice, tenant_a, {"cpu": 8})
    mail.outbox.clear()
    with django_capture_on_commit_callbacks() as callbacks, translation.override("en"):
        services.quota_request_approve(actor=platform_admin, request=request)
    _run_mail(callbacks)
    assert [m.to for m in mail.outbox] == [["alice@example.org"]]
    assert mail.outbox[0].subject == (
        f"[Trainyard] 你对 ty-acme-prod 的配额申请 #{request.pk} 已获批准：cpu=8。")


def test_an_api_user_is_answered_in_the_language_they_asked_in(
        api, alice, platform_admin, tenant_a, django_capture_on_commit_callbacks):
    """No browser login, no language menu: the language of the request is remembered."""
    response = api(alice).post("/api/v1/tenants/acme/quota-requests/", {
        "pool": "prod", "amounts": {"cpu": "8"}, "justification": "训练"}, format="json",
        HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert response.status_code == 201, response.content
    assert UserPreference.objects.get(user=alice).language == "zh-hans"
    mail.outbox.clear()
    with django_capture_on_commit_callbacks() as callbacks:
        services.quota_request_reject(actor=platform_admin,
                                      request=QuotaRequest.objects.get(),
                                      reason="not now")
    _run_mail(callbacks)
    assert "被拒绝：not now" in mail.outbox[0].subject


def test_a_reason_with_line_breaks_still_makes_a_one_line_subject(
        alice, platform_admin, tenant_a, django_capture_on_commit_callbacks):
    request = _submit(alice, tenant_a, {"cpu": 8})
    mail.outbox.clear()
    with django_capture_on_commit_callbacks() as callbacks:
        services.quota_request_reject(actor=platform_admin, request=request,
                                      reason="not now.\nAsk again in March.")
    _run_mail(callbacks)
    assert mail.outbox[0].subject.endswith("rejected: not now. Ask again in March.")
    assert "not now.\nAsk again in March." in mail.outbox[0].body


def test_the_language_menu_remembers_a_signed_in_users_language(client, alice):
    client.force_login(alice)  # the first login records the browser's language (English)
    assert UserPreference.objects.get(user=alice).language == "en"
    response = client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    assert response.status_code == 302
    assert UserPreference.objects.get(user=alice).language == "zh-hans"
    client.post("/i18n/setlang/", {"language": "klingon", "next": "/"})
    assert UserPreference.objects.get(user=alice).language == "zh-hans"
    client.force_login(alice)  # a later login never overrides a choice
    assert UserPreference.objects.get(user=alice).language == "zh-hans"


def test_the_first_login_records_the_browsers_language(client, bob):
    from conftest import PASSWORD

    response = client.post(reverse("login"), {"username": "bob", "password": PASSWORD},
                           HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9,en;q=0.5")
    assert response.status_code == 302
    assert UserPreference.objects.get(user=bob).language == "zh-hans"


def test_anonymous_language_switching_stores_nothing(client, db):
    client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/login/"})
    assert not UserPreference.objects.exists()


# --- the audit log and quota-request notes --------------------------------------------------


def test_the_audit_log_reads_in_each_readers_language(client, alice, platform_admin, tenant_a):
    with translation.override("zh-hans"):
        request = _submit(alice, tenant_a, {"cpu": 8})
        services.quota_request_reject(actor=platform_admin, request=request, reason="later")
    event = AuditEvent.objects.get(action="quota_request.reject")
    assert event.summary == f"rejected request #{request.pk}: later"
    AuditEvent.objects.create(action="legacy.row", summary="an old English summary")
    url = reverse("tenants:audit")
    english = _page(client, platform_admin, url, "en")
    assert f"rejected request #{request.pk}: later" in english
    assert "requested quota for acme/prod: cpu=8" in english
    chinese = _page(client, platform_admin, url, "zh-hans")
    assert f"拒绝了申请 #{request.pk}：later" in chinese
    assert "为 acme/prod 申请了配额：cpu=8" in chinese
    assert "an old English summary" in chinese


def test_a_dynamic_proposal_reads_in_each_readers_language(client, platform_admin, tenant_a):
    from decimal import Decimal

    pool = tenant_a.pools.get(kind="prod")
    first = services.quota_request_propose(pool=pool, amounts={"cpu": Decimal(8)}, formula="f")
    services.quota_request_propose(pool=pool, amounts={"cpu": Decimal(6)}, formula="g")
    first.refresh_from_db()
    assert first.decision_note == "Replaced by a newer proposal."
    url = reverse("tenants:request_detail", kwargs={"pk": first.pk})
    assert "Proposed from the last 30 days of usage." in _page(client, platform_admin, url,
                                                               "en")
    chinese = _page(client, platform_admin, url, "zh-hans")
    assert "根据最近 30 天的用量提议。" in chinese and "已被更新的提议取代。" in chinese
    body = client.get(f"/api/v1/quota-requests/{first.pk}/",
                      HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert body.json()["justification"] == "根据最近 30 天的用量提议。"
    assert body.json()["decision_note"] == "已被更新的提议取代。"
    assert QuotaRequest.objects.get(pk=first.pk).justification == (
        "Proposed from the last 30 days of usage.")


# --- every code is registered and translated ------------------------------------------------

CODE_LITERAL = re.compile(r"""\bmessage\(\s*["']([\w.\-]+)["']""")


def _codes_used_in(app: str) -> set[str]:
    """The codes a module of ``app`` passes to message(): literals and ``texts.NAME``."""
    import importlib

    module = importlib.import_module(f"{app}.texts")
    used: set[str] = set()
    for path in (ROOT / app).rglob("*.py"):
        if "tests" in path.parts or "migrations" in path.parts:
            continue
        source = path.read_text()
        used |= set(CODE_LITERAL.findall(source))
        for node in ast.walk(ast.parse(source)):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id == "texts" and node.attr.isupper()):
                value = getattr(module, node.attr, None)
                if isinstance(value, dict):  # a table of codes, e.g. one per egress class
                    assert all(isinstance(v, str) for v in value.values()), node.attr
                    used |= set(value.values())
                    continue
                assert isinstance(value, str), f"{path.name}: texts.{node.attr} is not a code"
                used.add(value)
    return used


def _template(code: str):
    return texts._TEMPLATES[code]


@pytest.mark.parametrize("app", ["tenants", "billing"])
def test_every_code_used_is_registered_and_translated(app):
    used = _codes_used_in(app)
    assert used, f"no codes found in {app}"
    assert sorted(c for c in used if not texts.registered(c)) == []
    catalogue = trans_real.translation("zh-hans")._catalog  # type: ignore[attr-defined]
    untranslated = []
    for code in texts.codes():
        if not code.startswith(f"{app}."):
            continue
        with translation.override("en"):
            msgid = str(_template(code))
        if not catalogue.get(msgid):
            untranslated.append((code, msgid))
    assert untranslated == []


@pytest.mark.parametrize("app", ["tenants", "billing"])
def test_every_translation_keeps_the_placeholders(app):
    for code in texts.codes():
        if not code.startswith(f"{app}."):
            continue
        template = _template(code)
        with translation.override("en"):
            english = str(template)
        with translation.override("zh-hans"):
            chinese = str(template)
        assert sorted(re.findall(r"%\(\w+\)s", english)) == sorted(
            re.findall(r"%\(\w+\)s", chinese)), code


def test_a_grants_reason_reads_in_each_readers_language(client, alice, platform_admin,
                                                         tenant_a):
    """The reason of a grant from a dynamic proposal nests the proposal's own text; a
    reason a person typed stays as typed."""
    from decimal import Decimal

    from tenants.models import QuotaGrant

    pool = tenant_a.pools.get(kind="prod")
    proposal = services.quota_request_propose(pool=pool, amounts={"cpu": Decimal(8)},
                                              formula="f")
    with translation.override("zh-hans"):
        services.quota_request_approve(actor=platform_admin, request=proposal)
    services.quota_set(actor=platform_admin, pool=pool, amounts={"memory": 64},
                       reason="手工设置 / by hand")
    grant = QuotaGrant.objects.get(pool=pool, resource="cpu")
    assert grant.reason == f"request #{proposal.pk}: Proposed from the last 30 days of usage."
    url = reverse("tenants:pool", kwargs={"slug": "acme", "kind": "prod"})
    english = _page(client, alice, url, "en")
    assert grant.reason in english and "手工设置 / by hand" in english
    chinese = _page(client, alice, url, "zh-hans")
    assert f"申请 #{proposal.pk}：根据最近 30 天的用量提议。" in chinese
    assert "手工设置 / by hand" in chinese
