"""Trainyard's own middleware.

``PrivateAnswersMiddleware``: a page or API answer made for a signed-in user (a session,
or an API token) is that user's alone, so no browser or proxy may keep it: it is sent
with ``Cache-Control: private, no-store`` unless the view set its own caching. Static
files never get here (WhiteNoise answers them first, with its long cache headers).
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.cache import patch_cache_control


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
