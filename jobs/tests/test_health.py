"""jobs.health: which jobs do not progress as expected, why and what happens next (pure),
and the cluster page's abnormal list and the job's own page, which show the same verdict."""

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone

from core.when import eta_text
from jobs.health import (
    NOT_CREATED_AFTER,
    NOT_STARTED_AFTER,
    PREEMPT_RELEASE_AFTER,
    JobFacts,
    Next,
    Trouble,
    classify,
)
from jobs.models import JobTransition, TrainingJob
from jobs.podstart import Seen
from k8s_sync.models import ObservedPod, ObservedQuota
from k8s_sync.naming import RESOURCE_QUOTA_NAME

NOW = dt.datetime(2026, 3, 2, 12, 0, tzinfo=dt.UTC)
DEADLINE = 600


def _verdict(**facts):
    facts.setdefault("since", NOW - dt.timedelta(minutes=1))
    return classify(JobFacts(**facts), now=NOW, deadline_seconds=DEADLINE, attempts=3)


def test_a_queued_job_is_abnormal_only_while_its_pool_is_not_in_the_cluster():
    assert _verdict(state="queued") is None
    v = _verdict(state="queued", pool_in_cluster=False,
                 last_error='404 NotFound: namespaces "ty-a-dev" not found')
    assert (v.trouble, v.next, v.every) == (Trouble.POOL_ABSENT, Next.WAIT_POOL, 5)
    assert v.since == NOW - dt.timedelta(minutes=1) and "ty-a-dev" in v.reason


@pytest.mark.parametrize("minutes, in_cluster, error, pods, trouble", [
    (0.5, False, "", (), None),  # being created: fine
    (NOT_CREATED_AFTER.total_seconds() / 60 + 0.1, False, "", (), Trouble.NOT_CREATED),
    (0.1, False, "403 Forbidden: no", (), Trouble.CLUSTER_ERROR),  # at once
    (NOT_STARTED_AFTER.total_seconds() / 60 - 0.1, True, "", (), None),  # pods starting
    (NOT_STARTED_AFTER.total_seconds() / 60 + 0.1, True, "",
     (Seen("Unschedulable", "0/4 nodes are available"), Seen("Unschedulable",
                                                             "0/4 nodes are available")),
     Trouble.NOT_STARTED),
])
def test_an_admitted_job_without_progress_is_requeued_at_the_pod_start_deadline(
        minutes, in_cluster, error, pods, trouble):
    admitted = NOW - dt.timedelta(minutes=minutes)
    v = _verdict(state="admitted", admitted_at=admitted, in_cluster=in_cluster,
                 last_error=error, pods=pods)
    if trouble is None:
        assert v is None
        return
    assert (v.trouble, v.since, v.next) == (trouble, admitted, Next.REQUEUE)
    assert v.at == admitted + dt.timedelta(seconds=DEADLINE)
    if pods:
        assert v.reason == "Unschedulable: 0/4 nodes are available"  # each reason once
    if error:
        assert v.reason == error


def test_the_last_attempt_fails_and_no_deadline_means_nothing_automatic():
    admitted = NOW - dt.timedelta(minutes=7)
    last = classify(JobFacts(state="admitted", since=admitted, admitted_at=admitted,
                             in_cluster=True, returns=2), now=NOW, deadline_seconds=DEADLINE,
                    attempts=3)
    assert (last.next, last.at) == (Next.FAIL, admitted + dt.timedelta(seconds=DEADLINE))
    off = classify(JobFacts(state="admitted", since=admitted, admitted_at=admitted,
                            in_cluster=True), now=NOW, deadline_seconds=0, attempts=3)
    assert (off.trouble, off.next, off.at) == (Trouble.NOT_STARTED, Next.NONE, None)


def test_preempting_past_its_grace_is_released_later_and_a_running_job_with_an_error():
    deadline = NOW - dt.timedelta(minutes=2)
    assert _verdict(state="preempting", preempt_deadline=NOW + dt.timedelta(seconds=30)) is None
    v = _verdict(state="preempting", preempt_deadline=deadline,
                 pods=(Seen("Terminating", "waiting for the checkpoint"),))
    assert (v.trouble, v.since, v.next) == (Trouble.PREEMPT_OVERDUE, deadline, Next.RELEASE)
    assert v.at == deadline + PREEMPT_RELEASE_AFTER and "Terminating" in v.reason
    assert _verdict(state="running") is None
    r = _verdict(state="running", last_error="422 Invalid: spec.x")
    assert (r.trouble, r.next) == (Trouble.CLUSTER_ERROR, Next.NONE)
    assert r.reason == "422 Invalid: spec.x"
    for done in ("succeeded", "failed", "cancelled"):
        assert _verdict(state=done, last_error="x") is None


# --- the pages ----------------------------------------------------------------------------


@pytest.fixture
def stuck(tenant_a):
    """acme's dev pool is in the cluster (its quota observed); one job admitted 7 minutes
    ago whose pod the scheduler cannot place, one preempting past its grace."""
    now = timezone.now()
    pool = tenant_a.pools.get(kind="dev")
    ObservedQuota.objects.create(namespace=pool.namespace, name=RESOURCE_QUOTA_NAME, uid="q",
                                 resource_version="1", observed_at=now)
    common = {"tenant": tenant_a, "pool": pool, "image": "trainer:1", "tier": "development",
              "max_run_seconds": 3600, "workers": 1, "gpus_per_worker": 2,
              "gpu_model": "NVIDIA-H800"}
    admitted = TrainingJob.objects.create(name="pending-pods", state="admitted",
                                          admitted_at=now - dt.timedelta(minutes=7),
                                          in_cluster=True, k8s_name="pending-pods", **common)
    JobTransition.objects.create(job=admitted, from_state="queued", to_state="admitted",
                                 reason="Admitted", at=admitted.admitted_at)
    ObservedPod.objects.create(
        namespace=pool.namespace, name="pending-pods-master-0", uid="p", resource_version="1",
        observed_at=now, phase="Pending", tenant="acme", pool="dev", job=str(admitted.pk),
        reason="Unschedulable", message="0/4 nodes are available: 4 Insufficient nvidia.com/gpu.")
    preempting = TrainingJob.objects.create(
        name="slow-stop", state="preempting", in_cluster=True, k8s_name="slow-stop",
        preempt_deadline=now - dt.timedelta(minutes=1), **common)
    TrainingJob.objects.create(name="fine", state="running", in_cluster=True, **common)
    return admitted, preempting


def _at(moment: dt.datetime) -> str:
    """A time as the pages write it (core.when, to the minute), in its <time> element."""
    return f'<time datetime="{moment.isoformat()}">{eta_text(moment)}</time>'


def test_stuck_jobs_are_on_the_abnormal_list_and_their_pages_with_the_clusters_reason(
        stuck, platform_admin, bob, charlie, tenant_b, login):
    admitted, preempting = stuck
    page = login(platform_admin).get(reverse("cluster")).content.decode()
    assert "Nothing abnormal" not in page and "acme/fine" not in page
    row = page.split(f'data-job="{admitted.pk}"')[1].split("</tr>")[0]
    requeue = timezone.localtime(admitted.admitted_at + dt.timedelta(seconds=600))
    assert "acme/pending-pods" in row and 'data-trouble="not_started"' in row
    assert "Unschedulable: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu." in row
    assert f"Next: back in the queue at {_at(requeue)}" in row   # one format: core.when
    assert f"Since {_at(admitted.admitted_at)}." in row
    row = page.split(f'data-job="{preempting.pk}"')[1].split("</tr>")[0]
    release = timezone.localtime(preempting.preempt_deadline + PREEMPT_RELEASE_AFTER)
    assert 'data-trouble="preempt_overdue"' in row
    assert f"Next: released to the queue at {_at(release)}" in row

    url = reverse("jobs:detail", kwargs={"slug": "acme", "pk": admitted.pk})
    body = login(bob).get(url).content.decode()
    banner = body.split('id="job-health"')[1].split("</div>")[0]
    assert "Admitted, but its pods have not started." in banner
    assert "Insufficient nvidia.com/gpu" in banner and _at(requeue) in banner
    assert login(charlie).get(url).status_code == 404
    fine = TrainingJob.objects.get(name="fine")
    assert 'id="job-health"' not in login(bob).get(
        reverse("jobs:detail", kwargs={"slug": "acme", "pk": fine.pk})).content.decode()
