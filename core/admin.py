"""Admin helpers every app may use, and the admin of core's own models."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from core.models import UserPreference


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows written only by Trainyard's own code (observations, the ledger, issued
    invoices): shown in the admin, never added, edited or deleted by hand."""

    actions = None  # no bulk delete

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(UserPreference)
class UserPreferenceAdmin(admin.ModelAdmin):
    list_display = ["user", "language", "updated_at"]
    list_filter = ["language"]
