from django.contrib import admin

from core.models import UserPreference


@admin.register(UserPreference)
class UserPreferenceAdmin(admin.ModelAdmin):
    list_display = ["user", "language", "updated_at"]
    list_filter = ["language"]
