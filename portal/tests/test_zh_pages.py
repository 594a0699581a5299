"""Every page speaks Chinese when Chinese is chosen: a crawler walks the portal as each
role, in Simplified Chinese, and reports English text a reader would see.

The world is the living demo (``seed_demo`` and ``seed_history``: 30 days of jobs, issued
invoices) plus a few live things on kubesim: jobs running and waiting with reasons, a
pending quota request, a loan offer, notifications. Each role (platform admin, finance,
tenant admin, researcher) starts at the home page and follows every link and every
``data-url`` on the portal, a few pages per URL name, so every page kind is read with real
rows in it.

What counts as English: two or more English words in a row, in the visible text or in
``title``, ``placeholder``, ``aria-label`` and ``alt``, once these are taken out:
- what people typed and names of things (tenant, user, job, node and template names, cost
  centres, e-mail addresses; the crawler collects them from the database),
- ``<code>``, ``<pre>``, ``<script>``, ``<style>``, and elements marked ``translate="no"``
  (the HTML attribute for text that must not be translated, e.g. a Kubernetes message),
- product and technical names that stay in English in Chinese text (:data:`TERMS`).
Also the JSON the pages' charts and tables load (``data-url``): the strings under keys a
reader sees (titles, labels, reasons, messages).

A finding names the page, the text and the place, so the fix is obvious; the test also
fails when a URL name the portal serves to browsers was never reached.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import re
from collections import defaultdict
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.tokens import default_token_generator
from django.core.management import call_command
from django.urls import Resolver404, resolve, reverse
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

pytestmark = [pytest.mark.django_db(transaction=False), pytest.mark.slow]

# Names that stay as they are in Chinese technical text.
TERMS = {
    "trainyard", "kubernetes", "kubesim", "pytorch", "pytorchjob", "trainjob", "torch",
    "kubeflow", "trainer", "nvidia",
    "gpu", "gpus", "cpu", "cpus", "mig", "gib", "gb", "tib", "iops", "api", "rest", "openapi",
    "swagger", "csv", "pdf", "json", "utc", "prometheus", "grafana", "dcgm", "celery",
    "redis", "postgres", "postgresql", "sqlite", "django", "kueue", "volcano", "nccl",
    "english", "token", "id", "url", "yaml", "kubectl", "h800", "a100", "sxm4", "80gb",
    "pcie", "nvlink", "infiniband", "rdma", "storageclass", "pvc", "namespace", "pod",
    "pods", "node", "nodes", "prod", "dev", "cc", "egress", "ingress", "fp16", "bf16",
}
# Elements whose text is not prose for a reader.
SKIP_TAGS = {"script", "style", "code", "pre", "noscript", "textarea", "svg", "option"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
        "source", "track", "wbr"}
ATTRS = ("title", "placeholder", "aria-label", "alt")
# URL names not to follow: they change state, switch language, leave the HTML portal or
# stream files; the downloads are covered by their own tests.
NOT_FOLLOWED = {"logout", "set_language", "javascript-catalog", "healthz", "metrics",
                "download", "month_download", "account_token"}
# URL names a browser never GETs as a page (POST-only actions and machine endpoints).
NOT_PAGES = NOT_FOLLOWED | {
    "pool_sync", "member_change", "status", "delete", "quota_request_cancel", "loan_action",
    "people_role", "action", "abnormal_job_action", "close", "credit_note", "job_preview",
    "preview", "home", "adjustment", "budget", "dedicated_nodes", "loan_offer",
    "quota_settings", "defrag_cancel",
}
PER_NAME = 4  # pages visited per URL name and role
WORD_RUN = re.compile(r"[A-Za-z][A-Za-z'’]*(?:[ \t\-/]+[A-Za-z][A-Za-z'’]*)+")
JSON_KEYS = {"title", "text", "name", "label", "reason", "message", "hint", "help", "why",
             "description", "name_label", "wait_reason", "summary", "note", "status_label",
             "state_label", "tier_label", "hovertemplate"}


class _Text(HTMLParser):
    """Visible text runs and reader-facing attributes, with the tag path of each."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._json_script = False
        self.stack: list[tuple[str, bool]] = []  # (tag, skipped)
        self.found: list[tuple[str, str]] = []  # (where, text)
        self.links: list[str] = []
        self.json: list[str] = []  # <script type="application/json"> bodies (chart figures)

    def _skipped(self) -> bool:
        return any(skip for _, skip in self.stack)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        skip = tag in SKIP_TAGS or values.get("translate") == "no" or "hidden" in values
        for name in ("href", "data-url", "data-live-url", "data-trends-url"):
            if values.get(name):
                self.links.append(values[name] or "")
        if not (skip or self._skipped()):
            for name in ATTRS:
                if values.get(name):
                    self.found.append((f"<{tag} {name}>", values[name] or ""))
            if tag == "input" and values.get("type") in ("submit", "button") and \
                    values.get("value"):
                self.found.append(("<input value>", values["value"] or ""))
        if tag == "script":
            self._json_script = values.get("type") == "application/json"
        if tag not in VOID:
            self.stack.append((tag, skip))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        if self.stack and self.stack[-1][0] == "script" and self._json_script:
            self.json.append(data)
        if data.strip() and not self._skipped():
            where = "/".join(t for t, _ in self.stack[-3:])
            self.found.append((where, data.strip()))


def english_runs(text: str, known: list[str]) -> list[str]:
    """Runs of two or more English words left after removing ``known`` names."""
    for name in known:
        if name in text:
            text = text.replace(name, " ")
    text = re.sub(r"\S+@\S+|https?://\S+|\b\S*\d\S*\b|\b[\w.-]+:[\w./-]+\b", " ", text)
    runs = []
    for match in WORD_RUN.finditer(text):
        words = [w for w in re.split(r"[ \t\-/]+", match.group(0)) if w]
        prose = [w for w in words if w.lower().strip("'’") not in TERMS and len(w) > 1]
        if len(prose) >= 2:
            runs.append(match.group(0))
    return runs


def json_strings(value: object, key: str = "") -> list[tuple[str, str]]:
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in json_strings(v, str(k))]
    if isinstance(value, list):
        return [s for v in value for s in json_strings(v, key)]
    if isinstance(value, str) and key in JSON_KEYS:
        return [(key, re.sub(r"<[^>]+>|%\{[^}]*\}", " ", value))]
    return []


# --------------------------------------------------------------------------- the world


@pytest.fixture
def world(cluster, settings, django_capture_on_commit_callbacks):
    """The demo, with live jobs on kubesim, a pending request, a loan and notifications."""
    from jobs.observation import observe_jobs
    from jobs.tasks import admission_cycle
    from k8s_sync.client import get_client
    from k8s_sync.observe import relist_all
    from tenants.access import access_for
    from tenants.models import Pool, Tenant
    from tenants.services import loans, quota

    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.LANGUAGE_CODE = "en"
    call_command("seed_demo", stdout=io.StringIO())
    call_command("seed_history", stdout=io.StringIO())
    users = {u.username: u for u in get_user_model().objects.all()}
    relist_all(get_client())  # the nodes, which the load generator picks models from
    with django_capture_on_commit_callbacks(execute=True):
        call_command("demo_load", burst=14, count=14, seed=7, every=0.01,
                     stdout=io.StringIO(), stderr=io.StringIO())
    for _ in range(3):
        with django_capture_on_commit_callbacks(execute=True):
            admission_cycle()
        cluster.advance(120)
        relist_all(get_client())
        with django_capture_on_commit_callbacks(execute=True):
            observe_jobs(timezone.now())
    vision, nlp = Tenant.objects.get(slug="vision"), Tenant.objects.get(slug="nlp")
    alice, dave = users["alice"], users["dave"]
    with django_capture_on_commit_callbacks(execute=True):
        quota.quota_request_submit(
            access=access_for(alice, vision), actor=alice,
            pool=Pool.objects.get(tenant=vision, kind="dev"),
            amounts={"gpu:NVIDIA-A100-SXM4-80GB": 12}, justification="ablation sweep")
        loans.loan_propose(access=access_for(dave, nlp), actor=dave,
                           lender_pool=Pool.objects.get(tenant=nlp, kind="prod"),
                           borrower="vision", borrower_pool="dev",
                           resource="gpu:NVIDIA-A100-SXM4-80GB", amount=2,
                           ends_at=timezone.now() + dt.timedelta(days=1))
    return users


def _known_names() -> list[str]:
    """Names and typed text in the database: shown as they are, in any language."""
    from jobs.models import TrainingJob
    from k8s_sync.models import ObservedNode, ObservedStorageClass
    from tenants.models import QuotaGrant, QuotaLoan, QuotaRequest, Tenant

    names: set[str] = set()
    for t in Tenant.objects.all():
        names.update([t.name, t.slug, t.cost_center, t.contact_email, t.suspended_reason])
    for u in get_user_model().objects.all():
        names.update([u.username, u.first_name, u.last_name, u.get_full_name(), u.email])
    for job in TrainingJob.objects.values("name", "image", "hold_reason"):
        names.update(v for v in job.values() if isinstance(v, str))
    names.update(ObservedNode.objects.values_list("name", flat=True))
    names.update(ObservedStorageClass.objects.values_list("name", flat=True))
    names.update(QuotaGrant.objects.values_list("reason", flat=True))  # typed by an admin
    names.update(QuotaRequest.objects.values_list("justification", flat=True))
    names.update(QuotaRequest.objects.values_list("decision_note", flat=True))
    names.update(QuotaLoan.objects.values_list("note", flat=True))
    from billing.models import StoragePrice

    names.update(StoragePrice.objects.values_list("storage_class", flat=True))
    return sorted((n for n in names if n), key=len, reverse=True)


def _crawl(client, known: list[str], starts: list[str]
           ) -> tuple[dict[str, list[str]], set[str]]:
    findings: dict[str, list[str]] = defaultdict(list)
    seen_names: dict[str, int] = defaultdict(int)
    visited: set[str] = set()
    queue = list(starts)
    while queue:
        url = queue.pop(0)
        path = urlsplit(url).path
        if url in visited or not path.startswith("/") or path.startswith(
                ("/static/", "/api/", "/admin/", "/i18n/", "/jsi18n/")):
            continue
        visited.add(url)
        try:
            match = resolve(path)
        except Resolver404:
            continue
        name = match.url_name or ""
        if name in NOT_FOLLOWED or seen_names[name] >= PER_NAME:
            continue
        seen_names[name] += 1
        response = client.get(url, HTTP_ACCEPT="text/html,application/json")
        if response.status_code != 200:
            continue
        kind = response.get("Content-Type", "")
        if "json" in kind:
            for key, text in json_strings(json.loads(response.content)):
                for run in english_runs(text, known):
                    findings[f"{name} {url} [json {key}]"].append(run)
            continue
        if "html" not in kind:
            continue
        parser = _Text()
        parser.feed(response.content.decode())
        for where, text in parser.found:
            for run in english_runs(text, known):
                findings[f"{name} {url} [{where}]"].append(run)
        for body in parser.json:
            for key, text in json_strings(json.loads(body)):
                for run in english_runs(text, known):
                    findings[f"{name} {url} [script json {key}]"].append(run)
        for link in parser.links:
            target = urljoin(url, link)
            if urlsplit(target).netloc in ("", "testserver") and target not in visited:
                queue.append(urlsplit(target)._replace(scheme="", netloc="").geturl())
    return findings, {n for n, c in seen_names.items() if c}


def test_every_page_speaks_chinese_for_every_role(world, client):
    from django.conf import settings as django_settings

    known = _known_names()
    client.cookies[django_settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    findings: dict[str, list[str]] = {}
    reached: set[str] = set()
    for username in ("platform", "finance", "alice", "bob"):
        client.force_login(world[username])
        client.cookies[django_settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
        found, names = _crawl(client, known, ["/", reverse("password_change_done")])
        reached |= names
        for where, runs in found.items():
            findings.setdefault(f"{username}: {where}", sorted(set(runs)))
        client.logout()
    # signed out: logging in and resetting a password (a link as the e-mail carries it)
    bob = world["bob"]
    reset_link = reverse("password_reset_confirm", kwargs={
        "uidb64": urlsafe_base64_encode(force_bytes(bob.pk)),
        "token": default_token_generator.make_token(bob)})
    client.cookies[django_settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    found, names = _crawl(client, known, [
        reverse("login"), reverse("password_reset"), reverse("password_reset_done"),
        reset_link, reverse("password_reset_complete")])
    reached |= names
    for where, runs in found.items():
        findings.setdefault(f"anonymous: {where}", sorted(set(runs)))
    from django.urls import get_resolver

    def names(resolver, prefix=""):
        for p in resolver.url_patterns:
            if hasattr(p, "url_patterns"):
                yield from names(p, prefix + str(p.pattern))
            elif p.name and not (prefix + str(p.pattern)).startswith(("api/", "admin/")):
                yield p.name

    unreached = set(names(get_resolver())) - NOT_PAGES - reached
    report = "\n".join(f"{where}: {runs}" for where, runs in sorted(findings.items()))
    assert not findings and not unreached, (
        f"English in the Chinese UI ({len(findings)} places):\n{report}\n"
        f"pages the crawler never reached: {sorted(unreached)}")


def test_the_detector_finds_english_and_lets_names_and_terms_pass():
    assert english_runs("等待 GPU 释放", []) == []
    assert english_runs("NVIDIA-H800 GPU 8 张", []) == []
    assert english_runs("队列中 waiting for capacity", []) == ["waiting for capacity"]
    assert english_runs("团队 Computer Vision 的配额", ["Computer Vision"]) == []
    parser = _Text()
    parser.feed('<p title="Queue position">甲<code>kubectl get pods -A</code>'
                '<span translate="no">0/4 nodes are available</span></p>')
    assert list(parser.found) == [("<p title>", "Queue position"), ("p", "甲")]


@pytest.mark.parametrize("url", ["/t/no-such-team/", "/t/no-such-team/jobs/1/"])
def test_the_not_found_page_speaks_chinese(client, bob, tenant_a, url):
    from django.conf import settings as django_settings
    from django.utils import translation

    client.force_login(bob)
    client.cookies[django_settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    response = client.get(url)
    assert response.status_code == 404
    parser = _Text()
    parser.feed(response.content.decode())
    with translation.override("zh-hans"):
        assert translation.gettext("Not found") in response.content.decode()
    assert [run for _, text in parser.found
            for run in english_runs(text, [tenant_a.name])] == []
    assert ">no-such-team<" not in response.content.decode()  # no switcher naming it
