"""Cluster pages (/platform/capacity/, /platform/cluster/) and the cluster API.

Pages: platform admins only (404 for everyone else, login redirect for anonymous).
API: capacity for every authenticated user, health for platform admins.
"""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.urls import reverse

from k8s_sync.client import get_client
from k8s_sync.observe import relist_all

pytestmark = pytest.mark.django_db
PAGES = ["platform_capacity", "platform_cluster"]


@pytest.fixture
def observed(cluster):
    from core.models import Policy

    cache.clear()
    relist_all(get_client())
    Policy.current()  # the row exists, as it does after the first page view
    yield cluster
    cache.clear()


@pytest.mark.parametrize("name", PAGES)
def test_anonymous_is_sent_to_login(client, name):
    response = client.get(reverse(name))
    assert response.status_code == 302 and reverse("login") in response["Location"]


@pytest.mark.parametrize("name", PAGES)
def test_pages_do_not_exist_for_tenant_people_or_finance(login, cast, alice, bob, charlie,
                                                         finance_user, name):
    for user in (alice, bob, charlie, finance_user):
        assert login(user).get(reverse(name)).status_code == 404


def test_the_capacity_page_shows_models_and_nodes(login, platform_admin, observed,
                                                  django_assert_max_num_queries):
    browser = login(platform_admin)
    # 10 + the policy's topology levels + the per-resource table (pools, their jobs in
    # use, card facts; constant however many pools and jobs there are) + 3: the observed
    # rows' stamp naming the one report the cluster page reads too (issue 30)
    with django_assert_max_num_queries(16):
        response = browser.get(reverse("platform_capacity"))
    assert response.status_code == 200
    body = response.content.decode()
    for text in ("NVIDIA-A100-SXM4-80GB", "NVIDIA-H800", "NVIDIA-L40S", "a100-mig-0",
                 "3g.40gb", "switch-a1", "rack-b1", "cpu-0", "80 GiB"):
        assert text in body, text


def test_the_cluster_page_shows_reachability_version_and_observers(
        login, platform_admin, observed, django_assert_max_num_queries):
    browser = login(platform_admin)
    # 16 + the idle-while-waiting figure (the 24 h totals, the hours of its chart)
    with django_assert_max_num_queries(18):
        response = browser.get(reverse("platform_cluster"))
    assert response.status_code == 200
    body = response.content.decode()
    assert get_client().server_version()["gitVersion"] in body
    assert "pytorchjobs.kubeflow.org" in body and "storageclasses" in body


def test_the_cluster_page_shows_the_error_when_the_api_is_down(login, platform_admin,
                                                               observed):
    observed.faults.add(method="GET", path_regex=r"^/version", status=500,
                        message="apiserver on fire")
    body = login(platform_admin).get(reverse("platform_cluster")).content.decode()
    assert "apiserver on fire" in body


def test_nav_links_are_for_platform_admins(login, platform_admin, bob, tenant_a):
    body = login(platform_admin).get(reverse("home"), follow=True).content.decode()
    assert reverse("platform_capacity") in body and reverse("platform_cluster") in body
    body = login(bob).get(reverse("home"), follow=True).content.decode()
    assert reverse("platform_capacity") not in body and reverse("platform_cluster") not in body


def test_capacity_api_needs_authentication(api):
    assert api().get("/api/v1/cluster/capacity/").status_code == 401
    assert api().get("/api/v1/cluster/health/").status_code == 401


def test_everyone_authenticated_reads_the_capacity_api(api, cast, bob, charlie, observed,
                                                       django_assert_max_num_queries):
    for user in (bob, charlie):
        with django_assert_max_num_queries(7):  # 6 + the policy's topology levels
            response = api(user).get("/api/v1/cluster/capacity/")
        assert response.status_code == 200
        data = response.json()
        models = {m["gpu_model"]: m for m in data["models"]}
        assert models["NVIDIA-H800"]["whole_allocatable"] == 8
        assert {x["profile"] for x in models["NVIDIA-A100-SXM4-80GB"]["mig"]} == {
            "1g.10gb", "3g.40gb"}
        assert len(data["nodes"]) == 6 and data["totals"]["nodes"] == 6


def test_the_capacity_api_is_read_only(api, bob):
    assert api(bob).post("/api/v1/cluster/capacity/", {}).status_code == 405


def test_the_health_api_is_for_platform_admins(api, cast, bob, finance_user, platform_admin,
                                               observed):
    for user in (bob, finance_user):
        assert api(user).get("/api/v1/cluster/health/").status_code == 404
    response = api(platform_admin).get("/api/v1/cluster/health/")
    assert response.status_code == 200
    data = response.json()
    assert data["reachable"] is True and data["training_operator"] is True and data["ok"]
    assert data["counts"]["nodes"] == 6
    assert {k["kind"] for k in data["kinds"]} >= {"nodes", "pods", "events"}


def test_the_cluster_page_shows_gpu_hours_idle_while_work_waited(login, platform_admin, db):
    import datetime as dt
    import json

    from django.utils import timezone

    from jobs.admission.waste import KeyIdle
    from jobs.idle_waiting import idle_waiting_record

    now = timezone.now()
    # 30 minutes of 16 GPUs, 8 idle of which 4 while a dev job above its quota waited
    for minutes in range(30):
        idle_waiting_record(figures={"gpu:NVIDIA-H800": KeyIdle(
            "gpu:NVIDIA-H800", 16, 8, {"soft_limit": 4, "reservation": 2})},
            seconds=60, now=now - dt.timedelta(minutes=minutes))
    # older than a day: not in the figure
    idle_waiting_record(figures={"gpu:NVIDIA-H800": KeyIdle(
        "gpu:NVIDIA-H800", 16, 8, {"soft_limit": 16})}, seconds=60,
        now=now - dt.timedelta(hours=25))
    browser = login(platform_admin)
    response = browser.get(reverse("platform_cluster"))
    body = response.content.decode()
    assert "GPU-hours idle while a job that fits them waited" in body
    # 3 GPU-hours idle while work waited, of 8 capacity-hours: 37.5%
    assert '<strong data-idle-hours>3</strong>' in body
    assert '<strong data-idle-percent>37.5%</strong>' in body
    assert "Soft limits (development and batch quota)" in body
    figure = response.context["figures"]["idle"]
    stacked = {t["name"]: sum(t["y"]) for t in figure["data"]}
    assert stacked["Soft limits (development and batch quota)"] == pytest.approx(2.0, abs=0.002)
    assert stacked["Reserved for a larger job"] == pytest.approx(1.0, abs=0.002)
    assert "plotly-trainyard.min.js" in body and 'data-figure="idle"' in body
    browser.cookies["django_language"] = "zh-hans"
    body = browser.get(reverse("platform_cluster")).content.decode()
    assert "等待期间闲置" in body and "软限制" in body
    assert "Soft limits (development and batch quota)" not in body
    figure = json.loads(body.split('id="dashboard-figures" type="application/json">')[1]
                        .split("</script>")[0])
    assert "软限制（开发和批处理配额）" in {t["name"] for t in figure["idle"]["data"]}
