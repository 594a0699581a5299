"""API helpers that need no app: used by every app's API views (the tenant-scoped base
class, which needs the tenants app, is :mod:`tenants.api.base`)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.utils.translation import gettext as _
from rest_framework import exceptions
from rest_framework.exceptions import ParseError
from rest_framework.metadata import SimpleMetadata
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.parsers import JSONParser as BaseJSONParser
from rest_framework.request import Request, clone_request


def validated(serializer_class: type, request: Request) -> dict[str, Any]:
    """Validate ``request.data`` with an input serializer (400 with the field errors when
    invalid) and return the validated data as a plain dict."""
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


class JSONParser(BaseJSONParser):
    """DRF's JSON parser, with a body nested too deeply for Python's parser (thousands of
    lists in lists) refused as a parse error (400) instead of a RecursionError (500)."""

    def parse(self, stream: Any, media_type: str | None = None,
              parser_context: dict[str, Any] | None = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(_("JSON parse error - the body is nested too deeply.")) from None


#: Past these a list's limit is cut down and its offset refused as out of range: a database
#: integer cannot hold any number, and no page of the API is that long.
MAX_LIMIT = 1000
MAX_OFFSET = 2**31 - 1


class Pagination(LimitOffsetPagination):
    """``?limit=&offset=`` pages; a limit above :data:`MAX_LIMIT` is cut to it and an
    offset past :data:`MAX_OFFSET` gives an empty page (instead of a number the database
    cannot take, a 500)."""

    max_limit = MAX_LIMIT

    def get_offset(self, request: Request) -> int:
        return min(super().get_offset(request), MAX_OFFSET)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        """``limit`` and ``offset`` with their ranges (past them: cut, or an empty page)."""
        parameters = super().get_schema_operation_parameters(view)
        bounds = {self.limit_query_param: (1, MAX_LIMIT),
                  self.offset_query_param: (0, MAX_OFFSET)}
        for parameter in parameters:
            low, high = bounds.get(parameter["name"], (None, None))
            if low is not None:
                parameter["schema"] = {**parameter["schema"], "minimum": low, "maximum": high}
        return parameters


class Metadata(SimpleMetadata):
    """DRF's answer to OPTIONS, except that the object is looked up (to check the caller may
    PUT it) only on a detail URL: a list-level action such as a tenant's budget has no
    object, and DRF's own lookup there is an AssertionError (a 500)."""

    def determine_actions(self, request: Request, view: Any) -> dict[str, Any]:
        actions = {}
        for method in {"PUT", "POST"} & set(view.allowed_methods):
            view.request = clone_request(request, method)
            try:
                view.check_permissions(view.request)
                if method == "PUT" and hasattr(view, "get_object") \
                        and getattr(view, "detail", True) is not False:
                    view.get_object()
            except (exceptions.APIException, PermissionDenied, Http404):
                pass
            else:
                actions[method] = self.get_serializer_info(view.get_serializer())
            finally:
                view.request = request
        return actions
