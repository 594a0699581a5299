"""Trainyard's own middleware.

``NulRefusedMiddleware``: a NUL character in the address or its query string (``%00``) is
a 400 before any view reads it: no Postgres text column can hold one, so a filter or a
search with it would be a database error (a 500). Form fields and API serializers refuse
it already, and typed reasons through ``core.validation.typed_text``.

``PageMethodsMiddleware``: a page takes GET, HEAD and POST (and OPTIONS); any other
method (PUT, PATCH, DELETE, ...) is a 405 with ``Allow`` before the view runs, instead of
the page it would otherwise render. The API (``/api/``) answers for itself: DRF's views
know their methods. A page that takes no POST says so with ``require_safe``.

``PrivateAnswersMiddleware``: a page or API answer made for a signed-in user (a session,
or an API token) is that user's alone, so no browser or proxy may keep it: it is sent
with ``Cache-Control: private, no-store`` unless the view set its own caching. Static
files never get here (WhiteNoise answers them first, with its long cache headers).

``TimeZoneMiddleware``: times on pages are written in the reader's time zone. The browser
says which (``static/js/confirm.js`` stores ``Intl``'s zone in the ``trainyard_tz``
cookie on every page, the sign-in page included); a name the zone database does not know
is ignored, and without the cookie (an API client, an e-mail) the deployment's
``TIME_ZONE`` holds. ``core.when`` writes the zone beside every time.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable
from functools import lru_cache
from urllib.parse import unquote

from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.cache import patch_cache_control
from django.utils.translation import gettext as _


class NulRefusedMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "\x00" in request.path or any(
                "\x00" in key or any("\x00" in v for v in values)
                for key, values in request.GET.lists()):
            message = _("The address contains a NUL character; remove it.")
            if request.path.startswith("/api/"):
                return JsonResponse({"message": message, "extra": {}}, status=400)
            return render(request, "400.html", {"detail": message}, status=400)
        return self.get_response(request)


PAGE_METHODS = ("GET", "HEAD", "POST", "OPTIONS")


class PageMethodsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method not in PAGE_METHODS and not request.path.startswith("/api/"):
            return HttpResponseNotAllowed(["GET", "HEAD", "POST"])
        return self.get_response(request)


class PrivateAnswersMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.has_header("Cache-Control"):
            return response
        user = getattr(request, "user", None)
        if (user is not None and user.is_authenticated) or "HTTP_AUTHORIZATION" in request.META:
            patch_cache_control(response, private=True, no_store=True)
        return response


TZ_COOKIE = "trainyard_tz"


@lru_cache(maxsize=256)
def zone_named(name: str) -> zoneinfo.ZoneInfo | None:
    """The zone of an IANA name ("Asia/Shanghai"), None for a name the database lacks."""
    if not name or len(name) > 64:
        return None
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        return None


class TimeZoneMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        zone = zone_named(unquote(request.COOKIES.get(TZ_COOKIE, "")))
        if zone is None:
            return self.get_response(request)
        timezone.activate(zone)
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
