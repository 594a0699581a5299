"""End-to-end flows in a real browser: Playwright driving Debian's chromium against
pytest-django's live server, with kubesim as the cluster (issue 9, item 3).

Each flow runs twice, with the UI in English and in Simplified Chinese, the language
chosen the way a user chooses it (the browser's language, or the switcher at the top of
the page), and asserts the labels the user reads, taken from the catalogue
(``locale/zh_Hans``; a label missing from it fails the Chinese run):

* a researcher submits a job from the form and watches it queue, run and finish; a
  second, bigger job waits for quota and says where it stands and why;
* a tenant admin asks for quota, a platform admin looks at the capacity and approves an
  amended amount, and the researcher's quota page and dashboard gauge show the new number;
* finance closes a month, opens the tenant's invoices and downloads the CSV and the PDF.

Screenshots of every step go to ``var/test-artifacts/e2e/``. With
``TRAINYARD_DOCS_SCREENSHOTS=<dir>`` (``make docs-screenshots``: ``docs/img``) the steps
the guides show are also saved there under fixed names (``doc=True`` below; the Chinese
run adds ``-zh`` to the name where ``zh_doc=True``). No request may leave 127.0.0.1.
Skipped when playwright or /usr/bin/chromium is missing.
"""

from __future__ import annotations

import datetime as dt
import gettext as pygettext
import os
import re
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.utils import translation

from conftest import PASSWORD

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]

try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # pragma: no cover - depends on the environment
    pytest.skip("playwright is not installed (pip install -e '.[test]')",
                allow_module_level=True)
if not (os.path.exists(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):  # pragma: no cover
    pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)", allow_module_level=True)

# One xdist worker runs them all (one browser, one live server), started first.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120), pytest.mark.xdist_group("e2e")]

ARTIFACTS = Path(settings.BASE_DIR) / "var" / "test-artifacts" / "e2e"
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
TIMEOUT_MS = 15_000
VIEWPORT = {"width": 1280, "height": 800}
LANGUAGES = ["en", "zh-hans"]
# What the browser says it prefers (Accept-Language, navigator.language) per UI language.
BROWSER_LOCALE = {"en": "en-US", "zh-hans": "zh-CN"}


def _docs_dir() -> Path | None:
    value = os.environ.get("TRAINYARD_DOCS_SCREENSHOTS", "").strip()
    if not value:
        return None
    path = Path(value)
    return path if path.is_absolute() else Path(settings.BASE_DIR) / path


# --------------------------------------------------------------------------- the catalogue


def tr(lang: str, msgid: str, **values) -> str:
    """``msgid`` as the catalogue renders it in ``lang`` (``%(name)s`` filled from
    ``values``). In a language other than English the text must be translated."""
    with translation.override(lang):
        text = translation.gettext(msgid)
    if lang != "en":
        assert text != msgid, f"not in the {lang} catalogue: {msgid!r}"
    return text % values if values else text


def resource_words(lang: str, key: str, amount: int) -> tuple[str, str]:
    """A catalog resource's label and unit for ``amount``, as the server renders them."""
    from tenants.catalog import Resource

    with translation.override(lang):
        resource = Resource.parse(key)
        return resource.label(), resource.unit_for(amount)


def tr_js(lang: str, msgid: str, plural: str | None = None, n: int = 1, **values) -> str:
    """The same for a string of static/js (the ``djangojs`` catalogue)."""
    if lang == "en":
        text = msgid if plural is None or n == 1 else plural
    else:
        catalogue = pygettext.translation("djangojs", Path(settings.BASE_DIR) / "locale",
                                          languages=[translation.to_locale(lang)])
        text = catalogue.gettext(msgid) if plural is None else \
            catalogue.ngettext(msgid, plural, n)
        assert text not in (msgid, plural), f"not in the {lang} djangojs catalogue: {msgid!r}"
    return text % values if values else text


def state_label(lang: str, state: str) -> str:
    from jobs.choices import JobState

    with translation.override(lang):
        return str(JobState(state).label)


# --------------------------------------------------------------------------- the browser


@pytest.fixture(scope="module")
def browser():
    # Playwright's sync API keeps an asyncio loop in this thread; the test's own ORM calls
    # (fixtures, driving the cluster) are plain synchronous code, so tell Django so.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    expect.set_options(timeout=TIMEOUT_MS)  # a loaded CI machine: plotly.js takes a while
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                         headless=True)
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def new_page(browser, live_server, transactional_db):
    """``new_page(lang)`` opens a fresh browser context (its own cookies) on the live
    server whose browser prefers ``lang`` (default English). Every request of every page
    is checked to stay on 127.0.0.1, and no page may break the Content-Security-Policy or
    throw a script error."""
    contexts = []
    outside: list[str] = []
    broken: list[str] = []

    def _new_page(lang: str = "en", zone: str = "UTC"):
        context = browser.new_context(base_url=live_server.url, accept_downloads=True,
                                      locale=BROWSER_LOCALE[lang], viewport=VIEWPORT,
                                      timezone_id=zone)
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        page = context.new_page()

        def check(request):
            host = urlsplit(request.url).hostname
            if request.url.startswith(("data:", "blob:", "about:")):
                return
            if host not in LOCAL_HOSTS:
                outside.append(request.url)

        def console(message):
            if message.type == "error" and "Content Security Policy" in message.text:
                broken.append(f"{page.url}: {message.text}")

        page.on("request", check)
        page.on("console", console)
        page.on("pageerror", lambda exc: broken.append(f"{page.url}: {exc}"))
        return page

    yield _new_page
    for context in contexts:
        context.close()
    assert outside == [], f"requests left 127.0.0.1: {outside}"
    assert broken == [], f"pages broke the CSP or threw: {broken}"


def shot(page, lang: str, name: str, *, doc: bool = False, zh_doc: bool = False,
         top=None) -> None:
    """Save the viewport (1280x800) as ``var/test-artifacts/e2e/<name>[-zh].png``; with
    ``doc`` (English) or ``zh_doc`` (Chinese) also into $TRAINYARD_DOCS_SCREENSHOTS for
    the guides, as a 256-colour PNG. ``top``: a locator scrolled to the top first."""
    if top is not None:
        top.evaluate("el => window.scrollTo(0, el.getBoundingClientRect().top"
                     " + window.scrollY - 12)")
    suffix = "" if lang == "en" else "-zh"
    target = ARTIFACTS / f"{name}{suffix}.png"
    page.screenshot(path=str(target), animations="disabled", caret="hide")
    docs = _docs_dir()
    if docs is not None and (zh_doc if suffix else doc):
        if suffix and not _has_cjk_font():
            pytest.fail("no Chinese font: the -zh screenshots would show boxes "
                        "(apt-get install fonts-wqy-microhei)")
        docs.mkdir(parents=True, exist_ok=True)
        _save_compressed(target, docs / f"{name}{suffix}.png")
    if top is not None:
        page.evaluate("window.scrollTo(0, 0)")


def _has_cjk_font() -> bool:
    if not shutil.which("fc-list"):
        return False
    out = subprocess.run(["fc-list", ":lang=zh"], capture_output=True, text=True,
                         timeout=30).stdout
    return bool(out.strip())


def _save_compressed(source: Path, target: Path) -> None:
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - Pillow comes with reportlab
        shutil.copyfile(source, target)
        return
    with Image.open(source) as image:
        small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT,
                                              dither=Image.Dither.NONE)
        small.save(target, optimize=True)


def switch_language(page, lang: str) -> None:
    """Choose ``lang`` in the switcher at the top of the page, as a user does."""
    if lang == "en":
        return
    with page.expect_navigation():
        page.locator("#lang-select").select_option(lang)
    expect(page.locator("html")).to_have_attribute("lang", lang)


def log_in(page, username: str, next_url: str = "/", *, switch_to: str | None = None) -> None:
    page.goto(f"/login/?next={next_url}")
    if switch_to:
        switch_language(page, switch_to)
    page.locator("input[name=username]").fill(username)
    page.locator("input[name=password]").fill(PASSWORD)
    page.locator("form.stack button[type=submit]").click()
    page.wait_for_url(lambda url: "/login/" not in url)


# --------------------------------------------------------------------------- the cluster


def _gpu_model(cluster, fragment: str) -> str:
    from kubernetes import client as k8s

    for node in k8s.CoreV1Api(cluster.api_client).list_node().items:
        product = (node.metadata.labels or {}).get("nvidia.com/gpu.product", "")
        if fragment in product and "MIG" not in product and "SHARED" not in product:
            return product
    raise AssertionError(f"no {fragment} node in the profile")


@pytest.fixture
def world(cluster, platform_admin, tenant_a):
    """Acme's pools synced with H800 quota, the cluster observed (as test_lifecycle)."""
    from k8s_sync.client import get_client
    from k8s_sync.observe import relist_all
    from tenants import services as tenant_services
    from tenants.tasks import reconcile_cluster, reconcile_pool

    reconcile_cluster.apply().get()
    relist_all(get_client())
    tenant_services.policy_update(actor=platform_admin,
                                  overcommit_factors={"gpu": 4, "cpu": 4, "memory": 4})
    h800 = _gpu_model(cluster, "H800")
    for pool in tenant_a.pools.all():
        tenant_services.quota_set(actor=platform_admin, pool=pool, reason="e2e", amounts={
            f"gpu:{h800}": 8, "cpu": 128, "memory": 1024})
        reconcile_pool.apply(args=[pool.pk]).get()
    relist_all(get_client(), kinds=["quotas"])  # the pools are in the cluster, as observed
    return {"h800": h800}


def _cycle(cluster, seconds: float = 0.0) -> None:
    from jobs.tasks import admission_cycle
    from k8s_sync.client import get_client
    from k8s_sync.observe import relist_all

    if seconds:
        cluster.advance(seconds, step=5)
    relist_all(get_client())
    admission_cycle.apply().get()


# --------------------------------------------------------------------------- the flows


def _fill_job_form(page, lang: str, *, name: str, gpus: int, h800: str) -> None:
    if not page.url.endswith("/t/acme/jobs/new/"):
        page.goto("/t/acme/jobs/new/")
    expect(page.locator("h1")).to_contain_text(tr(lang, "Submit a job"))
    expect(page.locator("label[for=id_name]")).to_have_text(tr(lang, "Name"))
    page.locator("input[name=name]").fill(name)
    page.locator("select[name=pool]").select_option("dev")
    page.locator("select[name=tier]").select_option("development")
    page.locator("input[name=image]").fill("registry.example.org/ml/trainer:1")
    page.locator("input[name=workers]").fill("1")
    page.locator("input[name=gpus_per_worker]").fill(str(gpus))
    page.locator("select[name=gpu_model]").select_option(h800)
    page.locator("input[name=cpu_per_worker]").fill("8")
    page.locator("input[name=memory_gib_per_worker]").fill("32")
    page.locator("input[name=max_run_hours]").fill("2")


@pytest.mark.parametrize("lang", LANGUAGES)
def test_researcher_submits_a_job_and_watches_it_queue_run_and_finish(
        lang, new_page, world, cluster, bob):
    """Bob's browser prefers ``lang`` (Accept-Language): no switcher needed."""
    from jobs.models import TrainingJob

    h800 = world["h800"]
    page = new_page(lang)
    log_in(page, "bob", "/t/acme/jobs/new/")
    expect(page.locator("html")).to_have_attribute("lang", lang)
    _fill_job_form(page, lang, name="e2e-resnet", gpus=1, h800=h800)
    # The live preview answers a moment after the last change (and re-lays the form out):
    # let it settle, then submit.
    preview = page.locator("#preview")
    label, unit = resource_words(lang, f"gpu:{h800}", 8)
    expect(preview).to_contain_text(tr_js(
        lang, "%(label)s: %(after)s of %(quota)s %(unit)s with this job",
        label=label, after=1, quota=8, unit=unit))
    with translation.override(lang):   # the one verdict, as the server words it
        fits = translation.ngettext(
            "Fits now: it would start at once on %(n)s node (%(nodes)s, switch %(switch)s).",
            "Fits now: it would start at once on %(n)s nodes (%(nodes)s, switch %(switch)s).",
            1) % {"n": 1, "nodes": "h800-0", "switch": "switch-b1"}
    expect(preview.locator(".verdict[data-verdict=fits]")).to_have_text(fits)
    expect(preview).not_to_have_attribute("aria-busy", "true")
    expect(page.locator("#job-form .field-error:not(:empty)")).to_have_count(0)
    shot(page, lang, "researcher-new-job", doc=True, zh_doc=True, top=page.locator("body"))
    page.locator("#job-form button[type=submit].primary").click()
    page.wait_for_url(re.compile(r"/t/acme/jobs/\d+/$"))
    job = TrainingJob.objects.get(tenant__slug="acme", name="e2e-resnet")
    assert page.url.rstrip("/").endswith(f"/t/acme/jobs/{job.pk}")
    body = page.locator("body")
    state = page.locator("h1 .badge[class*=state-]")
    expect(body).to_contain_text(tr(lang, "Job %(n)s is queued.", n="e2e-resnet"))
    expect(page.locator(".card h2", has_text=tr(lang, "Timeline"))).to_be_visible()
    # Submitting runs an admission cycle at once (eager Celery): the empty cluster admits
    # it straight away, so the page shows it queued in its history and admitted now.
    history = page.locator("ol.timeline li")
    expect(history.nth(0)).to_contain_text(state_label(lang, "queued"))
    expect(state).to_have_class(re.compile(r"state-(queued|admitted)"))
    shot(page, lang, "researcher-job-queued")

    _cycle(cluster)
    _cycle(cluster, 30)  # the pods start (startup 2 s) and are observed running
    job.refresh_from_db()
    assert job.state == "running", job.state
    page.reload()
    expect(state).to_have_class("badge state-running")
    expect(state).to_have_text(state_label(lang, "running"))
    shot(page, lang, "researcher-job-running", doc=True)

    # A second job asks for all 8 H800s of the pool while one is busy: above the quota it
    # borrows idle cards (issue 27), but only 7 are idle: it waits, and its page says
    # where it stands and why.
    _fill_job_form(page, lang, name="e2e-big", gpus=8, h800=h800)
    expect(preview).to_contain_text(tr_js(
        lang, "%(label)s: %(after)s of %(quota)s %(unit)s with this job", label=label,
        after=9, quota=8, unit=unit))
    expect(preview.locator(".verdict[data-verdict=waits]")).to_have_count(1)
    expect(preview).not_to_have_attribute("aria-busy", "true")
    page.locator("#job-form button[type=submit].primary").click()
    page.wait_for_url(re.compile(r"/t/acme/jobs/\d+/$"))
    big = TrainingJob.objects.get(tenant__slug="acme", name="e2e-big")
    assert big.state == "queued", big.state
    expect(state).to_have_text(state_label(lang, "queued"))
    banner = page.locator(".banner")
    expect(banner).to_contain_text(tr(
        lang, "#%(p)s in the pool's queue, #%(m)s for its GPU model.", p=1, m=1))
    if lang != "en":  # the reason and the history are stored texts, shown in Chinese too
        expect(banner).not_to_contain_text("above your")
        expect(history.nth(0)).not_to_contain_text("Submitted")
    shot(page, lang, "researcher-job-waiting", doc=True, zh_doc=True)

    page.goto("/t/acme/dashboard/")
    expect(page.locator(".card h2").first).to_contain_text(tr(lang, "Quota in use"))
    gauge = page.locator(f"figure.gauge[data-key='gpu:{h800}']")
    expect(gauge.locator("[data-field=quota]")).to_have_text("16")
    expect(gauge.locator(".js-plotly-plot")).to_have_count(1)
    waiting = page.locator("table[data-live=waiting]")
    expect(waiting).to_contain_text("e2e-big")
    shot(page, lang, "dashboard", doc=True)

    page.goto("/t/acme/jobs/")
    expect(page.locator("table.table thead")).to_contain_text(tr(lang, "Where it stands"))
    expect(page.locator("tbody tr", has_text="e2e-big")).to_contain_text(tr(
        lang, "#%(p)s in pool · #%(m)s for this GPU", p=1, m=1))
    shot(page, lang, "researcher-jobs", doc=True)

    # the small profile runs a job for 600 simulated seconds
    for _ in range(8):
        _cycle(cluster, 100)
        job.refresh_from_db()
        if job.state == "succeeded":
            break
    assert job.state == "succeeded", job.state
    page.goto(f"/t/acme/jobs/{job.pk}/")
    expect(state).to_have_class("badge state-succeeded")
    expect(state).to_have_text(state_label(lang, "succeeded"))
    expect(history.filter(has_text=state_label(lang, "running"))).to_have_count(1)
    shot(page, lang, "researcher-job-succeeded")


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_refused_submit_shows_its_reason_and_a_template_keeps_what_was_typed(
        lang, new_page, world, bob):
    """No error before anything is typed; a template fills its fields in place (no
    reload, the typed name stays, a GPU model the pool has quota for); a job that could
    never start is refused, and the reason stays at its field and at the top after the
    live preview has run."""
    from jobs.models import TrainingJob
    from tenants.models import Tenant

    # a platform admin capped the team's borrowing at its quota: 16 cards could never start
    Tenant.objects.filter(slug="acme").update(borrowing_cap=1)
    page = new_page(lang)
    log_in(page, "bob", "/t/acme/jobs/new/")
    preview = page.locator("#preview")
    expect(preview).not_to_have_attribute("aria-busy", "true")
    expect(page.locator("#job-form .field-error:not(:empty)")).to_have_count(0)
    expect(page.locator("#form-errors")).to_have_count(0)

    page.locator("input[name=name]").fill("e2e-refused")
    page.evaluate("window.__same_page = true")
    page.locator("select[name=template]").select_option("ddp-8gpu")
    expect(page.locator("input[name=gpus_per_worker]")).to_have_value("8")
    assert page.evaluate("window.__same_page === true"), "choosing a template reloaded"
    expect(page.locator("input[name=name]")).to_have_value("e2e-refused")
    expect(page.locator("select[name=gpu_model]")).to_have_value(world["h800"])

    page.locator("input[name=workers]").fill("2")  # 16 GPUs: the pool may hold 8
    expect(preview).not_to_have_attribute("aria-busy", "true")
    page.locator("#job-form button[type=submit].primary").click()
    summary = page.locator("#form-errors")
    expect(summary).to_be_visible()
    expect(summary).to_contain_text(tr(lang, "The job was not submitted."))
    field_error = page.locator(".field-error[data-field=gpus_per_worker]")
    expect(field_error).not_to_be_empty()
    reason = field_error.inner_text()
    expect(summary).to_contain_text(reason)
    # the live preview has answered since the page loaded: the server's reason is still there
    expect(preview).not_to_have_attribute("aria-busy", "true")
    page.wait_for_timeout(600)
    expect(field_error).to_have_text(reason)
    assert not TrainingJob.objects.filter(name="e2e-refused").exists()
    shot(page, lang, "researcher-refused-submit", top=page.locator("body"))


@pytest.mark.parametrize("lang", LANGUAGES)
def test_admin_approves_an_amended_quota_request_and_the_researcher_sees_it(
        lang, new_page, world, bob, alice, platform_admin):
    """Alice picks the language in the switcher on the login page; Bob's and Pat's
    browsers prefer it."""
    from tenants.models import QuotaRequest

    researcher = new_page(lang)
    log_in(researcher, "bob", "/t/acme/quota/")
    prod = researcher.locator("section.card",
                              has=researcher.locator("code", has_text="ty-acme-prod"))
    cpu_granted = prod.locator("tbody tr", has=researcher.locator(
        "code", has_text=re.compile(r"^cpu$"))).locator("td").nth(1)
    expect(cpu_granted).to_have_text(re.compile(r"^128\b"))
    # the numbers are in the HTML: no need to wait for the charts (plotly.js is large)
    researcher.goto("/t/acme/dashboard/", wait_until="commit")
    cpu_gauge = researcher.locator("figure.gauge[data-key=cpu] [data-field=quota]")
    expect(cpu_gauge).to_have_text("256")  # 128 cores in each pool

    page = new_page()
    log_in(page, "alice", "/t/acme/members/", switch_to=lang)
    expect(page.locator("nav.tabs [aria-current=page]")).to_have_text(tr(lang, "Members"))
    expect(page.locator("tbody")).to_contain_text("bob")
    shot(page, lang, "tenant-admin-members", doc=True)
    page.goto("/t/acme/quota/")
    expect(page.locator("html")).to_have_attribute("lang", lang)
    form = page.locator("form", has=page.locator(
        "button", has_text=tr(lang, "Send request")))
    form.locator("select[name=pool]").select_option("prod")
    form.locator("select[name=resource_0]").select_option("cpu")
    # the pool's current amount and the unit, beside the new amount, as soon as chosen
    first = form.locator("tr[data-request-row]").first
    expect(first.locator("[data-field=current]")).to_have_text(f"128 {tr(lang, 'cores')}")
    expect(first.locator("[data-field=unit]")).to_have_text(tr(lang, "cores"))
    form.locator("input[name=amount_0]").fill("192")
    form.locator("textarea[name=justification]").fill(
        "A bigger data-loading fleet." if lang == "en" else "更多的数据加载节点。")
    shot(page, lang, "tenant-admin-quota-request", doc=True, zh_doc=True,
         top=page.locator("section.card", has=form))
    form.locator("button[type=submit]").click()
    request = QuotaRequest.objects.get(tenant__slug="acme")
    body = page.locator("body")
    expect(body).to_contain_text(tr(lang, "Request #%(n)s was sent to the platform admins.",
                                    n=request.pk))
    assert request.status == "pending"
    row = page.locator("tbody tr", has_text="128 → 192")
    expect(row.locator(".badge")).to_have_text(tr(lang, "Pending"))

    admin = new_page(lang)
    log_in(admin, "pat", "/platform/capacity/")
    expect(admin.locator("h1")).to_have_text(tr(lang, "GPU capacity"))
    expect(admin.locator("tbody").first).to_contain_text(world["h800"])
    shot(admin, lang, "cluster-capacity", doc=True)
    admin.goto("/platform/quota-requests/")
    expect(admin.locator("h1")).to_have_text(tr(lang, "Quota requests"))
    expect(admin.locator("nav.tabs [aria-current=page]")).to_have_text(tr(lang, "Pending"))
    shot(admin, lang, "admin-quota-requests", doc=True)
    admin.locator("tbody a", has_text=str(request.pk)).click()
    admin.wait_for_url(f"**/platform/quota-requests/{request.pk}/")
    expect(admin.locator("section.card h2")).to_contain_text(tr(lang, "Facts"))
    item = request.items.get()
    admin.locator(f"input[name=amount_{item.pk}]").fill("160")
    admin.locator("textarea[name=note]").fill(
        "160 for now; ask again in a month." if lang == "en" else "先给 160，一个月后再申请。")
    shot(admin, lang, "admin-quota-approve", doc=True, zh_doc=True)
    admin.locator("button[name=decision][value=approve]",
                  has_text=tr(lang, "Approve")).click()
    admin.wait_for_url("**/platform/quota-requests/")
    expect(admin.locator("body")).to_contain_text(tr(
        lang, "Request #%(n)s was approved; the cluster is being updated.", n=request.pk))
    request.refresh_from_db()
    assert request.status == "approved"

    page.reload()
    expect(row.locator(".badge")).to_have_text(tr(lang, "Approved"))

    researcher.goto("/t/acme/quota/")
    expect(cpu_granted).to_have_text(re.compile(r"^160\b"))
    expect(researcher.locator("body")).to_contain_text(f"({tr(lang, 'approved')} 160)")
    shot(researcher, lang, "researcher-quota", doc=True)
    researcher.goto("/t/acme/dashboard/", wait_until="commit")
    expect(cpu_gauge).to_have_text("288")  # 160 in prod + 128 in dev


@pytest.mark.parametrize("lang", LANGUAGES)
def test_finance_closes_a_month_and_downloads_the_invoice(lang, new_page, settings, tenant_a,
                                                          platform_admin, finance_user):
    """Fran switches the language on the billing page, closes October, opens Acme's
    invoices and downloads the invoice as CSV and as PDF."""
    from billing import services
    from billing.models import Invoice
    from billing.tests.conftest import A100_PRICE, at, make_job, run

    settings.TIME_ZONE = "UTC"
    settings.TRAINYARD_CURRENCY = "USD"
    services.rate_card_create(actor=platform_admin, effective_from=dt.date(2026, 1, 1),
                              gpus=[A100_PRICE], storage=[], egress_gib=Decimal("0.08"))
    # acme: 2 workers x 4 A100 for 3 hours in October = 24 GPU-hours x 1.65
    make_job(tenant_a, run(at("2026-10-05", "10:00"), at("2026-10-05", "13:00")), workers=2,
             gpus=4, name="resnet-big")
    services.ledger_ingest_gpu(now=at("2026-11-01", "00:30"))

    page = new_page()
    log_in(page, "fran", "/billing/?month=2026-10")
    switch_language(page, lang)
    expect(page.locator("h1")).to_have_text(f"{tr(lang, 'Billing')} 2026-10")
    # closing issues invoices that never change: the page asks first
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("button", has_text=tr(lang, "Close %(m)s and issue the invoices",
                                       m="2026-10")).click()
    expect(page.locator("body")).to_contain_text(tr(
        lang, "%(month)s is closed: %(n)s invoices issued.", month="2026-10", n=1))
    invoice = Invoice.objects.get(tenant=tenant_a, period=dt.date(2026, 10, 1))
    assert invoice.is_issued
    shot(page, lang, "finance-billing", doc=True)

    # Acme's invoices, as its members see them: the issued invoice with PDF and CSV links
    page.locator("tbody a", has_text="Acme Vision").click()
    page.wait_for_url(f"**/t/acme/invoices/{invoice.pk}/")
    page.locator("nav.tabs a", has_text=tr(lang, "Invoices")).click()
    page.wait_for_url("**/t/acme/invoices/")
    expect(page.locator("section.card h2", has_text=tr(lang, "Invoices and credit notes"))
           ).to_be_visible()
    row = page.locator("tbody tr", has=page.locator("a", has_text=invoice.number))
    expect(row).to_contain_text("CC-acme")
    expect(row).to_contain_text("39.60 USD")
    with page.expect_download() as info:
        row.locator("a", has_text="CSV").click()
    csv_file = _save(info.value, ".csv", lang)
    text = csv_file.read_text(encoding="utf-8")
    assert f"{invoice.number},invoice,issued,Acme Vision,CC-acme,2026-10,USD" in text
    assert ",24," in text and text.strip().endswith("39.60")  # one billed-quantity rule

    row.locator("a", has_text=invoice.number).click()
    page.wait_for_url(f"**/t/acme/invoices/{invoice.pk}/")
    expect(page.locator("section.card h2").first).to_contain_text(invoice.number)
    # the invoice as a document (issue 30): issuer, bill-to, service period, due date
    expect(page.locator('[data-party="issuer"]')).to_contain_text(
        settings.TRAINYARD_INVOICE_ISSUER_NAME)
    expect(page.locator('[data-party="bill_to"]')).to_contain_text("CC-acme")
    expect(page.locator('[data-field="service_period"]')).to_have_text(
        "2026-10-01 – 2026-10-31")
    expect(page.locator('[data-field="due_date"]')).to_have_text(
        f"{invoice.issue_date + dt.timedelta(days=30):%Y-%m-%d}")
    # the utilisation figures of the invoice's month (issue 27): 24 allocated GPU-hours of
    # A100, no quota held and no utilisation measured, with their definitions; nothing
    # overflows the card
    idle = page.locator("section#utilisation")
    a100 = idle.locator(f'tr[data-kind="gpu:{A100_PRICE["gpu_model"]}"]')
    expect(a100.locator('[data-field="allocated"]')).to_have_text("24.00")
    expect(a100.locator('[data-field="quota_held"]')).to_have_text("0.00")
    expect(idle.locator("p.formula")).to_be_visible()
    assert idle.evaluate("e => e.scrollWidth <= e.clientWidth + 1")
    shot(page, lang, "finance-invoice", doc=True, zh_doc=True)
    with page.expect_download() as info:
        page.locator("a.button", has_text=tr(lang, "Download PDF")).click()
    pdf_file = _save(info.value, ".pdf", lang)
    data = pdf_file.read_bytes()
    assert data.startswith(b"%PDF-") and len(data) > 1000
    if shutil.which("pdftotext"):
        out = subprocess.run(["pdftotext", "-layout", str(pdf_file), "-"], check=True,
                             capture_output=True, text=True, timeout=30).stdout
        assert invoice.number in out and "CC-acme" in out and "39.60" in out

    # a job's run on Oct 31 reported after October was closed: November's page lists it
    # before November closes, as dated usage from October (1 GPU-hour at 1.65)
    from jobs.services import job_transition

    late_job = make_job(tenant_a, run(at("2026-10-31", "21:00"))[:2], name="late-report")
    for state, when in (("running", "22:00"), ("succeeded", "23:00")):
        assert job_transition(job_id=late_job.pk, from_states=["admitted", "running"],
                              to_state=state, reason="test", at=at("2026-10-31", when))
    services.ledger_ingest_gpu()  # the ten-minute ingest
    page.goto("/billing/?month=2026-11")
    late = page.locator("#late-lines tbody tr[data-tenant=acme]")
    expect(late).to_have_count(1)
    expect(late).to_contain_text("2026-10")
    expect(late.locator("[data-field=amount]")).to_have_text("1.65 USD")
    box = page.locator("#late-lines table").bounding_box()
    assert box is not None and box["width"] <= page.viewport_size["width"]


def _save(download, suffix: str, lang: str) -> Path:
    assert download.failure() is None
    assert download.suggested_filename.endswith(suffix), download.suggested_filename
    target = ARTIFACTS / lang / download.suggested_filename
    target.parent.mkdir(parents=True, exist_ok=True)
    download.save_as(target)
    return target


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_budget_out_of_range_gets_a_field_error(lang, new_page, tenant_a, alice):
    """1e12 as a monthly budget: the browser holds it back at the field (the input's own
    range), and when sent anyway the server answers at the field, keeps what was typed and
    stores nothing; the page does not break."""
    from billing.models import Budget

    page = new_page(lang)
    log_in(page, "alice", "/t/acme/invoices/")
    amount = page.locator("input[name=amount]")
    amount.fill("1e12")
    save = page.locator("form[action$='/budget/'] button[type=submit]")
    save.click()
    assert amount.evaluate("el => el.validity.rangeOverflow"), "the field's max did not hold"
    assert amount.evaluate("el => el.validationMessage")
    amount.evaluate("el => el.form.noValidate = true")
    save.click()
    error = page.locator("#budget-error")
    expect(error).to_be_visible()
    expect(error).to_contain_text("12")  # "no more than 12 digits before the decimal point"
    expect(page.locator("input[name=amount]")).to_have_value("1e12")
    expect(page.locator("h1")).to_be_visible()
    assert not Budget.objects.exists()
    shot(page, lang, "tenant-budget-refused", top=error)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_destructive_actions_ask_first(lang, new_page, world, bob, alice):
    """Cancelling a job and removing a member ask in the reader's language; saying no
    changes nothing, saying yes does it."""
    from jobs import services as job_services
    from jobs.models import TrainingJob
    from jobs.tests.conftest import submission
    from tenants.access import access_for
    from tenants.models import Membership, Tenant

    tenant = Tenant.objects.get(slug="acme")
    job = job_services.job_submit(access=access_for(bob, tenant), actor=bob, pool="dev",
                                  data=submission(name="e2e-keep", gpu_model=world["h800"],
                                                  gpus_per_worker=1))
    page = new_page(lang)
    log_in(page, "alice", f"/t/acme/jobs/{job.pk}/")
    asked: list[str] = []

    def answer(accept: bool):
        def handler(dialog):
            asked.append(dialog.message)
            dialog.accept() if accept else dialog.dismiss()
        return handler

    cancel = page.locator("form[action$='/cancel/'] button[type=submit]")
    page.once("dialog", answer(False))
    cancel.click()
    page.wait_for_timeout(300)
    assert asked == [tr(lang, "Cancel %(n)s? Its pods stop now and it does not come back "
                              "to the queue.", n="e2e-keep")]
    job.refresh_from_db()
    assert job.state != "cancelled"
    page.once("dialog", answer(True))
    with page.expect_navigation():
        cancel.click()
    assert TrainingJob.objects.get(pk=job.pk).state == "cancelled"

    page.goto("/t/acme/members/")
    remove = page.locator("tr", has_text="bob").locator("form[data-confirm] button")
    page.once("dialog", answer(False))
    remove.click()
    page.wait_for_timeout(300)
    assert asked[-1] == tr(lang, "Remove %(u)s from %(t)s?", u="bob", t="acme")
    assert Membership.objects.filter(user=bob, tenant=tenant).exists()


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_running_jobs_logs_appear_on_its_page(lang, new_page, world, cluster, bob):
    """Bob opens his running job: the log panel shows the Master pod's training output,
    follows it as the job goes on (English), offers the log as a file, and fits its card."""
    from jobs import services as job_services
    from jobs.tests.conftest import submission
    from tenants.access import access_for
    from tenants.models import Tenant

    job = job_services.job_submit(
        access=access_for(bob, Tenant.objects.get(slug="acme")), actor=bob, pool="dev",
        data=submission(name="e2e-logs", gpu_model=world["h800"], gpus_per_worker=1,
                        annotations={"kubesim.trainyard.io/run-seconds": "3600"}))
    _cycle(cluster)
    _cycle(cluster, 10)
    cluster.advance(200, step=50)
    page = new_page(lang)
    log_in(page, "bob", f"/t/acme/jobs/{job.pk}/")
    panel = page.locator("#logs")
    if lang == "en":  # a new string: the Chinese run checks the structure, not the words
        expect(panel.locator("h2")).to_have_text("Logs")
    expect(panel.locator("h2")).to_be_visible()
    expect(panel.locator("[data-log-pod] option")).to_have_text([f"{job.k8s_name}-master-0"])
    text = panel.locator("[data-log-text]")
    expect(text).to_contain_text("torchrun: MASTER_ADDR=")
    expect(text).to_contain_text(" step 300 loss=")
    expect(panel.locator("[data-log-follow]")).to_be_checked()
    href = panel.locator("[data-log-download]").get_attribute("href") or ""
    assert f"pod={job.k8s_name}-master-0" in href and "download=1" in href
    assert page.evaluate(OVERFLOW_JS) == []
    if lang == "en":  # following: later lines arrive without a reload
        cluster.advance(120, step=60)
        expect(text).to_contain_text(" step 500 loss=")
        assert text.inner_text().count(" step 300 loss=") == 1  # each line once
    shot(page, lang, "researcher-job-logs", doc=True, top=panel)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_rate_card_form_saves_and_shows_a_field_error(lang, new_page, platform_admin):
    """One row per GPU model the cluster reports: a PUE below 1 is refused at its field
    with what was typed kept and nothing saved; corrected, the card is saved and priced
    (with its currency); the form fits its card."""
    from django.utils import timezone

    from billing.models import RateCard
    from k8s_sync.models import ObservedNode

    ObservedNode.objects.create(name="a100-0", gpu_product="NVIDIA-A100-SXM4-80GB",
                                gpu_model="NVIDIA-A100-SXM4-80GB", gpu_count=8,
                                gpu_memory_mib=81920, observed_at=timezone.now())
    page = new_page(lang)
    log_in(page, "pat", "/billing/rates/", switch_to=lang)
    form = page.locator("#rate-card-form")
    expect(form.locator("select[name='gpus-0-gpu_model']")).to_have_value(
        "NVIDIA-A100-SXM4-80GB")
    form.locator("input[name=effective_from]").fill(
        (timezone.localdate() + dt.timedelta(days=40)).isoformat())
    for name, value in {"purchase_price": "26280", "depreciation_months": "36",
                        "power_watts": "500", "pue": "0.5", "electricity_kwh": "0.2"}.items():
        form.locator(f"input[name='gpus-0-{name}']").fill(value)
    # the browser holds a PUE below 1 back at its field (the input's min); sent anyway,
    # the server answers at the field
    pue = form.locator("input[name='gpus-0-pue']")
    assert pue.evaluate("el => el.validity.rangeUnderflow"), "the field's min did not hold"
    form.evaluate("el => el.noValidate = true")
    form.locator("button[type=submit]").click()
    error = page.locator("[data-field='gpus-0-pue']")
    expect(error).to_be_visible()
    expect(page.locator("input[name='gpus-0-pue']")).to_have_value("0.5")
    assert not RateCard.objects.exists()
    assert page.evaluate(OVERFLOW_JS) == []
    page.locator("input[name='gpus-0-pue']").fill("1.5")
    with page.expect_navigation():
        page.locator("#rate-card-form button[type=submit]").click()
    expect(page.locator("section.card table").first).to_contain_text("1.15")  # 1 + 0.15
    expect(page.locator("section.card table").first).to_contain_text("USD")
    assert RateCard.objects.get().gpu_prices.get().pue == Decimal("1.5")


OVERFLOW_JS = """() => {
  const out = [];
  for (const card of document.querySelectorAll('.card, main')) {
    const box = card.getBoundingClientRect();
    for (const el of card.querySelectorAll('table, pre, .chart, img, dl code')) {
      const r = el.getBoundingClientRect();
      if (r.width && (r.right > box.right + 1 || r.left < box.left - 1)) {
        const name = card.querySelector('h2')?.textContent?.trim() || card.tagName;
        out.push(`${el.tagName.toLowerCase()} in ${name}: ` +
                 `${Math.round(r.width)} px in ${Math.round(box.width)} px`);
      }
    }
  }
  const page = document.documentElement;
  if (page.scrollWidth > page.clientWidth + 1) {
    out.push(`the page is ${page.scrollWidth} px wide in a ${page.clientWidth} px window`);
  }
  return out;
}"""

# The pages with the widest tables (jobs with their reasons, pools, nodes, the queue) and
# the charts.
LAYOUT_PAGES = {
    "alice": ["/t/acme/dashboard/", "/t/acme/jobs/", "/t/acme/", "/t/acme/quota/"],
    "pat": ["/cluster/", "/platform/cluster/", "/platform/capacity/", "/platform/queue/"],
}


@pytest.mark.parametrize("lang", LANGUAGES)
def test_no_table_is_wider_than_its_card(lang, browser, live_server, world, cluster, bob,
                                         alice, platform_admin):
    """At 1280 and 1920 px, in English and Chinese, with jobs running and waiting (long
    reasons), no table, chart or picture reaches outside its card and no page scrolls
    sideways (element boxes measured in the browser)."""
    from jobs import services as job_services
    from jobs.tests.conftest import submission
    from tenants.access import access_for
    from tenants.models import Tenant

    tenant = Tenant.objects.get(slug="acme")
    jobs = [job_services.job_submit(  # the pool holds 8: two run, two wait with their reasons
        access=access_for(bob, tenant), actor=bob, pool="dev",
        data=submission(name=f"e2e-layout-{i}-with-a-long-name", gpu_model=world["h800"],
                        gpus_per_worker=4, image="registry.example.org/research/"
                        "a-rather-long-image-name-for-the-layout:2026.12.02-cuda12"))
        for i in range(4)]
    _cycle(cluster)
    problems = []
    # a running job's own page too: its image, command and pods in their cards
    pages = {**LAYOUT_PAGES, "alice": [*LAYOUT_PAGES["alice"], f"/t/acme/jobs/{jobs[0].pk}/"]}
    for user, urls in pages.items():
        context = browser.new_context(base_url=live_server.url, locale=BROWSER_LOCALE[lang],
                                      viewport={"width": 1280, "height": 900},
                                      timezone_id="UTC")
        context.set_default_timeout(TIMEOUT_MS)
        try:
            page = context.new_page()
            log_in(page, user, urls[0])
            for url in urls:
                page.set_viewport_size({"width": 1280, "height": 900})
                page.goto(url)  # waits for the page and its scripts (plotly.js included)
                page.wait_for_timeout(500)  # the charts' data arrive and draw
                for width in (1280, 1600, 1920):  # the page reflows; charts resize with it
                    page.set_viewport_size({"width": width, "height": 900})
                    page.wait_for_timeout(150)
                    problems += [f"{width} px {url}: {p}" for p in page.evaluate(OVERFLOW_JS)]
        finally:
            context.close()
    assert problems == []


@pytest.mark.parametrize("lang", LANGUAGES)
def test_gauge_quota_page_and_preview_show_the_same_in_use(lang, new_page, tenant_a, bob):
    """One admitted job holds 2 cards of acme's dev pool and has no pod yet: the dashboard
    gauge, the quota page and the job form's live preview all say 2 in use of 8 (issue 15:
    one number everywhere), in either language. No cluster needed: pages read the
    observed rows."""
    from django.utils import timezone

    from jobs.models import TrainingJob
    from k8s_sync.models import ObservedNode
    from tenants.models import QuotaGrant

    model = "NVIDIA-H800"
    key = f"gpu:{model}"
    ObservedNode.objects.create(
        name="h800-0", uid="h800-0", resource_version="1", observed_at=timezone.now(),
        gpu_product=model, gpu_model=model, gpu_count=8, gpu_memory_mib=81920, ready=True,
        allocatable={"cpu": "192", "memory": "2Ti", "nvidia.com/gpu": "8", "pods": "110"})
    dev = tenant_a.pools.get(kind="dev")
    for resource, amount in {key: 8, "cpu": 128, "memory": 1024}.items():
        QuotaGrant.objects.create(pool=dev, resource=resource, amount=amount)
    TrainingJob.objects.create(
        tenant=tenant_a, pool=dev, name="holder", image="trainer:1", tier="development",
        max_run_seconds=3600, state="admitted", workers=1, gpus_per_worker=2, gpu_model=model,
        cpu_per_worker=8, memory_gib_per_worker=32, placement=["h800-0"],
        admitted_at=timezone.now())

    page = new_page(lang)
    log_in(page, "bob", "/t/acme/quota/")
    row = page.locator(f"tr[data-pool=dev][data-key='{key}']")
    expect(row.locator("[data-field=used]")).to_have_text("2")
    expect(row.locator("[data-field=quota]")).to_have_text("8")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

    page.goto("/t/acme/jobs/new/", wait_until="domcontentloaded")
    _fill_job_form(page, lang, name="probe", gpus=1, h800=model)
    line = page.locator(f"#preview [data-key='{key}']")
    expect(line).to_have_attribute("data-in-use", "2")
    expect(line).to_have_attribute("data-quota", "8")
    expect(line).to_contain_text("3")   # 2 in use + this job's 1

    # the numbers are the server's, in the HTML before plotly.js: no need to wait for it
    page.goto("/t/acme/dashboard/", wait_until="commit")
    gauge = page.locator(f"figure.gauge[data-key='{key}']")
    expect(gauge.locator("[data-field=used]")).to_have_text("2")
    expect(gauge.locator("[data-field=quota]")).to_have_text("8")
    expect(gauge).to_have_attribute("data-state", "ok")


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_borrowed_job_says_it_may_be_reclaimed_and_the_cluster_page_measures_idle_cards(
        lang, new_page, world, cluster, platform_admin, tenant_a, bob):
    """Issue 27. Bob's development job is larger than his pool's grant: it runs on idle
    cards and its page says it may be reclaimed, and with what grace. Then a platform admin
    caps the team's borrowing: a job that fits the idle cards waits with the cap named,
    and the cluster page shows the GPU-hours idle while it waited, under that cause."""
    from django.utils import timezone

    from jobs import services as job_services
    from jobs.models import AdmissionState
    from jobs.tests.conftest import submission
    from tenants import services as tenant_services
    from tenants.access import access_for

    dev = tenant_a.pools.get(kind="dev")
    tenant_services.quota_set(actor=platform_admin, pool=dev, reason="e2e", amounts={
        f"gpu:{world['h800']}": 2, "cpu": 128, "memory": 1024})
    access = access_for(bob, tenant_a)
    borrowed = job_services.job_submit(access=access, actor=bob, pool="dev", data=submission(
        name="e2e-borrows", gpu_model=world["h800"], gpus_per_worker=4,
        annotations={"kubesim.trainyard.io/run-seconds": "7200"}))
    _cycle(cluster)
    _cycle(cluster, 10)
    borrowed.refresh_from_db()
    assert borrowed.borrowing and borrowed.state in ("admitted", "running")

    page = new_page(lang)
    log_in(page, "bob", f"/t/acme/jobs/{borrowed.pk}/", switch_to=lang)
    expect(page.locator("#job-reclaim")).to_have_text(tr(
        lang, "This job borrows idle capacity beyond your %(p)s pool's quota: when the owner "
              "needs its quota back, it gets %(g)s s to checkpoint, then stops and goes back "
              "to the queue, and resumes from its checkpoint.", p="dev", g=300))
    assert page.evaluate(OVERFLOW_JS) == []
    shot(page, lang, "researcher-borrowed-job", top=page.locator("#job-reclaim"))

    tenant_a.borrowing_cap = 3   # a platform admin caps the team's borrowing: 3 x 2 cards
    tenant_a.save(update_fields=["borrowing_cap", "updated_at"])
    capped = job_services.job_submit(access=access, actor=bob, pool="dev", data=submission(
        name="e2e-capped", gpu_model=world["h800"], gpus_per_worker=4))
    _cycle(cluster)
    capped.refresh_from_db()
    assert capped.state == "queued" and capped.wait_reason["code"] == "jobs.wait.borrow_cap"
    # the next explaining pass stands for the minute since the last one: 4 cards idle
    AdmissionState.objects.filter(pk=1).update(
        explained_at=timezone.now() - dt.timedelta(seconds=60))
    _cycle(cluster)

    admin = new_page(lang)
    log_in(admin, "pat", "/platform/cluster/", switch_to=lang)
    section = admin.locator("[data-idle-waiting]")
    expect(section.locator("h2")).to_contain_text(tr(lang, "Idle while work waited"))
    expect(section.locator("[data-idle-hours]")).to_have_text("0.1")   # 4 cards x 60 s
    row = section.locator("tr[data-cause=cap]")
    expect(row.locator("td").first).to_have_text(tr(lang, "Caps set by an admin"))
    expect(row.locator("td").nth(1)).to_have_text("0.1")
    expect(section.locator("[data-figure=idle] .plot-container")).to_be_visible()
    assert admin.evaluate(OVERFLOW_JS) == []
    shot(admin, lang, "platform-idle-while-waiting", top=section)
