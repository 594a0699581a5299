"""Admin views of billing. Issued invoices and their lines are read-only and cannot be
deleted here (the model refuses too); drafts are recomputed, so they are read-only as
well. The ledger tables are read-only views."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from billing.models import (
    Adjustment,
    Budget,
    DevicePrice,
    EgressSample,
    GpuPrice,
    GpuUsage,
    Invoice,
    InvoiceLine,
    MonthClose,
    RateCard,
    StoragePrice,
    StorageSnapshot,
)
from core.admin import ReadOnlyAdmin


class GpuPriceInline(admin.TabularInline):
    model = GpuPrice
    extra = 0


class StoragePriceInline(admin.TabularInline):
    model = StoragePrice
    extra = 0


class DevicePriceInline(admin.TabularInline):
    model = DevicePrice
    extra = 0


@admin.register(RateCard)
class RateCardAdmin(admin.ModelAdmin):
    list_display = ["effective_from", "egress_gib", "egress_region_gib", "egress_zone_gib",
                    "cpu_core_hour", "memory_gib_hour",
                    "mig_pricing", "created_by"]
    inlines = [GpuPriceInline, StoragePriceInline, DevicePriceInline]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a new card replaces an old one; create cards in the portal


class InvoiceLineInline(admin.TabularInline):
    model = InvoiceLine
    extra = 0
    can_delete = False
    fields = ("position", "kind", "description", "quantity", "unit", "unit_price", "amount")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Invoice)
class InvoiceAdmin(ReadOnlyAdmin):
    """Invoices come from the ledger and credit notes from the portal."""

    list_display = ["number", "tenant_name", "cost_center", "period", "kind", "status", "total"]
    list_filter = ["status", "kind", "period"]
    search_fields = ["number", "tenant_name", "cost_center"]
    inlines = [InvoiceLineInline]


@admin.register(GpuUsage)
class GpuUsageAdmin(ReadOnlyAdmin):
    list_display = ["job", "day", "billed_period", "gpu_model", "mig_profile", "device_kind",
                    "share_num", "share_den", "devices", "seconds"]
    list_filter = ["billed_period", "day", "device_kind"]
    raw_id_fields = ["job"]


@admin.register(StorageSnapshot)
class StorageSnapshotAdmin(ReadOnlyAdmin):
    list_display = ["namespace", "name", "storage_class", "size_bytes", "at", "billed_period"]


@admin.register(EgressSample)
class EgressSampleAdmin(ReadOnlyAdmin):
    list_display = ["namespace", "pod", "destination", "at", "transmit_total", "transmit_delta"]
    list_filter = ["destination"]


@admin.register(MonthClose)
class MonthCloseAdmin(ReadOnlyAdmin):
    list_display = ["period", "closed_at", "closed_by", "invoices", "total", "seconds"]


@admin.register(Adjustment)
class AdjustmentAdmin(ReadOnlyAdmin):
    list_display = ["tenant", "period", "description", "amount", "created_by"]


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    list_display = ["tenant", "monthly_amount", "updated_by", "updated_at"]
