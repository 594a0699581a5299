"""Passes decide every time but explain the queue (positions, ETAs, reasons) only every
``TRAINYARD_EXPLAIN_SECONDS`` (``jobs.admission.cadence``): the decisions are the same,
a pass that does not explain leaves what people read as the last explaining pass wrote."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from jobs import services
from jobs.admission import History, Policy, decide
from jobs.admission.cadence import explain_due
from jobs.admission.incremental import Engine
from jobs.models import AdmissionState, TrainingJob
from jobs.tasks import admission_cycle
from jobs.tests.conftest import cap_borrowing, submission
from tenants.access import access_for

from .test_admission_helpers import NOW, job, node, quota, with_usage

# -- when a pass explains (pure) -------------------------------------------------------------


def test_explain_due_by_interval_and_by_cost():
    last = NOW - dt.timedelta(seconds=3)
    assert explain_due(NOW, None, 0, 2.0)            # never explained
    assert explain_due(NOW, NOW, 0, 0.0)             # 0: every pass
    assert explain_due(NOW, last, 100, 2.0)          # 3 s old, cost 0.1 s: due
    assert not explain_due(NOW, last, 100, 5.0)      # the interval not yet over
    # an explanation of 1 s waits at least 5 s (at most a fifth of the loop's time)
    assert not explain_due(NOW, last, 1000, 2.0)
    assert explain_due(NOW + dt.timedelta(seconds=2), last, 1000, 2.0)
    assert explain_due(NOW, NOW + dt.timedelta(seconds=1), 0, 60.0)   # the clock went back


# -- the engines (pure) ------------------------------------------------------------------------


def _world():
    nodes = [node("h1", used=0), node("h2", used=0)]
    jobs = [job(1, gpus=8, state="running", on="h1"),
            *(job(i, gpus=4, tenant="acme" if i % 2 else "beta") for i in range(2, 12))]
    quotas = [quota("acme", nominal=8, ceiling=12), quota("beta", nominal=4, ceiling=8)]
    return {"nodes": with_usage(nodes, jobs), "jobs": jobs, "quotas": quotas,
            "policy": Policy(), "history": History(), "now": NOW}


def test_deciding_without_explaining_decides_the_same_and_explains_nothing():
    inputs = _world()
    full = decide(**inputs)
    bare = decide(**inputs, explain=False)
    assert full.admit and full.waiting
    assert (bare.admit, bare.preempt) == (full.admit, full.preempt)
    assert bare.waiting == {}
    engine = Engine()
    quick = engine.decide(**inputs, explain=False)
    assert (quick.admit, quick.preempt, quick.waiting) == (full.admit, full.preempt, {})
    # nothing changed, but the groups were decided without ETAs: explaining decides again
    again = engine.decide(**inputs, explain=True)
    assert again.waiting == full.waiting
    assert engine.stats["groups_decided"] == 2


# -- the loop ----------------------------------------------------------------------------------


def _submit(bob, tenant, capture, name, gpus=4):
    with capture(execute=False):
        return services.job_submit(access=access_for(bob, tenant), actor=bob, pool="dev",
                                   data=submission(name=name, gpus_per_worker=gpus))


def _pass(capture):
    with capture(execute=False):
        return admission_cycle.apply().get()


def test_passes_between_explanations_admit_but_leave_positions_as_last_explained(
        quota, bob, settings, django_capture_on_commit_callbacks):
    cap_borrowing(quota)   # quota 8: the rest waits
    settings.TRAINYARD_EXPLAIN_SECONDS = 60
    capture = django_capture_on_commit_callbacks
    first = [_submit(bob, quota, capture, f"q-{i}") for i in range(3)]  # quota 8: two fit
    out = _pass(capture)
    assert (out["admitted"], out["waiting"]) == (2, 1)
    third = TrainingJob.objects.get(pk=first[2].pk)
    assert third.state == "queued" and third.position_in_pool == 1 and third.wait_reason
    explained = AdmissionState.objects.get(pk=1).explained_at
    assert explained is not None

    late = _submit(bob, quota, capture, "late")
    out = _pass(capture)
    assert (out["admitted"], out["waiting"]) == (0, None)   # decided, not explained
    assert TrainingJob.objects.get(pk=late.pk).position_in_pool is None
    assert AdmissionState.objects.get(pk=1).explained_at == explained

    # a finish frees quota: the next pass admits at once, explanation or not
    services.job_transition(job_id=first[0].pk, from_states=["admitted"],
                            to_state="succeeded", reason="Succeeded")
    out = _pass(capture)
    assert (out["admitted"], out["waiting"]) == (1, None)
    assert TrainingJob.objects.get(pk=first[2].pk).state == "admitted"

    # once the interval is over, a pass explains again: the late job has its place
    AdmissionState.objects.filter(pk=1).update(
        explained_at=timezone.now() - dt.timedelta(seconds=61))
    out = _pass(capture)
    assert (out["admitted"], out["waiting"]) == (0, 1)
    late.refresh_from_db()
    assert late.position_in_pool == 1 and late.wait_reason
    assert AdmissionState.objects.get(pk=1).explained_at > explained


# -- the history the loop reads ------------------------------------------------------------------


def test_the_loop_reads_the_history_again_once_it_is_older_than_its_interval(
        db, settings, monkeypatch):
    from jobs.selectors import history as selectors

    settings.TRAINYARD_HISTORY_SECONDS = 60
    monkeypatch.setattr(selectors, "_HISTORY", {})
    reads = []
    real = selectors.job_history
    monkeypatch.setattr(selectors, "job_history", lambda now: reads.append(now) or real(now))
    now = timezone.now()
    first = selectors.recent_history(now)
    assert selectors.recent_history(now + dt.timedelta(seconds=59)) is first
    assert len(reads) == 1
    later = selectors.recent_history(now + dt.timedelta(seconds=60))
    assert len(reads) == 2 and later is not first
    selectors.recent_history(now)   # the clock went back: read again
    assert len(reads) == 3
    settings.TRAINYARD_HISTORY_SECONDS = 0   # every pass
    selectors.recent_history(now)
    selectors.recent_history(now)
    assert len(reads) == 5


# -- what a pass costs does not grow with the queue ------------------------------------------


def test_a_pass_takes_the_same_statements_whatever_the_number_of_queued_jobs(
        quota, bob, settings, django_capture_on_commit_callbacks):
    cap_borrowing(quota)   # quota 8: the rest waits
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.TRAINYARD_EXPLAIN_SECONDS = 0   # every pass explains: the most a pass writes
    capture = django_capture_on_commit_callbacks

    def statements() -> int:
        with CaptureQueriesContext(connection) as ctx:
            _pass(capture)
        return len(ctx.captured_queries)

    for i in range(3):
        _submit(bob, quota, capture, f"a-{i}")
    _pass(capture)          # admits what fits; the snapshot of quotas is read
    small = statements()
    for i in range(40):     # forty more wait: positions and reasons written for each
        _submit(bob, quota, capture, f"b-{i}")
    large = statements()
    assert TrainingJob.objects.filter(state="queued").count() == 41
    # at most the one statement that writes the waiting jobs' positions, if the small
    # pass had nothing new to write: never a statement per job, per pool or per tenant
    assert small <= large <= small + 1, (small, large)


# -- the pools' quotas the pass keeps ---------------------------------------------------------


def test_the_pass_keeps_the_pools_quotas_until_a_grant_changes(quota, platform_admin):
    from jobs import selectors
    from jobs.tests.conftest import H800
    from tenants import services as tenant_services

    now = timezone.now()
    first = selectors.admission_inputs(now)["quotas"]
    assert selectors.admission_inputs(now)["quotas"] is first   # nothing changed: kept
    dev = quota.pools.get(kind="dev")
    tenant_services.quota_set(actor=platform_admin, pool=dev, reason="less",
                              amounts={f"gpu:{H800}": 4, "cpu": 256, "memory": 2048,
                                       "mig:1g.10gb": 4})
    after = selectors.admission_inputs(now)["quotas"]
    assert after is not first
    mine = {q.pool: q for q in after if q.tenant == quota.slug}
    assert mine["dev"].nominal[f"gpu:{H800}"] == 4 and mine["prod"].nominal[f"gpu:{H800}"] == 8


def test_the_pass_reuses_the_view_of_a_job_whose_row_did_not_change(
        quota, bob, django_capture_on_commit_callbacks):
    from jobs import selectors

    capture = django_capture_on_commit_callbacks
    a, b = _submit(bob, quota, capture, "same"), _submit(bob, quota, capture, "changed")
    now = timezone.now()
    first = {j.id: j for j in selectors.admission_inputs(now)["jobs"]}
    TrainingJob.objects.filter(pk=b.pk).update(priority=7, held=True)
    second = {j.id: j for j in selectors.admission_inputs(now)["jobs"]}
    assert second[a.pk] is first[a.pk]
    assert second[b.pk] is not first[b.pk]
    assert (second[b.pk].priority, second[b.pk].held) == (7, True)
    TrainingJob.objects.filter(pk=a.pk).update(state="cancelled")
    assert a.pk not in {j.id for j in selectors.admission_inputs(now)["jobs"]}
