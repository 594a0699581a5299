"""One verdict before Submit: what pressing Submit would do with this submission now.

:func:`job_submit_verdict` makes the very check Submit makes
(``jobs.services.job_submit_check``: the submission contract, one function both call) and,
when it passes, asks the admission engine where the job stands
(``jobs.selectors.preview``). The answer is exactly one of:

* ``refused``: what Submit would refuse, with the ``field`` at fault (None for the
  submission as a whole), its ``message`` (Submit's words) and every field's
  ``errors``; ``status`` is the HTTP status Submit answers (400, 403 or 409);
* ``fits``: it would be admitted at once, with where it runs (``nodes``, ``placement``,
  ``switch``);
* ``waits``: it would be queued, with the one limit that holds it (``reason``,
  ``reason_code``) and the ETA (``eta_p50``, ``eta_p90`` and their ``_text``).

A ``fits`` or ``waits`` verdict also says what the job would be billed (``cost``: GPU,
CPU, memory and storage for its maximum run time and for the run time the engine expects,
``expected_run_seconds``), as ``billing`` answers ``jobs.signals.job_cost_estimate``.

The job form's preview (``jobs.views.preview_data``) and the API's ``preview`` action
both answer with it. Writes nothing.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone
from django.utils.translation import gettext as _

from core.exceptions import ApplicationError
from jobs import selectors, services
from jobs.contract import NON_FIELD
from jobs.signals import cost_estimate
from jobs.validation import Inventory
from tenants.access import TenantAccess

VERDICTS = ("fits", "waits", "refused")


def refused(errors: dict[str, str], *, status: int = 400,
            extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``refused`` verdict for ``{field: message}`` (the first is the one named);
    ``extra`` as Submit's error body has it (default: the errors)."""
    field, message = next(iter(errors.items()))
    return {"verdict": "refused", "field": None if field == NON_FIELD else field,
            "message": message, "errors": dict(errors), "status": status,
            "extra": {"errors": dict(errors)} if extra is None else extra,
            "summary": _("Submit would refuse it: %(message)s") % {"message": message}}


def refusal_of(exc: ApplicationError) -> dict[str, Any]:
    """The ``refused`` verdict of an error Submit raised."""
    errors = exc.extra.get("errors") or {exc.field or NON_FIELD: exc.message}
    if exc.field and exc.field in errors:  # the field Submit names comes first
        errors = {exc.field: errors[exc.field], **errors}
    return refused(errors, status=exc.status_code, extra=exc.extra)


def job_submit_verdict(*, access: TenantAccess, pool: str, data: dict[str, Any],
                       inventory: Inventory | None = None, now: dt.datetime | None = None
                       ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The verdict (see the module) and the cleaned submission it was decided for (None
    when refused)."""
    try:
        _pool, clean, _annotations = services.job_submit_check(
            access=access, pool=pool, data=data, inventory=inventory)
    except ApplicationError as exc:
        return refusal_of(exc), None
    result = selectors.preview(access.tenant, pool, clean, now or timezone.now())
    result["gpu_kind"] = selectors.gpu_kind_label(clean)
    # what it would be billed for its maximum and its expected run time (billing answers)
    result["cost"] = cost_estimate(clean, {"max": int(clean["max_run_seconds"]),
                                           "expected": int(result["expected_run_seconds"])})
    return result, clean
