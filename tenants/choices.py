"""Enumerations of the tenants app."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class TenantStatus(models.TextChoices):
    ACTIVE = "active", _("Active")
    SUSPENDED = "suspended", _("Suspended")
    # Namespaces are being removed; then DELETED. Rows stay for billing history.
    DELETING = "deleting", _("Being deleted")
    DELETED = "deleted", _("Deleted")


class PoolKind(models.TextChoices):
    PROD = "prod", _("Production")
    DEV = "dev", _("Development")


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
