"""Expected domain errors and the one place that turns them into HTTP answers.

Services raise :class:`ApplicationError` (or a subclass) for anything a user can fix:
invalid input, a rule that forbids the change. Views show the message in the page; the
API returns it as ``{"message": ..., "extra": {...}}`` with a 4xx status. Nothing is
written when one is raised (services validate before they write, inside a transaction).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils.translation import gettext as _
from rest_framework import exceptions as drf_exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler


class ApplicationError(Exception):
    """A user-fixable error; ``field`` names the input it concerns, if any."""

    status_code = 400

    def __init__(self, message: str, *, field: str | None = None,
                 extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.extra = extra or {}


class Conflict(ApplicationError):
    """The change conflicts with the current state (duplicate, last admin ...)."""

    status_code = 409


class NotAllowed(ApplicationError):
    """The user may see the object but not make this change."""

    status_code = 403


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF exception handler: ApplicationError and Django ValidationError become 4xx, a body
    past ``DATA_UPLOAD_MAX_MEMORY_SIZE`` a JSON 413."""
    if isinstance(exc, ApplicationError):
        body: dict[str, Any] = {"message": exc.message, "extra": exc.extra}
        if exc.field:
            body["field"] = exc.field
        return Response(body, status=exc.status_code)
    if isinstance(exc, RequestDataTooBig):
        # Django's own answer would be its HTML 400 page; an API client gets JSON
        return Response({"message": _("The request body is too large."), "extra": {}},
                        status=413)
    if isinstance(exc, DjangoValidationError):
        detail = (exc.message_dict if hasattr(exc, "error_dict")
                  else {"non_field_errors": exc.messages})
        exc = drf_exceptions.ValidationError(detail=detail)
    return exception_handler(exc, context)
