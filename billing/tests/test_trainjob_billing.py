"""A finished TrainJob is billed like a PyTorchJob: the cluster's run time of its pods
(kubesim over HTTP), in GPU-hours on the tenant's invoice (issue 18, item 5)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db.models import F, Sum

from billing import pricing, services
from billing.models import GpuUsage, InvoiceLine
from billing.tests.test_cluster_times import _advance, _follow, _kubesim_run_seconds, _state
from jobs import services as job_services
from jobs.models import TrainingJob
from jobs.tests import test_lifecycle
from tenants.access import access_for

pytestmark = pytest.mark.timeout(120)

world = test_lifecycle.world  # the fixture: both tenants' pools synced, quota granted

RUN_SECONDS = 300
GPUS = 2
WORKERS = 2


@pytest.mark.parametrize("pause", ["never", "before_start"])
def test_a_finished_trainjob_is_billed_by_its_nodes_run_time(
        world, cluster, frozen_clock, bob, tenant_a, rate_card, pause):
    """Whether the loop watched it run, or stopped for an hour after admitting it (the
    TrainJob ran and finished unseen), the bill is its pods' run time."""
    _follow(frozen_clock, cluster)
    with world["capture"](execute=True):
        job = job_services.job_submit(
            access=access_for(bob, tenant_a), actor=bob, pool="dev", data={
                "name": "billed-v2", "kind": "trainjob", "image": "registry.example.org/t:1",
                "tier": "development", "workers": WORKERS, "gpus_per_worker": GPUS,
                "gpu_model": world["a100"], "cpu_per_worker": 8, "memory_gib_per_worker": 32,
                "max_run_seconds": 86400,
                "annotations": {"kubesim.trainyard.io/run-seconds": str(RUN_SECONDS)}})
    assert job.kind == "trainjob"
    _advance(world, cluster, frozen_clock, 10, loop=True)
    assert _state(job) == "admitted"
    if pause == "never":
        _advance(world, cluster, frozen_clock, RUN_SECONDS + 60, loop=True)
    else:
        _advance(world, cluster, frozen_clock, 3600, loop=False)
        assert _state(job) == "admitted"
        _advance(world, cluster, frozen_clock, 10, loop=True)
    assert _state(job) == "succeeded"
    job = TrainingJob.objects.get(pk=job.pk)
    ran = _kubesim_run_seconds(cluster, job)
    assert ran == RUN_SECONDS
    assert job.finished_at - job.started_at == dt.timedelta(seconds=ran)
    services.ledger_ingest_gpu()
    device_seconds = GpuUsage.objects.filter(job=job).aggregate(
        s=Sum(F("seconds") * F("devices")))["s"]
    assert device_seconds == WORKERS * GPUS * ran
    draft = services.invoice_draft_refresh(tenant=tenant_a)
    line = InvoiceLine.objects.get(invoice=draft, kind="gpu")
    assert line.quantity == pricing.hours(WORKERS * GPUS * ran)
    assert line.amount == pricing.hourly_amount(WORKERS * GPUS * ran, line.unit_price) > 0
