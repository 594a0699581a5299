"""Failures shown at once (issue 29, item 4): what stops an admitted job's pods is on its
badge, list row, banner and in the API as soon as the cluster reports it; an image that
cannot be resolved fails the job after its first attempt; the owner is told once.

The decision is pure (``jobs.problems``); the rest runs against kubesim over HTTP, through
the Celery pass and the admission service."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.test import Client
from django.utils import timezone

from core.models import Policy
from core.texts import english
from jobs import problems, services
from jobs.models import TrainingJob
from jobs.podstart import Seen
from jobs.problems import Code, Found, Next, PodSeen
from jobs.tests.conftest import cycle as _cycle
from jobs.tests.test_lifecycle import world  # noqa: F401  (the kubesim world)
from tenants.access import access_for
from tenants.models import Notification

pytestmark = pytest.mark.timeout(180)

NOT_FOUND = ('rpc error: code = NotFound desc = failed to pull and unpack image '
             '"registry.example.org/ml/trainer:9": failed to resolve reference '
             '"registry.example.org/ml/trainer:9": registry.example.org/ml/trainer:9: not found')
NO_HOST = ('rpc error: code = Unknown desc = failed to pull and unpack image "registry.invalid/'
           'team/trainer:2.4": failed to resolve reference "registry.invalid/team/trainer:2.4": '
           'failed to do request: Head "https://registry.invalid/v2/team/trainer/manifests/2.4":'
           ' dial tcp: lookup registry.invalid on 10.96.0.10:53: no such host')
TIMEOUT = ('rpc error: code = Unknown desc = failed to pull and unpack image "r.example.org/a:1":'
           ' failed to resolve reference "r.example.org/a:1": failed to do request: Head '
           '"https://r.example.org/v2/a/manifests/1": dial tcp 10.0.0.1:443: i/o timeout')
RATE = ('rpc error: code = Unknown desc = failed to pull and unpack image "docker.io/library/'
        'python:3": failed to copy: httpReadSeeker: failed open: unexpected status code https://'
        'registry-1.docker.io/v2/library/python/manifests/sha256:ab: 429 Too Many Requests - '
        'Server message: toomanyrequests: You have reached your pull rate limit.')
UNAVAILABLE = ('rpc error: code = Unknown desc = failed to pull and unpack image "r.example.org/'
               'a:1": failed to resolve reference "r.example.org/a:1": unexpected status from '
               'HEAD request to https://r.example.org/v2/a/manifests/1: 503 Service Unavailable')
DENIED = ('rpc error: code = Unknown desc = failed to pull and unpack image "docker.io/acme/x:1":'
          ' failed to resolve reference "docker.io/acme/x:1": pull access denied, repository does'
          ' not exist or may require authorization: server message: insufficient_scope: '
          'authorization failed')


# --- the pure decision ----------------------------------------------------------------------


@pytest.mark.parametrize(("message", "kind"), [
    (NOT_FOUND, "missing"), (NO_HOST, "missing"),
    ("reading manifest 2.4 in registry.example.org/team/trainer: manifest unknown", "missing"),
    ("Error response from daemon: manifest for x:1 not found: manifest unknown: manifest "
     "unknown", "missing"),
    (TIMEOUT, "transient"), (RATE, "transient"), (UNAVAILABLE, "transient"),
    (DENIED, "denied"), ("Back-off pulling image \"x\"", "transient"),
])
def test_a_pull_error_is_missing_denied_or_transient(message, kind):
    assert problems.pull_kind(message) == kind


def test_find_names_the_most_telling_reason():
    assert problems.find([PodSeen("j-master-0", "ContainerCreating")]) is None
    assert problems.find([]) is None
    # ImagePullBackOff says only "Back-off"; the kubelet's event has the runtime's words
    backoff = problems.find([PodSeen("j-master-0", "ImagePullBackOff", 'Back-off pulling "x"')],
                            [Seen("Failed", f'Failed to pull image "x": {NOT_FOUND}')])
    assert backoff == Found(Code.IMAGE_MISSING, "ImagePullBackOff",
                            f'Failed to pull image "x": {NOT_FOUND}', "j-master-0")
    pull = problems.find([PodSeen("j-worker-0", "Unschedulable", "0/4 nodes"),
                          PodSeen("j-master-0", "ErrImagePull", TIMEOUT)])
    assert (pull.code, pull.reason, pull.pod) == (Code.IMAGE_PULL, "ErrImagePull", "j-master-0")
    invalid = problems.find([PodSeen("p", "InvalidImageName", "Failed to apply default image "
                                     'tag "X": couldn\'t parse image name "X": invalid '
                                     "reference format")])
    assert invalid.code == Code.IMAGE_INVALID
    assert problems.find([PodSeen("p", "ErrImagePull", DENIED)]).code == Code.IMAGE_DENIED
    assert problems.find([PodSeen("p", "CreateContainerConfigError",
                                  'secret "s" not found')]).code == Code.CONFIG
    assert problems.find([PodSeen("p", "Unschedulable", "0/4 nodes")]).code == \
        Code.UNSCHEDULABLE
    refused = problems.find([], [Seen("FailedCreatePod", "Error creating: exceeded quota")])
    assert (refused.code, refused.pod) == (Code.CREATE_FAILED, "")


def _decide(found, previous=None, *, returns=0, attempts=3, deadline=600, minutes=1):
    admitted = dt.datetime(2026, 12, 7, 12, 0, tzinfo=dt.UTC)
    return problems.decide(found=found, previous=previous,
                           now=admitted + dt.timedelta(minutes=minutes), admitted_at=admitted,
                           deadline_seconds=deadline, attempts=attempts, returns=returns)


def test_decide_the_next_step_and_tell_the_owner_once_per_problem():
    pull = Found(Code.IMAGE_PULL, "ErrImagePull", TIMEOUT, "j-master-0")
    first = _decide(pull)
    assert first.notify and not first.fail_now
    p = first.problem
    assert (p["code"], p["next"], p["at"], p["attempt"], p["attempts"], p["open"]) == (
        "image_pull", "requeue", "2026-12-07T12:10:00+00:00", 1, 3, True)
    assert p["since"] == "2026-12-07T12:01:00+00:00"
    # seen again later: nothing new, nobody told again, the same since
    again = _decide(pull, p, minutes=2)
    assert again.problem == p and not again.notify
    # the last attempt fails at the deadline
    assert _decide(pull, returns=2).problem["next"] == Next.FAIL
    # no longer reported: closed, kept (with whom it was told about) until the pods start
    gone = _decide(None, p, minutes=3)
    assert gone.problem == {**p, "open": False} and not gone.notify
    back = _decide(pull, gone.problem, minutes=4)
    assert back.problem["open"] and not back.notify
    assert back.problem["since"] == "2026-12-07T12:04:00+00:00"
    # another problem in the same episode is told
    other = _decide(Found(Code.UNSCHEDULABLE, "Unschedulable", "0/4"), p)
    assert other.notify and other.problem["notified"] == ["image_pull", "unschedulable"]
    assert _decide(None).problem is None


def test_an_image_that_cannot_resolve_fails_at_once_and_a_refused_one_is_not_requeued():
    missing = _decide(Found(Code.IMAGE_MISSING, "ErrImagePull", NOT_FOUND))
    assert missing.fail_now and missing.problem["next"] == Next.FAIL_NOW
    assert _decide(Found(Code.IMAGE_INVALID, "InvalidImageName", "x")).fail_now
    denied = _decide(Found(Code.IMAGE_DENIED, "ErrImagePull", DENIED))
    assert not denied.fail_now and denied.problem["next"] == Next.FAIL  # first attempt only
    # no deadline set: it waits as long as it takes
    assert _decide(Found(Code.UNSCHEDULABLE, "Unschedulable", "0/4"),
                   deadline=0).problem["at"] is None


# --- against kubesim --------------------------------------------------------------------------


def _submit(world, user, tenant, name, image, annotations=None):  # noqa: F811
    with world["capture"](execute=True):
        return services.job_submit(access=access_for(user, tenant), actor=user, pool="dev", data={
            "name": name, "image": image, "tier": "development", "workers": 1,
            "gpus_per_worker": 8, "gpu_model": world["h800"], "cpu_per_worker": 8,
            "memory_gib_per_worker": 32, "max_run_seconds": 86400,
            "annotations": {"kubesim.trainyard.io/run-seconds": "3600", **(annotations or {})}})


def _api(api, user, job):
    response = api(user).get(f"/api/v1/tenants/{job.tenant.slug}/jobs/{job.pk}/")
    assert response.status_code == 200
    return response.json()


def _start_attempts(n):
    Policy.objects.filter(pk=Policy.current().pk).update(pod_start_deadline_seconds=600,
                                                        pod_start_attempts=n)


def test_an_image_that_does_not_exist_fails_after_its_first_attempt_with_the_clusters_words(
        world, cluster, bob, tenant_a, api):  # noqa: F811
    _start_attempts(3)
    job = _submit(world, bob, tenant_a, "typo", "registry.example.org/ml/trainer:9",
                  {"kubesim.trainyard.io/image-pull": "not-found"})
    _cycle(world, cluster)
    assert TrainingJob.objects.get(pk=job.pk).state == "admitted"
    _cycle(world, cluster, 10)  # the pods are bound and the kubelet tries to pull: one pass
    job.refresh_from_db()
    assert job.state == "failed" and job.finished_at is not None
    body = _api(api, bob, job)
    assert body["state"] == "failed"
    problem = body["problem"]
    assert problem["code"] == "image_missing" and problem["next"] == "failed"
    assert problem["reason"] in ("ErrImagePull", "ImagePullBackOff")
    assert "registry.example.org/ml/trainer:9: not found" in problem["message"]
    assert "code = NotFound" in body["last_error"]
    assert "cannot be pulled: it does not exist" in problem["text"]
    step = job.transitions.order_by("-at", "-id").first()
    assert (step.from_state, step.to_state, step.reason) == ("admitted", "failed", "NotStarted")
    assert "Retrying cannot help" in english(step.message)
    assert TrainingJob.objects.get(pk=job.pk).transitions.filter(to_state="queued",
                                                                 reason="NotStarted").count() == 0
    # the owner is told once, by the failure, with the cluster's words
    told = [english(n.text) for n in Notification.objects.filter(user=bob)
            if "typo" in english(n.text)]
    assert len(told) == 1 and "not found" in told[0]
    _cycle(world, cluster, 30)
    assert len([n for n in Notification.objects.filter(user=bob)
                if "typo" in english(n.text)]) == 1


def test_an_unresolvable_registry_host_fails_at_once_too(world, cluster, bob, tenant_a,  # noqa: F811
                                                         api):
    _start_attempts(3)
    job = _submit(world, bob, tenant_a, "nohost", "registry.invalid/team/trainer:2.4")
    _cycle(world, cluster)
    _cycle(world, cluster, 10)
    body = _api(api, bob, job)
    assert body["state"] == "failed" and body["problem"]["code"] == "image_missing"
    assert "lookup registry.invalid" in body["problem"]["message"]
    assert "no such host" in body["last_error"]


def test_a_transient_pull_failure_is_shown_at_once_retried_and_cleared_when_the_pods_start(
        world, cluster, bob, tenant_a, api):  # noqa: F811
    _start_attempts(3)
    job = _submit(world, bob, tenant_a, "flaky", "registry.example.org/ml/trainer:1",
                  {"kubesim.trainyard.io/image-pull": "unavailable",
                   "kubesim.trainyard.io/image-pull-failures": "3"})
    _cycle(world, cluster)
    _cycle(world, cluster, 10)  # one observation after the first failed pull
    job.refresh_from_db()
    assert job.state == "admitted"  # the state stays what admission says
    body = _api(api, bob, job)
    problem = body["problem"]
    assert problem["code"] == "image_pull" and problem["next"] == "requeue"
    assert "503 Service Unavailable" in problem["message"]
    assert dt.datetime.fromisoformat(problem["at"]) == job.admitted_at + dt.timedelta(
        seconds=600)
    assert (problem["attempt"], problem["attempts"]) == (1, 3)
    assert "then puts it back in the queue (attempt 1 of 3)" in problem["text"]
    assert "503 Service Unavailable" in body["last_error"]
    # the researcher's pages say it: the badge, the list row, the banner
    client = Client()
    client.force_login(bob)
    page = client.get(f"/t/acme/jobs/{job.pk}/").content.decode()
    assert 'id="job-problem" data-problem="image_pull"' in page
    assert "Its pods cannot start: the image registry.example.org/ml/trainer:1 cannot be " \
           "pulled for now" in page
    assert "image pull failing" in page
    listing = client.get("/t/acme/jobs/").content.decode()
    assert 'class="problem" data-problem="image_pull"' in listing
    assert "(the pod-start deadline)" in listing
    # told once, however many passes see it
    _cycle(world, cluster, 5)
    told = [n for n in Notification.objects.filter(user=bob) if "flaky" in english(n.text)]
    assert len(told) == 1 and "cannot be pulled for now" in english(told[0].text)
    # the registry answers again: the pods start, the problem is gone
    for _ in range(8):
        _cycle(world, cluster, 20)
        if TrainingJob.objects.get(pk=job.pk).state == "running":
            break
    job.refresh_from_db()
    assert job.state == "running" and job.problem is None
    body = _api(api, bob, job)
    assert body["problem"] is None and body["last_error"] == ""
    assert "job-problem" not in client.get(f"/t/acme/jobs/{job.pk}/").content.decode()


def _later(minutes):
    return time_machine.travel(timezone.now() + dt.timedelta(minutes=minutes), tick=True)


@pytest.mark.slow
def test_a_transient_failure_keeps_its_retries_and_the_api_counts_the_requeues(
        world, cluster, bob, tenant_a, api):  # noqa: F811
    _start_attempts(2)
    job = _submit(world, bob, tenant_a, "slowreg", "registry.example.org/ml/trainer:1",
                  {"kubesim.trainyard.io/image-pull": "timeout"})
    _cycle(world, cluster)
    _cycle(world, cluster, 10)
    assert _api(api, bob, job)["problem"]["next"] == "requeue"
    with _later(11):
        _cycle(world, cluster, 5)
        body = _api(api, bob, job)
        assert body["state"] == "queued" and body["restart_count"] == 1
        assert body["problem"]["next"] == "readmit" and body["problem"]["attempt"] == 2
        assert "i/o timeout" in body["last_error"]
        # the problem's notification (once), then the requeue's
        told = [n for n in Notification.objects.filter(user=bob)
                if "slowreg" in english(n.text)]
        assert len(told) == 2
        _cycle(world, cluster, 10)
        _cycle(world, cluster, 10)
        body = _api(api, bob, job)
        assert body["state"] == "admitted" and body["problem"]["next"] == "fail"
        assert len([n for n in Notification.objects.filter(user=bob)
                    if "slowreg" in english(n.text)]) == 2  # the same problem: not again
    with _later(23):
        _cycle(world, cluster, 5)
        body = _api(api, bob, job)
        assert body["state"] == "failed" and body["problem"]["next"] == "failed"
        assert body["restart_count"] == 1 and "i/o timeout" in body["last_error"]
        assert len([n for n in Notification.objects.filter(user=bob)
                    if "slowreg" in english(n.text)]) == 3  # and its failure


def test_the_admission_service_shows_the_problem_from_its_informers(
        world, cluster, bob, tenant_a, api):  # noqa: F811
    from jobs.tests.test_admission_service import _pass, _service

    _start_attempts(3)
    service = _service()
    _pass(world, service, cluster)  # the lease, the first full read
    flaky = _submit(world, bob, tenant_a, "svc-flaky", "registry.example.org/ml/trainer:1",
                    {"kubesim.trainyard.io/image-pull": "toomanyrequests"})
    _pass(world, service)
    assert TrainingJob.objects.get(pk=flaky.pk).state == "admitted"
    _pass(world, service, cluster, 10)
    body = _api(api, bob, flaky)
    assert body["state"] == "admitted" and body["problem"]["code"] == "image_pull"
    assert "toomanyrequests" in body["problem"]["message"]
