"""End-to-end flows in a real browser: Playwright driving Debian's chromium against
pytest-django's live server, with kubesim as the cluster (issue 9, item 3).

* a researcher submits a job from the form and watches it queue, run and finish;
* a tenant admin asks for quota, a platform admin approves an amended amount, and the
  researcher's quota page shows the new number;
* finance closes a month and downloads an invoice as CSV;
* logging in and the quota page in Simplified Chinese, through the language switcher.

Screenshots go to ``var/test-artifacts/e2e/``. No request may leave 127.0.0.1.
Skipped when playwright or /usr/bin/chromium is missing.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.conf import settings

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

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

ARTIFACTS = Path(settings.BASE_DIR) / "var" / "test-artifacts" / "e2e"
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
TIMEOUT_MS = 15_000


@pytest.fixture(scope="module")
def browser():
    # Playwright's sync API keeps an asyncio loop in this thread; the test's own ORM calls
    # (fixtures, driving the cluster) are plain synchronous code, so tell Django so.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
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
    """``new_page()`` opens a fresh browser context (its own cookies) on the live server.
    Every request of every page is checked to stay on 127.0.0.1."""
    contexts = []
    outside: list[str] = []

    def _new_page():
        context = browser.new_context(base_url=live_server.url, accept_downloads=True,
                                      locale="en-US", viewport={"width": 1280, "height": 900})
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        page = context.new_page()

        def check(request):
            host = urlsplit(request.url).hostname
            if request.url.startswith(("data:", "blob:", "about:")):
                return
            if host not in LOCAL_HOSTS:
                outside.append(request.url)

        page.on("request", check)
        return page

    yield _new_page
    for context in contexts:
        context.close()
    assert outside == [], f"requests left 127.0.0.1: {outside}"


def shot(page, name: str, full_page: bool = True) -> None:
    """Save a screenshot. A full-page one resizes the viewport for a moment: take it when
    nothing is to be clicked on that page any more (or pass full_page=False)."""
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=full_page)


def log_in(page, username: str, next_url: str = "/") -> None:
    page.goto(f"/login/?next={next_url}")
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


def test_researcher_submits_a_job_and_watches_it_queue_run_and_finish(new_page, world,
                                                                      cluster, bob):
    from jobs.models import TrainingJob

    page = new_page()
    log_in(page, "bob", "/t/acme/jobs/new/")
    page.goto("/t/acme/jobs/new/")
    page.locator("input[name=name]").fill("e2e-resnet")
    page.locator("select[name=pool]").select_option("dev")
    page.locator("select[name=tier]").select_option("development")
    page.locator("input[name=image]").fill("registry.example.org/ml/trainer:1")
    page.locator("input[name=workers]").fill("1")
    page.locator("input[name=gpus_per_worker]").fill("1")
    page.locator("select[name=gpu_model]").select_option(world["h800"])
    page.locator("input[name=cpu_per_worker]").fill("8")
    page.locator("input[name=memory_gib_per_worker]").fill("32")
    page.locator("input[name=max_run_hours]").fill("2")
    # The live preview answers a moment after the last change (and re-lays the form out):
    # let it settle, then submit.
    preview = page.locator("#preview")
    expect(preview).to_contain_text(f"Fits your quota: 1 / 8 gpu:{world['h800']}")
    expect(preview).to_contain_text("Would start now on 1 node.")
    expect(preview).not_to_have_attribute("aria-busy", "true")
    expect(page.locator("#job-form .field-error:not(:empty)")).to_have_count(0)
    shot(page, "job-new", full_page=False)
    page.locator("#job-form button[type=submit].primary").click()
    page.wait_for_url(re.compile(r"/t/acme/jobs/\d+/$"))
    job = TrainingJob.objects.get(tenant__slug="acme", name="e2e-resnet")
    assert page.url.rstrip("/").endswith(f"/t/acme/jobs/{job.pk}")
    state = page.locator("h1 .badge[class*=state-]")
    expect(page.locator("body")).to_contain_text("Job e2e-resnet is queued.")
    # Submitting runs an admission cycle at once (eager Celery): the empty cluster admits
    # it straight away, so the page shows it queued in its history and admitted now.
    history = page.locator("li", has=page.locator("time"))
    expect(history.nth(0)).to_contain_text("Queued")
    expect(state).to_have_class(re.compile(r"state-(queued|admitted)"))
    shot(page, "job-queued")

    _cycle(cluster)
    _cycle(cluster, 30)  # the pods start (startup 2 s) and are observed running
    job.refresh_from_db()
    assert job.state == "running", job.state
    page.reload()
    expect(state).to_have_class("badge state-running")
    shot(page, "job-running")

    # the small profile runs a job for 600 simulated seconds
    for _ in range(8):
        _cycle(cluster, 100)
        job.refresh_from_db()
        if job.state == "succeeded":
            break
    assert job.state == "succeeded", job.state
    page.reload()
    expect(state).to_have_class("badge state-succeeded")
    expect(page.locator("body")).to_contain_text("Running")
    shot(page, "job-succeeded")


def test_admin_approves_an_amended_quota_request_and_the_researcher_sees_it(
        new_page, world, bob, alice, platform_admin):
    from tenants.models import QuotaRequest

    researcher = new_page()
    log_in(researcher, "bob", "/t/acme/quota/")
    researcher.goto("/t/acme/quota/")
    prod = researcher.locator("section.card",
                              has=researcher.locator("code", has_text="ty-acme-prod"))
    cpu_granted = prod.locator("tbody tr", has=researcher.locator(
        "code", has_text=re.compile(r"^cpu$"))).locator("td").nth(1)
    expect(cpu_granted).to_have_text("128 cores")

    page = new_page()
    log_in(page, "alice", "/t/acme/quota/")
    page.goto("/t/acme/quota/")
    form = page.locator("form:has(button:text('Send request'))")
    form.locator("select[name=pool]").select_option("prod")
    form.locator("input[name=resource_0]").fill("cpu")
    form.locator("input[name=amount_0]").fill("192")
    form.locator("textarea[name=justification]").fill("A bigger data-loading fleet.")
    shot(page, "quota-request", full_page=False)
    form.locator("button[type=submit]").click()
    expect(page.locator("body")).to_contain_text("was sent to the platform admins")
    request = QuotaRequest.objects.get(tenant__slug="acme")
    assert request.status == "pending"

    admin = new_page()
    log_in(admin, "pat", f"/platform/quota-requests/{request.pk}/")
    admin.goto(f"/platform/quota-requests/{request.pk}/")
    item = request.items.get()
    admin.locator(f"input[name=amount_{item.pk}]").fill("160")
    admin.locator("textarea[name=note]").fill("160 for now; ask again in a month.")
    shot(admin, "quota-approve", full_page=False)
    admin.locator("button[name=decision][value=approve]").click()
    admin.wait_for_url("**/platform/quota-requests/")
    expect(admin.locator("body")).to_contain_text("was approved")
    request.refresh_from_db()
    assert request.status == "approved"

    researcher.reload()
    expect(cpu_granted).to_have_text("160 cores")
    expect(researcher.locator("body")).to_contain_text("(approved 160)")
    shot(researcher, "quota-after-approval")


def test_finance_closes_a_month_and_downloads_an_invoice_csv(new_page, settings, tenant_a,
                                                           platform_admin, finance_user):
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
    page.goto("/billing/?month=2026-10")
    page.locator("button:text('Close 2026-10 and issue the invoices')").click()
    expect(page.locator("body")).to_contain_text("invoices issued")
    invoice = Invoice.objects.get(tenant=tenant_a, period=dt.date(2026, 10, 1))
    assert invoice.is_issued
    shot(page, "billing-closed", full_page=False)
    row = page.locator("tr", has=page.locator("td", has_text="CC-acme"))
    with page.expect_download() as info:
        row.locator("a", has_text="CSV").click()
    download = info.value
    assert download.suggested_filename.endswith(".csv")
    target = ARTIFACTS / download.suggested_filename
    download.save_as(target)
    text = target.read_text(encoding="utf-8")
    assert f"{invoice.number},invoice,issued,Acme Vision,CC-acme,2026-10,USD" in text
    assert ",24.0000,GPU-hours,1.65,39.60" in text and text.strip().endswith("39.60")


def test_login_and_quota_page_in_chinese(new_page, world, alice):
    from tenants.models import QuotaRequest

    page = new_page()
    page.goto("/login/?next=/t/acme/quota/")
    expect(page.locator("h1")).to_have_text("Log in to Trainyard")
    page.locator("#lang-select").select_option("zh-hans")
    page.wait_for_load_state()
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    expect(page.locator("h1")).to_have_text("登录 Trainyard")
    shot(page, "zh-login", full_page=False)
    page.locator("input[name=username]").fill("alice")
    page.locator("input[name=password]").fill(PASSWORD)
    page.locator("form.stack button[type=submit]").click()
    page.wait_for_url("**/t/acme/quota/")
    expect(page).to_have_title("配额 · acme · Trainyard")
    body = page.locator("body")
    for text in ("已授予", "申请配额", "发送申请"):
        expect(body).to_contain_text(text)
    expect(body).not_to_contain_text("Ask for quota")
    shot(page, "zh-quota", full_page=False)
    form = page.locator("form:has(button:text('发送申请'))")
    form.locator("select[name=pool]").select_option("prod")
    form.locator("input[name=resource_0]").fill("cpu")
    form.locator("input[name=amount_0]").fill("192")
    form.locator("textarea[name=justification]").fill("更多的数据加载节点。")
    form.locator("button[type=submit]").click()
    expect(body).to_contain_text("已发送给平台管理员")
    request = QuotaRequest.objects.get(tenant__slug="acme")
    expect(body).to_contain_text(f"申请 #{request.pk} 已发送给平台管理员。")
    row = page.locator("tbody tr", has_text="128 → 192")
    expect(row.locator(".badge")).to_have_text("待处理")
    shot(page, "zh-quota-requested", full_page=False)

    # the platform admin decides in Chinese too (the language comes from the switcher)
    admin = new_page()
    log_in(admin, "pat", f"/platform/quota-requests/{request.pk}/")
    admin.goto(f"/platform/quota-requests/{request.pk}/")
    admin.locator("#lang-select").select_option("zh-hans")
    expect(admin.locator("html")).to_have_attribute("lang", "zh-hans")
    admin.locator("button[name=decision][value=approve]", has_text="批准").click()
    admin.wait_for_url("**/platform/quota-requests/")
    expect(admin.locator("body")).to_contain_text(f"申请 #{request.pk} 已批准；正在更新集群。")

    page.reload()
    expect(row.locator(".badge")).to_have_text("已批准")
    prod = page.locator("section.card", has=page.locator("code", has_text="ty-acme-prod"))
    cpu_granted = prod.locator("tbody tr", has=page.locator(
        "code", has_text=re.compile(r"^cpu$"))).locator("td").nth(1)
    expect(cpu_granted).to_contain_text("192")
    shot(page, "zh-quota-approved")

