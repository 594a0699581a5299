"""Observe the cluster: move jobs by what it reports, as the ``k8s_watch`` reflector recorded it.

* :func:`observe_jobs`: jobs to running, succeeded, failed, and (a preempted job whose
  pods are gone) back to the queue, each dated by the cluster's clock
  (:func:`_cluster_times`); no API call.
* :func:`record_problems`: what stops an admitted job's pods, stored on the job as soon
  as the cluster reports it (``jobs.problems``), its owner told once; an image that
  cannot be resolved fails the job at once.
* :func:`enforce_pod_start`: an admitted job whose pods have not started within the
  policy's deadline goes back to the queue, or fails (``jobs.podstart``).

Both admission backends run them at the start of a pass (``jobs.backends``). Plain
functions: they write through ``jobs.transitions`` and enqueue through ``jobs.enqueue``.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Count, Max

from core.models import Policy
from core.texts import StoredText
from core.texts import message as stored_text
from jobs import enqueue, health, podstart, problems, selectors, transitions
from jobs.admission import ACTIVE_STATES as HOLDING_STATES
from jobs.choices import JobState
from jobs.models import JobTransition, TrainingJob
from k8s_sync.models import ClusterEvent, ObservedPod
from k8s_sync.naming import namespace_name
from k8s_sync.selectors import WorkloadStatus, pod_run_times, workload_statuses
from k8s_sync.specs import WORKLOAD_KINDS

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClusterView:
    """What the caller keeps of the cluster itself (the admission service's informers,
    ``k8s_sync.informer``), instead of the watcher's recorded rows: each job kind's
    workloads' statuses by (namespace, name), and the pods' rows."""

    workloads: Mapping[str, Mapping[tuple[str, str], WorkloadStatus]]
    pods: Sequence[Any]


@dataclass(frozen=True)
class Held:
    """What :func:`observe_jobs` reads of a job that holds quota."""

    pk: int
    state: str
    kind: str
    k8s_name: str
    namespace: str
    preempt_deadline: dt.datetime | None
    restart_count: int


def held_of(rows: Iterable[Any]) -> list[Held]:
    """The jobs holding quota among active jobs' rows (``jobs.selectors.active_rows``, as
    the admission service keeps them; or read by :func:`_held`)."""
    return [Held(pk=r.id, state=r.state, kind=r.kind, k8s_name=r.k8s_name,
                 namespace=namespace_name(r.tenant__slug, r.pool__kind),
                 preempt_deadline=r.preempt_deadline, restart_count=r.restart_count)
            for r in rows if r.state in HOLDING_STATES]


def _held() -> list[Held]:
    return held_of(TrainingJob.objects.filter(state__in=HOLDING_STATES).values_list(
        "id", "state", "kind", "k8s_name", "tenant__slug", "pool__kind", "preempt_deadline",
        "restart_count", named=True))


def observe_jobs(now: dt.datetime, *, cluster: ClusterView | None = None,
                 held: list[Held] | None = None) -> dict[str, int]:
    """Record what happened to jobs, from their PyTorchJobs as the ``k8s_watch`` reflector
    last recorded them (``k8s_sync.selectors.workload_statuses``: one query, no API call).

    Each change is dated by the cluster's clock, not by this pass (:func:`_cluster_times`),
    so a slow or stopped loop bills the same: a job seen running is running from its
    ``Running`` condition's time; one seen finished ends at its ``Succeeded``/``Failed``
    condition's time, and one that ran and finished between two passes gets both
    transitions. A PyTorchJob not recorded (yet) moves nothing, as one missing from a
    list did. ``cluster``: the workloads and pods as the caller keeps them; ``held``: the
    jobs holding quota as it keeps them (:func:`held_of`); else both are read."""
    counts = {"running": 0, "succeeded": 0, "failed": 0, "requeued": 0}
    active = held if held is not None else _held()
    # the recorded workloads of these jobs only, not of every job that ever ran
    objs = cluster.workloads if cluster is not None else {
        kind: workload_statuses(*types, keys=[(j.namespace, j.k8s_name)
                                              for j in active if j.kind == kind])
        for kind, types in WORKLOAD_KINDS.items()}
    # the preempting jobs whose pods are still observed (terminating ones included): one
    # query for all of them, not one a job
    remaining = _pods_remaining([j for j in active if j.state == JobState.PREEMPTING],
                                pods=cluster.pods if cluster is not None else None)
    # What each job's recorded workload says, then every move of the pass in one
    # transaction, by kind of move (transitions.job_transitions: conditional, one
    # JobTransition each); a job that ran and finished between two passes is moved
    # twice, running first.
    running: list[transitions.Move] = []
    finished: dict[str, list[tuple[Held, dt.datetime | None, dt.datetime, str]]] = {
        "Succeeded": [], "Failed": []}
    requeued: list[transitions.Move] = []
    for job in active:
        obj = objs.get(job.kind, {}).get((job.namespace, job.k8s_name))
        if obj is None:
            continue
        conditions = obj.true_conditions()
        active_pods = obj.active
        finish = ("Succeeded" if "Succeeded" in conditions
                  else "Failed" if "Failed" in conditions else "")
        if finish and job.state != JobState.PREEMPTING:
            started, ended = _cluster_times(job, obj, finish, now)
            if job.state == JobState.ADMITTED and started is not None:
                # it ran and finished between two passes: its run is billed all the same
                running.append(transitions.Move(job.pk, fields={"placement": [],
                                                                "problem": None},
                                                at=started))
            finished[finish].append((job, started, ended,
                                     conditions[finish].get("message", "")))
        elif job.state == JobState.ADMITTED and "Running" in conditions:
            started, _ended = _cluster_times(job, obj, "", now)
            # its pods started: whatever stopped them is over (jobs.problems)
            running.append(transitions.Move(job.pk, fields={"placement": [], "problem": None},
                                            at=started or now))
        elif job.state == JobState.PREEMPTING and (
                (active_pods == 0 and job.pk not in remaining)
                or (job.preempt_deadline
                    and now >= job.preempt_deadline + health.PREEMPT_RELEASE_AFTER)):
            requeued.append(transitions.Move(job.pk, fields={
                "restart_count": job.restart_count + 1},
                message=stored_text("jobs.transition.requeued")))
    with transaction.atomic():
        counts["running"] = len(transitions.job_transitions(
            moves=running, from_states=[JobState.ADMITTED], to_state=JobState.RUNNING,
            reason="Running", stamp=["started_at"]))
        ran = [job.pk for done in finished.values() for job, started, _, _ in done
               if started is not None]
        recorded = dict(JobTransition.objects.filter(
            job_id__in=ran, to_state=JobState.RUNNING).values("job_id").annotate(
            last=Max("at")).values_list("job_id", "last")) if ran else {}
        for finish, done in finished.items():
            moves = []
            for job, started, ended, message in done:
                if started is not None and ended >= started and job.pk in recorded:
                    # the run lasts as long as the cluster says, from its recorded start
                    # (the same time unless the cluster's clock is off Trainyard's)
                    ended = recorded[job.pk] + (ended - started)
                moves.append(transitions.Move(job.pk, message=message, at=ended))
            counts[finish.lower()] = len(transitions.job_transitions(
                moves=moves, from_states=[JobState.ADMITTED, JobState.RUNNING],
                to_state=JobState(finish.lower()), reason=finish, stamp=["finished_at"]))
        counts["requeued"] = len(transitions.job_transitions(
            moves=requeued, from_states=[JobState.PREEMPTING], to_state=JobState.QUEUED,
            reason="Requeued", preempt_deadline=None,
            started_at=None, admitted_at=None, borrowing=False, placement=[]))
    return counts


def _cluster_times(job: Held, obj: WorkloadStatus, finished: str, now: dt.datetime
                   ) -> tuple[dt.datetime | None, dt.datetime]:
    """(when the job's last run started, when it finished) by the cluster's clock.

    The start is the ``Running`` condition's ``lastTransitionTime``
    (:meth:`~k8s_sync.selectors.WorkloadStatus.running_since`), else the earliest
    container start of its observed pods; None when neither shows it ran. The end (for
    ``finished``, "Succeeded" or "Failed") is that condition's time, else the latest
    container end, else ``now``. ``transitions.job_transition`` keeps both between the
    job's previous transition and now."""
    started = obj.running_since()
    pod_start: dt.datetime | None = None
    pod_end: dt.datetime | None = None
    if started is None or (finished and obj.condition_time(finished) is None):
        pod_start, pod_end = pod_run_times(job.namespace, str(job.pk))
    started = started or pod_start
    ended = (obj.condition_time(finished) or pod_end or now) if finished else now
    return started, ended


def start_words(policy: Policy) -> tuple[int, int]:
    """The pod-start deadline in whole minutes (at least 1) and the attempts, as the
    researcher reads them."""
    deadline = int(policy.pod_start_deadline_seconds or 0)
    return max(1, round(deadline / 60)), max(1, int(policy.pod_start_attempts or 1))


def start_cause(job: TrainingJob) -> StoredText:
    """Why the job's pods have not started, in the cluster's words (``podstart.cause``)."""
    pods, events = selectors.start_observations(job)
    return podstart.cause(pods=pods, events=events, image=job.image,
                          in_cluster=job.in_cluster, last_error=job.last_error)


def start_requeue(job: TrainingJob, *, why: StoredText, minutes: int, n: int, attempts: int,
                  at: dt.datetime) -> StoredText | None:
    """Back to the queue for its ``n``-th missed pod-start deadline (the engine's, or
    Kueue's ``waitForPodsReady``): a restart, as a preemption's requeue is (the next
    admission resumes the same job object). Its transition's text, None if the job had
    moved already."""
    text = stored_text("jobs.transition.start_requeued", minutes=minutes, cause=why, n=n,
                       max=attempts)
    moved = transitions.job_transition(
        job_id=job.pk, from_states=[JobState.ADMITTED], to_state=JobState.QUEUED,
        reason="NotStarted", message=text, at=at, admitted_at=None, borrowing=False,
        placement=[], switch="", restart_count=job.restart_count + 1,
        problem=problems.requeued(job.problem, attempt=n + 1, attempts=attempts))
    return text if moved else None


def start_fail(job: TrainingJob, *, why: StoredText, minutes: int, attempts: int,
               at: dt.datetime, from_states: Sequence[str]) -> StoredText | None:
    """Failed: its pods did not start in any of its ``attempts``. Its transition's text,
    None if the job had moved already."""
    text = stored_text("jobs.transition.start_failed", minutes=minutes, cause=why,
                       max=attempts)
    moved = transitions.job_transition(
        job_id=job.pk, from_states=list(from_states), to_state=JobState.FAILED,
        reason="NotStarted", message=text, at=at, finished_at=at, placement=[],
        problem=problems.failed(job.problem, now=at))
    return text if moved else None


def enforce_pod_start(now: dt.datetime, *, policy: Policy | None = None,
                      rows: Iterable[Any] | None = None) -> dict[str, int]:
    """No job holds quota without pods: an admitted job whose pods have not all started
    within ``Policy.pod_start_deadline_seconds`` of its admission goes back to the queue
    (its PyTorchJob suspended, its GPUs free for this pass) with the cluster's reason on
    its page and in a notification, or fails after ``Policy.pod_start_attempts`` such
    admissions (see :mod:`jobs.podstart`). ``policy`` and ``rows`` (the active jobs'
    rows) as the caller keeps them: then the database is read only when a kept job is
    past the deadline."""
    policy = policy if policy is not None else Policy.current()
    deadline = int(policy.pod_start_deadline_seconds or 0)
    attempts = max(1, int(policy.pod_start_attempts or 1))
    counts = {"start_requeued": 0, "start_failed": 0}
    if deadline <= 0:
        return counts
    due = now - dt.timedelta(seconds=deadline)
    if rows is not None and not any(r.state == JobState.ADMITTED and r.admitted_at is not None
                                    and r.admitted_at <= due for r in rows):
        return counts
    stuck = TrainingJob.objects.filter(
        state=JobState.ADMITTED, admitted_at__lte=now - dt.timedelta(seconds=deadline)
    ).select_related("tenant", "pool", "submitted_by")
    for job in stuck:
        returns = job.transitions.filter(reason="NotStarted", to_state=JobState.QUEUED).count()
        decision = podstart.verdict(admitted_at=job.admitted_at, now=now,
                                    deadline_seconds=deadline, returns=returns,
                                    attempts=attempts)
        if decision == "wait":
            continue
        why = start_cause(job)
        minutes, _attempts = start_words(policy)
        if decision == "requeue":
            text = start_requeue(job, why=why, minutes=minutes, n=returns + 1,
                                 attempts=attempts, at=now)
        else:
            text = start_fail(job, why=why, minutes=minutes, attempts=attempts, at=now,
                              from_states=[JobState.ADMITTED])
        if text is None:
            continue
        log.warning("job %s: pods not started within %ss (%s): %s", job.pk, deadline,
                    decision, why)
        counts["start_requeued" if decision == "requeue" else "start_failed"] += 1
        enqueue.schedule_sync(job.pk)  # suspend its PyTorchJob: the pending pods go
        transitions.job_notify_owner(job=job, text=text, email=decision == "fail")
    return counts


def record_problems(now: dt.datetime, *, policy: Policy | None = None,
                    rows: Iterable[Any] | None = None,
                    pods: Sequence[Any] | None = None) -> dict[str, int]:
    """What stops each admitted job's pods, stored on the job as soon as the cluster
    reports it (``jobs.problems.decide``: the pods' waiting or scheduling reasons, the
    kubelet's pull errors and the operator's ``FailedCreatePod`` since its admission).
    The owner is told once per problem; an image that cannot be resolved fails the job
    at once. ``rows`` (the active jobs' rows) and ``pods`` (the pods' rows) as the
    caller keeps them (the admission service); else read."""
    counts = {"problems": 0, "image_failed": 0}
    if rows is not None and not any(r.state == JobState.ADMITTED for r in rows):
        return counts
    admitted: list[Any] = list(TrainingJob.objects.filter(state=JobState.ADMITTED).values_list(
        "id", "k8s_name", "tenant__slug", "pool__kind", "admitted_at", "problem", "image",
        named=True))
    if not admitted:
        return counts
    ids = {str(j.id) for j in admitted}
    waiting: dict[str, list[problems.PodSeen]] = defaultdict(list)
    source = pods if pods is not None else ObservedPod.objects.filter(job__in=ids).exclude(
        phase__in=["Running", "Succeeded", "Failed"]).exclude(reason="").only(
        "job", "name", "phase", "reason", "message")
    for pod in source:
        if pod.job in ids and pod.reason and pod.phase not in ("Running", "Succeeded",
                                                               "Failed"):
            waiting[pod.job].append(problems.PodSeen(pod.name, pod.reason, pod.message))
    events = _problem_events(admitted, waiting)
    policy = policy if policy is not None else Policy.current()
    deadline = int(policy.pod_start_deadline_seconds or 0)
    attempts = max(1, int(policy.pod_start_attempts or 1))
    found = {j.id: problems.find(waiting.get(str(j.id), ()), events.get(j.id, ()))
             for j in admitted}
    looked = [j.id for j in admitted if found[j.id] is not None or j.problem]
    returns = dict(JobTransition.objects.filter(
        job_id__in=looked, reason="NotStarted", to_state=JobState.QUEUED).values("job_id")
        .annotate(n=Count("id")).values_list("job_id", "n")) if looked else {}
    for job in admitted:
        if found[job.id] is None and not job.problem:
            continue
        decision = problems.decide(found=found[job.id], previous=job.problem, now=now,
                                   admitted_at=job.admitted_at, deadline_seconds=deadline,
                                   attempts=attempts, returns=returns.get(job.id, 0))
        if decision.problem == job.problem:
            continue
        if _store_problem(job.id, job.problem, decision, now):
            counts["image_failed" if decision.fail_now else "problems"] += 1
    return counts


def _problem_events(admitted: Sequence[Any], waiting: Mapping[str, list[problems.PodSeen]]
                    ) -> dict[int, list[podstart.Seen]]:
    """The events of this admission of each job: the operator's refusals to create its
    pods (on the job object) and the kubelet's pull errors (on its pods), recorded since
    it was admitted (Trainyard's clock: ``observed_at``). One query."""
    by_key: dict[tuple[str, str], int] = {}
    for job in admitted:
        namespace = namespace_name(job.tenant__slug, job.pool__kind)
        if job.k8s_name:
            by_key[(namespace, job.k8s_name)] = job.id
        for pod in waiting.get(str(job.id), ()):
            by_key[(namespace, pod.name)] = job.id
    since = {job.id: job.admitted_at for job in admitted}
    earliest = min((t for t in since.values() if t is not None), default=None)
    if not by_key or earliest is None:
        return {}
    out: dict[int, list[podstart.Seen]] = defaultdict(list)
    rows = ClusterEvent.objects.filter(
        involved_namespace__in={ns for ns, _ in by_key},
        involved_name__in={name for _, name in by_key},
        reason__in=[*podstart.CREATE_REASONS, "Failed"], observed_at__gte=earliest,
    ).values_list("involved_namespace", "involved_name", "reason", "message", "last_seen",
                  "observed_at")
    for namespace, name, reason, message, last_seen, observed in rows:
        job_id = by_key.get((namespace, name))
        start = since.get(job_id) if job_id is not None else None
        if job_id is None or start is None or observed < start:
            continue
        if reason == "Failed" and not message.startswith("Failed to pull image"):
            continue
        out[job_id].append(podstart.Seen(reason, message, last_seen))
    return out


def _store_problem(job_id: int, previous: Any, decision: problems.Decision,
                   now: dt.datetime) -> bool:
    """Write ``decision`` on the job if it is still admitted with ``previous`` (another
    pass may have written first: then nothing, so the owner is told once); tell the
    owner; fail the job when the decision says so. True when written."""
    with transaction.atomic():
        job = (TrainingJob.objects.select_for_update(of=("self",))
               .filter(pk=job_id, state=JobState.ADMITTED)
               .select_related("tenant", "submitted_by").first())
        if job is None or job.problem != previous:
            return False
        problem = decision.problem or {}
        if decision.fail_now:
            text = stored_text("jobs.transition.image_failed", cause=problems.cause(
                problem, image=job.image))
            if not transitions.job_transition(
                    job_id=job.pk, from_states=[JobState.ADMITTED], to_state=JobState.FAILED,
                    reason="NotStarted", message=text, at=now, finished_at=now,
                    placement=[], problem=problems.failed(problem, now=now)):
                return False
            enqueue.schedule_sync(job.pk)  # its PyTorchJob suspended: the pods go
            transitions.job_notify_owner(job=job, text=text, email=True)
            log.warning("job %s: its image cannot be resolved, failed at once: %s", job.pk,
                        problems.words(problem))
            return True
        TrainingJob.objects.filter(pk=job.pk).update(problem=decision.problem)
        if decision.notify:
            transitions.job_notify_owner(
                job=job, text=problems.notice(problem, image=job.image),
                email=problem.get("code") in problems.OWNER_FIXES)
    return True


def _pods_remaining(jobs: list[Held], *, pods: Sequence[Any] | None = None
                    ) -> set[int]:
    """The jobs of ``jobs`` of which a pod is still observed, terminating ones included:
    until they are gone their GPUs are held, so the job is not back in the queue yet.
    ``pods``: the pods' rows the caller keeps (else read)."""
    if not jobs:
        return set()
    wanted = {(j.namespace, str(j.pk)): j.pk for j in jobs}
    if pods is not None:
        return {wanted[key] for p in pods if p.phase not in ("Succeeded", "Failed")
                and (key := (p.namespace, p.job)) in wanted}
    rows = (ObservedPod.objects.filter(job__in=[key[1] for key in wanted])
            .exclude(phase__in=["Succeeded", "Failed"]).order_by()
            .values_list("namespace", "job").distinct())
    return {wanted[row] for row in rows if row in wanted}
