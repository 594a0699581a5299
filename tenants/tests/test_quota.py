"""Setting quota (static mode) in the page and the API; the pool shows sync and quota."""

from decimal import Decimal

import pytest

from core.exceptions import ApplicationError, NotAllowed
from tenants import services
from tenants.models import AuditEvent, QuotaGrant
from tenants.quota import quota_spec_for
from tenants.selectors import current_grants


def test_quota_spec_zeroes_what_is_not_granted():
    spec = quota_spec_for({"cpu": Decimal("16.000"), "gpu:H800": Decimal(2),
                           "gpu:A100": Decimal(3), "storage:fast": Decimal("100.5")},
                          storage_classes={"fast", "slow"}, mig_profiles=["1g.10gb"])
    hard = spec.to_hard()
    assert hard["requests.cpu"] == "16" and hard["requests.memory"] == "0"
    assert hard["requests.nvidia.com/gpu"] == "5"
    assert hard["requests.nvidia.com/mig-1g.10gb"] == "0"
    assert hard["fast.storageclass.storage.k8s.io/requests.storage"] == "102912Mi"
    assert hard["slow.storageclass.storage.k8s.io/requests.storage"] == "0"
    assert hard["slow.storageclass.storage.k8s.io/persistentvolumeclaims"] == "0"


def test_the_borrowing_ceiling_is_one_rule():
    """Grant x factor rounded down to the engine's unit, for job dimensions only; no cap
    (None) is no limit; the factor is the tenant's cap, else the policy's; pool_limits
    agrees."""
    from tenants.demand import (
        UNLIMITED,
        borrowing_factor,
        elastic_ceiling,
        pool_ceiling,
        pool_limits,
    )

    assert elastic_ceiling("gpu:H800", Decimal(3), Decimal("1.5")) == 4
    assert elastic_ceiling("cpu", Decimal("10.001"), Decimal("1.5")) == Decimal("15.001")
    assert elastic_ceiling("storage:fast", Decimal(100), Decimal(2)) == 100  # not elastic
    assert elastic_ceiling("memory", Decimal(8), Decimal("0.5")) == 8  # never below the grant
    assert pool_ceiling("gpu:H800", Decimal(3), None) is None   # no cap: any idle capacity
    assert pool_ceiling("storage:fast", Decimal(100), None) == 100   # storage never borrows
    assert pool_ceiling("gpu:H800", Decimal(3), Decimal(1)) == 3
    assert borrowing_factor(None, None) is None
    assert borrowing_factor(None, Decimal(2)) == 2
    assert borrowing_factor(Decimal("1.5"), Decimal(2)) == Decimal("1.5")   # the tenant's
    assert borrowing_factor(Decimal("0.5"), None) == 1
    grants = {"gpu:H800": Decimal(3), "cpu": Decimal("10.001"), "storage:fast": Decimal(100)}
    nominal, ceiling, default = pool_limits(grants, factor=Decimal("1.5"))
    assert nominal == {"gpu:H800": 3, "cpu": 10001}
    assert ceiling == {"gpu:H800": 4, "cpu": 15001} and default is None
    nominal, ceiling, default = pool_limits(grants, factor=None)
    assert ceiling == {"gpu:H800": UNLIMITED, "cpu": UNLIMITED} and default == UNLIMITED


def test_quota_set_keeps_history_and_is_idempotent(platform_admin, tenant_a):
    pool = tenant_a.pools.get(kind="prod")
    services.quota_set(actor=platform_admin, pool=pool, amounts={"cpu": 8}, reason="start")
    assert services.quota_set(actor=platform_admin, pool=pool, amounts={"cpu": "8.0"},
                              reason="again") == []
    services.quota_set(actor=platform_admin, pool=pool, amounts={"cpu": 16}, reason="more")
    rows = list(QuotaGrant.objects.filter(pool=pool).order_by("created_at"))
    assert [(r.amount, r.superseded_at is None) for r in rows] == [
        (Decimal("8.000"), False), (Decimal("16.000"), True)]
    assert AuditEvent.objects.filter(action="quota.set").count() == 2


@pytest.mark.parametrize("amounts,message", [
    ({"cpus": 1}, "unknown resource"),
    ({"gpu": 1}, "qualifier"),
    ({"gpu:H800": "1.5"}, "whole number"),
    ({"memory": -1}, "zero or more"),
    ({"cpu": "lots"}, "not a number"),
    ({}, "at least one"),
])
def test_bad_quota_input_is_refused_and_changes_nothing(platform_admin, tenant_a, amounts,
                                                        message):
    pool = tenant_a.pools.get(kind="dev")
    with pytest.raises(ApplicationError, match=message):
        services.quota_set(actor=platform_admin, pool=pool,
                           amounts={"cpu": 4, **amounts} if amounts else {}, reason="x")
    assert not QuotaGrant.objects.exists()


def test_only_platform_admins_set_quota(alice, tenant_a):
    with pytest.raises(NotAllowed):
        services.quota_set(actor=alice, pool=tenant_a.pools.get(kind="prod"),
                           amounts={"cpu": 1}, reason="please")


def test_the_api_sets_and_shows_quota_and_sync_state(api, platform_admin, bob, tenant_a):
    response = api(platform_admin).put("/api/v1/tenants/acme/pools/prod/quota/", {
        "amounts": {"cpu": 32, "gpu:NVIDIA-H800": 4}, "reason": "kickoff"}, format="json")
    assert response.status_code == 200, response.json()
    body = api(bob).get("/api/v1/tenants/acme/pools/prod/").json()
    assert body["quota"] == {"cpu": "32", "gpu:NVIDIA-H800": "4"}
    assert body["sync"]["state"] == "pending"
    assert api(bob).put("/api/v1/tenants/acme/pools/prod/quota/", {
        "amounts": {"cpu": 64}, "reason": "mine"}, format="json").status_code == 403
    bad = api(platform_admin).put("/api/v1/tenants/acme/pools/prod/quota/", {
        "amounts": {"cpu": 1, "warp-drive": 1}, "reason": "x"}, format="json")
    assert bad.status_code == 400 and "unknown resource" in bad.json()["message"]


def test_outsiders_get_404_on_pool_pages_and_endpoints(api, login, charlie, tenant_a,
                                                       tenant_b):
    assert login(charlie).get("/t/acme/pools/prod/").status_code == 404
    assert login(charlie).post("/t/acme/pools/prod/sync/").status_code == 404
    assert api(charlie).put("/api/v1/tenants/acme/pools/prod/quota/", {
        "amounts": {"cpu": 1}, "reason": "x"}, format="json").status_code == 404
    assert api(charlie).post("/api/v1/tenants/acme/pools/prod/sync/").status_code == 404


def test_anonymous_is_sent_to_login_from_pool_pages(client, tenant_a):
    response = client.get("/t/acme/pools/prod/")
    assert response.status_code == 302 and "/login/" in response.url


def test_the_pool_page_shows_quota_and_lets_platform_admins_set_it(login, platform_admin, bob,
                                                                   tenant_a):
    client = login(platform_admin)
    response = client.post("/t/acme/pools/dev/", {
        "resource_0": "memory", "amount_0": "128", "resource_1": "pvcs",
        "amount_1": "2", "reason": "new project"})
    assert response.status_code == 302
    body = login(bob).get("/t/acme/pools/dev/").content.decode()
    assert "128 GiB" in body and "new project" in body and "Set quota" not in body
    assert login(bob).post("/t/acme/pools/dev/", {"resource_0": "cpu", "amount_0": "999",
                                                  "reason": "x"}).status_code == 404
    # a resource the catalog does not offer is a field error; nothing changes
    bad = login(platform_admin).post("/t/acme/pools/dev/", {"resource_0": "gpu:NVIDIA-H800",
                                                            "amount_0": "1", "reason": "x"})
    assert bad.status_code == 400 and "Select a valid choice" in bad.content.decode()
    assert "gpu:NVIDIA-H800" not in current_grants(tenant_a.pools.get(kind="dev"))


def test_members_cannot_request_a_sync_but_admins_can(api, alice, bob, tenant_a):
    assert api(bob).post("/api/v1/tenants/acme/pools/prod/sync/").status_code == 403
    response = api(alice).post("/api/v1/tenants/acme/pools/prod/sync/")
    assert response.status_code == 202 and response.json()["sync"]["state"] == "pending"
