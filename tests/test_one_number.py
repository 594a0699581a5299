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
"""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from core.exceptions import ApplicationError
from core.texts import render
from jobs import services as job_services
from jobs.admission import decide
from jobs.models import TrainingJob
from jobs.selectors import admission_inputs
from k8s_sync.models import ObservedNode, ObservedPod
from tenants import services as tenant_services
from tenants.models import QuotaGrant, UsageSeries

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
    home = login(bob).get(reverse("home")).content.decode()
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
