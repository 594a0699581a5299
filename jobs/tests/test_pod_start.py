"""No job holds quota without pods, against kubesim: a job whose image cannot be pulled for
now (the registry answers 503) is sent back to the queue after the pod-start deadline with
the cluster's reason on its page, fails after the policy's attempts, and its GPUs go to the
next job. (An image that does not exist fails at once: ``test_job_problem``.)"""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.utils import timezone

from core.models import Policy
from core.texts import english
from jobs import podstart, services
from jobs.models import TrainingJob
from tenants.access import access_for
from tenants.models import Notification

from .test_lifecycle import _cycle, _submit, world  # noqa: F401  (the kubesim world)

pytestmark = pytest.mark.timeout(180)


def _later(minutes):
    return time_machine.travel(timezone.now() + dt.timedelta(minutes=minutes), tick=True)


def test_an_unpullable_image_is_requeued_then_failed_and_its_gpus_go_to_the_next_job(
        world, cluster, bob, tenant_a):  # noqa: F811
    Policy.objects.filter(pk=Policy.current().pk).update(pod_start_deadline_seconds=600,
                                                        pod_start_attempts=2)
    with world["capture"](execute=True):  # a registry that answers 503, whatever the retry
        bad = services.job_submit(access=access_for(bob, tenant_a), actor=bob, pool="dev", data={
            "name": "bad-image", "image": "registry.example.org/ml/trainer:1",
            "tier": "development", "workers": 1, "gpus_per_worker": 8,
            "gpu_model": world["h800"], "cpu_per_worker": 8, "memory_gib_per_worker": 32,
            "max_run_seconds": 86400,
            "annotations": {"kubesim.trainyard.io/image-pull": "unavailable"}})
    _cycle(world, cluster)
    bad.refresh_from_db()
    assert bad.state == "admitted"
    # The next job of the pool waits: the bad one holds the pool's 8 H800.
    good = _submit(world, bob, tenant_a, "good", "development", "dev", world["h800"])
    _cycle(world, cluster, 60)
    assert TrainingJob.objects.get(pk=bad.pk).state == "admitted"   # within the deadline
    assert TrainingJob.objects.get(pk=good.pk).state == "queued"

    with _later(11):
        _cycle(world, cluster, 5)
        bad.refresh_from_db()
        # a requeue that re-admits the same job is a restart: counted
        assert bad.state == "queued" and bad.admitted_at is None and bad.restart_count == 1
        step = bad.transitions.order_by("-at", "-id").first()
        assert (step.from_state, step.to_state, step.reason) == ("admitted", "queued",
                                                                 "NotStarted")
        text = english(step.message)
        assert text.startswith("Its pods did not start within 10 minutes: the cluster cannot "
                               "pull the image registry.example.org/ml/trainer:1 (")
        assert "ImagePullBackOff" in text or "ErrImagePull" in text
        assert "attempt 1 of 2" in text
        # the owner was told of the problem when the cluster reported it (once), and now
        # of the requeue
        notes = [english(n.text) for n in Notification.objects.filter(user=bob).order_by("id")
                 if "bad-image" in english(n.text)]
        assert len(notes) == 2
        assert "cannot be pulled for now" in notes[0] and "503 Service Unavailable" in notes[0]
        assert "cannot pull the image" in notes[1] and "back in the queue" in notes[1]
        detail = _page(bob, bad)
        assert "cannot pull the image registry.example.org/ml/trainer:1" in detail
        # Its PyTorchJob is suspended, the pods go; it is admitted again (first in line).
        _cycle(world, cluster, 10)
        _cycle(world, cluster, 5)
        assert TrainingJob.objects.get(pk=bad.pk).state == "admitted"

    with _later(23):
        _cycle(world, cluster, 5)
        bad.refresh_from_db()
        assert bad.state == "failed" and bad.finished_at is not None
        step = bad.transitions.order_by("-at", "-id").first()
        assert (step.to_state, step.reason) == ("failed", "NotStarted")
        assert "did not start within 10 minutes, 2 times" in english(step.message)
        assert "cannot pull the image" in english(
            Notification.objects.filter(user=bob).latest("id").text)
        # Its pods go and its GPUs are free again: the next job is admitted onto them.
        for _ in range(3):
            _cycle(world, cluster, 10)
            if TrainingJob.objects.get(pk=good.pk).state != "queued":
                break
        assert TrainingJob.objects.get(pk=good.pk).state in ("admitted", "running")


def _page(user, job):
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client.get(f"/t/{job.tenant.slug}/jobs/{job.pk}/").content.decode()


def test_the_cause_names_the_clusters_reason():
    image = podstart.cause(pods=[podstart.Seen("ImagePullBackOff", 'Back-off pulling image "x"')],
                           events=[podstart.Seen("Failed", 'Failed to pull image "x": not found')],
                           image="x")
    assert image == {"code": "jobs.start.image", "args": {
        "image": "x", "reason": "ImagePullBackOff",
        "message": 'Failed to pull image "x": not found'}}
    unschedulable = podstart.cause(pods=[podstart.Seen("Unschedulable", "0/4 nodes ...")],
                                   events=[], image="x")
    assert unschedulable["code"] == "jobs.start.unschedulable"
    refused = podstart.cause(pods=[], events=[podstart.Seen(
        "FailedCreatePod", "exceeded quota: gpu")], image="x")
    assert refused["code"] == "jobs.start.create_failed"
    assert podstart.cause(pods=[], events=[], image="x", in_cluster=False,
                          last_error="404")["code"] == "jobs.start.not_created"
    assert podstart.cause(pods=[], events=[], image="x")["code"] == "jobs.start.unknown"
    now = timezone.now()
    assert podstart.verdict(admitted_at=now, now=now + dt.timedelta(seconds=599),
                            deadline_seconds=600, returns=0, attempts=3) == "wait"
    assert podstart.verdict(admitted_at=now, now=now + dt.timedelta(seconds=600),
                            deadline_seconds=600, returns=1, attempts=3) == "requeue"
    assert podstart.verdict(admitted_at=now, now=now + dt.timedelta(seconds=600),
                            deadline_seconds=600, returns=2, attempts=3) == "fail"
