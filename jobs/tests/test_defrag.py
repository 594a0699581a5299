"""Defragmentation: which preemptible jobs to move so whole nodes free up."""

import datetime as dt

import pytest
from django.utils import timezone

from core.exceptions import ApplicationError, NotAllowed
from jobs import services
from jobs.admission import JobView, NodeView
from jobs.defrag import plan_defrag
from jobs.models import MaintenanceWindow, TrainingJob
from jobs.tests.conftest import H800, submission
from tenants.access import access_for

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def node(name, used, gpus=8):
    return NodeView(name=name, gpu_model="H100", switch="s", gpus=gpus, gpus_used=used,
                    mig={}, mig_used={}, schedulable=True)


def job(id_, nodes, gpus, tier="development"):
    return JobView(id=id_, tenant="t", pool="dev", tier=tier, gpu_model="H100",
                   mig_profile="", replicas=len(nodes), gpus_per_replica=gpus, state="running",
                   submitted_at=T0, placement=tuple(nodes))


def test_it_empties_the_cheapest_nodes_whose_jobs_fit_elsewhere():
    nodes = [node("n1", 2), node("n2", 4), node("n3", 6)]
    jobs = [job(1, ["n1"], 2), job(2, ["n2"], 4), job(3, ["n3"], 6)]
    plan = plan_defrag(nodes=nodes, jobs=jobs, gpu_model="H100", wanted=1)
    assert (plan.nodes, plan.moves, plan.gpus_moved) == (["n1"], [1], 2)
    plan = plan_defrag(nodes=nodes, jobs=jobs, gpu_model="H100", wanted=2)
    assert plan.nodes == ["n1"] and not plan.complete  # n2's 4 + n1's 2 do not fit on n3's 2
    assert plan.blocked["n2"].startswith("its jobs would not fit")


def test_production_jobs_are_never_moved():
    nodes = [node("n1", 1), node("n2", 0)]
    jobs = [job(1, ["n1"], 1, tier="production")]
    plan = plan_defrag(nodes=nodes, jobs=jobs, gpu_model="H100", wanted=2)
    assert plan.nodes == ["n2"] and plan.moves == []
    assert plan.blocked == {"n1": "runs a production job"}


def test_a_window_applies_once_and_preempts_the_planned_jobs(bob, platform_admin, quota):
    from k8s_sync.models import ObservedPod

    j = services.job_submit(access=access_for(bob, quota), actor=bob, pool="dev",
                            data=submission(gpus_per_worker=2))
    TrainingJob.objects.filter(pk=j.pk).update(state="running", started_at=timezone.now())
    prod = services.job_submit(access=access_for(bob, quota), actor=bob, pool="prod",
                               data=submission(name="prod", tier="production", gpus_per_worker=1))
    TrainingJob.objects.filter(pk=prod.pk).update(state="running", started_at=timezone.now())
    for name, node_name, owner, gpus in (("p", "h800-0", j, "2"), ("q", "h800-1", prod, "1")):
        ObservedPod.objects.create(namespace=owner.pool.namespace, name=name, uid=name,
                                   resource_version="1", observed_at=timezone.now(),
                                   node_name=node_name, phase="Running", job=str(owner.pk),
                                   requests={"nvidia.com/gpu": gpus})
    start = timezone.now()
    with pytest.raises(NotAllowed):
        services.window_schedule(actor=bob, gpu_model=H800, nodes_wanted=1, starts_at=start,
                                 ends_at=start + dt.timedelta(hours=2))
    with pytest.raises(ApplicationError, match="no GPU model"):
        services.window_schedule(actor=platform_admin, gpu_model="B200", nodes_wanted=1,
                                 starts_at=start, ends_at=start + dt.timedelta(hours=2))
    window = services.window_schedule(actor=platform_admin, gpu_model=H800, nodes_wanted=1,
                                      starts_at=start, ends_at=start + dt.timedelta(hours=2))
    assert window.plan["moves"] == [j.pk] and window.plan["nodes"] == ["h800-0"]
    assert window.plan["blocked"] == {"h800-1": "runs a production job"}
    assert services.window_apply(window_id=window.pk) == 1
    assert services.window_apply(window_id=window.pk) == 0
    assert TrainingJob.objects.get(pk=j.pk).state == "preempting"
    assert MaintenanceWindow.objects.get(pk=window.pk).status == "applied"


def test_the_defrag_page_is_for_platform_admins(login, alice, platform_admin, inventory):
    assert login(alice).get("/platform/defrag/").status_code == 404
    page = login(platform_admin).get(f"/platform/defrag/?gpu_model={H800}&nodes_wanted=2")
    assert page.status_code == 200 and "can be emptied" in page.content.decode()


def test_a_window_holds_its_nodes_for_a_queued_job_of_its_model_only(
        login, bob, platform_admin, quota, inventory):
    """The target job is named on the page: a queued job of the window's model (its
    cards per worker bound the nodes the plan empties); anything else is refused, in
    words, with nothing written."""
    queued = services.job_submit(access=access_for(bob, quota), actor=bob, pool="dev",
                                 data=submission(name="two-node", workers=2,
                                                 gpus_per_worker=8))
    running = services.job_submit(access=access_for(bob, quota), actor=bob, pool="dev",
                                  data=submission(name="busy", gpus_per_worker=2))
    TrainingJob.objects.filter(pk=running.pk).update(state="running")
    client = login(platform_admin)
    start = timezone.now() + dt.timedelta(minutes=5)
    form = {"gpu_model": H800, "nodes_wanted": "1", "reason": "run",
            "starts_at": start.strftime("%Y-%m-%dT%H:%M"),
            "ends_at": (start + dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")}
    for bad in ("x1", str(running.pk), "999999"):
        answer = client.post("/platform/defrag/", {**form, "target_job": bad})
        assert answer.status_code == 400, bad
    assert not MaintenanceWindow.objects.exists()
    answer = client.post("/platform/defrag/", {**form, "target_job": str(queued.pk)})
    assert answer.status_code == 302
    window = MaintenanceWindow.objects.get()
    assert window.target_job_id == queued.pk
    page = client.get("/platform/defrag/").content.decode()
    assert f"(held for job #{queued.pk})" in page
    with pytest.raises(ApplicationError, match="queued job of B200"):
        services.window_schedule(actor=platform_admin, gpu_model="B200", nodes_wanted=1,
                                 starts_at=start, ends_at=start + dt.timedelta(hours=1),
                                 target_job_id=queued.pk)
