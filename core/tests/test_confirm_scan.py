"""Every destructive form asks first: a POST form whose action (URL name and arguments),
hidden ``action`` value, submit button value or template name says cancel, delete, remove,
close, credit, revoke, reject, end, decline, withdraw, suspend or rotate carries
``data-confirm`` (on the form, or on the destructive button itself; ``static/js/confirm.js``
asks before it is sent)."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

DESTRUCTIVE = {"cancel", "delete", "remove", "close", "credit", "revoke", "reject", "end",
               "decline", "withdraw", "suspend", "suspended", "rotate", "token"}
FORM = re.compile(r"<form\b(?P<tag>[^>]*)>(?P<body>.*?)</form>", re.S | re.I)
URL = re.compile(r"\{%\s*url\s+'(?P<name>[^']+)'(?P<args>[^%]*)%\}")
VALUE = re.compile(r"<(?:input|button)\b[^>]*\bvalue=\"(?P<value>[^\"{]+)\"[^>]*>", re.I)
BUTTON = re.compile(r"<button\b[^>]*>", re.I)


def _words(text: str) -> set[str]:
    return set(re.split(r"[^a-z]+", text.lower()))


def destructive_forms(path: Path, text: str) -> list[tuple[str, bool]]:
    """(``path:line``, asks first) of every destructive POST form in ``text``."""
    found = []
    for match in FORM.finditer(text):
        tag, body = match.group("tag"), match.group("body")
        if "post" not in tag.lower():
            continue
        words: set[str] = _words(path.stem)
        url = URL.search(tag)
        if url:
            words |= _words(url.group("name").partition(":")[2] or url.group("name"))
            words |= {w.strip("'\"") for w in re.findall(r"'([^']+)'", url.group("args"))}
        words |= {v.lower() for v in VALUE.findall(body)}
        if not words & DESTRUCTIVE:
            continue
        confirmed = "data-confirm" in tag or any(
            "data-confirm" in b and _words(b) & DESTRUCTIVE for b in BUTTON.findall(body))
        line = text[:match.start()].count("\n") + 1
        found.append((f"{path.relative_to(settings.BASE_DIR)}:{line}", confirmed))
    return found


def destructive_forms_without_confirm(path: Path, text: str) -> list[str]:
    return [where for where, confirmed in destructive_forms(path, text) if not confirmed]


def test_every_destructive_form_asks_first():
    forms = []
    for path in sorted(Path(settings.BASE_DIR, "templates").rglob("*.html")):
        forms += destructive_forms(path, path.read_text())
    missing = [where for where, confirmed in forms if not confirmed]
    assert not missing, f"destructive forms without data-confirm: {missing}"
    files = {where.partition(":")[0] for where, _confirmed in forms}
    for expected in ("templates/billing/finance_month.html", "templates/billing/invoice.html",
                     "templates/tenants/members.html", "templates/jobs/platform_queue.html",
                     "templates/tenants/delete.html", "templates/tenants/request_detail.html",
                     "templates/portal/account.html", "templates/tenants/quota.html"):
        assert expected in files  # the scan sees them: it is not vacuous


def test_the_scan_finds_a_form_that_does_not_ask():
    bad = ("<form method=\"post\" action=\"{% url 'tenants:loan_action' slug=t pk=1 "
           "action='end' %}\"><button>End</button></form>"
           "<form method=\"post\"><button name=\"decision\" value=\"reject\">R</button></form>"
           "<form method=\"post\" action=\"{% url 'billing:budget' slug=t %}\"></form>")
    inside = Path(settings.BASE_DIR, "templates", "x.html")  # a path the report can name
    assert len(destructive_forms_without_confirm(inside, bad)) == 2
    good = bad.replace("<form method=\"post\" action", "<form method=\"post\" data-confirm=\"?\" "
                       "action").replace("value=\"reject\"", "value=\"reject\" data-confirm=\"?\"")
    assert destructive_forms_without_confirm(inside, good) == []
