"""Progress from the job against kubesim over HTTP: a running PyTorchJob's progress line
and a running TrainJob's ``status.trainerStatus`` reach its page and the API, and the job
waiting behind it gets an ETA from the remaining time the running job reported."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import progress, services
from jobs.models import TrainingJob
from jobs.tasks import read_progress
from jobs.tests import test_lifecycle
from jobs.tests.conftest import cycle, states
from k8s_sync.client import get_client
from k8s_sync.observe import relist_all
from tenants.access import access_for

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]
world = test_lifecycle.world  # the fixture: both tenants' pools synced, quota granted


def _submit(world, user, tenant, name, *, kind="pytorchjob", pool="prod", gpus=8,
            run_seconds=3600, max_run_seconds=86400):
    with world["capture"](execute=True):
        return services.job_submit(access=access_for(user, tenant), actor=user, pool=pool, data={
            "name": name, "kind": kind, "image": "registry.example.org/ml/trainer:1",
            "tier": "production" if pool == "prod" else "development", "workers": 1,
            "gpus_per_worker": gpus, "gpu_model": world["h800"], "cpu_per_worker": 8,
            "memory_gib_per_worker": 32, "max_run_seconds": max_run_seconds,
            "annotations": {"kubesim.trainyard.io/run-seconds": str(run_seconds)}})


def _read(cluster, seconds=0.0):
    if seconds:
        cluster.advance(seconds, step=10)
    relist_all(get_client())
    return read_progress.apply().get()


def test_a_running_pytorchjobs_progress_line_reaches_its_page_and_the_api(
        world, cluster, bob, tenant_a, api, login):
    job = _submit(world, bob, tenant_a, "fit", run_seconds=1800)
    page = login(bob).get(f"/t/acme/jobs/{job.pk}/").content.decode()
    assert "No progress reported yet." in page and "TRAINYARD_PROGRESS" in page
    assert api(bob).get(f"/api/v1/tenants/acme/jobs/{job.pk}/").json()["progress"] is None
    cycle(world, cluster, 30)
    cycle(world, cluster, 10)
    assert states(job) == ["running"]
    counts = _read(cluster, 600)
    assert counts["jobs"] == 1 and counts["logs"] == 1 and counts["written"] == 1, counts
    body = api(bob).get(f"/api/v1/tenants/acme/jobs/{job.pk}/").json()["progress"]
    assert body["source"] == "log" and body["current"] is True
    assert 25 <= body["percent"] <= 40 and 1100 <= body["remaining_seconds"] <= 1300
    assert body["step"] > 0 and [m["name"] for m in body["metrics"]] == ["loss"]
    page = login(bob).get(f"/t/acme/jobs/{job.pk}/").content.decode()
    assert f'{body["percent"]:.0f}% done' in page
    assert progress.duration_text(body["remaining_seconds"]) in page
    assert "No progress reported yet." not in page
    # nothing new to read: nothing written; later, a higher figure
    assert _read(cluster)["written"] == 0
    _read(cluster, 300)
    later = api(bob).get(f"/api/v1/tenants/acme/jobs/{job.pk}/").json()["progress"]
    assert later["percent"] > body["percent"]
    assert later["remaining_seconds"] < body["remaining_seconds"]


def test_a_trainjobs_trainer_status_is_read_without_a_log_request(
        world, cluster, bob, tenant_a, api, monkeypatch):
    job = _submit(world, bob, tenant_a, "v2", kind="trainjob", run_seconds=1800)
    cycle(world, cluster, 30)
    cycle(world, cluster, 10)
    assert states(job) == ["running"]
    cluster.advance(600, step=10)

    def no_log(*args, **kwargs):
        raise AssertionError("a TrainJob that reports trainerStatus needs no log read")

    monkeypatch.setattr(type(get_client()), "pod_log", no_log)
    counts = _read(cluster)
    assert counts["trainer"] == 1 and counts["logs"] == 0 and counts["written"] == 1, counts
    body = api(bob).get(f"/api/v1/tenants/acme/jobs/{job.pk}/").json()["progress"]
    assert body["source"] == "trainer_status"
    assert 25 <= body["percent"] <= 40 and body["percent"] == int(body["percent"])
    assert {m["name"] for m in body["metrics"]} == {"loss", "step"}
    assert body["step"] == int(next(m["value"] for m in body["metrics"] if m["name"] == "step"))


def test_the_job_waiting_behind_gets_its_eta_from_the_reported_remaining_time(
        world, cluster, bob, tenant_a):
    # the prod pool's 8 H800 (production never borrows): the second job waits for the first
    first = _submit(world, bob, tenant_a, "first", run_seconds=3000, max_run_seconds=86400)
    cycle(world, cluster, 30)
    cycle(world, cluster, 10)
    second = _submit(world, bob, tenant_a, "second")
    cycle(world, cluster)
    assert states(first, second) == ["running", "queued"]
    before = TrainingJob.objects.get(pk=second.pk).eta_p50
    assert before is not None
    _read(cluster, 1200)
    first.refresh_from_db()
    said = first.progress["remaining_seconds"]
    assert 1600 <= said <= 1900
    cycle(world, cluster)
    second.refresh_from_db()
    now = timezone.now()
    # p50: the reported time left (less the moments since the report), p90 a bit above
    assert abs((second.eta_p50 - now).total_seconds() - said) <= 120
    assert second.eta_p90 >= second.eta_p50 + timedelta(seconds=120)
    assert abs((second.eta_p50 - before).total_seconds()) > 600  # it moved
    # a report that the first job now needs much longer moves the ETA with it
    with world["capture"](execute=True):
        progress.record(first.pk, {
            **first.progress, "remaining_seconds": said + 7200,
            "reported_at": progress._iso(timezone.now()), "observed_at": progress._iso(
                timezone.now())})
    cycle(world, cluster)
    second.refresh_from_db()
    assert abs((second.eta_p50 - timezone.now()).total_seconds() - (said + 7200)) <= 120
