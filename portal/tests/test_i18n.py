"""English and Simplified Chinese: every marked string is translated, pages switch."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import reverse

ROOT = Path(__file__).resolve().parents[2]
PO = ROOT / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"
MO = PO.with_suffix(".mo")
JS_PO = PO.with_name("djangojs.po")
JS_MO = JS_PO.with_suffix(".mo")
SOURCES = ["core", "portal", "tenants", "jobs", "billing", "k8s_sync", "templates", "static/js"]


def _msgids(po_text: str) -> dict[str, str]:
    """msgid -> msgstr (first plural form) of a .po file's text."""
    entries = {}
    for block in po_text.split("\n\n"):
        msgid = re.search(r'^msgid ((?:".*"\n?)+)', block, re.M)
        if not msgid:
            continue
        key = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', msgid.group(1)))
        if not key:
            continue
        msgstr = re.search(r'^msgstr(?:\[0\])? ((?:".*"\n?)+)', block, re.M)
        value = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', msgstr.group(1))) if msgstr else ""
        entries[key] = "" if "#, fuzzy" in block else value
    return entries


def test_every_message_is_translated():
    entries = _msgids(PO.read_text())
    assert len(entries) > 100
    untranslated = [k for k, v in entries.items() if not v]
    assert untranslated == []


def test_every_javascript_message_is_translated():
    entries = _msgids(JS_PO.read_text())
    assert len(entries) > 5
    untranslated = [k for k, v in entries.items() if not v]
    assert untranslated == []


@pytest.mark.skipif(shutil.which("msgfmt") is None, reason="gettext's msgfmt is not installed")
@pytest.mark.slow
def test_the_catalogue_is_complete_and_compiled(tmp_path):
    """makemessages on a copy of the sources finds no string missing from the .po files
    (django and djangojs), and each committed .mo is what its .po compiles to."""
    copy = tmp_path / "src"
    for name in [*SOURCES, "manage.py", "locale"]:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, copy / name, ignore=shutil.ignore_patterns("tests", "__pycache__"))
        else:
            shutil.copy(src, copy / name)
    env = {"DEBUG": "true", "DJANGO_SETTINGS_MODULE": "portal.settings", "PATH": "/usr/bin:/bin",
           "TRAINYARD_VAR_DIR": str(tmp_path / "var"), "PYTHONPATH": str(copy)}
    for domain in ["django", "djangojs"]:
        subprocess.run([sys.executable, "manage.py", "makemessages", "-d", domain,
                        "-l", "zh_Hans", "--no-obsolete"], cwd=copy, env=env, check=True,
                       capture_output=True, timeout=120)
    for po, mo in [(PO, MO), (JS_PO, JS_MO)]:
        fresh = _msgids((copy / "locale/zh_Hans/LC_MESSAGES" / po.name).read_text())
        committed = _msgids(po.read_text())
        assert sorted(set(fresh) - set(committed)) == [], f"`make messages`, translate {po.name}"
        compiled = tmp_path / mo.name
        subprocess.run(["msgfmt", "--check", "-o", str(compiled), str(po)], check=True)
        assert compiled.read_bytes() == mo.read_bytes(), f"`make messages` to recompile {mo.name}"


def test_pages_speak_chinese_when_chosen(client, bob, tenant_a):
    client.cookies["django_language"] = "zh-hans"
    assert "登录 Trainyard" in client.get(reverse("login")).content.decode()
    client.force_login(bob)
    body = client.get(reverse("home") + "?all=1").content.decode()
    assert "我的租户" in body and 'lang="zh-hans"' in body


def test_the_language_switcher_sets_the_language(client, db):
    response = client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/login/"})
    assert response.status_code == 302
    assert "登录" in client.get("/login/").content.decode()


def test_service_errors_are_translated(api, alice, tenant_a):
    response = api(alice).post("/api/v1/tenants/acme/members/", {"user": "ghost"},
                               format="json", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert response.status_code == 400
    assert "不存在用户“ghost”" in response.json()["message"]


def test_the_javascript_catalogue_speaks_chinese(client, db):
    client.cookies["django_language"] = "zh-hans"
    body = client.get(reverse("javascript-catalog")).content.decode()
    assert json.dumps("暂时无法预览。")[1:-1] in body


def test_a_chinese_invoice_pdf_has_its_glyphs(tenant_a):
    """Helvetica has no CJK glyphs: a zh-hans PDF must use a CJK font (no ■ boxes)."""
    import datetime as dt
    import io

    from django.utils import translation
    from pypdf import PdfReader

    from billing.exports import invoice_pdf
    from billing.models import Invoice

    invoice = Invoice.objects.create(tenant=tenant_a, period=dt.date(2026, 10, 1),
                                     tenant_name=tenant_a.name, cost_center="CC-acme",
                                     currency="USD")
    with translation.override("zh-hans"):
        text = PdfReader(io.BytesIO(invoice_pdf(invoice))).pages[0].extract_text()
    assert "账单" in text and "成本中心" in text and "■" not in text


def test_javascript_strings_go_through_gettext():
    """makemessages -d djangojs only finds gettext(...)/ngettext(...) calls: an alias such as
    t("...") hides the string from the catalogue (and t is not defined in static/js)."""
    for js in sorted((ROOT / "static" / "js").glob("*.js")):
        calls = re.findall(r'(?<![\w.$])(\w+)\(\s*"', js.read_text())
        aliases = sorted({c for c in calls if c in {"t", "_", "__", "tr", "i18n"}})
        assert aliases == [], f"{js.name}: use gettext()/ngettext()/interpolate(), not {aliases}"
