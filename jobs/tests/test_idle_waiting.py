"""The waste figure (``jobs.admission.waste``): units idle while a job that fits waits."""

from __future__ import annotations

from dataclasses import replace

import pytest

from jobs.admission import Decisions, NodeView, WaitInfo
from jobs.admission.waste import cause_of, idle_while_waiting
from tenants.demand import UNLIMITED

from .test_admission_helpers import A100, H800, job, node, quota, run, with_usage

GPU = f"gpu:{H800}"


def figure(nodes, jobs, quotas, **kw):  # type: ignore[no-untyped-def]
    d = run(nodes, jobs, quotas, **kw)
    return d, idle_while_waiting(nodes=with_usage(nodes, jobs), jobs=jobs, decisions=d)


def test_idle_capacity_with_a_fitting_job_above_a_capped_quota_counts_as_the_cap():
    # 8 GPUs, the dev pool's quota is 2 and a platform admin capped borrowing at the quota:
    # one job runs, another of 2 waits
    nodes = [node("n1")]
    jobs = [job(1, gpus=2, state="running", on="n1"), job(2, gpus=2)]
    d, fig = figure(nodes, jobs, [quota(nominal=2)])
    assert d.waiting[2].reason["code"] == "jobs.wait.borrow_cap"
    assert fig[GPU].capacity == 8 and fig[GPU].free == 6
    assert fig[GPU].waiting == {"cap": 2}
    assert fig[GPU].idle_waiting == 2


def test_without_a_cap_the_same_job_borrows_and_nothing_idles_behind_a_soft_limit():
    nodes = [node("n1")]
    jobs = [job(1, gpus=2, state="running", on="n1"), job(2, gpus=2)]
    uncapped = replace(quota(nominal=2, ceiling=UNLIMITED), ceiling_default=UNLIMITED)
    d, fig = figure(nodes, jobs, [uncapped])
    assert [(a.job_id, a.borrowing) for a in d.admit] == [(2, True)]
    assert fig[GPU].free == 4 and fig[GPU].waiting == {}


def test_production_above_its_own_quota_is_own_quota():
    nodes = [node("n1")]
    jobs = [job(1, pool="prod", gpus=2, state="running", on="n1"), job(2, pool="prod", gpus=4)]
    _d, fig = figure(nodes, jobs, [quota(nominal=2, pool="prod")])
    assert fig[GPU].waiting == {"own_quota": 4}


def test_a_job_that_does_not_fit_the_free_units_is_not_counted():
    # 3 free GPUs on the one node; the waiting job needs 4 on one node
    nodes = [node("n1")]
    jobs = [job(1, gpus=5, state="running", on="n1"), job(2, gpus=4)]
    d, fig = figure(nodes, jobs, [quota(nominal=5, ceiling=5)])
    assert 2 in d.waiting
    assert fig[GPU].free == 3 and fig[GPU].waiting == {}


def test_a_gang_counts_only_when_it_fits_under_one_switch():
    nodes = [node("n1", switch="s1"), node("n2", switch="s2")]
    jobs = [job(1, gpus=6, state="running", on="n1"), job(2, gpus=6, state="running", on="n2"),
            job(3, replicas=2, gpus=2)]
    _d, fig = figure(nodes, jobs, [quota(nominal=12)])
    assert fig[GPU].free == 4 and fig[GPU].waiting == {}   # 2 + 2 on two switches


def test_no_double_counting_jobs_take_the_free_units_in_queue_order():
    # 4 free GPUs; three waiting jobs of 2, 2 and 2 above their quota: only 4 are counted
    nodes = [node("n1")]
    jobs = [job(1, gpus=4, state="running", on="n1"), job(2, gpus=2), job(3, gpus=2),
            job(4, gpus=2)]
    d, fig = figure(nodes, jobs, [quota(nominal=4)])
    assert set(d.waiting) == {2, 3, 4}
    assert fig[GPU].free == 4 and fig[GPU].waiting == {"cap": 4}


def test_the_pass_admissions_are_not_free():
    nodes = [node("n1")]
    jobs = [job(1, gpus=4), job(2, gpus=4)]   # quota 4: one is admitted, one waits
    d, fig = figure(nodes, jobs, [quota(nominal=4)])
    assert len(d.admit) == 1
    assert fig[GPU].free == 4 and fig[GPU].waiting == {"cap": 4}


def test_admitted_jobs_unbound_placements_are_not_free():
    nodes = [node("n1")]
    jobs = [job(1, gpus=6, state="admitted", on="n1"), job(2, gpus=4)]
    _d, fig = figure(nodes, jobs, [quota(nominal=6)])
    assert fig[GPU].free == 2 and fig[GPU].waiting == {}


def test_a_node_dedicated_to_another_tenant_is_idle_but_not_for_this_job():
    nodes = [node("n1", dedicated_to="globex")]
    jobs = [job(1, gpus=2)]
    d, fig = figure(nodes, jobs, [quota(nominal=0)])
    assert 1 in d.waiting
    assert fig[GPU].free == 8 and fig[GPU].waiting == {}
    # the dedicated tenant's own job fits it
    jobs = [job(1, tenant="globex", gpus=2)]
    _d, fig = figure(nodes, jobs, [quota("globex", nominal=0)])
    assert fig[GPU].waiting == {"cap": 2}


def test_unschedulable_nodes_count_as_capacity_not_as_free():
    nodes = [node("n1"), node("n2", schedulable=False)]
    jobs = [job(1, gpus=8, state="running", on="n1"), job(2, gpus=2)]
    _d, fig = figure(nodes, jobs, [quota(nominal=8)])
    assert fig[GPU].capacity == 16 and fig[GPU].free == 0 and fig[GPU].waiting == {}


def test_mig_and_shared_keys():
    mig = "1g.10gb"
    nodes = [node("m1", model=A100, gpus=0, mig={mig: 7}),
             NodeView(name="s1", gpu_model="NVIDIA-L40S", switch="s1", gpus=0, gpus_used=0,
                      mig={}, mig_used={}, schedulable=True, shared=16, shared_used=4)]
    jobs = [job(1, mig=mig, gpus=3, state="running", on="m1"), job(2, mig=mig, gpus=2),
            job(3, model="NVIDIA-L40S", gpus=2, gpu_shared=True, resources={"gpu-shared": 2})]
    quotas = [quota(nominal=3, key=f"mig:{mig}", gpu_shared=(0, 0))]
    d, fig = figure(nodes, jobs, quotas)
    assert fig[f"mig:{mig}"].capacity == 7 and fig[f"mig:{mig}"].free == 4
    assert fig[f"mig:{mig}"].waiting == {"cap": 2}
    shared = fig["shared:NVIDIA-L40S"]
    assert shared.capacity == 16 and shared.free == 12
    # the share's quota (gpu-shared) is 0: it waits on 12 free shares
    assert d.waiting[3].reason["code"] == "jobs.never.no_quota_capped"
    assert shared.waiting == {"cap": 2}


def test_held_jobs_and_jobs_without_a_reason_are_not_counted():
    nodes = [node("n1")]
    jobs = [job(1, gpus=2, held=True), job(2, gpus=2)]
    d = Decisions()   # a pass that did not explain: no reasons
    assert idle_while_waiting(nodes=nodes, jobs=jobs, decisions=d)[GPU].waiting == {}
    reasons = {1: {"code": "jobs.wait.held", "args": {}},
               2: {"code": "jobs.wait.reserved", "args": {}}}
    fig = idle_while_waiting(nodes=nodes, jobs=jobs, decisions=d, reasons=reasons)
    assert fig[GPU].waiting == {"reservation": 2}


def test_queue_order_decides_which_job_is_counted():
    # 2 free units: job 3 (first in the engine's order) takes them, job 2 is left out
    nodes = [node("n1", gpus=2)]
    jobs = [job(2, gpus=2), job(3, gpus=2)]
    d = Decisions(waiting={
        2: WaitInfo(2, 2, None, None, {"code": "jobs.wait.watermark", "args": {}}),
        3: WaitInfo(1, 1, None, None, [{"code": "jobs.wait.reserved", "args": {}}, "x"])})
    fig = idle_while_waiting(nodes=nodes, jobs=jobs, decisions=d)
    assert fig[GPU].waiting == {"reservation": 2}
    d.waiting[3] = replace(d.waiting[3], position_in_model=3)
    fig = idle_while_waiting(nodes=nodes, jobs=jobs, decisions=d)
    assert fig[GPU].waiting == {"watermark": 2}


def test_causes_from_codes():
    def c(code: str, tier: str = "development") -> str:
        return cause_of({"code": code, "args": {}}, tier)

    for code in ("jobs.wait.over_quota", "jobs.wait.over_quota_wait", "jobs.wait.over_ceiling",
                 "jobs.wait.over_batch_ceiling", "jobs.wait.over_quota_dim",
                 "jobs.wait.over_ceiling_dim", "jobs.never.above_quota"):
        assert c(code) == "soft_limit" and c(code, "batch") == "soft_limit"
        assert c(code, "production") == "own_quota"
    assert c("jobs.wait.reserved") == "reservation"
    assert c("jobs.wait.watermark") == "watermark"
    assert c("jobs.wait.borrow_cap") == "cap"
    assert c("jobs.never.above_cap") == "cap"
    assert c("jobs.never.no_node_has") == "other"
    assert c("jobs.wait.capacity") == "other"
    assert cause_of("plain words", "development") == "other"
    assert cause_of(None, "development") == "other"


# -- the recording in the admission loop --------------------------------------------------------


def test_the_loop_records_idle_gpu_seconds_while_a_fitting_job_waits(
        quota, bob, settings, django_capture_on_commit_callbacks):
    import datetime as dt

    from django.utils import timezone

    from jobs import idle_waiting, services
    from jobs.models import AdmissionState, IdleWhileWaiting
    from jobs.tasks import admission_cycle
    from jobs.tests.conftest import submission
    from tenants.access import access_for

    settings.TRAINYARD_EXPLAIN_SECONDS = 0   # every pass explains
    quota.borrowing_cap = 1   # a platform admin capped borrowing at the grant
    quota.save(update_fields=["borrowing_cap", "updated_at"])
    capture = django_capture_on_commit_callbacks

    def cycle():  # type: ignore[no-untyped-def]
        with capture(execute=False):
            return admission_cycle.apply().get()

    def stored(cause: str) -> float:
        return sum(IdleWhileWaiting.objects.filter(key=GPU, cause=cause)
                   .values_list("waiting_seconds", flat=True))

    for i in range(3):   # the dev pool's quota is 8 H800s: two of 4 run, the third waits
        with capture(execute=False):
            services.job_submit(access=access_for(bob, quota), actor=bob, pool="dev",
                                data=submission(name=f"w-{i}", gpus_per_worker=4))
    assert cycle()["admitted"] == 2
    # the next pass stands for the 30 s since the last explaining pass: the third job
    # (4 GPUs, above the pool's cap) could have run on the 8 idle H800s
    AdmissionState.objects.filter(pk=1).update(
        explained_at=timezone.now() - dt.timedelta(seconds=30))
    before = stored("cap")
    cycle()
    added = stored("cap") - before
    assert 4 * 30 <= added < 4 * 32
    total = IdleWhileWaiting.objects.filter(key=GPU, cause="")
    assert sum(r.capacity_seconds for r in total) >= 16 * 30   # two H800 nodes of 8
    assert sum(r.idle_seconds for r in total) >= 8 * 30
    # a loop that stopped for an hour does not invent an hour of waste: 60 s at most
    AdmissionState.objects.filter(pk=1).update(
        explained_at=timezone.now() - dt.timedelta(hours=1))
    before = stored("cap")
    cycle()
    assert stored("cap") - before == pytest.approx(4 * idle_waiting.MAX_INTERVAL_SECONDS)
    # what the page and /metrics read
    day = idle_waiting.window_totals(timezone.now() - dt.timedelta(days=1),
                                     timezone.now() + dt.timedelta(minutes=1))
    soft = next(c for c in day["causes"] if c["cause"] == "cap")
    assert soft["hours"] == stored("cap") / 3600 and 0 < soft["share"] < 1
    assert idle_waiting.counter_totals()[(GPU, "cap")] == stored("cap")
