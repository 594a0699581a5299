"""Kubernetes API errors as v1 Status bodies."""
from __future__ import annotations

from typing import Any


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.metadata: dict = {}    # the Status's ListMeta (a continue token on 410)

    def status(self) -> dict:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": self.metadata,
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if not self.reason:     # StatusReasonUnknown is "" and omitted (omitempty)
            del body["reason"]
        if self.details:
            body["details"] = self.details
        return body

    def __repr__(self) -> str:
        return f"ApiError({self.code}, {self.reason!r}, {self.message!r})"


def _details(name: str | None, group: str, kind: str, causes: list | None = None) -> dict:
    d: dict[str, Any] = {}
    if name:
        d["name"] = name
    if group:
        d["group"] = group
    d["kind"] = kind
    if causes:
        d["causes"] = causes
    return d


def qualified(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, group: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{qualified(resource, group)} "{name}" not found',
                    _details(name, group, resource))


def already_exists(resource: str, group: str, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists",
                    f'{qualified(resource, group)} "{name}" already exists',
                    _details(name, group, resource))


def conflict(resource: str, group: str, name: str, why: str) -> ApiError:
    what = qualified(resource, group)
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {what} "{name}": {why}',
                    _details(name, group, resource))


def forbidden(resource: str, group: str, name: str, why: str) -> ApiError:
    return ApiError(403, "Forbidden", f'{qualified(resource, group)} "{name}" is forbidden: {why}',
                    _details(name, group, resource))


def invalid(kind: str, group: str, name: str, causes: list[dict]) -> ApiError:
    """422 with field causes: each cause {field, message, reason?}.

    The message follows apimachinery: `Kind "name" is invalid: [field: msg, ...]`."""
    full = [{"reason": c.get("reason", "FieldValueInvalid"), "message": c["message"],
             "field": c["field"]} for c in causes]
    parts = [f"{c['field']}: {c['message']}" for c in full]
    joined = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    qkind = f"{kind}.{group}" if group else kind
    return ApiError(422, "Invalid", f'{qkind} "{name}" is invalid: {joined}',
                    _details(name, group, kind, full))


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def too_large_resource_version(rv: int, current: int) -> ApiError:
    """504 as storage.NewTooLargeResourceVersionError (apiserver/pkg/storage/errors.go), which
    the watch cache returns when asked for a resourceVersion it has not reached; kubesim has
    no lag to wait out, so it answers at once instead of after the cache's 3 s wait."""
    return ApiError(504, "Timeout", f"Timeout: Too large resource version: {rv}, current: "
                    f"{current}", {"causes": [{"reason": "ResourceVersionTooLarge",
                                                "message": "Too large resource version"}],
                                   "retryAfterSeconds": 1})
