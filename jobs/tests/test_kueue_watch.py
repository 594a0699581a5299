"""Kueue mode driven by the watcher (issue 28, item 4): a pass reads the Workloads the
watcher recorded, never lists them from the API server; it asks Kueue's visibility API
for positions only about the ClusterQueues whose pending Workloads changed; a recorded
Workload event moves its job at the next pass; the ETA forecaster runs on the
explanation cadence, not on every pass."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from core.texts import english
from jobs import services
from jobs.backends import kueue as backend
from jobs.backends.kueue import KueueBackend
from jobs.models import TrainingJob
from jobs.tests.conftest import cycle as _cycle
from jobs.tests.conftest import states as _states
from jobs.tests.conftest import submission
from jobs.tests.test_kueue_mode import (
    _submit,
    kworld,  # noqa: F401  (the fixture)
)
from k8s_sync.client import get_client
from k8s_sync.observe import KINDS, record_event, record_relist, relist_all
from k8s_sync.tests.test_kueue import _workload
from tenants import services as tenant_services
from tenants.access import access_for

SPEC = KINDS["kueueworkloads"]
LISTS = {"list_objects", "list_with_resource_version", "watch"}


class Counting:
    """A KubeClient that records every call it passes on."""

    def __init__(self, inner):
        self.inner = inner
        self.calls: list[tuple[str, tuple]] = []

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            self.calls.append((name, args))
            return attr(*args, **kwargs)
        return call

    def take(self) -> list[tuple[str, tuple]]:
        calls, self.calls = self.calls, []
        return calls


@pytest.mark.timeout(240)
@pytest.mark.slow
def test_a_pass_lists_no_workload_and_reads_positions_only_for_changed_queues(
        kworld, cluster, alice, bob, platform_admin, tenant_a, monkeypatch):  # noqa: F811
    with kworld["capture"](execute=True):  # no borrowing: a full pool's jobs wait
        tenant_services.tenant_update(access=access_for(platform_admin, tenant_a),
                                      actor=platform_admin, borrowing_cap=Decimal(1))
    relist_all(get_client(), kinds=["quotas"])
    counting = Counting(get_client())
    monkeypatch.setattr(backend, "get_client", lambda: counting)
    running = [_submit(kworld, alice, tenant_a, "prod-a", "production", "prod", run_seconds=3600),
               _submit(kworld, bob, tenant_a, "dev-a", "development", "dev", run_seconds=3600)]
    for _ in range(6):
        _cycle(kworld, cluster, 5)
        if _states(*running) == ["running", "running"]:
            break
    assert _states(*running) == ["running", "running"]

    prod_b = _submit(kworld, alice, tenant_a, "prod-b", "production", "prod")
    dev_b = _submit(kworld, bob, tenant_a, "dev-b", "development", "dev")
    counting.take()
    result = _cycle(kworld, cluster, 5)
    assert _states(prod_b, dev_b) == ["queued", "queued"]
    # both queues have a new pending Workload: one visibility read each, and no list
    assert sorted(args for name, args in counting.take()
                  if name == "kueue_pending_workloads") == [("ty-acme-dev",), ("ty-acme-prod",)]
    assert result["positions_read"] == 2 and result["waiting"] == 2
    for job in (prod_b, dev_b):
        job.refresh_from_db()
        assert job.position_in_pool == 1 and "quota" in english(job.wait_reason)

    result = _cycle(kworld, cluster, 5)  # nothing of the queues changed: no read at all
    assert result["positions_read"] == 0 and result["waiting"] == 2
    assert [name for name, _args in counting.take()] == []
    prod_b.refresh_from_db()
    assert prod_b.position_in_pool == 1  # what was read before

    dev_c = _submit(kworld, bob, tenant_a, "dev-c", "development", "dev")
    counting.take()
    reads = [_cycle(kworld, cluster, 5)["positions_read"]]
    # kubesim's Kueue queues a new Workload at its next tick: until a read finds it, the
    # queue is read again; the other queue, unchanged, never
    reads.append(_cycle(kworld, cluster, 5)["positions_read"])
    calls = counting.take()
    assert {args for name, args in calls if name == "kueue_pending_workloads"} == {
        ("ty-acme-dev",)}
    assert not [name for name, _args in calls if name in LISTS]
    assert reads[0] == 1 and reads[1] <= 1
    for job, place in ((prod_b, 1), (dev_b, 1), (dev_c, 2)):
        job.refresh_from_db()
        assert job.position_in_pool == place, (job.name, job.position_in_pool)
    assert _cycle(kworld, cluster, 5)["positions_read"] == 0  # all found: no read


# --- without kubesim: the recorded rows and a client that says what it was asked --------


class FakeKueue:
    """Kueue's visibility API for one pending Workload; any other call fails the test."""

    def __init__(self):
        self.pending: dict[str, list[dict]] = {}
        self.calls: list[tuple[str, tuple]] = []

    def kueue_pending_workloads(self, queue):
        self.calls.append(("kueue_pending_workloads", (queue,)))
        return self.pending.get(queue, [])

    def __getattr__(self, name):
        raise AssertionError(f"the pass called {name} on the API server")


@pytest.fixture
def kqueue(settings, quota, bob, monkeypatch):
    """A queued, created job of tenant_a's dev pool in Kueue mode; its pending Workload
    recorded by the watcher; the pass's client a :class:`FakeKueue`."""
    settings.TRAINYARD_ADMISSION_BACKEND = "kueue"
    job = services.job_submit(access=access_for(bob, quota), actor=bob, pool="dev",
                              data=submission(gpus_per_worker=8))
    TrainingJob.objects.filter(pk=job.pk).update(in_cluster=True)
    job.refresh_from_db()
    wl = _workload(name=f"pytorchjob-{job.k8s_name}-1a2b3", owner=job.k8s_name, conditions=[
        ("QuotaReserved", "False", "WaitingForQuota", "insufficient quota for nvidia.com/gpu")])
    wl["metadata"].update(namespace=job.pool.namespace, uid="wl-1", resourceVersion="10")
    record_relist(SPEC, [wl], "10")
    fake = FakeKueue()
    fake.pending["ty-acme-dev"] = [{"metadata": {"namespace": job.pool.namespace,
                                                 "name": wl["metadata"]["name"]},
                                    "positionInClusterQueue": 0, "positionInLocalQueue": 0}]
    monkeypatch.setattr(backend, "get_client", lambda: fake)
    return {"job": job, "workload": wl, "client": fake}


def test_a_workload_event_moves_the_job_at_the_next_pass(kqueue):
    job, wl, fake = kqueue["job"], kqueue["workload"], kqueue["client"]
    result = KueueBackend().cycle()
    assert result["admitted"] == 0 and result["waiting"] == 1
    assert _states(job) == ["queued"]
    job.refresh_from_db()
    assert job.position_in_pool == 1 and "quota" in english(job.wait_reason)
    assert fake.calls == [("kueue_pending_workloads", ("ty-acme-dev",))]

    # Kueue admits it: the watch delivers the Workload's new version
    wl = {**wl, "metadata": {**wl["metadata"], "resourceVersion": "11"}, "status": {
        "conditions": [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
             "message": "", "lastTransitionTime": "2026-01-01T00:02:00Z"},
            {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
             "lastTransitionTime": "2026-01-01T00:02:00Z"}],
        "admission": {"clusterQueue": "ty-acme-dev", "podSetAssignments": [
            {"name": "master", "flavors": {"nvidia.com/gpu": "gpu-nvidia-h800"}}]}}}
    assert record_event(SPEC, "MODIFIED", wl) == [f"{job.pool.namespace}/{wl['metadata']['name']}"]
    result = KueueBackend().cycle()
    assert result["admitted"] == 1 and _states(job) == ["admitted"]
    admitted = job.transitions.get(to_state="admitted")
    assert "ty-acme-dev" in english(admitted.message)
    assert fake.calls == [("kueue_pending_workloads", ("ty-acme-dev",))]  # none since


def test_the_forecast_runs_on_the_explanation_cadence(kqueue, settings, monkeypatch):
    settings.TRAINYARD_EXPLAIN_SECONDS = 60
    forecasts: list[dt.datetime] = []
    real = backend._forecast
    monkeypatch.setattr(backend, "_forecast",
                        lambda now, inputs=None, order=None: forecasts.append(now)
                        or real(now, inputs, order))
    first = KueueBackend().cycle()
    assert first["waiting"] == 1 and len(forecasts) == 1
    again = KueueBackend().cycle()  # seconds later: decisions read, nothing explained
    assert again["waiting"] is None and len(forecasts) == 1
    assert kqueue["client"].calls == [("kueue_pending_workloads", ("ty-acme-dev",))]


def test_a_pass_before_the_watcher_listed_workloads_moves_nothing(kqueue):
    from k8s_sync.models import ObservedKind

    ObservedKind.objects.filter(kind="kueueworkloads").update(last_list_at=None)
    result = KueueBackend().cycle()
    assert "not observed" in result["error"] and _states(kqueue["job"]) == ["queued"]
    assert kqueue["client"].calls == []
