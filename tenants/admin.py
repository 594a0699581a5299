from django.contrib import admin

from tenants.models import AuditEvent, Membership, PlatformRole, Pool, Tenant


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    raw_id_fields = ["user"]


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "cost_center", "status", "created_at"]
    list_filter = ["status"]
    search_fields = ["slug", "name", "cost_center"]
    inlines = [MembershipInline]
    readonly_fields = ["slug"]  # the slug names namespaces; create tenants in the portal


@admin.register(Pool)
class PoolAdmin(admin.ModelAdmin):
    list_display = ["tenant", "kind", "created_at"]


@admin.register(PlatformRole)
class PlatformRoleAdmin(admin.ModelAdmin):
    list_display = ["user", "role", "created_at"]


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["at", "actor", "tenant", "action", "summary"]
    list_filter = ["action"]

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False  # the audit log is append-only
