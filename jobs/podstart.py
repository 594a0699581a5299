"""No job holds quota without pods: the pod-start deadline, as pure decisions.

An admitted job holds its GPUs in the admission engine's books from the moment it is
admitted. If its pods do not all start within the policy's deadline
(``Policy.pod_start_deadline_seconds``, 10 minutes by default), something on the cluster
side stops them: an image that cannot be pulled, a pod the scheduler cannot place, a pod
the cluster refuses to create (quota, admission webhooks). The job is then sent back to
the queue, its PyTorchJob suspended so the pods go, its GPUs free for the next pass; after
``Policy.pod_start_attempts`` admissions that never started it fails instead (an image
that does not exist will never pull).

:func:`verdict` decides, :func:`cause` names the cluster's reason as a stored text
(``jobs.start.*``, registered in ``jobs.texts``) from what was observed of the job's pods
and events. Nothing here touches the database or the cluster.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

#: Why a container cannot start because of its image (kubelet's waiting reasons, events).
IMAGE_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName",
                           "ErrImageNeverPull", "InspectFailed"})
#: The scheduler cannot place the pod.
SCHEDULING_REASONS = frozenset({"Unschedulable", "FailedScheduling"})
#: The cluster refuses to create the pod (quota, an admission webhook, a bad template).
CREATE_REASONS = frozenset({"FailedCreatePod", "FailedCreate"})
MESSAGE_MAX = 500


@dataclass(frozen=True)
class Seen:
    """One observation: an observed pod's (reason, message), or a cluster event's."""

    reason: str
    message: str = ""
    at: dt.datetime | None = None  # events: when last seen (the newest wins a tie)


def verdict(*, admitted_at: dt.datetime | None, now: dt.datetime, deadline_seconds: int,
            returns: int, attempts: int) -> Literal["wait", "requeue", "fail"]:
    """What to do with an admitted job whose pods are not all running: ``wait`` within
    the deadline, then ``requeue`` (``returns`` earlier such returns so far) or ``fail``
    when this was its last of ``attempts`` admissions."""
    if admitted_at is None or deadline_seconds <= 0:
        return "wait"
    if now < admitted_at + dt.timedelta(seconds=deadline_seconds):
        return "wait"
    return "fail" if returns + 1 >= max(1, attempts) else "requeue"


def _text(code: str, **args: Any) -> dict[str, Any]:
    return {"code": code, "args": args}


def _pick(seen: Iterable[Seen], reasons: frozenset[str]) -> Seen | None:
    matches = [s for s in seen if s.reason in reasons]
    if not matches:
        return None
    # The most telling message: the runtime's "Failed to pull image ..." beats the bare
    # "Back-off pulling image"; among equals the newest.
    return max(matches, key=lambda s: (s.message.startswith("Failed to pull image"),
                                       s.reason not in ("ImagePullBackOff", "BackOff"),
                                       s.at or dt.datetime.min.replace(tzinfo=dt.UTC)))


def cause(*, pods: Iterable[Seen], events: Iterable[Seen], image: str,
          in_cluster: bool = True, last_error: str = "") -> dict[str, Any]:
    """The cluster's reason the job's pods did not start, as a stored text."""
    pods, events = list(pods), list(events)
    if not in_cluster:
        return _text("jobs.start.not_created",
                     message=(last_error or "—")[:MESSAGE_MAX])
    # The kubelet's image events are reason "Failed"/"BackOff"; only those about pulling.
    pulls = [Seen("ErrImagePull" if e.reason == "Failed" else "ImagePullBackOff", e.message,
                  e.at) for e in events if e.reason in ("Failed", "BackOff")
             and "image" in e.message.lower() and "pull" in e.message.lower()]
    image_seen = _pick([*pods, *pulls, *events], IMAGE_REASONS)
    if image_seen is not None:
        reason = next((p.reason for p in pods if p.reason in IMAGE_REASONS), image_seen.reason)
        return _text("jobs.start.image", image=image, reason=reason,
                     message=image_seen.message[:MESSAGE_MAX])
    for reasons, code in ((CREATE_REASONS, "jobs.start.create_failed"),
                          (SCHEDULING_REASONS, "jobs.start.unschedulable")):
        found = _pick([*events, *pods], reasons)
        if found is not None:
            return _text(code, reason=found.reason, message=found.message[:MESSAGE_MAX])
    other = next((p for p in pods if p.reason), None)
    if other is not None:
        return _text("jobs.start.other", reason=other.reason,
                     message=other.message[:MESSAGE_MAX])
    return _text("jobs.start.unknown")
