"""The cluster page's query budget does not grow with the rows it shows.

A platform admin sees every part: the busyness banner, the hourly heatmap, the node
table, per-tenant allocation at the latest minute and the abnormal jobs (with their
tenant and pool). Loading 3 or 40 tenants (each with a node, a running pod, a sampled
minute, a job idle for hours and a job running for days) must cost the same number of
queries, cold (nothing cached) and warm, so a per-row query cannot creep back.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from core.models import Policy
from jobs.models import JobTransition, TrainingJob
from k8s_sync.models import ObservedNode, ObservedPod
from k8s_sync.naming import namespace_name
from tenants.models import JobUtilisation, Pool, Tenant, UsageSeries

pytestmark = pytest.mark.django_db

H800 = "NVIDIA-H800"
# warm: session, user, the observed rows' stamps (pods, nodes, last node list), roles,
# latest minute, the jobs that do not progress (the pools not in the cluster: pools and
# observed quotas, then the jobs), low-utilisation rows, abnormal jobs (with tenant and
# pool), the switcher's tenants, unread notifications, pending requests; cold adds the capacity
# report (pods, nodes, bookkeeping), queued demand, recent waits, the heatmap and the
# latest minute's rows; the policy is read twice (the topology levels of the capacity
# report (cold page and data), the watermark of the physical use, which the report gives)
# +1: the pools' namespaces, to split the report's pods per tenant; the JSON +3 more: the
# observed rows' stamp naming the one report the page reads too (issue 30)
COLD_PAGE, WARM_PAGE, COLD_DATA = 25, 16, 15


@pytest.fixture(autouse=True)
def _clear_cache():
    Policy.current()  # the one policy row exists in any running portal
    cache.clear()
    yield
    cache.clear()


def _load(n: int) -> None:
    now = timezone.now()
    minute = now.replace(second=0, microsecond=0)
    tenants = Tenant.objects.bulk_create([Tenant(
        slug=f"q{i:03d}", name=f"Q {i}", cost_center="CC", contact_email="q@example.org")
        for i in range(n)])
    pools = Pool.objects.bulk_create([Pool(tenant=t, kind="prod") for t in tenants])
    ObservedNode.objects.bulk_create([ObservedNode(
        name=f"n{i:03d}", uid=f"n{i}", resource_version="1", observed_at=now,
        gpu_product=H800, gpu_model=H800, gpu_count=8, gpu_memory_mib=81559, ready=True,
        allocatable={"cpu": "128", "nvidia.com/gpu": "8"},
        capacity={"cpu": "128", "nvidia.com/gpu": "8"}) for i in range(n)])
    jobs = []
    for i, pool in enumerate(pools):
        for name, started in (("idle", now - dt.timedelta(hours=3)),
                              ("marathon", now - dt.timedelta(days=6))):
            jobs.append(TrainingJob(
                tenant=pool.tenant, pool=pool, name=f"{name}-{i}", image="x",
                tier="development", max_run_seconds=3600, state="running", workers=1,
                gpus_per_worker=2, gpu_model=H800, started_at=started))
    jobs = TrainingJob.objects.bulk_create(jobs)
    JobTransition.objects.bulk_create([JobTransition(
        job=j, from_state="admitted", to_state="running", reason="Running", at=j.started_at)
        for j in jobs])
    JobUtilisation.objects.bulk_create([JobUtilisation(
        namespace=namespace_name(j.tenant.slug, "prod"), job=str(j.pk), gpu_samples=60,
        util_sum=180, last_util=3, low_since=now - dt.timedelta(hours=2),
        first_sampled_at=now, last_sampled_at=now) for j in jobs if j.name.startswith("idle")])
    ObservedPod.objects.bulk_create([ObservedPod(
        namespace=namespace_name(j.tenant.slug, "prod"), name=f"{j.name}-master-0",
        uid=f"p{j.pk}", resource_version="1", observed_at=now, phase="Running",
        node_name=f"n{i // 2:03d}", tenant=j.tenant.slug, pool="prod", job=str(j.pk),
        requests={"cpu": "8", "nvidia.com/gpu": "2"}) for i, j in enumerate(jobs)])
    UsageSeries.objects.bulk_create([UsageSeries(
        pool=pool, resource=key, resolution=res, start=start, allocated=4, peak=4,
        utilised=1 if key.startswith("gpu:") else None, quota=8)
        for pool in pools for key in (f"gpu:{H800}", "cpu")
        for res, start in (("m", minute), ("h", minute.replace(minute=0)))])


@pytest.mark.parametrize("n", [3, 40])
def test_cluster_page_queries_do_not_grow_with_rows(n, platform_admin, login,
                                                    django_assert_max_num_queries):
    _load(n)
    client = login(platform_admin)
    with django_assert_max_num_queries(COLD_PAGE):
        response = client.get(reverse("cluster"))
    assert response.status_code == 200
    # every part was drawn: a row per tenant, two abnormal jobs per tenant (up to 25)
    assert len(response.context["tenants"]["rows"]) == n
    assert len(response.context["abnormal"]) == min(25, 2 * n)
    assert len(response.context["report"].nodes) == n
    body = response.content.decode()
    assert f'href="/t/q{n - 1:03d}/dashboard/"' in body
    assert 'href="/t/q000/jobs/' in body
    with django_assert_max_num_queries(WARM_PAGE):
        assert client.get(reverse("cluster")).status_code == 200
    cache.clear()
    with django_assert_max_num_queries(COLD_DATA):
        data = json.loads(client.get(reverse("cluster_data")).content)
    assert len(data["tenants"]) == n and data["busyness"][0]["allocated"] == 4 * n
