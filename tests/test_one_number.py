"""One number everywhere: for one state of the cluster and the queue, every page and API
endpoint shows the same "in use" of a pool and the same capacity of a resource.

"In use" is the demand of the pool's admitted, running and preempting jobs
(``jobs.selectors.in_use_by_pool`` behind ``tenants.usage.in_use_by_pool``); capacity is
what every observed node offers, cordoned ones included
(``k8s_sync.selectors.resource_capacity``). The state is built so that the older,
competing definitions would each give another number: the admitted job has no pod yet
(pods: 1, not 3), the queued job is in the same pool (all active jobs: 5), one A100 node
is cordoned (schedulable only: 12), a MIG node carries 8 physical A100 of which 4 are
whole (physical cards: 24; whole + MIG instances: 36), and a node without a GPU model
label runs a GPU pod (the old ``gpu:unknown``).

The utilisation figures (``tenants.utilisation``: quota held, allocated within quota and
borrowed, busy, quota use, idle rate) are one computation too
(``billing.selectors.utilisation_figures``): for one seeded month the dashboard, the quota
request's facts (page and API), the invoice, finance's month, the ``idle`` API and
``/metrics`` show the same values.
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

import pytest
import time_machine
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from billing import services as billing_services
from core.exceptions import ApplicationError
from core.texts import render
from jobs import services as job_services
from jobs.admission import decide
from jobs.models import TrainingJob
from jobs.selectors import admission_inputs
from k8s_sync.models import ObservedNode, ObservedPod
from tenants import services as tenant_services
from tenants.models import (
    JobUtilisation,
    QuotaGrant,
    QuotaLoan,
    QuotaRequest,
    QuotaRequestItem,
    UsageSeries,
)

pytestmark = pytest.mark.django_db

A100 = "NVIDIA-A100-SXM4-80GB"
KEY = f"gpu:{A100}"
IN_USE, QUOTA, CAPACITY = 3, 4, 20


def _node(name: str, *, model: str = A100, gpus: str = "8", cordoned: bool = False,
          **extra) -> ObservedNode:
    allocatable = {"cpu": "128", "memory": "1Ti", "nvidia.com/gpu": gpus, "pods": "110"}
    allocatable.update(extra.pop("allocatable", {}))
    return ObservedNode.objects.create(
        name=name, uid=name, resource_version="1", observed_at=timezone.now(),
        gpu_product=model, gpu_model=model, gpu_count=8 if model else 0,
        gpu_memory_mib=81920 if model else None, ready=True, unschedulable=cordoned,
        allocatable=allocatable, switch="s1", **extra)


def _job(tenant, pool, name: str, state: str, gpus: int, **extra) -> TrainingJob:
    return TrainingJob.objects.create(
        tenant=tenant, pool=pool, name=name, image="trainer:1",
        tier="production" if pool.kind == "prod" else "development",
        max_run_seconds=3600, state=state, workers=1, gpus_per_worker=gpus, gpu_model=A100,
        cpu_per_worker=8, memory_gib_per_worker=64, checkpoint_path="/ckpt", **extra)


@pytest.fixture
def state(tenant_a, tenant_b, platform_admin):
    cache.clear()
    _node("a100-0")
    _node("a100-1", cordoned=True)
    _node("a100-mig-0", gpus="4", mig_strategy="mixed",
          allocatable={"nvidia.com/mig-1g.10gb": "12", "nvidia.com/mig-3g.40gb": "4"})
    _node("anon-0", model="", gpus="2")  # a GPU node without the gpu.product label
    prod = tenant_a.pools.get(kind="prod")
    tenant_services.quota_set(actor=platform_admin, pool=prod, reason="test",
                              amounts={KEY: QUOTA, "cpu": 64, "memory": 512,
                                       "gpu-memory": 200})
    admitted = _job(tenant_a, prod, "admitted", "admitted", 2, placement=["a100-0"],
                    admitted_at=timezone.now())
    running = _job(tenant_a, prod, "running", "running", 1, started_at=timezone.now())
    queued = _job(tenant_a, prod, "queued", "queued", 2, submitted_by=tenant_a.memberships
                  .get(role="member").user)
    _job(tenant_a, tenant_a.pools.get(kind="dev"), "dev-queued", "queued", 1)
    for name, node, job, gpus in (("running-master-0", "a100-0", running, "1"),
                                  ("stray-0", "anon-0", None, "1")):
        ObservedPod.objects.create(
            namespace=prod.namespace, name=name, uid=name, resource_version="1",
            observed_at=timezone.now(), phase="Running", node_name=node,
            requests={"cpu": "4", "memory": "57.6Gi", "nvidia.com/gpu": gpus},
            tenant="acme", pool="prod", job=str(job.pk) if job else "")
    # the admission loop's wait reason, as it records it
    decisions = decide(**admission_inputs(timezone.now()))
    job_services.record_waiting(decisions.waiting)
    return {"prod": prod, "admitted": admitted, "running": running, "queued": queued}


def _cell(body: str, row: str, field: str) -> str:
    """The text of ``<td data-field=field>`` in the first ``<tr {row}...>``."""
    match = re.search(rf'<tr [^>]*{re.escape(row)}[^>]*>.*?data-field="{field}">(.*?)</t[dh]>',
                      body, re.S)
    assert match, f"no {field} in the row {row}"
    return re.sub(r"<[^>]+>", "", match.group(1)).strip()


def _number(text: str) -> Decimal:
    return Decimal(re.search(r"-?\d+(?:\.\d+)?", text).group(0))


def test_in_use_and_capacity_agree_on_every_page_and_endpoint(state, login, api, alice, bob,
                                                              platform_admin, settings):
    settings.TRAINYARD_METRICS_TOKEN = "t"
    member = login(bob)
    quota_page = member.get(reverse("tenants:quota", kwargs={"slug": "acme"})).content.decode()
    row = f'data-pool="prod" data-key="{KEY}"'
    seen_in_use = {"quota page": _number(_cell(quota_page, row, "used")),
                   "quota page quota": None}
    assert _number(_cell(quota_page, row, "quota")) == QUOTA

    dashboard = member.get(reverse("tenant_dashboard", kwargs={"slug": "acme"})).content.decode()
    gauge = re.search(rf'<figure class="gauge" data-key="{re.escape(KEY)}"[^>]*>(.*?)</figure>',
                      dashboard, re.S).group(1)
    seen_in_use["gauge"] = _number(re.search(r'data-field="used">([^<]+)', gauge).group(1))
    live = member.get(reverse("tenant_dashboard_data", kwargs={"slug": "acme"})).json()
    seen_in_use["gauge (live JSON)"] = next(g["used"] for g in live["gauges"] if g["key"] == KEY)

    form = {"name": "probe", "pool": "prod", "tier": "production", "image": "trainer:1",
            "workers": "1", "gpus_per_worker": "1", "gpu_model": A100, "cpu_per_worker": "8",
            "memory_gib_per_worker": "64", "max_run_hours": "1", "checkpoint_path": "/c"}
    preview = member.post(reverse("job_preview", kwargs={"slug": "acme"}), form).json()
    assert preview["errors"] == {}
    dimension = next(d for d in preview["preview"]["dimensions"] if d["key"] == KEY)
    seen_in_use["job form preview"] = dimension["in_use"]
    seen_in_use["job form preview (summary)"] = preview["preview"]["in_use"]
    assert dimension["quota"] == QUOTA

    job_page = member.get(reverse("jobs:detail", kwargs={"slug": "acme",
                                                          "pk": state["queued"].pk}))
    reason = render(TrainingJob.objects.get(pk=state["queued"].pk).wait_reason)
    assert reason and reason in job_page.content.decode()
    seen_in_use["wait reason"] = int(re.search(r"\((\d+) in use\)", reason).group(1))

    admin = login(platform_admin)
    capacity_page = admin.get(reverse("platform_capacity")).content.decode()
    seen_in_use["capacity page (all pools)"] = _number(
        _cell(capacity_page, f'data-key="{KEY}"', "in_use"))
    seen_capacity = {"capacity page": _number(_cell(capacity_page, f'data-key="{KEY}"',
                                                    "capacity"))}
    whole = _cell(capacity_page, f'data-model="{A100}"', "whole")   # "allocated / capacity"
    seen_capacity["capacity page, by model"] = int(whole.split("/")[1])
    cluster_page = admin.get(reverse("cluster")).content.decode()
    busy = re.search(rf'data-model="{re.escape(A100)}".*?data-field="alloc">(\d+) / (\d+)',
                     cluster_page, re.S)
    seen_capacity["cluster page, busyness"] = int(busy.group(2))
    catalog_page = admin.get(reverse("tenants:catalog")).content.decode()
    assert "gpu:unknown" not in catalog_page

    # the API, for the same state
    overview = api(bob).get("/api/v1/tenants/acme/quota/").json()
    prod = next(p for p in overview["pools"] if p["pool"] == "prod")
    seen_in_use["API quota"] = Decimal(next(r for r in prod["resources"]
                                            if r["key"] == KEY)["used"])
    answer = api(bob).post("/api/v1/tenants/acme/jobs/preview/", {
        "pool": "prod", "name": "probe", "image": "trainer:1", "tier": "production",
        "workers": 1, "gpus_per_worker": 1, "gpu_model": A100, "cpu_per_worker": 8,
        "memory_gib_per_worker": 64, "max_run_seconds": 3600, "checkpoint_path": "/c"},
        format="json").json()
    seen_in_use["API preview"] = next(d for d in answer["dimensions"]
                                      if d["key"] == KEY)["in_use"]
    job = api(bob).get(f"/api/v1/tenants/acme/jobs/{state['queued'].pk}/").json()
    seen_in_use["API wait reason"] = int(re.search(r"\((\d+) in use\)",
                                                   job["wait_reason"]).group(1))
    catalog = {r["key"]: r for r in api(bob).get("/api/v1/catalog/").json()}
    seen_capacity["API catalog"] = Decimal(catalog[KEY]["capacity"])
    seen_capacity["API cluster capacity"] = Decimal(
        api(bob).get("/api/v1/cluster/capacity/").json()["resources"][KEY])
    metrics = admin.get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()
    seen_in_use["/metrics"] = _number(re.search(
        rf'trainyard_quota_used\{{pool="prod",resource="{re.escape(KEY)}",tenant="acme"\}} (\S+)',
        metrics).group(1))
    seen_capacity["/metrics"] = _number(re.search(
        rf'trainyard_capacity\{{resource="{re.escape(KEY)}"\}} (\S+)', metrics).group(1))

    seen_in_use.pop("quota page quota")
    assert seen_in_use == dict.fromkeys(seen_in_use, IN_USE)
    assert seen_capacity == dict.fromkeys(seen_capacity, CAPACITY)
    # no resource of no known model anywhere, not even from samples an older sampler wrote
    UsageSeries.objects.create(pool=state["prod"], resource="gpu:unknown", resolution="h",
                               start=timezone.now().replace(minute=0, second=0,
                                                            microsecond=0),
                               allocated=1, peak=1, quota=0)
    cache.clear()
    trends = member.get(reverse("tenant_dashboard_trends", kwargs={"slug": "acme"}),
                        {"days": "7"}).content.decode()
    for body in (quota_page, dashboard, capacity_page, catalog_page, metrics, str(catalog),
                 trends):
        assert "gpu:unknown" not in body


def test_member_counts_agree(state, login, alice, bob):
    home = login(bob).get(reverse("home") + "?all=1").content.decode()
    overview = login(bob).get(reverse("tenants:detail", kwargs={"slug": "acme"})).content.decode()
    on_home = int(re.search(r"(\d+) members?", home).group(1))
    on_overview = int(re.search(r'members/">(\d+)</a>', overview).group(1))
    assert on_home == on_overview == 2


def test_a_gauge_over_its_quota_is_never_green(state, login, bob):
    """3 A100 in use x 80 GiB = 240 GiB of GPU memory against a grant of 200."""
    live = login(bob).get(reverse("tenant_dashboard_data", kwargs={"slug": "acme"})).json()
    gauges = {g["key"]: g for g in live["gauges"]}
    memory = gauges["gpu-memory"]
    assert memory["used"] > memory["quota"] and memory["state"] == "over"
    assert memory["meter"]["max"] >= memory["used"] > memory["meter"]["high"]
    assert memory["figure"]["data"][0]["gauge"]["bar"]["color"] != "#16a34a"
    assert gauges[KEY]["state"] == "ok"   # 3 of 4
    page = login(bob).get(reverse("tenant_dashboard", kwargs={"slug": "acme"})).content.decode()
    figure = re.search(r'<figure class="gauge" data-key="gpu-memory" data-state="over">(.*?)'
                       r"</figure>", page, re.S).group(1)
    meter = re.search(r"<meter ([^>]*)>", figure).group(1)
    attrs = dict(re.findall(r'(\w+)="([^"]*)"', meter))
    assert attrs["optimum"] == "0" and float(attrs["value"]) > float(attrs["high"])
    assert float(attrs["max"]) >= float(attrs["value"])  # not clamped to the quota


def test_resources_on_no_node_are_neither_offered_nor_accepted(state, login, api, alice,
                                                               platform_admin):
    prod = state["prod"]
    quota_page = login(alice).get(reverse("tenants:quota", kwargs={"slug": "acme"}))
    offered = re.findall(r'<option value="([^"]+)">', quota_page.content.decode())
    assert KEY in offered and "mig:1g.10gb" in offered
    assert not [k for k in offered if k.startswith("gpu:") and k != KEY]
    # the service, the form and the API refuse them, naming the field
    with pytest.raises(ApplicationError) as refused:
        tenant_services.quota_set(actor=platform_admin, pool=prod, reason="x",
                                  amounts={"gpu:NVIDIA-T4": 2})
    assert refused.value.field == "amounts"
    page = login(alice).post(reverse("tenants:quota", kwargs={"slug": "acme"}), {
        "pool": "prod", "justification": "more", "resource_0": "gpu:unknown",
        "amount_0": "1"})
    assert page.status_code == 400
    assert page.context["form"].errors["resource_0"]
    response = api(alice).post("/api/v1/tenants/acme/quota-requests/", {
        "pool": "prod", "justification": "more", "amounts": {"gpu:NVIDIA-T4": "1"}},
        format="json")
    assert response.status_code == 400 and response.json()["extra"]["resource"] == \
        "gpu:NVIDIA-T4"
    # a grant of a resource whose nodes are gone can be lowered and removed, not raised
    QuotaGrant.objects.create(pool=prod, resource="gpu:NVIDIA-V100", amount=4)
    with pytest.raises(ApplicationError):
        tenant_services.quota_set(actor=platform_admin, pool=prod, reason="x",
                                  amounts={"gpu:NVIDIA-V100": 5})
    tenant_services.quota_set(actor=platform_admin, pool=prod, reason="x",
                              amounts={"gpu:NVIDIA-V100": 2})
    tenant_services.quota_set(actor=platform_admin, pool=prod, reason="x",
                              amounts={"gpu:NVIDIA-V100": 0})
    assert not QuotaGrant.objects.filter(pool=prod, resource="gpu:NVIDIA-V100",
                                         superseded_at__isnull=True).exists()


# --- the utilisation figures -------------------------------------------------------------

UTC = dt.UTC
#: mid-October 2026: the month, the quarter so far and the last 30 days all begin with the
#: grant on October 1st, so every page's period holds the same hours
NOW = dt.datetime(2026, 10, 20, 12, 0, tzinfo=UTC)


def _ran(tenant, pool, start, hours, gpus, *, mean=None, **extra) -> TrainingJob:
    """A finished job that ran ``hours`` from ``start`` (its transitions: the ledger's
    source), measured at ``mean`` % GPU utilisation by the minute sampler."""
    from jobs.models import JobTransition

    end = start + dt.timedelta(hours=hours)
    job = _job(tenant, pool, f"ran-{start:%d%H}-{gpus}", "succeeded", gpus, **extra)
    for before, after, when in (("", "queued", start - dt.timedelta(minutes=5)),
                                ("queued", "admitted", start), ("admitted", "running", start),
                                ("running", "succeeded", end)):
        JobTransition.objects.create(job=job, from_state=before, to_state=after,
                                     reason="test", at=when)
    if mean is not None:
        JobUtilisation.objects.create(
            namespace=pool.namespace, job=str(job.pk), gpu_samples=gpus * 60 * hours,
            util_sum=mean * gpus * 60 * hours, last_util=mean, first_sampled_at=start,
            last_sampled_at=end)
    return job


def _figure_cells(html: str, row: str) -> dict[str, str]:
    """The figures of the table row ``<tr {row}...>`` by their ``data-field``."""
    match = re.search(rf"<tr [^>]*{re.escape(row)}[^>]*>(.*?)</tr>", html, re.S)
    assert match, f"no row {row}"
    return {field: re.sub(r"<[^>]+>", "", text).strip() for field, text in re.findall(
        r'data-field="(\w+)">(.*?)</t[dh]>', match.group(1), re.S)}


def _hours(text: str) -> Decimal:
    return Decimal(text.replace(",", ""))


def _percent(text: str) -> int:
    return int(re.search(r"(\d+)%", text).group(1))


def _api_percent(share: str | None) -> int:
    return int((Decimal(share) * 100).quantize(Decimal(1), rounding="ROUND_HALF_UP"))


@pytest.fixture
def used_month(tenant_a, tenant_b, platform_admin):
    """acme's prod pool held 4 A100 from October 1st, and 2 more lent by globex for five
    days; it ran 2 cards for 48 h at 80% within quota, 1 card for 12 h at 20% borrowing,
    and 1 card for 6 h never measured."""
    cache.clear()
    with time_machine.travel(NOW, tick=False):
        _node("a100-0")
        prod = tenant_a.pools.get(kind="prod")
        tenant_services.quota_set(actor=platform_admin, pool=prod, reason="test",
                                  amounts={KEY: QUOTA})
        QuotaGrant.objects.filter(pool=prod).update(
            created_at=dt.datetime(2026, 10, 1, tzinfo=UTC))
        QuotaLoan.objects.create(
            lender=tenant_b.pools.get(kind="prod"), borrower=prod, resource=KEY, amount=2,
            ends_at=dt.datetime(2026, 10, 15, tzinfo=UTC), status="ended",
            started_at=dt.datetime(2026, 10, 10, tzinfo=UTC),
            ended_at=dt.datetime(2026, 10, 15, tzinfo=UTC))
        _ran(tenant_a, prod, dt.datetime(2026, 10, 5, tzinfo=UTC), 48, 2, mean=80)
        _ran(tenant_a, prod, dt.datetime(2026, 10, 12, 6, tzinfo=UTC), 12, 1, mean=20,
             borrowing=True)
        _ran(tenant_a, prod, dt.datetime(2026, 10, 16, tzinfo=UTC), 6, 1)
        billing_services.ledger_ingest_gpu(now=NOW)
        invoice = billing_services.invoice_draft_refresh(tenant=tenant_a,
                                                         period=dt.date(2026, 10, 1))
        request = QuotaRequest.objects.create(tenant=tenant_a, pool=prod,
                                              requested_by=tenant_a.memberships.first().user,
                                              justification="more")
        QuotaRequestItem.objects.create(request=request, resource=KEY, current_amount=QUOTA,
                                        requested_amount=QUOTA + 2)
    return {"prod": prod, "invoice": invoice, "request": request}


def test_utilisation_figures_agree_on_every_page_and_endpoint(
        used_month, login, api, bob, platform_admin, finance_user, settings):
    """Quota held: 4 x 468 h (October 1st to the 20th, noon) + 2 x 120 h lent = 2,112
    GPU-hours. Allocated 114: 102 within quota (96 + 6 never measured), 12 borrowed.
    Busy: 96 x 0.8 + 12 x 0.2 = 79.2 of the 108 measured. Quota use 102 / 2,112 = 5%,
    idle rate 1 - 79.2 / 108 = 27%."""
    expected = {"quota_held": Decimal("2112"), "allocated": Decimal("114"),
                "within_quota": Decimal("102"), "borrowed": Decimal("12"),
                "busy": Decimal("79.2"), "quota_use": 5, "idle_rate": 27}
    settings.TRAINYARD_METRICS_TOKEN = "t"
    seen: dict[str, dict] = {}
    with time_machine.travel(NOW, tick=False):
        def page(cells: dict[str, str]) -> dict:
            return {k: _percent(v) if k in ("quota_use", "idle_rate") else _hours(v)
                    for k, v in cells.items() if k in expected}

        member = login(bob)
        dashboard = member.get(reverse("tenant_dashboard", kwargs={"slug": "acme"}))
        seen["dashboard"] = page(_figure_cells(dashboard.content.decode(),
                                               f'data-kind="{KEY}"'))
        invoice = member.get(reverse("billing:invoice", kwargs={
            "slug": "acme", "pk": used_month["invoice"].pk}))
        seen["invoice"] = page(_figure_cells(invoice.content.decode(), f'data-kind="{KEY}"'))
        admin = login(platform_admin)
        request = admin.get(reverse("tenants:request_detail",
                                    kwargs={"pk": used_month["request"].pk}))
        seen["quota request page"] = page(_figure_cells(request.content.decode(),
                                                        f'data-key="{KEY}"'))
        finance = login(finance_user).get(reverse("billing:month") + "?month=2026-10")
        row = re.search(r'<tr data-tenant="acme">.*?</tr>', finance.content.decode(),
                        re.S).group(0)
        month_cell = re.search(r'<td data-period="month">(.*?)</td>', row, re.S).group(1)
        seen["finance month page"] = page(dict(re.findall(
            r'<span data-field="(\w+)">([^<]*)</span>', month_cell)))

        def from_api(body: dict) -> dict:
            return {"quota_held": Decimal(body["quota_held_gpu_hours"]),
                    "allocated": Decimal(body["allocated_gpu_hours"]),
                    "within_quota": Decimal(body["within_quota_gpu_hours"]),
                    "borrowed": Decimal(body["borrowed_gpu_hours"]),
                    "busy": Decimal(body["busy_gpu_hours"]),
                    "quota_use": _api_percent(body["quota_use"]),
                    "idle_rate": _api_percent(body["idle_rate"])}

        idle = api(bob).get("/api/v1/tenants/acme/invoices/idle/").json()
        seen["API idle (month)"] = from_api(idle["month"])
        seen["API idle (quarter)"] = from_api(idle["quarter"])
        seen["API idle (by kind)"] = from_api(idle["by_kind"][KEY])
        seen["API idle (by kind, month)"] = from_api(idle["by_kind_month"][KEY])
        facts = api(platform_admin).get(
            f"/api/v1/quota-requests/{used_month['request'].pk}/").json()["facts"]
        seen["API quota request facts"] = from_api(
            next(f for f in facts if f["resource"] == KEY)["utilisation"])
        month = api(finance_user).get("/api/v1/billing/months/2026-10/").json()
        seen["API finance month"] = from_api(next(
            t for t in month["tenants"] if t["tenant"] == "acme")["utilisation"])
        metrics = admin.get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()

        def metric(name: str, extra: str = "") -> Decimal:
            labels = f'kind="{KEY}",{extra}tenant="acme"'
            found = re.search(rf"{name}\{{{re.escape(labels)}\}} (\S+)", metrics)
            assert found, name
            return Decimal(found.group(1))

        seen["/metrics"] = {
            "quota_held": metric("trainyard_gpu_quota_held_hours"),
            "allocated": metric("trainyard_gpu_allocated_hours", 'quota="within",')
            + metric("trainyard_gpu_allocated_hours", 'quota="borrowed",'),
            "within_quota": metric("trainyard_gpu_allocated_hours", 'quota="within",'),
            "borrowed": metric("trainyard_gpu_allocated_hours", 'quota="borrowed",'),
            "busy": metric("trainyard_gpu_busy_hours"),
            "quota_use": _api_percent(str(metric("trainyard_gpu_quota_use"))),
            "idle_rate": _api_percent(str(metric("trainyard_gpu_idle_rate")))}
    for where, figures in seen.items():
        assert figures == {k: v for k, v in expected.items() if k in figures}, where
        assert {"quota_held", "quota_use", "idle_rate"} <= set(figures), where
    # one name and one definition each, wherever the figure is shown
    for body in (dashboard, invoice, request, finance):
        html = body.content.decode()
        assert 'title="Allocated within quota ÷ quota held." data-figure="quota_use">Quota ' \
               "use<" in html
        assert ">Idle rate<" in html and "GPU idle rate" not in html
