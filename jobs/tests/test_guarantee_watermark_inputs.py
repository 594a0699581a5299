"""Issue 13, part G: what admission is given (database, no cluster).

* The guaranteed part the quota page shows is the one admission protects.
* Physical use per key, from the observed cluster and DCGM: framebuffer used on shared
  cards raises it above what the pods' requests account for; the engine and the cluster
  page read the same number.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from jobs.selectors import admission_inputs, physical_use_now
from k8s_sync.metrics import GpuSample
from k8s_sync.models import ObservedNode, ObservedPod
from k8s_sync.physical import physical_use, shared_framebuffer_mib
from k8s_sync.selectors import capacity_report
from tenants import services as tenant_services
from tenants.selectors import quota_overview

from .conftest import H800

L40S = "NVIDIA-L40S"


@pytest.fixture(autouse=True)
def _fresh_cache():
    cache.clear()
    yield
    cache.clear()


def test_the_guaranteed_part_shown_is_the_one_admission_protects(
        platform_admin, tenant_a, tenant_b, inventory):
    # 16 H800 cards; acme static 8, globex overcommitted 12 (GPU overcommit 1.5): globex's
    # guaranteed share is (16 - 8) / 12, so 8 of its 12 are guaranteed.
    tenant_services.policy_update(actor=platform_admin,
                                  overcommit_factors={"gpu": 1.5, "cpu": 4, "memory": 4})
    tenant_b.quota_mode = "overcommitted"
    tenant_b.borrowing_cap = Decimal("1.5")
    tenant_b.save(update_fields=["quota_mode", "borrowing_cap"])
    for tenant, gpus in ((tenant_a, 8), (tenant_b, 12)):
        tenant_services.quota_set(actor=platform_admin, pool=tenant.pools.get(kind="dev"),
                                  reason="test", amounts={f"gpu:{H800}": gpus})
    shown = {row["key"]: row["guaranteed"] for p in quota_overview(tenant_b)
             if p["pool"].kind == "dev" for row in p["rows"]}
    assert shown[f"gpu:{H800}"] == Decimal(8)
    quotas = {(q.tenant, q.pool): q for q in admission_inputs(timezone.now())["quotas"]}
    assert quotas[("globex", "dev")].guaranteed == {f"gpu:{H800}": 8}
    assert quotas[("globex", "dev")].ceiling[f"gpu:{H800}"] == 18
    assert quotas[("acme", "dev")].guaranteed is None   # static: all of its nominal quota


def _shared_node():
    """One time-sliced L40S node: 4 cards of 46068 MiB, 4 shares each; a pod holds 2."""
    now = timezone.now()
    ObservedNode.objects.create(
        name="shared-0", uid="s0", resource_version="1", observed_at=now, gpu_product=L40S,
        gpu_model=L40S, gpu_count=4, gpu_memory_mib=46068, ready=True,
        sharing_strategy="time-slicing", gpu_replicas=4,
        allocatable={"cpu": "64", "memory": "512Gi", "nvidia.com/gpu.shared": "16",
                     "pods": "110"})
    ObservedPod.objects.create(
        namespace="ty-acme-dev", name="job-1-master-0", uid="p1", resource_version="1",
        observed_at=now, phase="Running", node_name="shared-0", tenant="acme", pool="dev",
        job="1", requests={"cpu": "16", "memory": "64Gi", "nvidia.com/gpu.shared": "2"})


def _sample(gpu: str, pod: str, mib: float) -> GpuSample:
    return GpuSample(namespace="ty-acme-dev" if pod else "", pod=pod, node="shared-0", gpu=gpu,
                     uuid=f"GPU-{gpu}", model=L40S, util_pct=80.0, fb_used_mib=mib,
                     fb_free_mib=46068 - mib)


def test_dcgm_framebuffer_on_shared_cards_raises_physical_use(db):
    _shared_node()
    report = capacity_report()
    plain = physical_use(report)[f"shared:{L40S}"]
    assert plain.cards == pytest.approx(2 / 16)
    assert plain.framebuffer is None
    assert plain.cpu == pytest.approx(16 / 64) and plain.memory == pytest.approx(64 / 512)
    assert plain.use == pytest.approx(0.25)   # the CPU requested is the largest share
    # The 2 shares' pods use 40000 MiB on each of two cards (dcgm-exporter repeats a
    # device's FB_USED on every pod sharing it: counted once per device).
    samples = [_sample("0", "job-1-master-0", 40000), _sample("0", "other-pod", 40000),
               _sample("1", "job-1-master-0", 40000), _sample("2", "", 0)]
    fb = shared_framebuffer_mib(report, samples)
    assert fb == {"shared-0": 80000}
    measured = physical_use(report, fb)[f"shared:{L40S}"]
    assert measured.framebuffer == pytest.approx(80000 / (16 * 46068 // 4), rel=1e-3)
    assert measured.use == pytest.approx(measured.framebuffer)
    assert measured.percent == 43


def test_the_engine_and_the_cluster_page_read_the_same_physical_use(
        db, settings, platform_admin, login):
    settings.PROMETHEUS_URL = ""
    settings.TRAINYARD_DCGM_URLS = ["http://127.0.0.1:9/metrics"]   # nothing listens: None
    _shared_node()
    report = capacity_report()
    shared_framebuffer_mib(report, [_sample("0", "job-1-master-0", 40000),
                                    _sample("1", "job-1-master-0", 40000)])  # the last read
    # the metrics source does not answer now: the engine keeps the last reading (<= 5 min)
    engine = admission_inputs(timezone.now())["physical"]
    assert engine[f"shared:{L40S}"] == pytest.approx(80000 / (16 * 46068 // 4), rel=1e-3)
    # and the page shows the same
    page = login(platform_admin).get(reverse("cluster"))
    assert page.status_code == 200
    [row] = [w for w in page.context["watermark"]["rows"] if w["key"] == f"shared:{L40S}"]
    assert row["framebuffer"] == 43 and row["percent"] == 43 and not row["above"]
    body = page.content.decode()
    assert "Physical use against the eviction watermark" in body
    assert "43% of 85%" in body
    cache.clear()   # no reading at all: the pods' requests alone
    assert physical_use_now(report)[f"shared:{L40S}"].use == pytest.approx(0.25)
