"""The admission service (jobs.service, jobs.live) against kubesim over HTTP: its memory of
the queue follows the database through submissions, its own decisions, what the cluster
reports, cancels, holds and priorities from outside, late commits and restarts; it decides
exactly what a pass on a full read decides; one replica leads; the Celery pass defers."""

import datetime as dt
import random

import pytest
from django.utils import timezone

from core.texts import english
from jobs import selectors, services
from jobs.live import Journal, LiveJobs
from jobs.models import AdmissionState, TrainingJob
from jobs.service import AdmissionService, Timing
from jobs.tests.conftest import states as _states
from jobs.tests.test_lifecycle import _submit, world  # noqa: F401 (a fixture)
from k8s_sync.client import get_client
from k8s_sync.observe import relist_all
from tenants.access import access_for
from tenants.models import AuditEvent

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def stack(world):  # noqa: F811 - the fixture imported above
    """test_lifecycle's world: both tenants' pools synced with H800 and A100 quota."""
    return world

TIMING = Timing(poll_seconds=0.01, min_pass_seconds=0.0, idle_seconds=0.0,
                verify_seconds=3600, lease_seconds=30)


def _service(identity="svc-1", **timing):
    return AdmissionService(identity=identity, threads=False,
                            timing=Timing(**{**TIMING.__dict__, **timing}))


def _observe(stack, cluster, seconds=0.0):
    if seconds:
        cluster.advance(seconds, step=5)
    relist_all(get_client())


def _pass(stack, service, cluster=None, seconds=0.0):
    """One pass of the service, after ``seconds`` of kubesim time and a relist; the
    on-commit work (cluster writes of submissions) runs."""
    if cluster is not None:
        _observe(stack, cluster, seconds)
    with stack["capture"](execute=True):
        return service.step(timezone.now())


def _truth():
    return {row.id: row for row in selectors.active_rows(None)}


def _same_decisions(service):
    """The decisions on the service's memory (its queue, its informers' cluster) equal
    those on a full read of the database (the watcher's rows, relisted just before)."""
    now = timezone.now()
    service.cluster.refresh()
    live = selectors.decide_with_pools_absent(
        selectors.admission_inputs(now, rows=service.live.active(),
                                   nodes=service.cluster.nodes(),
                                   pods=service.cluster.pods()), explain=True)[0]
    full = selectors.decide_with_pools_absent(selectors.admission_inputs(now), explain=True)[0]
    assert live.admit == full.admit and live.preempt == full.preempt
    assert live.waiting == full.waiting


def test_journal_reads_new_rows_once_and_a_late_commit_through_its_gap(tenant_a, db):
    journal = Journal(AuditEvent, ("action",))
    journal.start()
    first = AuditEvent.objects.create(action="a", summary="a")
    assert [r[0] for r in journal.read()] == [first.pk]
    assert journal.read() == []
    # Two ids taken; the lower commits after the higher (out of order on Postgres).
    late_id = first.pk + 1
    second = AuditEvent.objects.create(id=first.pk + 2, action="b", summary="b")
    assert [r[0] for r in journal.read()] == [second.pk]
    assert late_id in journal.gaps
    AuditEvent.objects.create(id=late_id, action="late", summary="late")
    assert journal.read() == [(late_id, "late")]
    assert not journal.gaps
    # A gap that never commits (a rollback) is forgotten after GAP_SECONDS.
    AuditEvent.objects.create(id=first.pk + 5, action="c", summary="c")
    journal.read(clock=lambda: 0.0)
    assert journal.gaps
    journal.read(clock=lambda: 10_000.0)
    assert not journal.gaps


@pytest.mark.slow
def test_memory_follows_the_database_and_decides_as_a_full_read(stack, cluster, alice,
                                                                 charlie, tenant_a, tenant_b,
                                                                 platform_admin):
    service = _service()
    assert service.hold_lease(timezone.now())  # the Celery passes of submissions defer
    rng = random.Random(28)
    jobs = []
    for step in range(14):
        # what happens between two passes: submissions, and now and then a cancel, a hold,
        # a priority, a job finished by the cluster (kubesim's time)
        for _ in range(rng.randint(1, 3)):
            tenant, user = rng.choice([(tenant_a, alice), (tenant_b, charlie)])
            tier = rng.choice(["development", "batch", "production"])
            pool = "prod" if tier == "production" else "dev"
            jobs.append(_submit(stack, user, tenant, f"j{step}-{len(jobs)}", tier, pool,
                                rng.choice([stack["h800"], stack["a100"]]),
                                gpus=rng.choice([2, 4, 8]), run_seconds=rng.choice([60, 600])))
        queued = [j for j in jobs if _states(j) == ["queued"]]
        if queued and step % 3 == 1:
            job = rng.choice(queued)
            with stack["capture"](execute=True):
                services.job_hold(actor=platform_admin, job=job, held=True, reason="wait")
        if queued and step % 4 == 2:
            job = rng.choice(queued)
            with stack["capture"](execute=True):
                services.job_set_priority(actor=platform_admin, job=job, priority=rng.randint(
                    -5, 5), reason="reorder")
        if step % 5 == 3:
            job = rng.choice(jobs)
            with stack["capture"](execute=True):
                services.job_cancel(access=access_for(platform_admin, job.tenant),
                                    actor=platform_admin, job=job)
        _observe(stack, cluster, rng.choice([0, 30, 120]))
        service.live.refresh()
        assert service.live.rows == _truth()
        _same_decisions(service)
        with stack["capture"](execute=True):
            service.run_pass(timezone.now())
        if step == 7:  # a restart: a new process reads everything and goes on
            service.release_lease()
            service = _service()
            assert service.hold_lease(timezone.now())
    service.live.refresh()
    assert service.live.rows == _truth()
    assert service.live.verify() == 0
    states = {s for j in jobs for s in _states(j)}
    assert {"running", "queued"} <= states or {"succeeded"} <= states


@pytest.mark.slow
def test_a_change_the_journals_miss_is_found_counted_and_healed(stack, cluster, alice,
                                                                tenant_a):
    service = _service()
    job = _submit(stack, alice, tenant_a, "quiet", "development", "dev", stack["h800"])
    _pass(stack, service, cluster)
    assert _states(job) == ["admitted"]
    TrainingJob.objects.filter(pk=job.pk).update(priority=7)  # behind the service's back
    service.live.refresh()
    assert service.live.rows[job.pk].priority == 0
    before = AdmissionState.objects.get(pk=1).drift
    service._verified = float("-inf")  # the slow period is over: the next pass compares
    _pass(stack, service, cluster)
    assert service.live.rows == _truth() and service.live.rows[job.pk].priority == 7
    assert AdmissionState.objects.get(pk=1).drift == before + 1


@pytest.mark.slow
def test_a_submission_is_admitted_by_the_next_pass_and_created_in_the_cluster(
        stack, cluster, alice, tenant_a):
    service = _service()
    _pass(stack, service, cluster)  # the lease, the first full read
    job = _submit(stack, alice, tenant_a, "fast", "development", "dev", stack["h800"])
    outcome = _pass(stack, service)
    assert outcome is not None and outcome["admitted"] == 1
    assert _states(job) == ["admitted"]
    job.refresh_from_db()
    assert job.in_cluster and not job.cluster_suspended  # written by the service itself
    obj = get_client().read("kubeflow.org/v1", "PyTorchJob", job.k8s_name,
                            job.pool.namespace)
    assert obj is not None and not obj["spec"]["runPolicy"].get("suspend")
    # explained beside the decision: a queued job behind it has its position and reason
    big = _submit(stack, alice, tenant_a, "big", "development", "dev", stack["h800"], gpus=8)
    other = _submit(stack, alice, tenant_a, "other", "production", "prod", stack["h800"],
                    gpus=8)
    AdmissionState.objects.filter(pk=1).update(explained_at=None)
    _pass(stack, service)
    waiting = [TrainingJob.objects.get(pk=j.pk) for j in (big, other)
               if _states(j) == ["queued"]]
    for w in waiting:
        assert w.position_in_pool is not None and english(w.wait_reason)


@pytest.mark.slow
def test_one_service_leads_and_the_celery_pass_leaves_the_deciding_to_it(stack, cluster,
                                                                          alice, tenant_a):
    from jobs.tasks import admission_cycle

    first, second = _service("svc-1"), _service("svc-2")
    assert _pass(stack, first, cluster) is not None
    assert first.leading
    assert _pass(stack, second) is None and not second.leading
    job = _submit(stack, alice, tenant_a, "led", "development", "dev", stack["h800"])
    with stack["capture"](execute=True):
        outcome = admission_cycle.apply().get()
    assert "skipped" in outcome and _states(job) == ["queued"]
    # the leader stops (its lease given up): the standby takes over at its next look
    first.release_lease()
    assert _pass(stack, second) is not None and second.leading
    assert _states(job) == ["admitted"]
    # a lease that lapsed (a leader that died) is taken over too
    AdmissionState.objects.filter(pk=1).update(
        leader="gone", lease_until=timezone.now() - dt.timedelta(seconds=1))
    assert first.hold_lease(timezone.now())


def test_memory_reads_again_only_what_changed(quota, alice, platform_admin,
                                              django_capture_on_commit_callbacks):
    """40 jobs queued: a submission, a hold and a priority later, the service has read
    three rows again, not 43, and its memory equals a full read."""
    from jobs.tests.conftest import submission
    from tenants.access import access_for

    def submit(name):
        with django_capture_on_commit_callbacks(execute=False):
            return services.job_submit(access=access_for(alice, quota), actor=alice,
                                       pool="dev", data=submission(name=name))

    for i in range(40):
        submit(f"q{i}")
    live = LiveJobs(read_rows=selectors.active_rows)
    assert len(live.refresh()) == 40 and live.reads == 0
    assert not live.pending()
    new = submit("new")
    held = TrainingJob.objects.get(name="q3")
    moved = TrainingJob.objects.get(name="q7")
    with django_capture_on_commit_callbacks(execute=False):
        services.job_hold(actor=platform_admin, job=held, held=True, reason="wait")
        services.job_set_priority(actor=platform_admin, job=moved, priority=9, reason="r")
    assert live.pending()
    assert live.refresh() == {new.pk, held.pk, moved.pk}
    assert live.reads == 3
    assert live.rows[held.pk].held and live.rows[moved.pk].priority == 9
    assert live.rows == _truth() and live.verify() == 0 and live.drift == 0
    # a change no journal carries (a write by hand): found by the full read, healed
    TrainingJob.objects.filter(pk=held.pk).update(priority=-3)
    assert live.refresh() == set() and live.rows[held.pk].priority == 0
    assert live.verify() == 1 and live.drift == 1
    assert live.rows[held.pk].priority == -3 and live.rows == _truth()


@pytest.mark.slow
def test_the_writers_ordered_batches_patch_without_reading_and_write_back_at_once(
        stack, cluster, alice, tenant_a):
    """The service's writer (converge.sync_many(ordered=True)): the share's rows read at
    once, a created PyTorchJob patched without a GET, its row written back after."""
    from core.db import update_rows
    from jobs import converge, submitcache

    service = _service()
    _pass(stack, service, cluster)
    job = _submit(stack, alice, tenant_a, "ordered", "development", "dev", stack["h800"])
    with stack["capture"](execute=False):  # the pass's own writes are left undone
        service._write = lambda ids: None
        assert service.run_pass(timezone.now())["admitted"] == 1
    row = TrainingJob.objects.select_related("tenant", "pool").get(pk=job.pk)
    assert row.in_cluster and row.cluster_suspended  # created suspended at submission
    patched: list = []
    calls = []
    client = get_client()
    read = client.read
    client.read = lambda *a, **k: calls.append(a) or read(*a, **k)
    try:
        assert converge.sync_one(job.pk, facts=submitcache.snapshot(), job=row,
                                 patched=patched) == ("running", None)
    finally:
        client.read = read
    assert calls == [] and patched == [(job.pk, False, "")]
    update_rows(TrainingJob, ["cluster_suspended", "last_error"], patched)
    assert not TrainingJob.objects.get(pk=job.pk).cluster_suspended
    obj = read("kubeflow.org/v1", "PyTorchJob", job.k8s_name, job.pool.namespace)
    assert not obj["spec"]["runPolicy"].get("suspend")
    # a row that says the cluster is as wanted is left alone
    row.refresh_from_db()
    assert converge.sync_one(job.pk, job=row, patched=patched) == ("unchanged", None)
    assert converge.sync_one(job.pk + 10_000, job=None) == ("gone", None)


def test_in_kueue_mode_the_service_decides_nothing_and_holds_no_lease(stack, cluster, alice,
                                                                       tenant_a, settings):
    """With ``TRAINYARD_ADMISSION_BACKEND=kueue`` Kueue admits: a service left running (one
    deployment for both modes) takes no lease, admits and preempts nothing, so the Celery
    pass is not told to defer to it (found in a ``make run`` walk in Kueue mode: the engine
    and Kueue admitted and preempted the same batch job six times in two minutes)."""
    settings.TRAINYARD_ADMISSION_BACKEND = "kueue"
    service = _service()
    job = _submit(stack, alice, tenant_a, "kueue-only", "development", "dev", stack["h800"])
    assert _pass(stack, service, cluster) is None
    assert not service.leading
    assert not AdmissionState.objects.filter(pk=1, lease_until__isnull=False).exists()
    assert _states(job) == ["queued"]   # not admitted by the engine
    from jobs.backends import get_backend

    assert not get_backend().service_decides(timezone.now())
