"""A job page's events: oldest first by their full time (a day boundary does not wrap them),
and the training operator's admission-gate events explained in plain words, the suspend
told apart from a preemption's (jobs.selectors.events_of)."""

import datetime as dt

from django.urls import reverse
from django.utils import timezone

from jobs.models import JobTransition, TrainingJob
from jobs.selectors import events_of
from jobs.selectors.pods import GATE_TEXTS
from k8s_sync.models import ClusterEvent


def _job(tenant, name):
    pool = tenant.pools.get(kind="dev")
    return TrainingJob.objects.create(
        tenant=tenant, pool=pool, name=name, k8s_name=name, state="running", image="t:1",
        tier="development", max_run_seconds=3600, workers=1, gpus_per_worker=1,
        gpu_model="NVIDIA-H800", in_cluster=True)


def _event(job, reason, at, n, etype="Normal"):
    return ClusterEvent.objects.create(
        namespace=job.pool.namespace, name=f"{job.k8s_name}.{n}", uid=f"u{n}",
        resource_version=str(n), observed_at=at, type=etype, reason=reason,
        message=f"{reason} message", involved_kind="PyTorchJob",
        involved_namespace=job.pool.namespace, involved_name=job.k8s_name, count=3,
        first_seen=at, last_seen=at)


def test_events_run_oldest_first_across_midnight_and_the_gate_is_explained(
        tenant_a, login, bob):
    job = _job(tenant_a, "gated")
    midnight = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    _event(job, "Started", midnight + dt.timedelta(seconds=5), 3)       # 00:00:05
    _event(job, "PyTorchJobSuspended", midnight - dt.timedelta(hours=3), 1)  # 21:00 before
    _event(job, "PyTorchJobResumed", midnight - dt.timedelta(seconds=10), 2)  # 23:59:50
    events = events_of(job)
    assert [e.reason for e in events] == ["PyTorchJobSuspended", "PyTorchJobResumed", "Started"]
    assert [e.gate for e in events] == [str(GATE_TEXTS["created"]), str(GATE_TEXTS["resumed"]),
                                        ""]

    page = login(bob).get(reverse("jobs:detail", kwargs={"slug": "acme", "pk": job.pk}))
    body = page.content.decode()
    card = body[body.index('data-live="events"'):body.index('id="logs"')]
    assert str(GATE_TEXTS["created"]) in card
    assert ">PyTorchJobSuspended</span>" not in card   # never a bare reason badge
    assert ">Started</span>" in card and "×3" in card   # other events as the cluster says
    assert card.index("PyTorchJobSuspended") < card.index("PyTorchJobResumed") < \
        card.index(">Started<")

    # once the job was preempted, a suspension is also a preemption's: said so
    JobTransition.objects.create(job=job, from_state="running", to_state="preempting",
                                 reason="Preempted", at=timezone.now())
    assert events_of(job)[0].gate == str(GATE_TEXTS["suspended"])


def test_borrowing_is_said_of_a_job_that_holds_cards_not_of_a_finished_one(
        tenant_a, login, bob):
    running, failed = _job(tenant_a, "borrows"), _job(tenant_a, "borrowed-once")
    TrainingJob.objects.filter(pk__in=[running.pk, failed.pk]).update(borrowing=True)
    TrainingJob.objects.filter(pk=failed.pk).update(state="failed")
    client = login(bob)
    badge = '<span class="badge">borrowing</span>'
    for job, shown in ((running, True), (failed, False)):
        page = client.get(reverse("jobs:detail", kwargs={"slug": "acme", "pk": job.pk}))
        head = page.content.decode().split("</h1>")[0]
        assert (badge in head) is shown, (job.name, head[-300:])


def test_the_progress_card_is_for_a_job_that_holds_cards_or_reported(tenant_a, login, bob):
    queued, running = _job(tenant_a, "waits"), _job(tenant_a, "runs")
    TrainingJob.objects.filter(pk=queued.pk).update(state="queued")
    client = login(bob)
    for job, shown in ((queued, False), (running, True)):
        body = client.get(reverse("jobs:detail", kwargs={"slug": "acme", "pk": job.pk})
                          ).content.decode()
        assert 'data-live="progress"' in body   # the slot is there for the live re-read
        assert ('id="job-progress"' in body) is shown


def test_a_suspension_seen_after_admission_is_said_to_have_stopped_the_job(tenant_a):
    job = _job(tenant_a, "stopped")
    admitted = timezone.now() - dt.timedelta(minutes=5)
    JobTransition.objects.create(job=job, from_state="queued", to_state="admitted",
                                 reason="Admitted", at=admitted)
    _event(job, "PyTorchJobSuspended", admitted + dt.timedelta(minutes=1), 1)
    assert events_of(job)[0].gate == str(GATE_TEXTS["stopped"])
