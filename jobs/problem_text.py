"""A job's problem (``jobs.problems``) as people read it: the badge's words, the
sentence with the cluster's words, and the next step with its time in the reader's
language and time zone. One presenter for the badge, the list row, the banner and the API."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from core.texts import render
from core.when import eta_text
from jobs.choices import ACTIVE_STATES
from jobs.problems import Code, Next, cause, next_step, words

#: The badge beside the job's state.
BADGES = {
    Code.IMAGE_MISSING: _("image not found"),
    Code.IMAGE_INVALID: _("invalid image name"),
    Code.IMAGE_DENIED: _("image access refused"),
    Code.IMAGE_PULL: _("image pull failing"),
    Code.CONFIG: _("containers cannot be created"),
    Code.UNSCHEDULABLE: _("pods cannot be scheduled"),
    Code.CREATE_FAILED: _("pods refused"),
}


@dataclass(frozen=True)
class Shown:
    code: str
    badge: str
    cause: str      # Trainyard's words with the cluster's
    next: str       # what happens next, and when ("" when nothing will)
    words: str      # the cluster's reason and message, as written
    since: dt.datetime | None
    at: dt.datetime | None

    def as_api(self, problem: dict[str, Any]) -> dict[str, Any]:
        return {"code": self.code, "reason": problem.get("reason") or "",
                "message": problem.get("message") or "", "pod": problem.get("pod") or "",
                "since": problem.get("since"), "next": problem.get("next"),
                "at": problem.get("at"), "attempt": problem.get("attempt"),
                "attempts": problem.get("attempts"), "text": f"{self.cause} {self.next}".strip()}


def _time(value: Any) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(value) if value else None
    except (TypeError, ValueError):
        return None


def shown(job: Any) -> Shown | None:
    """The job's problem as it is shown, or None (none, or no longer reported)."""
    problem = getattr(job, "problem", None)
    if not isinstance(problem, dict) or not problem.get("open"):
        return None
    code = str(problem.get("code") or "")
    at = _time(problem.get("at"))
    step = problem.get("next")
    ongoing = job.state in ACTIVE_STATES or step in (Next.FAIL_NOW, Next.FAILED)
    return Shown(
        code=code, badge=str(BADGES.get(code, code)),  # type: ignore[call-overload]
        cause=gettext("Its pods cannot start: %(cause)s.") % {
            "cause": render(cause(problem, image=job.image))},
        next=render(next_step(problem, at=eta_text(at))) if ongoing else "",
        words=words(problem), since=_time(problem.get("since")), at=at)
