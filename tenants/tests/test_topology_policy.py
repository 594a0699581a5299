"""The policy's topology levels: page, API and service check them as label keys; the
capacity page shows the levels in force."""

import pytest
from django.urls import reverse

from core.exceptions import ApplicationError
from core.models import Policy
from tenants import services
from tenants.selectors import topology_levels

pytestmark = pytest.mark.django_db


def test_levels_default_and_are_checked_by_the_service(platform_admin):
    assert topology_levels() == ("trainyard.io/rack", "trainyard.io/switch")
    services.policy_update(actor=platform_admin,
                           topology_levels=["topology.kubernetes.io/zone", "example.com/blk"])
    assert topology_levels() == ("topology.kubernetes.io/zone", "example.com/blk")
    for bad in (["not a key"], ["kubernetes.io/hostname", "example.com/blk"], "example.com/x"):
        with pytest.raises(ApplicationError) as err:
            services.policy_update(actor=platform_admin, topology_levels=bad)
        assert err.value.field == "topology_levels"
    assert Policy.current().topology_levels == ["topology.kubernetes.io/zone", "example.com/blk"]
    services.policy_update(actor=platform_admin, topology_levels=[])
    assert topology_levels()[-1] == "trainyard.io/switch"


def test_the_api_reads_and_changes_the_levels(api, platform_admin):
    client = api(platform_admin)
    assert client.get("/api/v1/policy/").json()["topology_levels"] == []
    bad = client.patch("/api/v1/policy/", {"topology_levels": ["a b"]}, format="json")
    assert bad.status_code == 400 and "topology_levels" in bad.content.decode()
    ok = client.patch("/api/v1/policy/", {"topology_levels": ["example.com/blk"]},
                      format="json")
    assert ok.status_code == 200 and ok.json()["topology_levels"] == ["example.com/blk"]


def test_the_policy_page_field_and_the_capacity_page(login, platform_admin):
    browser = login(platform_admin)
    page = browser.get(reverse("tenants:policy"))
    assert 'name="topology_levels"' in page.content.decode()
    data = {"eviction_watermark": "85", "development_grace_seconds": "300",
            "batch_grace_seconds": "60", "dynamic_headroom": "20",
            "dynamic_idle_threshold": "50",
            "topology_levels": "example.com/blk\nkubernetes.io/hostname"}
    response = browser.post(reverse("tenants:policy"), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Policy.current().topology_levels == ["example.com/blk", "kubernetes.io/hostname"]
    data["topology_levels"] = "kubernetes.io/hostname\nexample.com/blk"
    refused = browser.post(reverse("tenants:policy"), data)
    assert refused.status_code == 400 and "last level" in refused.content.decode()
    capacity = browser.get(reverse("platform_capacity")).content.decode()
    assert "<code>example.com/blk</code>" in capacity
    assert "<code>kubernetes.io/hostname</code>" in capacity
