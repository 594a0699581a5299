"""Tenant dashboard and cluster page: access, content, JSON endpoints, query budgets."""

from __future__ import annotations

import datetime as dt
import json
import re

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from core.models import Policy
from jobs.models import JobTransition, TrainingJob
from k8s_sync.metrics import GpuSample
from k8s_sync.models import ObservedNode, ObservedPod
from portal import cluster_figures, dashboards
from tenants.models import JobUtilisation, QuotaGrant, UsageSeries
from tenants.series import usage_rollup, usage_sample

pytestmark = pytest.mark.django_db

H800 = "NVIDIA-H800"


@pytest.fixture(autouse=True)
def _clear_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def granted(tenant_a):
    prod = tenant_a.pools.get(kind="prod")
    for key, amount in {f"gpu:{H800}": 8, "cpu": 64, "memory": 512, "gpu-memory": 640}.items():
        QuotaGrant.objects.create(pool=prod, resource=key, amount=amount)
    return prod


@pytest.fixture
def observed(granted):
    """A node with 8 H800 and a running 2-GPU job ("llm") with its pod in acme's prod
    namespace: 2 cards in use (the job, as admission counts it) and allocated (the pod)."""
    llm = TrainingJob.objects.create(
        tenant=granted.tenant, pool=granted, name="llm", image="pytorch:2", tier="production",
        max_run_seconds=3600, state="running", workers=1, gpus_per_worker=2, gpu_model=H800,
        cpu_per_worker=16, memory_gib_per_worker=64)
    ObservedNode.objects.create(
        name="h800-0", uid="n1", resource_version="1", observed_at=timezone.now(),
        gpu_product=H800, gpu_model=H800, gpu_memory_mib=81559, gpu_count=8,
        allocatable={"cpu": "128", "memory": "1Ti", "nvidia.com/gpu": "8"},
        capacity={"cpu": "128", "memory": "1Ti", "nvidia.com/gpu": "8"}, ready=True)
    ObservedPod.objects.create(
        namespace=granted.namespace, name="llm-master-0", uid="p1", resource_version="1",
        observed_at=timezone.now(), phase="Running",
        node_name="h800-0", requests={"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2"},
        tenant="acme", pool="prod", job=str(llm.pk))
    return granted


def _samples(namespace: str, util: float) -> list[GpuSample]:
    return [GpuSample(namespace=namespace, pod="llm-master-0", node="h800-0", gpu=str(i),
                      uuid=f"GPU-{i}", model="NVIDIA H800", util_pct=util, fb_used_mib=40960,
                      fb_free_mib=40599) for i in range(2)] + [
        GpuSample(namespace="", pod="", node="h800-0", gpu="7", uuid="GPU-7",
                  model="NVIDIA H800", util_pct=0, fb_used_mib=0, fb_free_mib=81559)]


def _job(tenant, pool, name: str, *, state: str = "succeeded", gpus: int = 1, workers: int = 1,
         submitted_by=None, **extra) -> TrainingJob:
    return TrainingJob.objects.create(
        tenant=tenant, pool=pool, name=name, image="pytorch:2", tier="production",
        max_run_seconds=3600, state=state, workers=workers, gpus_per_worker=gpus,
        gpu_model=H800, submitted_by=submitted_by, **extra)


def _ran(job: TrainingJob, start: dt.datetime, end: dt.datetime | None) -> None:
    JobTransition.objects.create(job=job, from_state="queued", to_state="admitted",
                                 reason="Admitted", at=start - dt.timedelta(minutes=5))
    JobTransition.objects.create(job=job, from_state="admitted", to_state="running",
                                 reason="Running", at=start)
    if end is not None:
        JobTransition.objects.create(job=job, from_state="running", to_state="succeeded",
                                     reason="Succeeded", at=end)


# --- the sampler and the series ---------------------------------------------------------------


def test_sample_records_allocated_utilised_and_quota(observed):
    now = timezone.now()
    usage_sample(now=now, samples=_samples(observed.namespace, 60))
    minute = UsageSeries.objects.get(pool=observed, resource=f"gpu:{H800}",
                                     resolution=UsageSeries.MINUTE)
    assert (minute.allocated, minute.quota) == (2.0, 8.0)
    assert minute.utilised == pytest.approx(1.2)  # two cards at 60%
    mem = UsageSeries.objects.get(pool=observed, resource="gpu-memory", resolution="m")
    assert mem.utilised == pytest.approx(80.0)  # 2 x 40 GiB framebuffer
    cpu = UsageSeries.objects.get(pool=observed, resource="cpu", resolution="m")
    assert cpu.allocated == 8 and cpu.utilised is None and cpu.quota == 64
    for res in ("h", "d"):
        assert UsageSeries.objects.get(pool=observed, resource=f"gpu:{H800}",
                                       resolution=res).allocated == 2.0
    util = JobUtilisation.objects.get(job=str(TrainingJob.objects.get(name="llm").pk))
    assert util.gpu_samples == 2 and util.mean_util == 60 and util.low_since is None


def test_hour_and_day_rows_are_means_and_a_repeat_minute_overwrites(observed):
    start = timezone.now().replace(minute=0, second=0, microsecond=0) - dt.timedelta(hours=2)
    for i, util in enumerate([100, 50, 0]):
        usage_sample(now=start + dt.timedelta(minutes=i), samples=_samples(observed.namespace,
                                                                           util))
    usage_sample(now=start + dt.timedelta(minutes=2, seconds=30),
                 samples=_samples(observed.namespace, 0))  # same minute again
    hour = UsageSeries.objects.get(pool=observed, resource=f"gpu:{H800}", resolution="h",
                                   start=start)
    assert hour.samples == 3 and hour.utilised == pytest.approx(1.0)  # (2 + 1 + 0) / 3
    job = JobUtilisation.objects.get(job=str(TrainingJob.objects.get(name="llm").pk))
    assert job.gpu_samples == 6  # the repeated minute is not counted twice
    assert job.low_since == start + dt.timedelta(minutes=2)


def test_metrics_outage_records_allocation_without_utilisation(observed, settings):
    settings.PROMETHEUS_URL = ""
    settings.TRAINYARD_DCGM_URLS = ["http://127.0.0.1:9/metrics"]
    settings.TRAINYARD_METRICS_SOURCE_TIMEOUT = 0.5
    assert usage_sample() > 0
    row = UsageSeries.objects.get(pool=observed, resource=f"gpu:{H800}", resolution="m")
    assert row.allocated == 2 and row.utilised is None


def test_retention_drops_old_minutes_and_hours_but_keeps_days(granted):
    now = timezone.now()
    old = now - dt.timedelta(days=40)
    for res, start in (("m", now - dt.timedelta(days=3)), ("m", now), ("h", old), ("d", old),
                       ("h", now - dt.timedelta(days=10))):
        UsageSeries.objects.create(pool=granted, resource="cpu", resolution=res, start=start)
    result = usage_rollup(now=now)
    assert result["dropped_minutes"] == 1 and result["dropped_hours"] == 1
    assert set(UsageSeries.objects.values_list("resolution", flat=True)) >= {"m", "h", "d"}
    assert UsageSeries.objects.filter(resolution="d", start=old).exists()


# --- the tenant dashboard ------------------------------------------------------------------


def test_dashboard_access(tenant_a, tenant_b, alice, charlie, platform_admin, login, client):
    url = reverse("tenant_dashboard", kwargs={"slug": "acme"})
    assert client.get(url).status_code == 302  # anonymous -> login
    assert login(charlie).get(url).status_code == 404
    assert login(charlie).get(url + "data.json").status_code == 404
    assert login(platform_admin).get(url).status_code == 200
    response = login(alice).get(url)
    assert response.status_code == 200
    body = response.content.decode()
    assert "/static/vendor/plotly/plotly-trainyard.min.js" in body and "js/dashboard.js" in body
    # every script and stylesheet is served by the portal itself (a CSRF token may contain
    # any letters, so look at the references, not the whole body)
    external = re.findall(r'(?:src|href)="((?:https?:)?//[^"]+)"', body)
    assert external == []


def test_dashboard_shows_gauges_jobs_waiting_and_banner(observed, tenant_a, bob, login):
    now = timezone.now()
    usage_sample(now=now, samples=_samples(observed.namespace, 40))
    big = _job(tenant_a, observed, "big-run", gpus=4, workers=2,
               finished_at=now - dt.timedelta(hours=1))
    _ran(big, now - dt.timedelta(hours=3), now - dt.timedelta(hours=1))  # 8 GPUs x 2 h
    small = _job(tenant_a, observed, "small-run", state="running")
    _ran(small, now - dt.timedelta(hours=1), None)
    TrainingJob.objects.filter(name="llm").update(state="succeeded")  # small-run: 2 cards
    small.gpus_per_worker = 2
    small.save(update_fields=["gpus_per_worker"])
    JobUtilisation.objects.update_or_create(
        namespace=observed.namespace, job=str(big.pk),
        defaults={"gpu_samples": 10, "util_sum": 450, "first_sampled_at": now,
                  "last_sampled_at": now})
    _job(tenant_a, observed, "waits", state="queued", submitted_by=bob, position_in_pool=3,
         position_in_model=5, wait_reason="Waiting for 4 H800 GPUs",
         eta_p50=now + dt.timedelta(minutes=40))
    response = login(bob).get(reverse("tenant_dashboard", kwargs={"slug": "acme"}))
    body = response.content.decode()
    gauges = {g.key: g for g in response.context["gauges"]}
    assert gauges[f"gpu:{H800}"].used == 2 and gauges[f"gpu:{H800}"].quota == 8
    jobs = response.context["jobs"]
    assert [j.name for j in jobs] == ["big-run", "small-run"]  # most GPU-hours first
    assert jobs[0].gpu_hours == pytest.approx(16.0) and jobs[0].mean_util == 45.0
    assert jobs[1].gpu_hours == pytest.approx(2.0, abs=0.01)
    # the cost column appears exactly when billing offers job_costs
    try:
        from billing.selectors import job_costs  # noqa: F401
        has_billing = True
    except ImportError:
        has_billing = False
    assert response.context["has_cost"] is has_billing
    if has_billing:
        assert all(j.cost is not None for j in jobs) and "Cost" in body
    assert "Waiting for 4 H800 GPUs" in body and "waits" in body
    assert re.search(r'<time datetime="[^"]+">(today|tomorrow) \d\d:\d\d ', body)  # a day
    assert "H800: 25% allocated" in body  # the busyness banner (2 of 8 cards)
    figures = response.context["figures"]
    assert figures["gauges"][0]["data"][0]["type"] == "indicator"
    assert figures["trends"]["7"] and figures["trends"]["30"]
    assert f'href="/t/acme/jobs/{big.pk}/"' in body


def test_the_typical_wait_agrees_with_the_queue(observed, tenant_a):
    """Recent jobs started at once, but jobs queue now with ETAs hours ahead: the typical
    wait says hours, never "under a minute"."""
    now = timezone.now()
    quick = _job(tenant_a, observed, "quick", submitted_at=now - dt.timedelta(hours=2))
    _ran(quick, now - dt.timedelta(hours=2) + dt.timedelta(seconds=40), now)
    before = {b.model: b for b in cluster_figures.busyness(fresh=True)}[H800]
    assert before.typical_wait_min is not None and before.typical_wait_min < 1
    assert "under a minute" in before.sentence()
    for i in range(3):
        _job(tenant_a, observed, f"q{i}", state="queued",
             eta_p50=now + dt.timedelta(hours=3 + i))
    after = {b.model: b for b in cluster_figures.busyness(fresh=True)}[H800]
    assert after.waiting_jobs == 3 and after.typical_wait_min >= 4 * 60 - 1
    assert "under a minute" not in after.sentence() and " h" in after.sentence()
    assert cluster_figures.typical_wait([], []) is None
    assert cluster_figures.typical_wait([0.5, 0.7], []) == 0.6


def test_borrowed_part_is_what_is_used_above_quota(observed, tenant_a):
    QuotaGrant.objects.filter(pool=observed, resource=f"gpu:{H800}").update(amount=1)
    gauge = next(g for g in dashboards.tenant_gauges(tenant_a) if g.key == f"gpu:{H800}")
    assert (gauge.used, gauge.quota, gauge.borrowed, gauge.within) == (2, 1, 1, 1)
    fig = gauge.figure()
    assert fig["data"][0]["gauge"]["threshold"]["value"] == 1


def test_a_resource_without_quota_shows_its_use_but_nothing_borrowed(observed, tenant_a, bob,
                                                                     login, api, platform_admin):
    """GPU memory binds only where it was granted (``tenants.demand.quota_limits``): not
    granted, its use is shown, not limited, in the same words on the dashboard, the quota
    page and the API. A GPU model not granted is a quota of 0: its use is borrowed."""
    QuotaGrant.objects.filter(pool=observed, resource="gpu-memory").delete()
    gauges = {g.key: g for g in dashboards.tenant_gauges(tenant_a)}
    memory = gauges["gpu-memory"]
    assert memory.used > 0 and (memory.quota, memory.borrowed, memory.limited) == (0, 0, False)
    assert "threshold" not in memory.figure()["data"][0]["gauge"]
    client = login(bob)
    words = "no quota set: use is shown, not limited"
    body = client.get(reverse("tenant_dashboard", kwargs={"slug": "acme"})).content.decode()
    gauge = body[body.index('data-key="gpu-memory"'):]
    assert words in gauge[:gauge.index("</figure>")]
    quota = client.get(reverse("tenants:quota", kwargs={"slug": "acme"})).content.decode()
    row = quota[quota.index('data-key="gpu-memory"'):]
    row = row[:row.index("</tr>")]
    assert words in row and "0 GiB" not in row   # not "Granted 0 GiB" beside its use
    overview = api(bob).get("/api/v1/tenants/acme/quota/").json()
    prod = next(p for p in overview["pools"] if p["pool"] == "prod")
    entry = next(r for r in prod["resources"] if r["key"] == "gpu-memory")
    assert entry["limited"] is False and entry["ceiling"] is None
    # a request for it: the platform admin's facts say it is not limited now, not "0"
    from tenants.access import access_for
    from tenants.models import QuotaRequest
    from tenants.services.quota import quota_request_submit

    alice = tenant_a.memberships.get(role="admin").user
    quota_request_submit(access=access_for(alice, tenant_a), actor=alice, pool=observed,
                         amounts={"gpu-memory": 800}, justification="bound it")
    pk = QuotaRequest.objects.get().pk
    facts = login(platform_admin).get(reverse("tenants:request_detail", kwargs={"pk": pk}))
    fact = facts.content.decode()
    fact = fact[fact.index('<tr data-key="gpu-memory">'):]
    assert words in fact[:fact.index("</tr>")]
    detail = api(platform_admin).get(f"/api/v1/quota-requests/{pk}/").json()
    assert [f["limited"] for f in detail["facts"]] == [False]

    QuotaGrant.objects.filter(pool=observed, resource=f"gpu:{H800}").delete()
    cards = next(g for g in dashboards.tenant_gauges(tenant_a) if g.key == f"gpu:{H800}")
    assert (cards.used, cards.quota, cards.borrowed, cards.limited) == (2, 0, 2, True)
    quota = client.get(reverse("tenants:quota", kwargs={"slug": "acme"})).content.decode()
    row = quota[quota.index(f'data-key="gpu:{H800}"'):]
    assert words not in row[:row.index("</tr>")]


def test_live_json_and_etag(observed, alice, login):
    client = login(alice)
    url = reverse("tenant_dashboard_data", kwargs={"slug": "acme"})
    response = client.get(url)
    data = json.loads(response.content)
    assert {"gauges", "waiting", "busyness"} <= set(data)
    assert data["busyness"][0]["label"] == "H800"
    again = client.get(url, HTTP_IF_NONE_MATCH=response["ETag"])
    assert again.status_code == 304
    trends = client.get(reverse("tenant_dashboard_trends", kwargs={"slug": "acme"}),
                        {"days": "30"})
    assert json.loads(trends.content)["days"] == 30


def _bulk_history(tenant, pool, n_jobs: int, n_samples: int) -> None:
    now = timezone.now()
    jobs = TrainingJob.objects.bulk_create([TrainingJob(
        tenant=tenant, pool=pool, name=f"j{i}", image="x", tier="development",
        max_run_seconds=3600, state="succeeded", workers=1, gpus_per_worker=1, gpu_model=H800,
        finished_at=now - dt.timedelta(minutes=i % 1000)) for i in range(n_jobs)])
    JobTransition.objects.bulk_create([JobTransition(
        job=j, from_state="admitted", to_state=state, reason=state,
        at=now - dt.timedelta(minutes=(i % 1000) + (30 if state == "running" else 0)))
        for i, j in enumerate(jobs) for state in ("running", "succeeded")])
    start = now.replace(second=0, microsecond=0)
    UsageSeries.objects.bulk_create([UsageSeries(
        pool=pool, resource=f"gpu:{H800}", resolution=res, start=start - span * i,
        allocated=i % 8, peak=i % 8, utilised=(i % 8) / 2, quota=8)
        for res, span in (("m", dt.timedelta(minutes=1)), ("h", dt.timedelta(hours=1)),
                          ("d", dt.timedelta(days=1)))
        for i in range(n_samples)])


@pytest.mark.parametrize("rows", [10, 2_000])
def test_dashboard_query_count_does_not_grow(rows, observed, tenant_a, alice, login,
                                             django_assert_max_num_queries):
    _bulk_history(tenant_a, observed, rows, rows)
    Policy.current()  # the one policy row exists in any running portal
    client = login(alice)
    # +1 since the capacity report reads the policy's topology levels; +3 for the trends'
    # GPU keys that exist (observed models, cached; the tenant's grants per range)
    # +2 for the job costs' device prices and device facts (issue 30: shares by share)
    # +3: the busyness banner reads the cluster page's one report (its stamp; issue 30)
    with django_assert_max_num_queries(49):   # 4 for the idle KPI (issue 17)
        assert client.get(reverse("tenant_dashboard", kwargs={"slug": "acme"})).status_code \
            == 200
    with django_assert_max_num_queries(22):
        assert client.get(reverse("tenant_dashboard_data", kwargs={"slug": "acme"})
                          ).status_code == 200
    with django_assert_max_num_queries(12):
        assert client.get(reverse("tenant_dashboard_trends", kwargs={"slug": "acme"})
                          ).status_code == 200
    # +3: the jobs that do not progress (pools, their observed quotas, the jobs)
    with django_assert_max_num_queries(27):
        assert client.get(reverse("cluster")).status_code == 200


# --- the cluster page ------------------------------------------------------------------------


def test_cluster_page_for_everyone_admin_parts_for_admins(observed, tenant_a, bob,
                                                          platform_admin, login, client):
    assert client.get(reverse("cluster")).status_code == 302
    usage_sample(samples=_samples(observed.namespace, 5))
    body = login(bob).get(reverse("cluster")).content.decode()
    assert "H800" in body and "h800-0" in body
    assert "Abnormal jobs" not in body and "idle GPUs per tenant" not in body
    data = json.loads(login(bob).get(reverse("cluster_data")).content)
    assert "tenants" not in data and data["busyness"][0]["allocated"] == 2
    admin = login(platform_admin).get(reverse("cluster"))
    (row,) = admin.context["tenants"]["rows"]
    assert row["tenant"] == "acme" and row["idle"] == pytest.approx(1.9)
    assert row["cells"]["gpu"] == "2 cards" and admin.context["tenants"]["total"]["gpu"] == \
        "2 cards"
    assert "Abnormal jobs" in admin.content.decode()


def test_heatmap_shares_of_cards_by_hour(observed):
    now = timezone.now()
    UsageSeries.objects.create(pool=observed, resource=f"gpu:{H800}", resolution="h",
                               start=now.replace(minute=0, second=0, microsecond=0),
                               allocated=4)
    report = cluster_figures.capacity_report()
    (heat,) = dashboards.allocation_by_hour(report=report, now=now)
    z = heat["figure"]["data"][0]["z"]
    assert len(z) == 7 and len(z[0]) == 24 and z[-1][now.hour] == 50.0


def test_abnormal_jobs_and_one_click_actions(observed, tenant_a, bob, platform_admin, login):
    now = timezone.now()
    idle = _job(tenant_a, observed, "idle", state="running", started_at=now - dt.timedelta(hours=3))
    old = _job(tenant_a, observed, "marathon", state="running",
               started_at=now - dt.timedelta(days=6))
    fine = _job(tenant_a, observed, "fine", state="running", started_at=now)
    for job, low in ((idle, now - dt.timedelta(hours=2)), (fine, None)):
        JobUtilisation.objects.create(namespace=observed.namespace, job=str(job.pk),
                                      gpu_samples=100, util_sum=300, last_util=3,
                                      low_since=low, first_sampled_at=now, last_sampled_at=now)
    names = {a["job"].name for a in dashboards.abnormal_jobs(now=now)}
    assert names == {"idle", "marathon"}
    url = reverse("abnormal_job_action", kwargs={"pk": idle.pk, "action": "hold"})
    assert login(bob).post(url).status_code == 404
    assert login(platform_admin).post(url, {"reason": "idle GPUs"}).status_code == 302
    idle.refresh_from_db()
    assert idle.held and idle.hold_reason == "idle GPUs"
    cancel = reverse("abnormal_job_action", kwargs={"pk": old.pk, "action": "cancel"})
    assert login(platform_admin).post(cancel).status_code == 302
    old.refresh_from_db()
    assert old.state == "cancelled"


def test_dashboards_reference_no_external_assets(observed, bob, login):
    import re

    client = login(bob)
    for url in (reverse("tenant_dashboard", kwargs={"slug": "acme"}), reverse("cluster")):
        html = client.get(url).content.decode()
        assert re.findall(r'(?:src|href)="(https?://[^"]+)"', html) == [], url
        for asset in re.findall(r'(?:src|href)="(/static/[^"]+)"', html):
            assert client.get(asset).status_code == 200, asset
        # readable without JavaScript: the numbers are in the HTML
        assert "<meter" in html and 'id="dashboard-figures"' in html


def test_rollup_feeds_measured_utilisation_into_usage_daily(observed):
    from decimal import Decimal

    from tenants.models import UsageDaily

    now = timezone.now()
    UsageDaily.objects.create(pool=observed, resource=f"gpu:{H800}", day=now.date(),
                              peak=2, total=Decimal(2 * 288), samples=288)
    usage_sample(now=now, samples=_samples(observed.namespace, 50))  # 1 of 2 cards busy
    usage_rollup(now=now)
    row = UsageDaily.objects.get(pool=observed, resource=f"gpu:{H800}", day=now.date())
    assert (row.utilised_total, row.utilised_samples) == (Decimal(288), 288)
    assert row.utilised_total / row.utilised_samples == 1   # 1 of 2 cards busy


def test_a_gauge_counts_its_unit():
    assert dashboards.counted_unit("gpu:NVIDIA-H800", 1, "cards") == "card"
    assert dashboards.counted_unit("gpu:NVIDIA-H800", 2, "cards") == "cards"
    assert dashboards.counted_unit("cpu", 1.5, "cores") == "cores"
    assert dashboards.counted_unit("memory", 1, "GiB") == "GiB"
