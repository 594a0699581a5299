"""The bill is the cluster's time, not the loop's: the same job against kubesim over HTTP
bills the same GPU-hours whether the admission loop passes every few simulated seconds or
stops for an hour while the job runs and finishes (issue 17).

Trainyard's clock is kept on kubesim's (deterministic) clock, so "now" and the cluster's
timestamps are one time line and the expected figure is kubesim's own run time.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.db.models import F, Sum
from kubernetes import client as k8s

from billing import pricing, services
from billing.models import GpuUsage, InvoiceLine
from jobs.models import TrainingJob
from jobs.tasks import admission_cycle
from jobs.tests import test_lifecycle
from k8s_sync.client import get_client
from k8s_sync.observe import relist_all

pytestmark = pytest.mark.timeout(120)

world = test_lifecycle.world  # the fixture: both tenants' pools synced, quota granted
_submit = test_lifecycle._submit

RUN_SECONDS = 300
GPUS = 2
STEP = 10  # the loop passes every STEP simulated seconds
WATCH_EVERY = 600  # while the loop is stopped, the watcher records this often


def _follow(clock, cluster) -> None:
    """Trainyard's clock to kubesim's."""
    clock.move_to(cluster.cluster.clock.now())


def _advance(world, cluster, clock, seconds: int, *, loop: bool, watch: bool = True) -> None:
    """``seconds`` of simulated time. With ``loop`` the watcher records and the loop
    passes every STEP seconds; without, the watcher records every WATCH_EVERY seconds
    (or, when ``watch`` is False, only at the end) and the loop does not pass."""
    every = STEP if loop else (WATCH_EVERY if watch else seconds)
    for _ in range(seconds // every):
        cluster.advance(every, step=STEP)
        _follow(clock, cluster)
        relist_all(get_client(), kinds=["pytorchjobs", "trainjobs", "pods"])
        if loop:
            with world["capture"](execute=True):
                admission_cycle.apply().get()


def _state(job) -> str:
    return TrainingJob.objects.get(pk=job.pk).state


def _kubesim_run_seconds(cluster, job) -> int:
    """The run time kubesim reports: the master container's startedAt to finishedAt."""
    pod = k8s.CoreV1Api(cluster.api_client).list_namespaced_pod(
        job.pool.namespace, label_selector=f"trainyard.io/job={job.pk}").items[0]
    term = pod.status.container_statuses[0].state.terminated
    return int((term.finished_at - term.started_at).total_seconds())


@pytest.mark.parametrize("pause", ["never", "after_start", "before_start", "blind_watcher"])
def test_gpu_hours_do_not_depend_on_when_the_loop_looked(world, cluster, frozen_clock, bob,
                                                         tenant_a, rate_card, pause):
    _follow(frozen_clock, cluster)
    job = _submit(world, bob, tenant_a, f"times-{pause}".replace("_", "-"), "development",
                  "dev", world["a100"], gpus=GPUS, run_seconds=RUN_SECONDS)
    _advance(world, cluster, frozen_clock, STEP, loop=True)
    assert _state(job) == "admitted"
    hour = 3600
    if pause == "never":
        _advance(world, cluster, frozen_clock, RUN_SECONDS + 60, loop=True)
    elif pause == "after_start":  # seen running, then an hour without a pass
        for _ in range(20):
            _advance(world, cluster, frozen_clock, STEP, loop=True)
            if _state(job) == "running":
                break
        assert _state(job) == "running"
        _advance(world, cluster, frozen_clock, hour, loop=False)
        assert _state(job) == "running"  # nobody looked
    else:  # admitted, then an hour without a pass: it ran and finished unseen
        _advance(world, cluster, frozen_clock, hour, loop=False,
                 watch=pause == "before_start")
        assert _state(job) == "admitted"
    _advance(world, cluster, frozen_clock, STEP, loop=True)
    assert _state(job) == "succeeded"

    ran = _kubesim_run_seconds(cluster, job)
    assert ran == RUN_SECONDS
    services.ledger_ingest_gpu()
    device_seconds = GpuUsage.objects.filter(job=job).aggregate(
        s=Sum(F("seconds") * F("devices")))["s"]
    assert device_seconds == GPUS * ran
    job.refresh_from_db()
    assert job.finished_at - job.started_at == dt.timedelta(seconds=ran)
    draft = services.invoice_draft_refresh(tenant=tenant_a)
    line = InvoiceLine.objects.get(invoice=draft, kind="gpu")
    assert line.quantity == pricing.hours(GPUS * ran)
    assert line.amount == pricing.hourly_amount(GPUS * ran, line.unit_price) > 0
    running = job.transitions.get(to_state="running")
    assert running.observed_at >= running.at
