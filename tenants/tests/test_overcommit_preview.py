"""The policy page's overcommit preview: one pure function (``tenants.quota.over_cap``)
says which resources and tenants a set of factors puts over the cap; the page previews it
without saving, states it again on save, and refuses a factor out of range at its field."""

from decimal import Decimal

from django.conf import settings
from django.utils import timezone

from core.models import Policy
from core.tests.html import form_values
from k8s_sync.models import ObservedNode
from tenants.models import AuditEvent, QuotaGrant
from tenants.quota import OverCap, over_cap

D = Decimal


def test_over_cap_names_the_resources_and_tenants_above_factor_times_capacity():
    capacity = {"gpu:NVIDIA-A100": D(16), "cpu": D(100)}
    grants = {"gpu:NVIDIA-A100": {"globex": D(12), "acme": D(16), "initech": D(0)},
              "cpu": {"acme": D(150)}, "storage:fast": {"acme": D(10**6)},
              "mig:1g.10gb": {"acme": D(2)}}
    result = over_cap(factors={"gpu": "1.5", "cpu": 2}, capacity=capacity, grants=grants)
    assert result == [
        OverCap(key="gpu:NVIDIA-A100", factor=D("1.5"), capacity=D(16), limit=D("24.0"),
                granted=D(28), tenants=(("acme", D(16)), ("globex", D(12)))),
        # a MIG profile no node has: a capacity of 0, as approvals count it
        OverCap(key="mig:1g.10gb", factor=D(1), capacity=D(0), limit=D(0), granted=D(2),
                tenants=(("acme", D(2)),))]
    # a key's own factor wins over its kind's; at the cap exactly is not over it
    assert [o.key for o in over_cap(factors={"gpu": 1, "gpu:NVIDIA-A100": "1.75", "cpu": 1},
                                    capacity=capacity, grants=grants)] == \
        ["cpu", "mig:1g.10gb"]
    assert over_cap(factors={}, capacity={}, grants=grants) == []   # nothing observed


def _values(client):
    return form_values(client.get("/platform/policy/").content.decode(), "")


def test_the_policy_page_previews_saves_with_the_effect_and_refuses_out_of_range(
        client, login, platform_admin, tenant_a, tenant_b):
    ObservedNode.objects.create(name="h800-0", gpu_product="NVIDIA-H800",
                                gpu_model="NVIDIA-H800", gpu_count=8, gpu_memory_mib=81920,
                                allocatable={"nvidia.com/gpu": "8"}, observed_at=timezone.now())
    for tenant, amount in [(tenant_a, 6), (tenant_b, 4)]:
        QuotaGrant.objects.create(pool=tenant.pools.get(kind="prod"), amount=D(amount),
                                  resource="gpu:NVIDIA-H800", granted_by=platform_admin)
    Policy.objects.filter(pk=Policy.current().pk).update(overcommit_factors={"gpu": 2})
    login(platform_admin)
    page = client.get("/platform/policy/").content.decode()
    assert "No resource's grants are over the cap." in page   # 10 of 16
    values = _values(client)
    sentence = ("GPUs · NVIDIA-H800, factor 1.1: acme (6), globex (4) would be over the cap "
                "(granted 10 of 8.8 cards, 1.1 × the capacity of 8).")
    preview = client.post("/platform/policy/", {**values, "overcommit_factors.gpu": "1.1",
                                                "preview": "1"})
    assert preview.status_code == 200 and sentence in preview.content.decode()
    assert Policy.current().overcommit_factors == {"gpu": 2}          # nothing saved
    for button in ({}, {"preview": "1"}):   # out of range: refused at the field, saved or not
        bad = client.post("/platform/policy/", {**values, "overcommit_factors.gpu": "12",
                                                **button})
        body = bad.content.decode()
        assert bad.status_code == 400 and "between 1 and 10, not 12.0 (gpu)" in body
        assert 'id="id_overcommit_factors.gpu_error"' in body
    assert Policy.current().overcommit_factors == {"gpu": 2}
    assert not AuditEvent.objects.filter(action="policy.update").exists()
    saved = client.post("/platform/policy/", {**values, "overcommit_factors.gpu": "1.1"},
                        follow=True)
    assert Policy.current().overcommit_factors == {"gpu": 1.1}
    body = saved.content.decode()
    assert "The policy was saved." in body and sentence in body
    assert "With the factors saved:" in body
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    chinese = client.get("/platform/policy/").content.decode()
    assert "GPU · NVIDIA-H800，系数 1.1：acme (6)、globex (4) 将超出上限" in chinese


def test_the_tenant_create_page_flags_an_empty_default_quota(client, login, platform_admin):
    login(platform_admin)
    page = client.get("/platform/tenants/").content.decode()
    assert ("New tenants get no quota: they can run nothing until a quota is granted."
            in page and 'href="/platform/policy/#id_default_quota"' in page)
    policy_page = client.get("/platform/policy/").content.decode()
    assert 'id="id_default_quota"' in policy_page and "New tenants get no quota" in policy_page
    Policy.objects.filter(pk=Policy.current().pk).update(
        default_quota={"dev": {"cpu": "8", "gpu:NVIDIA-H800": "0"}, "prod": {"memory": "64"}})
    page = client.get("/platform/tenants/").content.decode()
    assert "New tenants get no quota" not in page
    assert "New tenants get no quota" not in client.get("/platform/policy/").content.decode()
    assert "New tenants get the default quota: Production · Memory 64 GiB; " \
           "Development · CPU 8 cores." in page
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    Policy.objects.filter(pk=Policy.current().pk).update(default_quota={})
    assert "新租户没有任何配额" in client.get("/platform/tenants/").content.decode()
