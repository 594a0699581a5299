"""What stops an admitted job's pods, as soon as the cluster says so: one pure decision.

The pod-start deadline (``jobs.podstart``) acts ten minutes after admission; a person
should not wait that long to learn that the image cannot be pulled. On every admission
pass the observation path (``jobs.observation.record_problems``) gives :func:`decide`
what the cluster reports of an admitted job's pods that have not started (their waiting
or scheduling reason and message, as the watcher or the admission service's informers
recorded them) and the job's own events (the training operator's ``FailedCreatePod``),
and stores what it returns on the job (``TrainingJob.problem``). The job's state stays
what admission says; the problem is shown beside it (badge, list row, banner, API).

A problem (a plain dict, stored as JSON):

* ``code``: :class:`Code` (what kind of trouble, in Trainyard's words);
* ``reason``, ``message``: the cluster's own (``ErrImagePull`` and containerd's error);
* ``pod``: the pod it is about; ``since``: when it was first seen (ISO);
* ``next``: :class:`Next`, with ``at`` (ISO) where it has a time, and ``attempt`` of
  ``attempts`` (admissions);
* ``open``: whether the cluster reports it now (a problem no longer reported is kept,
  closed, until the pods start: it is what the owner was told);
* ``notified``: the codes the owner was told about in this episode (once each).

An image reference that cannot be resolved at all (:func:`pull_kind` ``missing``: "not
found", "manifest unknown", an invalid name, a registry host that does not resolve)
will not pull by waiting: the job fails at once (``Next.FAIL_NOW``) with the cluster's
words. A registry that refuses access (``denied``) gets the first attempt's deadline
but is not requeued (the same registry would refuse again); anything else (a timeout, a
5xx, a rate limit, a pod that cannot be scheduled or created) keeps the pod-start
deadline's retries. The episode ends when the pods start (``jobs.observation`` clears
the problem with the ``Running`` transition).

Nothing here touches the database or the cluster.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from jobs.podstart import CREATE_REASONS, IMAGE_REASONS, Seen

MESSAGE_MAX = 1000
#: The kubelet's reasons a container waits for its image (``jobs.podstart``'s, and the
#: registry-unavailable and signature reasons of kubelet 1.30+).
PULL_REASONS = IMAGE_REASONS | {"RegistryUnavailable", "SignatureValidationFailed"}


class Code(StrEnum):
    IMAGE_MISSING = "image_missing"    # the reference cannot be resolved: fails at once
    IMAGE_INVALID = "image_invalid"    # InvalidImageName: fails at once
    IMAGE_DENIED = "image_denied"      # the registry refuses access
    IMAGE_PULL = "image_pull"          # a pull failed for a reason that may pass
    CONFIG = "config"                  # CreateContainerConfigError (a missing Secret, ...)
    UNSCHEDULABLE = "unschedulable"    # PodScheduled=False
    CREATE_FAILED = "create_failed"    # FailedCreatePod on the job object


class Next(StrEnum):
    FAIL_NOW = "fail_now"  # failed at once: retrying cannot help
    REQUEUE = "requeue"    # retried until ``at`` (the pod-start deadline), then requeued
    FAIL = "fail"          # retried until ``at``, then failed (its last attempt)
    READMIT = "readmit"    # back in the queue; tried again when admitted
    FAILED = "failed"      # the job failed of it


#: Codes that fail the job at once, and codes that are not requeued at the deadline.
FAIL_AT_ONCE = frozenset({Code.IMAGE_MISSING, Code.IMAGE_INVALID})
NO_REQUEUE = frozenset({Code.IMAGE_DENIED})
#: Codes whose owner gets an e-mail besides the portal's notification (theirs to fix).
OWNER_FIXES = frozenset({Code.IMAGE_MISSING, Code.IMAGE_INVALID, Code.IMAGE_DENIED,
                         Code.CONFIG})

# containerd's, CRI-O's and Docker's words for a reference that does not exist or cannot
# resolve (containerd: "failed to resolve reference ...: <ref>: not found"; CRI-O and
# Docker: "manifest unknown"; Go's resolver: "no such host"), and for a refused pull.
_MISSING = re.compile(r"code = NotFound|: not found\b|manifest unknown|not found: manifest|"
                      r"no such host|name unknown|invalid reference format|"
                      r"repository name must be", re.IGNORECASE)
_DENIED = re.compile(r"pull access denied|unauthorized|authorization failed|"
                     r"403 Forbidden|denied: ", re.IGNORECASE)
# Words that say the failure may pass, whatever else the message holds.
_TRANSIENT = re.compile(r"timeout|timed out|toomanyrequests|429 Too Many|"
                        r"\b5\d\d [A-Z][a-z]+|connection refused|connection reset|EOF\b|"
                        r"temporary failure|try again", re.IGNORECASE)


def pull_kind(message: str) -> Literal["missing", "denied", "transient"]:
    """What an image pull error says: the reference does not exist or cannot resolve
    (``missing``), the registry refuses access (``denied``), or something that may pass
    (``transient``: a timeout, a 5xx, a rate limit, anything not recognised)."""
    if _TRANSIENT.search(message):
        return "transient"
    if _MISSING.search(message):
        return "missing"
    if _DENIED.search(message):
        return "denied"
    return "transient"


@dataclass(frozen=True)
class PodSeen:
    """One pod of the job that has not started: its name and the cluster's reason."""

    name: str
    reason: str
    message: str = ""


@dataclass(frozen=True)
class Found:
    code: Code
    reason: str
    message: str
    pod: str = ""


def find(pods: Iterable[PodSeen], events: Iterable[Seen] = ()) -> Found | None:
    """The cluster's reason the job's pods do not start, the most telling first (the
    image, then the containers' configuration, then scheduling, then the operator's
    refusal to create pods), or None when it reports no problem (pods being created,
    pulling, starting)."""
    pods = sorted(pods, key=lambda p: p.name)
    image = [p for p in pods if p.reason in PULL_REASONS]
    if image:
        # ErrImagePull carries the runtime's error; ImagePullBackOff only "Back-off pulling".
        best = next((p for p in image if p.reason != "ImagePullBackOff"), image[0])
        message = best.message
        if best.reason == "ImagePullBackOff":
            said = next((e.message for e in sorted(events, key=_newest)
                         if e.message.startswith("Failed to pull image")), "")
            message = said or message
        if best.reason == "InvalidImageName":
            code = Code.IMAGE_INVALID
        else:
            code = {"missing": Code.IMAGE_MISSING, "denied": Code.IMAGE_DENIED,
                    "transient": Code.IMAGE_PULL}[pull_kind(message)]
        return Found(code, best.reason, message[:MESSAGE_MAX], best.name)
    for reasons, code in ((frozenset({"CreateContainerConfigError",
                                      "CreateContainerError"}), Code.CONFIG),
                          (frozenset({"Unschedulable"}), Code.UNSCHEDULABLE)):
        pod = next((p for p in pods if p.reason in reasons), None)
        if pod is not None:
            return Found(code, pod.reason, pod.message[:MESSAGE_MAX], pod.name)
    refused = sorted((e for e in events if e.reason in CREATE_REASONS), key=_newest)
    if refused:
        return Found(Code.CREATE_FAILED, refused[0].reason, refused[0].message[:MESSAGE_MAX])
    return None


def _newest(seen: Seen) -> float:
    return -(seen.at.timestamp() if seen.at else 0.0)


@dataclass(frozen=True)
class Decision:
    problem: dict[str, Any] | None   # what the job carries now
    notify: bool = False             # tell the owner (a code not told in this episode)
    fail_now: bool = False           # fail the job now


def _iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def decide(*, found: Found | None, previous: Mapping[str, Any] | None, now: dt.datetime,
           admitted_at: dt.datetime | None, deadline_seconds: int, attempts: int,
           returns: int) -> Decision:
    """The problem an admitted job carries after this observation (see the module
    docstring). ``returns``: the times the pod-start deadline sent it back already;
    ``attempts``: ``Policy.pod_start_attempts``."""
    attempts = max(1, attempts)
    attempt = min(returns + 1, attempts)
    told = list((previous or {}).get("notified") or [])
    if found is None:
        if previous and previous.get("open"):
            return Decision({**previous, "open": False})
        return Decision(dict(previous) if previous else None)
    at: dt.datetime | None = None
    if found.code in FAIL_AT_ONCE:
        step = Next.FAIL_NOW
        at = now
    elif deadline_seconds > 0 and admitted_at is not None:
        last = returns + 1 >= attempts or found.code in NO_REQUEUE
        step = Next.FAIL if last else Next.REQUEUE
        at = admitted_at + dt.timedelta(seconds=deadline_seconds)
    else:  # no deadline: it waits for the cluster as long as it takes
        step = Next.REQUEUE
    same = bool(previous) and previous.get("code") == found.code  # type: ignore[union-attr]
    since = (previous or {}).get("since") if same and (previous or {}).get("open") else None
    notify = found.code not in told
    problem = {
        "code": str(found.code), "reason": found.reason, "message": found.message,
        "pod": found.pod, "since": since or _iso(now), "next": str(step), "at": _iso(at),
        "attempt": attempt, "attempts": attempts, "open": True,
        "notified": [*told, str(found.code)] if notify else told,
    }
    if previous is not None and problem == dict(previous):
        return Decision(dict(previous))
    return Decision(problem, notify=notify, fail_now=step == Next.FAIL_NOW)


def requeued(problem: Mapping[str, Any] | None, *, attempt: int, attempts: int
             ) -> dict[str, Any] | None:
    """The problem of a job the pod-start deadline sent back to the queue: tried again
    when admitted (``attempt`` of ``attempts``, the next one)."""
    if not problem:
        return None
    return {**problem, "next": str(Next.READMIT), "at": None, "attempt": attempt,
            "attempts": attempts}


def failed(problem: Mapping[str, Any] | None, *, now: dt.datetime) -> dict[str, Any] | None:
    """The problem of a job that failed of it (the deadline's last attempt, or at once)."""
    if not problem:
        return None
    return {**problem, "next": str(Next.FAILED), "at": _iso(now)}


def words(problem: Mapping[str, Any] | None) -> str:
    """The cluster's words of a problem: ``ErrImagePull: rpc error: ...`` ("" for none)."""
    if not problem:
        return ""
    reason, message = problem.get("reason") or "", problem.get("message") or ""
    return f"{reason}: {message}" if reason and message else reason or message


def _text(code: str, **args: Any) -> dict[str, Any]:
    return {"code": code, "args": args}


def cause(problem: Mapping[str, Any], *, image: str) -> dict[str, Any]:
    """The problem in Trainyard's words with the cluster's, as a stored text
    (``jobs.problem.<code>``, registered in ``jobs.texts``)."""
    return _text(f"jobs.problem.{problem.get('code') or Code.IMAGE_PULL}", image=image,
                 reason=problem.get("reason") or "", message=problem.get("message") or "")


def when(value: str | None) -> str:
    """A stored ISO time as a notification says it: ``2026-12-07 14:32 UTC``."""
    if not value:
        return ""
    return dt.datetime.fromisoformat(value).astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def next_step(problem: Mapping[str, Any], *, at: str | None = None) -> dict[str, Any]:
    """What Trainyard does next, and when, as a stored text (``jobs.problem.next.<next>``);
    ``at``: the time as the reader should read it (default: :func:`when`)."""
    step = problem.get("next") or Next.REQUEUE
    if step in (Next.REQUEUE, Next.FAIL) and not problem.get("at"):
        step = "wait"
    return _text(f"jobs.problem.next.{step}", at=at if at is not None else when(
        problem.get("at")), n=problem.get("attempt") or 1, max=problem.get("attempts") or 1)


def notice(problem: Mapping[str, Any], *, image: str) -> dict[str, Any]:
    """The owner's notification of a new problem (``jobs.notify.job`` wraps it)."""
    return _text("jobs.problem.notify", cause=cause(problem, image=image),
                 next=next_step(problem))
