"""A job's pods, logs, GPU utilisation and events, as its page shows them."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache
from django.http import Http404
from django.utils.translation import gettext_lazy

from core.when import when_text
from jobs.choices import JobState
from jobs.models import TrainingJob
from k8s_sync.client import K8sError, get_client
from k8s_sync.metrics import MetricsSource
from k8s_sync.models import (
    ClusterEvent,
    ObservedPod,
)
from tenants.models import JobUtilisation


def pods_of(job: TrainingJob) -> list[ObservedPod]:
    """The job's pods as last observed (name, phase, node, reason), the Master first, then
    the Workers by index. ``terminating``: the pod is being deleted (``kubectl``'s
    Terminating; its phase stays Running through the grace period)."""
    pods = list(ObservedPod.objects.filter(namespace=job.pool.namespace, job=str(job.pk)))
    for pod in pods:
        meta = (pod.raw or {}).get("metadata") or {}
        pod.terminating = bool(meta.get("deletionTimestamp"))  # type: ignore[attr-defined]
    return sorted(pods, key=lambda p: _pod_order(job, p.name))


def _pod_order(job: TrainingJob, name: str) -> tuple[int, int, str]:
    match = _POD_NAME.fullmatch(name[len(job.k8s_name) + 1:]) if job.k8s_name else None
    if match is None:
        return (2, 0, name)
    return (0 if match.group(1) == "master" else 1, int(match.group(2)), name)


_POD_NAME = re.compile(r"(master|worker)-(\d+)")


def log_pods(job: TrainingJob, pods: list[ObservedPod]) -> list[str]:
    """The pods whose logs the job page offers: those observed, else the names the
    operator gives the job's replicas (the Master, then each Worker)."""
    if pods:
        return [p.name for p in pods]
    if not job.k8s_name:
        return []
    return [f"{job.k8s_name}-master-0"] + [f"{job.k8s_name}-worker-{i}"
                                            for i in range(max(0, job.workers - 1))]


def job_pod_or_404(job: TrainingJob, pod: str) -> str:
    """``pod`` if it is one of the job's pods (observed with the job's label, or named as
    the operator names the job's replicas, so a pod already gone still answers), else 404."""
    if job.k8s_name and pod.startswith(job.k8s_name + "-") and _POD_NAME.fullmatch(
            pod[len(job.k8s_name) + 1:]):
        return pod
    if pod and ObservedPod.objects.filter(namespace=job.pool.namespace, job=str(job.pk),
                                          name=pod).exists():
        return pod
    raise Http404


# --- GPU utilisation (DCGM) ----------------------------------------------------------------

POD_UTIL_CACHE_SECONDS = 15


def pod_gpu_utilisation(job: TrainingJob, pods: list[ObservedPod]) -> dict[str, dict[str, Any]]:
    """Per running pod of the job, its GPUs' utilisation now: ``{pod: {"gpus", "util",
    "fb_gib"}}`` from the metrics source (DCGM), read at most every 15 s per namespace.
    Empty when the job has no running GPU pod or the metrics cannot be read."""
    running = {p.name for p in pods if p.phase == "Running"}
    if not running or not (job.gpus_per_worker or job.mig_profile):
        return {}
    key = f"jobs:podutil:{job.pool.namespace}"
    per_pod = cache.get(key)
    if per_pod is None:
        try:
            samples = MetricsSource.from_settings().gpu_samples()
        except K8sError:
            samples = None
        per_pod = {}
        for sample in samples or []:
            if sample.idle or sample.namespace != job.pool.namespace:
                continue
            acc = per_pod.setdefault(sample.pod, [0, 0.0, 0.0])
            acc[0] += 1
            acc[1] += sample.util_pct
            acc[2] += sample.fb_used_mib
        cache.set(key, per_pod, POD_UTIL_CACHE_SECONDS if samples is not None else 5)
    return {name: {"gpus": n, "util": round(total / n, 1), "fb_gib": round(mib / 1024, 1)}
            for name, (n, total, mib) in per_pod.items() if name in running and n}


def mean_gpu_utilisation(jobs: list[TrainingJob]) -> dict[int, float]:
    """The mean GPU utilisation (DCGM, minute samples) of each job that has been measured,
    by job id (one query)."""
    if not jobs:
        return {}
    rows = JobUtilisation.objects.filter(
        namespace__in={j.pool.namespace for j in jobs},
        job__in=[str(j.pk) for j in jobs]).values_list("namespace", "job", "util_sum",
                                                       "gpu_samples")
    wanted = {(j.pool.namespace, str(j.pk)): j.pk for j in jobs}
    return {wanted[(ns, job)]: round(total / n, 1) for ns, job, total, n in rows
            if n and (ns, job) in wanted}


# --- pod logs (read from the cluster) ------------------------------------------------------

LOG_TAIL_LINES = 2000  # what the log panel first shows
LOG_VIEW_BYTES = 512 * 1024  # at most this much per read of the panel or the API
LOG_DOWNLOAD_BYTES = 16 * 1024 * 1024  # a download's cap
# What a person reads when there is no log to show; the cluster's own words go beside it.
LOG_PROBLEMS = {
    "not_started": gettext_lazy("This pod has not started yet, so it has no log."),
    "no_previous": gettext_lazy("This pod's container has not restarted: there is no "
                                "previous container."),
    "gone": gettext_lazy("This pod no longer exists; its log went with it."),
    # the pod was never created: the job has not run yet (queued, or admitted and starting)
    "job_not_started": gettext_lazy("The job has not started yet: logs appear when its "
                                    "first pod runs."),
    # the job ended without ever running a pod (cancelled or failed while waiting)
    "job_never_ran": gettext_lazy("The job ended before any of its pods ran, so there are "
                                  "no logs."),
    "unreachable": gettext_lazy("The cluster cannot be reached right now; try again in a "
                                "moment."),
    "refused": gettext_lazy("The cluster did not give this log."),
}


@dataclass(frozen=True)
class PodLog:
    """One read of a pod's log: the lines (timestamp, text) or why there are none."""

    pod: str
    previous: bool
    lines: list[tuple[str, str]]
    problem: str = ""  # a key of LOG_PROBLEMS
    detail: str = ""  # the cluster's words
    truncated: bool = False  # the byte cap cut it

    @property
    def text(self) -> str:
        return "".join(text + "\n" for _stamp, text in self.lines)

    @property
    def stamped_text(self) -> str:
        """The lines with the kubelet's timestamps (RFC 3339, UTC), as ``kubectl logs
        --timestamps`` prints them: a downloaded log keeps its dates."""
        return "".join(f"{stamp} {text}\n" if stamp else text + "\n"
                       for stamp, text in self.lines)

    def shown(self) -> list[dict[str, str]]:
        """The lines as the page shows them: each with its timestamp in the one format of
        times (:func:`core.when.when_text`, the reader's language and time zone, to the
        second), beside the exact instant; a line without one has no time."""
        out = []
        for stamp, text in self.lines:
            at = _log_time(stamp)
            out.append({"at": at.isoformat() if at else "",
                        "when": when_text(at, seconds=True) if at else "", "text": text})
        return out

    @property
    def last(self) -> str:
        return self.lines[-1][0] if self.lines else ""

    @property
    def message(self) -> str:
        return str(LOG_PROBLEMS[self.problem]) if self.problem else ""


def pod_log(job: TrainingJob, *, pod: str, previous: bool = False,
            tail: int | None = LOG_TAIL_LINES, after: str = "",
            limit_bytes: int = LOG_VIEW_BYTES) -> PodLog:
    """The log of one of the job's pods, from the cluster (``pod`` checked by the caller
    with :func:`job_pod_or_404`). ``after``: the timestamp of the last line already shown
    (following a log by polling): only newer lines come back. Never raises for what the
    cluster says; a problem is named in ``problem``."""
    since_time = None
    if after:
        since_time = after[:19] + "Z"  # whole seconds; finer lines are dropped below
        tail = None
    try:
        raw = get_client().pod_log(job.pool.namespace, pod, previous=previous,
                                   tail_lines=tail, since_time=since_time,
                                   limit_bytes=limit_bytes, timestamps=True)
    except K8sError as exc:
        problem = _log_problem(exc)
        if problem == "gone" and not _ever_ran(job):
            # a pod that never existed did not go: say where the job stands instead
            # (the cluster's "not found" would only confuse)
            return PodLog(pod, previous, [],
                          "job_not_started" if job.is_active else "job_never_ran")
        return PodLog(pod, previous, [], problem, exc.message[:500])
    assert isinstance(raw, str)  # not followed
    truncated = len(raw.encode()) >= limit_bytes
    lines = []
    for line in raw.splitlines():
        stamp, sep, text = line.partition(" ")
        if not sep or not stamp[:4].isdigit():
            stamp, text = "", line
        if after and stamp and stamp <= after:
            continue
        lines.append((stamp, text))
    return PodLog(pod, previous, lines, truncated=truncated)


def _ever_ran(job: TrainingJob) -> bool:
    """Whether any of the job's pods ever ran: it is running now, or its history has a
    start (``started_at`` is cleared when a job goes back to the queue)."""
    if job.started_at is not None or job.restart_count:
        return True
    return job.transitions.filter(to_state=JobState.RUNNING).exists()


def _log_time(stamp: str) -> dt.datetime | None:
    """The instant of a kubelet log timestamp ("2026-12-07T12:24:55.123456789Z")."""
    try:
        return dt.datetime.fromisoformat(stamp[:19] + "+00:00") if stamp else None
    except ValueError:
        return None


def _log_problem(exc: K8sError) -> str:
    if exc.status is None or exc.transient:
        return "unreachable"
    if exc.status == 404:
        return "gone"
    text = exc.message
    if "previous terminated container" in text:
        return "no_previous"
    if ("waiting to start" in text or "does not have a host assigned" in text
            or "is not available" in text or "ContainerCreating" in text):
        return "not_started"
    if "is terminated" in text:
        return "gone"
    return "refused"


#: The training operator's events of the admission gate. Trainyard (or Kueue) creates every
#: job suspended and resumes it when it is admitted, and suspends it again when it is
#: preempted; the operator says so with these events (on every reconcile of a suspended
#: job, counted in one Event). The page explains them instead of showing the bare reason,
#: which reads like a preemption.
SUSPENDED_EVENT, RESUMED_EVENT = GATE_EVENTS = ("PyTorchJobSuspended", "PyTorchJobResumed")
GATE_TEXTS = {
    "created": gettext_lazy("Created suspended, as every job is: the cluster starts its "
                            "pods only once the job is admitted. This is not a preemption."),
    "suspended": gettext_lazy("Suspended: every job is created suspended until it is "
                              "admitted, and suspended again when it is preempted; the "
                              "cluster starts its pods once it is admitted."),
    "resumed": gettext_lazy("Resumed on admission: the cluster creates its pods."),
    "stopped": gettext_lazy("Suspended again when it stopped: Trainyard suspends a job to "
                            "remove its pods when it fails, is cancelled or goes back to the "
                            "queue (every job is also created suspended until it is admitted)."),
}
EVENTS_SHOWN = 50


def events_of(job: TrainingJob) -> list[ClusterEvent]:
    """The job's and its pods' latest cluster events, oldest first (by their full time, as
    the timeline and the log run). An admission-gate event (:data:`GATE_EVENTS`) carries
    ``gate``: the plain words the page shows for it."""
    if not job.k8s_name:
        return []
    events = list(ClusterEvent.objects.filter(
        involved_namespace=job.pool.namespace, involved_name__startswith=job.k8s_name,
    ).order_by("-last_seen", "-first_seen", "-pk")[:EVENTS_SHOWN])
    events.reverse()
    preempted, admitted = None, None
    for event in events:
        gate = ""
        if event.reason == RESUMED_EVENT:
            gate = "resumed"
        elif event.reason == SUSPENDED_EVENT:
            if preempted is None:
                preempted = job.transitions.filter(to_state=JobState.PREEMPTING).exists()
                admitted = job.transitions.filter(to_state=JobState.ADMITTED).order_by(
                    "at").values_list("at", flat=True).first()
            # the operator counts every suspended reconcile into one event: seen last
            # after the job was admitted, it is a suspension that stopped the job
            later = admitted is not None and event.last_seen is not None and \
                event.last_seen > admitted
            gate = "suspended" if preempted else "stopped" if later else "created"
        event.gate = str(GATE_TEXTS[gate]) if gate else ""  # type: ignore[attr-defined]
    return events
