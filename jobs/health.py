"""Which active jobs are not progressing as they should, why, and what happens next.

One rule, pure: :func:`classify` looks at one job's facts (:class:`JobFacts`, built by
``jobs.selectors.job_health``/``stuck_jobs`` from its row, its pool's presence in the
cluster and its observed pods) and returns a :class:`Verdict`, or ``None`` for a job that
is where it should be. The cluster page's abnormal list and the banner on the job's own
page both show the verdict, so a job is listed there exactly when its page explains it.

A verdict names the job's trouble (:class:`Trouble`), since when, the cluster's own words
(a Kubernetes error message or the pods' reasons, shown as written) and the next step the
system takes by itself (:class:`Next`), with its time where it has one:

* queued, its pool's namespace and quota not in the cluster (observed) -> it is admitted
  once they are, checked on every admission pass;
* admitted and its PyTorchJob not created (:data:`NOT_CREATED_AFTER`), or the cluster
  refused the last write (``last_error``), or its pods not started
  (:data:`NOT_STARTED_AFTER`) -> back in the queue at the pod-start deadline, or failed
  there when that was its last attempt (``jobs.podstart``);
* preempting past its grace -> released to the queue :data:`PREEMPT_RELEASE_AFTER` after
  its deadline, whether or not its pods have gone (``jobs.observation.observe_jobs``);
* running or preempting with a cluster error -> nothing automatic for a running job.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from jobs.choices import JobState
from jobs.podstart import Seen

#: An admitted job's PyTorchJob is created within seconds; after this it is listed.
NOT_CREATED_AFTER = dt.timedelta(minutes=1)
#: An admitted job whose pods have not all started by then is listed (the pod-start
#: deadline, ``Policy.pod_start_deadline_seconds``, acts later).
NOT_STARTED_AFTER = dt.timedelta(minutes=5)
#: A preempting job is put back in the queue this long after its grace ended even when
#: its pods have not gone (``jobs.observation.observe_jobs``).
PREEMPT_RELEASE_AFTER = dt.timedelta(minutes=5)
REASON_MAX = 500
#: The admission loop's period (``portal/schedules.py`` runs it this often, and on every
#: submit, cancel, finish and observed change).
ADMISSION_EVERY_SECONDS = 5


class Trouble(StrEnum):
    POOL_ABSENT = "pool_absent"
    NOT_CREATED = "not_created"
    NOT_STARTED = "not_started"
    CLUSTER_ERROR = "cluster_error"
    PREEMPT_OVERDUE = "preempt_overdue"


class Next(StrEnum):
    WAIT_POOL = "wait_pool"  # admitted once its pool is in the cluster; checked every ``every`` s
    REQUEUE = "requeue"      # back in the queue at ``at``
    FAIL = "fail"            # fails at ``at`` (its last attempt)
    RELEASE = "release"      # released to the queue at ``at``
    NONE = "none"            # nothing automatic


@dataclass(frozen=True)
class JobFacts:
    """What :func:`classify` needs of one job."""

    state: str
    since: dt.datetime | None  # when it entered its current state
    admitted_at: dt.datetime | None = None
    preempt_deadline: dt.datetime | None = None
    in_cluster: bool = False  # its PyTorchJob was created
    last_error: str = ""
    pool_in_cluster: bool = True  # its pool's namespace and quota are observed
    pods: tuple[Seen, ...] = ()  # its pods not running yet: (reason, message)
    returns: int = 0  # times the pod-start deadline sent it back already


@dataclass(frozen=True)
class Verdict:
    trouble: Trouble
    since: dt.datetime | None
    reason: str  # the cluster's words (plain text, shown as written); may be ""
    next: Next
    at: dt.datetime | None = None
    every: int | None = None  # seconds


def _pods_reason(pods: Iterable[Seen]) -> str:
    """The pods' reasons and messages, each once: ``Unschedulable: 0/4 nodes ...``."""
    seen: list[str] = []
    for pod in pods:
        if not pod.reason:
            continue
        text = f"{pod.reason}: {pod.message}" if pod.message else pod.reason
        if text not in seen:
            seen.append(text)
    return "; ".join(seen)[:REASON_MAX]


def classify(job: JobFacts, *, now: dt.datetime, deadline_seconds: int, attempts: int,
             cycle_seconds: int = ADMISSION_EVERY_SECONDS) -> Verdict | None:
    """The job's trouble and the system's next step, or ``None`` when it progresses as
    expected (see the module docstring)."""
    error = (job.last_error or "")[:REASON_MAX]
    if job.state == JobState.QUEUED:
        if not job.pool_in_cluster:
            return Verdict(Trouble.POOL_ABSENT, job.since, error, Next.WAIT_POOL,
                           every=cycle_seconds)
        return None
    if job.state == JobState.ADMITTED:
        admitted = job.admitted_at or job.since
        age = now - admitted if admitted else dt.timedelta(0)
        if deadline_seconds > 0 and admitted is not None:
            last = job.returns + 1 >= max(1, attempts)
            step = Next.FAIL if last else Next.REQUEUE
            at: dt.datetime | None = admitted + dt.timedelta(seconds=deadline_seconds)
        else:
            step, at = Next.NONE, None
        if error:
            return Verdict(Trouble.CLUSTER_ERROR, admitted, error, step, at)
        if not job.in_cluster and age >= NOT_CREATED_AFTER:
            return Verdict(Trouble.NOT_CREATED, admitted, "", step, at)
        if age >= NOT_STARTED_AFTER:
            return Verdict(Trouble.NOT_STARTED, admitted, _pods_reason(job.pods), step, at)
        return None
    if job.state == JobState.PREEMPTING:
        release = (job.preempt_deadline + PREEMPT_RELEASE_AFTER
                   if job.preempt_deadline else None)
        if job.preempt_deadline is not None and now > job.preempt_deadline:
            return Verdict(Trouble.PREEMPT_OVERDUE, job.preempt_deadline,
                           error or _pods_reason(job.pods), Next.RELEASE, release)
        if error:
            return Verdict(Trouble.CLUSTER_ERROR, job.since, error,
                           Next.RELEASE if release else Next.NONE, release)
        return None
    if job.state == JobState.RUNNING and error:
        return Verdict(Trouble.CLUSTER_ERROR, job.since, error, Next.NONE)
    return None
