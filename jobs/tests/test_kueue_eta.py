"""Kueue mode's estimated starts follow Kueue's own order (``jobs.kueue_eta``): the
forecaster is fed the queued jobs in Kueue's positions, the ClusterQueue's admission rate
bounds the range, and the ETAs are recorded so their accuracy is measured, against
kubesim's Kueue over HTTP."""

import datetime as dt
from decimal import Decimal

import pytest

from jobs.admission.types import JobView
from jobs.kueue_eta import combine, in_kueue_order, rate_eta
from jobs.models import EtaRecord
from jobs.tests.conftest import cycle as _cycle
from jobs.tests.conftest import states as _states
from jobs.tests.test_kueue_mode import _submit, kworld  # noqa: F401  (the fixture)
from k8s_sync.client import get_client
from k8s_sync.observe import relist_all
from tenants import services as tenant_services
from tenants.access import access_for

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _view(id_, minutes, state="queued", priority=0):
    return JobView(id=id_, tenant="t", pool="dev", tier="development", gpu_model="H100",
                   mig_profile="", replicas=1, gpus_per_replica=4, state=state,
                   submitted_at=T0 + dt.timedelta(minutes=minutes), priority=priority)


def test_the_forecaster_gets_the_queued_jobs_in_kueues_positions():
    # submitted 1, 2, 3 (job 2 with a higher Trainyard priority); Kueue lists 3, 1, 2
    jobs = [_view(1, 0), _view(2, 1, priority=5), _view(3, 2), _view(4, -10, "running")]
    positions = {1: ("cq", 2), 2: ("cq", 3), 3: ("cq", 1)}
    fed = in_kueue_order(jobs, positions)
    engine_order = [v.id for v in sorted((v for v in fed if v.state == "queued"),
                                         key=lambda v: (-v.priority, v.submitted_at))]
    assert engine_order == [3, 1, 2]
    assert sorted(v.submitted_at for v in fed if v.state == "queued") == [
        j.submitted_at for j in jobs[:3]]  # the queue's own times, handed out anew
    assert fed[3] is jobs[3]  # the running job untouched
    # a job Kueue does not list (held, not yet queued) keeps its place and time
    assert in_kueue_order(jobs, {1: ("cq", 1)})[0] is jobs[0]


def test_the_admission_rate_bounds_the_range():
    now = T0
    assert rate_eta(now, 3, 1 / 600) == now + dt.timedelta(seconds=1800)
    assert rate_eta(now, None, 1 / 600) is None and rate_eta(now, 2, None) is None
    p50, p90 = now + dt.timedelta(minutes=10), now + dt.timedelta(minutes=20)
    slow = now + dt.timedelta(minutes=45)
    assert combine((p50, p90), slow) == (p50, slow)
    assert combine((p50, p90), now + dt.timedelta(minutes=5)) == (p50, p90)
    assert combine((None, None), slow) == (slow, slow)
    assert combine((p50, p90), None) == (p50, p90)


@pytest.mark.timeout(240)
@pytest.mark.slow
def test_etas_follow_kueues_positions_and_are_measured_when_kueue_admits(
        kworld, cluster, bob, platform_admin, tenant_a, settings):  # noqa: F811
    settings.TRAINYARD_EXPLAIN_SECONDS = 0
    # exact quota: capped at its grant, so the queue waits for its own 4 cards
    with kworld["capture"](execute=True):
        tenant_services.tenant_update(access=access_for(platform_admin, tenant_a),
                                      actor=platform_admin, borrowing_cap=Decimal(1))
    relist_all(get_client(), kinds=["quotas"])
    first = _submit(kworld, bob, tenant_a, "first", "development", "dev", gpus=4,
                    run_seconds=300)
    for _ in range(6):
        _cycle(kworld, cluster, 10)
        if _states(first) == ["running"]:
            break
    assert _states(first) == ["running"]
    waiting = [_submit(kworld, bob, tenant_a, f"next-{i}", "development", "dev", gpus=4,
                       run_seconds=300) for i in range(3)]
    _cycle(kworld, cluster, 5)
    _cycle(kworld, cluster, 5)
    for job in waiting:
        job.refresh_from_db()
    assert [j.state for j in waiting] == ["queued"] * 3
    positions = [j.position_in_pool for j in waiting]
    assert sorted(positions) == [1, 2, 3], positions  # Kueue's visibility API
    by_position = sorted(waiting, key=lambda j: j.position_in_pool)
    etas = [j.eta_p50 for j in by_position]
    assert all(etas), etas
    assert etas == sorted(etas) and len(set(etas)) == 3, etas  # the ETA order is Kueue's
    assert all(j.eta_p90 >= j.eta_p50 for j in waiting)
    head = by_position[0]
    assert EtaRecord.objects.filter(job=head, started_at__isnull=True).exists()
    # the head is admitted by Kueue once the first job ends: its record gets its start
    for _ in range(40):
        _cycle(kworld, cluster, 20)
        head.refresh_from_db()
        if head.state in ("admitted", "running"):
            break
    assert head.state in ("admitted", "running")
    record = EtaRecord.objects.filter(job=head).order_by("predicted_at").first()
    assert record is not None and record.started_at == head.admitted_at, (
        record and record.started_at, head.admitted_at)
