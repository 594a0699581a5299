"""Enumerations of the tenants app."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class TenantStatus(models.TextChoices):
    ACTIVE = "active", _("Active")
    SUSPENDED = "suspended", _("Suspended")
    # Namespaces are being removed; then DELETED. Rows stay for billing history.
    DELETING = "deleting", _("Being deleted")
    DELETED = "deleted", _("Deleted")


class MembershipRole(models.TextChoices):
    MEMBER = "member", _("Member")
    ADMIN = "admin", _("Tenant admin")


class PlatformRoleName(models.TextChoices):
    PLATFORM_ADMIN = "platform_admin", _("Platform admin")
    FINANCE = "finance", _("Finance")


class SyncState(models.TextChoices):
    IN_SYNC = "in_sync", _("In sync")
    PENDING = "pending", _("Pending")
    ERROR = "error", _("Error")
    MISSING = "missing", _("Not in the cluster")


class QuotaMode(models.TextChoices):
    STATIC = "static", _("Static")
    DYNAMIC = "dynamic", _("Dynamic (proposed from usage)")
    OVERCOMMITTED = "overcommitted", _("Overcommitted (elastic)")


class RequestStatus(models.TextChoices):
    PENDING = "pending", _("Pending")
    APPROVED = "approved", _("Approved")
    REJECTED = "rejected", _("Rejected")
    CANCELLED = "cancelled", _("Cancelled")


class RequestSource(models.TextChoices):
    PERSON = "person", _("Asked by a person")
    DYNAMIC = "dynamic", _("Proposed from usage")


class LoanStatus(models.TextChoices):
    PROPOSED = "proposed", _("Proposed")
    ACTIVE = "active", _("Active")
    DECLINED = "declined", _("Declined")
    ENDED = "ended", _("Ended")
    CANCELLED = "cancelled", _("Cancelled")
    EXPIRED = "expired", _("Expired")
