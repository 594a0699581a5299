"""Read-only admin views of the observed tables (rows are written only by observe.py)."""

from __future__ import annotations

from django.contrib import admin

from core.admin import ReadOnlyAdmin
from k8s_sync.models import (
    ClusterEvent,
    ObservedKind,
    ObservedKueueWorkload,
    ObservedNode,
    ObservedPod,
    ObservedPVC,
    ObservedQuota,
    ObservedStorageClass,
    ObservedWorkload,
)


@admin.register(ObservedNode)
class ObservedNodeAdmin(ReadOnlyAdmin):
    list_display = ["name", "gpu_model", "gpu_count", "rack", "switch", "ready",
                    "unschedulable", "observed_at"]
    list_filter = ["gpu_model", "ready", "unschedulable", "rack"]
    search_fields = ["name"]


@admin.register(ObservedPod)
class ObservedPodAdmin(ReadOnlyAdmin):
    list_display = ["namespace", "name", "phase", "node_name", "tenant", "pool", "job",
                    "observed_at"]
    list_filter = ["phase", "tenant"]
    search_fields = ["namespace", "name", "job"]


@admin.register(ObservedQuota)
class ObservedQuotaAdmin(ReadOnlyAdmin):
    list_display = ["namespace", "name", "observed_at"]
    search_fields = ["namespace", "name"]


@admin.register(ObservedPVC)
class ObservedPVCAdmin(ReadOnlyAdmin):
    list_display = ["namespace", "name", "storage_class", "requested", "phase"]
    search_fields = ["namespace", "name"]


@admin.register(ObservedStorageClass)
class ObservedStorageClassAdmin(ReadOnlyAdmin):
    list_display = ["name", "provisioner", "is_default"]


@admin.register(ClusterEvent)
class ClusterEventAdmin(ReadOnlyAdmin):
    list_display = ["last_seen", "namespace", "reason", "involved_kind", "involved_name",
                    "count"]
    list_filter = ["reason", "type"]
    search_fields = ["namespace", "involved_name", "message"]


@admin.register(ObservedWorkload)
class ObservedWorkloadAdmin(ReadOnlyAdmin):
    list_display = ["namespace", "name", "kind", "suspended", "active", "observed_at"]
    list_filter = ["kind", "suspended"]
    search_fields = ["namespace", "name"]


@admin.register(ObservedKueueWorkload)
class ObservedKueueWorkloadAdmin(ReadOnlyAdmin):
    list_display = ["namespace", "name", "owner_kind", "owner_name", "active",
                    "cluster_queue", "observed_at"]
    list_filter = ["owner_kind", "active"]
    search_fields = ["namespace", "name", "owner_name"]


@admin.register(ObservedKind)
class ObservedKindAdmin(ReadOnlyAdmin):
    list_display = ["kind", "object_count", "last_list_at", "last_event_at", "last_error_at"]
