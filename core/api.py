"""API helpers that need no app: used by every app's API views (the tenant-scoped base
class, which needs the tenants app, is :mod:`tenants.api.base`)."""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request


def validated(serializer_class: type, request: Request) -> dict[str, Any]:
    """Validate ``request.data`` with an input serializer (400 with the field errors when
    invalid) and return the validated data as a plain dict."""
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)
