"""Platform-wide rows that belong to no tenant: the policy and each user's preferences.

They are read by every app (the policy by admission, quota, pools and the dashboards; the
preferences by whatever writes to a user when they are not looking at a page), and they
need nothing of any app, so they live on the ground floor. ``core`` imports no Trainyard
app, not even by a string foreign key: the audit log and notifications carry a tenant and
stay in ``tenants``. Writes go through ``tenants.services`` (``policy_update``,
``preference_set_language``), which check who may write.
"""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from core.choices import DEFAULT_GRACE_SECONDS, Tier


class UserPreference(models.Model):
    """A user's settings that matter when they are not looking at a page: the language
    their e-mails are written in (set by the language menu, or at first login from the
    browser's language)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="preference")
    language = models.CharField(_("language"), max_length=16, default=settings.LANGUAGE_CODE)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.user}: {self.language}"


#: The range of each number of the policy, inclusive: ``tenants.services.policy_update``
#: refuses a value outside it, the API's serializer and the policy form state it.
#: Fractions are stored as fractions (the form shows them in percent).
POLICY_BOUNDS: dict[str, tuple[Decimal, Decimal]] = {
    "overcommit_factor": (Decimal(1), Decimal(10)),
    "eviction_watermark": (Decimal("0.5"), Decimal(1)),
    "borrowing_cap": (Decimal(1), Decimal(100)),
    "development_grace_seconds": (Decimal(0), Decimal(86400)),
    "batch_grace_seconds": (Decimal(0), Decimal(86400)),
    "dev_pvc_reclaim_days": (Decimal(1), Decimal(3650)),
    "dynamic_headroom": (Decimal(0), Decimal(2)),
    "dynamic_idle_threshold": (Decimal(0), Decimal(1)),
}


class Policy(models.Model):
    """Platform-wide policy: one row (pk=1), changed only by platform admins.

    ``overcommit_factors`` maps a resource kind (``gpu``, ``cpu`` ...) or a full key
    (``gpu:NVIDIA-H800``) to the factor by which total grants may exceed physical
    capacity; a key wins over its kind; missing means 1.0.
    """

    overcommit_factors = models.JSONField(default=dict, blank=True)
    eviction_watermark = models.DecimalField(max_digits=4, decimal_places=3, default=0.85)
    # What development and batch work may borrow of idle capacity, as a factor of each
    # pool's grants, for every tenant without a cap of its own (``Tenant.borrowing_cap``);
    # null: no cap (any idle capacity, reclaimed when its owner needs it).
    borrowing_cap = models.DecimalField(max_digits=5, decimal_places=2, null=True, blank=True)
    production_grace_seconds = models.PositiveIntegerField(
        default=DEFAULT_GRACE_SECONDS[Tier.PRODUCTION])  # never preempted
    development_grace_seconds = models.PositiveIntegerField(
        default=DEFAULT_GRACE_SECONDS[Tier.DEVELOPMENT])
    batch_grace_seconds = models.PositiveIntegerField(default=DEFAULT_GRACE_SECONDS[Tier.BATCH])
    default_quota = models.JSONField(default=dict, blank=True)  # {pool: {key: amount}}
    dev_pvc_reclaim_days = models.PositiveIntegerField(null=True, blank=True)
    dynamic_headroom = models.DecimalField(max_digits=4, decimal_places=2, default=0.2)
    dynamic_idle_threshold = models.DecimalField(max_digits=4, decimal_places=2, default=0.5)
    # CIDRs every pool's pods may reach (object storage, dataset servers, a proxy).
    egress_cidrs = models.JSONField(default=list, blank=True)
    # An admitted job whose pods have not all started by then goes back to the queue
    # (or fails after ``pod_start_attempts`` tries), and its GPUs are released.
    pod_start_deadline_seconds = models.PositiveIntegerField(default=600)
    pod_start_attempts = models.PositiveIntegerField(default=3)
    # Node-label keys of the network topology, widest first (e.g. rack, then leaf switch):
    # a multi-node job is placed under one value of the last level.
    topology_levels = models.JSONField(default=list, blank=True)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "policy"

    def __str__(self) -> str:
        return "policy"

    @classmethod
    def current(cls) -> Policy:
        return cls.objects.get_or_create(pk=1)[0]
