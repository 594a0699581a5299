"""Which active jobs do not progress as expected (``jobs.health``) and what a job's pods
and events say about its start."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Sequence

from django.db.models import Count, OuterRef, Q, Subquery
from django.utils import timezone

from core.models import Policy
from jobs.choices import ACTIVE_STATES, JobState
from jobs.health import NOT_CREATED_AFTER, NOT_STARTED_AFTER, JobFacts, Verdict, classify
from jobs.models import JobTransition, TrainingJob
from jobs.podstart import Seen
from k8s_sync.models import (
    ClusterEvent,
    ObservedPod,
)
from tenants.selectors import (
    pools_not_in_cluster,
)


def start_observations(job: TrainingJob):  # type: ignore[no-untyped-def]
    """What the cluster said about a job whose pods have not started
    (``jobs.podstart.Seen`` lists): its unstarted pods' reasons and its events."""
    pods = [Seen(reason, message) for reason, message in ObservedPod.objects.filter(
        namespace=job.pool.namespace, job=str(job.pk)).exclude(
        phase__in=["Running", "Succeeded", "Failed"]).values_list("reason", "message")]
    events = [Seen(reason, message, at) for reason, message, at in ClusterEvent.objects.filter(
        involved_namespace=job.pool.namespace, involved_name__startswith=job.k8s_name
    ).order_by("-last_seen").values_list("reason", "message", "last_seen")[:50]
    ] if job.k8s_name else []
    return pods, events


# --- health: jobs that do not progress as expected (jobs.health) ---------------------------


def _entered_state() -> Subquery:
    """When the job entered its current state (its latest transition to it)."""
    return Subquery(JobTransition.objects.filter(job=OuterRef("pk"), to_state=OuterRef("state"))
                    .order_by("-at", "-id").values("at")[:1])


def _health_facts(jobs: Sequence[TrainingJob], absent: set[int]) -> dict[int, JobFacts]:
    """Facts of ``jobs`` (annotated with ``entered_at``) for ``jobs.health.classify``:
    two queries whatever their number (unstarted pods, pod-start returns)."""
    pods: dict[str, list[Seen]] = defaultdict(list)
    starting = [str(j.pk) for j in jobs if j.state in (JobState.ADMITTED, JobState.PREEMPTING)]
    if starting:
        for job_id, reason, message in ObservedPod.objects.filter(job__in=starting).exclude(
                phase__in=["Running", "Succeeded", "Failed"]).values_list("job", "reason",
                                                                          "message"):
            pods[job_id].append(Seen(reason, message))
    admitted = [j.pk for j in jobs if j.state == JobState.ADMITTED]
    returns = dict(JobTransition.objects.filter(
        job_id__in=admitted, reason="NotStarted", to_state=JobState.QUEUED).values("job_id")
        .annotate(n=Count("id")).values_list("job_id", "n")) if admitted else {}
    return {j.pk: JobFacts(
        state=j.state, since=getattr(j, "entered_at", None) or j.submitted_at,
        admitted_at=j.admitted_at, preempt_deadline=j.preempt_deadline,
        in_cluster=j.in_cluster, last_error=j.last_error,
        pool_in_cluster=j.pool_id not in absent, pods=tuple(pods.get(str(j.pk), ())),
        returns=returns.get(j.pk, 0)) for j in jobs}


def _classify(facts: JobFacts, now: dt.datetime, policy: Policy) -> Verdict | None:
    return classify(facts, now=now, deadline_seconds=int(policy.pod_start_deadline_seconds or 0),
                    attempts=int(policy.pod_start_attempts or 1))


def job_health(job: TrainingJob, *, now: dt.datetime | None = None) -> Verdict | None:
    """Whether ``job`` does not progress as expected, why and what happens next (the
    banner on its page; the cluster page lists the same verdicts: :func:`stuck_jobs`)."""
    if job.state not in ACTIVE_STATES:
        return None
    now = now or timezone.now()
    row = TrainingJob.objects.filter(pk=job.pk).annotate(entered_at=_entered_state()).first()
    if row is None:
        return None
    absent = set() if job.state != JobState.QUEUED or job.pool.in_cluster else {job.pool_id}
    return _classify(_health_facts([row], absent)[row.pk], now, Policy.current())


def stuck_jobs(*, now: dt.datetime, limit: int = 25) -> list[tuple[TrainingJob, Verdict]]:
    """Every active job that does not progress as expected (``jobs.health.classify``),
    with its verdict, the longest-stuck first: a queued job whose pool is not in the
    cluster, an admitted job without its PyTorchJob, with a cluster error or whose pods
    have not started, a preempting job past its grace, a running one the cluster refused."""
    absent = {p.pk for p in pools_not_in_cluster()}
    candidates = (
        Q(state=JobState.QUEUED, pool_id__in=absent)
        | Q(state=JobState.ADMITTED, admitted_at__lte=now - min(NOT_CREATED_AFTER,
                                                                NOT_STARTED_AFTER))
        | Q(state=JobState.PREEMPTING, preempt_deadline__lt=now)
        | (Q(state__in=[JobState.ADMITTED, JobState.RUNNING, JobState.PREEMPTING])
           & ~Q(last_error="")))
    jobs: list[TrainingJob] = list(
        TrainingJob.objects.filter(candidates).select_related("tenant", "pool__tenant")
        .annotate(entered_at=_entered_state())
        .only("id", "name", "state", "held", "workers", "gpus_per_worker", "gpu_model",
              "mig_profile", "submitted_at", "admitted_at", "preempt_deadline", "in_cluster",
              "last_error", "k8s_name", "tenant__slug", "pool__kind", "pool__tenant__slug")
        .order_by("submitted_at", "id")[:limit * 4])
    if not jobs:
        return []
    facts = _health_facts(jobs, absent)
    policy = Policy.current()
    out = [(j, v) for j in jobs if (v := _classify(facts[j.pk], now, policy)) is not None]
    out.sort(key=lambda jv: (jv[1].since or now, jv[0].pk))
    return out[:limit]
