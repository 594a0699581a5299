"""Tenants, their pools, who belongs to them, and platform-wide roles.

A Tenant is a team sharing the cluster. Each tenant has exactly two pools, prod and
dev, each of which becomes a namespace in Kubernetes. Writes go through
``tenants.services``; reads through ``tenants.selectors``.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.utils.functional import cached_property
from django.utils.translation import gettext_lazy as _

from core.choices import PoolKind
from core.models import Policy
from core.texts import StoredText
from k8s_sync.naming import namespace_name
from k8s_sync.selectors import pool_namespaces_observed
from tenants.choices import (
    LoanStatus,
    MembershipRole,
    PlatformRoleName,
    QuotaMode,
    RequestSource,
    RequestStatus,
    SyncState,
    TenantStatus,
)
from tenants.demand import borrowing_factor

SLUG_RE = r"^[a-z]([a-z0-9-]{0,38}[a-z0-9])?$"
slug_validator = RegexValidator(
    SLUG_RE,
    _("Use 1 to 40 lower-case letters, digits and hyphens, starting with a letter "
      "and not ending with a hyphen."),
    code="invalid_slug",
)


class Tenant(models.Model):
    """A team that shares the cluster. Suspended tenants keep their data but cannot submit."""

    slug = models.CharField(_("slug"), max_length=40, unique=True, validators=[slug_validator],
                            help_text=_("Short name used in URLs and namespaces, e.g. vision."))
    name = models.CharField(_("name"), max_length=200)
    cost_center = models.CharField(_("cost center"), max_length=64)
    contact_name = models.CharField(_("contact name"), max_length=200, blank=True)
    contact_email = models.EmailField(_("contact e-mail"))
    # the postal address invoices are sent to (the bill-to of billing.document), if any
    billing_address = models.TextField(
        _("billing address"), blank=True, max_length=1000,
        help_text=_("The postal address printed on this tenant's invoices; blank: none."))
    status = models.CharField(_("status"), max_length=16, choices=TenantStatus.choices,
                              default=TenantStatus.ACTIVE)
    suspended_reason = models.TextField(_("reason for suspension"), blank=True)
    quota_mode = models.CharField(_("quota mode"), max_length=16, choices=QuotaMode.choices,
                                  default=QuotaMode.STATIC)
    # A cap on what the tenant's development and batch work may borrow of idle capacity,
    # as a factor of its grants (``tenants.demand.borrowing_factor``); blank: the policy's
    # cap, and without one, any idle capacity (reclaimed when its owner needs it).
    borrowing_cap = models.DecimalField(
        _("borrowing cap (x quota)"), max_digits=5, decimal_places=2, null=True, blank=True,
        help_text=_("Development and batch jobs may borrow idle capacity up to this many "
                    "times the quota; blank: the platform's cap, or none."))
    members_may_request_quota = models.BooleanField(
        _("members may request quota"), default=False,
        help_text=_("When off, only tenant admins ask for quota changes."))
    # Extra egress destinations of this tenant's pods (CIDRs), beside the policy's.
    egress_cidrs = models.JSONField(_("egress CIDRs"), default=list, blank=True)
    suspended_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]
        verbose_name = _("tenant")
        verbose_name_plural = _("tenants")

    def __str__(self) -> str:
        return self.slug

    @property
    def is_active(self) -> bool:
        return self.status == TenantStatus.ACTIVE

    def borrowing_factor(self, policy: Any = None) -> Decimal | None:
        """The factor that caps what this tenant's development and batch work may hold
        (``tenants.demand.borrowing_factor``: its own cap, else the policy's, else None,
        no cap). ``policy``: the Policy row when the caller has it."""
        cap = (policy if policy is not None else Policy.current()).borrowing_cap
        return borrowing_factor(self.borrowing_cap, cap)


class Pool(models.Model):
    """One of a tenant's two pools (prod, dev); each is a namespace in the cluster.

    Sync bookkeeping: every change that alters what the pool should look like in the
    cluster bumps ``desired_version`` (in the same transaction); a successful reconcile
    records the version it applied in ``synced_version``. The pool is in sync when the two
    match and the last attempt did not fail, so a lost task is visible and the periodic
    resync picks it up.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="pools")
    kind = models.CharField(_("pool"), max_length=8, choices=PoolKind.choices)
    created_at = models.DateTimeField(auto_now_add=True)
    desired_version = models.PositiveBigIntegerField(default=1)
    synced_version = models.PositiveBigIntegerField(default=0)
    sync_error = models.TextField(blank=True)
    sync_error_transient = models.BooleanField(default=False)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_synced_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["tenant__slug", "-kind"]
        constraints = [models.UniqueConstraint(fields=["tenant", "kind"], name="pool_unique_kind")]

    def __str__(self) -> str:
        return f"{self.tenant.slug}/{self.kind}"

    @property
    def namespace(self) -> str:
        """The Kubernetes namespace of this pool, ``ty-<tenant>-<pool>``."""
        return namespace_name(self.tenant.slug, self.kind)

    @property
    def write_state(self) -> str:
        """What Trainyard's writes say: ``error`` (last attempt failed), ``pending``
        (change not yet applied) or ``in_sync`` (every change was applied, as far as the
        API calls went). Not what the cluster holds now: see :attr:`sync_state`."""
        if self.sync_error:
            return SyncState.ERROR
        if self.synced_version < self.desired_version:
            return SyncState.PENDING
        return SyncState.IN_SYNC

    @cached_property
    def in_cluster(self) -> bool:
        """The pool is set up in the cluster, as observed: the watcher has recorded its
        ResourceQuota in its namespace (``k8s_sync.selectors.pool_namespaces_observed``,
        the one rule; admission waits for it). Lists set it for all their pools in one
        query (``tenants.selectors.mark_in_cluster``)."""
        return self.namespace in pool_namespaces_observed([self.namespace])

    @property
    def sync_state(self) -> str:
        """The pool's state as shown: :attr:`write_state`, except that a pool whose writes
        all succeeded but whose namespace and quota the cluster does not show (never
        created, lost, deleted by hand) is ``missing``, never ``in_sync``."""
        state = self.write_state
        if state == SyncState.IN_SYNC and not self.in_cluster:
            return SyncState.MISSING
        return state


class Membership(models.Model):
    """A user's role in one tenant. Every tenant keeps at least one admin."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="memberships")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(_("role"), max_length=16, choices=MembershipRole.choices,
                            default=MembershipRole.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tenant__slug", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["user", "tenant"], name="membership_unique_user")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant} ({self.role})"

    @property
    def is_admin(self) -> bool:
        return self.role == MembershipRole.ADMIN


class PlatformRole(models.Model):
    """A platform-wide role (platform admin, finance) held by a user."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="platform_roles")
    role = models.CharField(_("role"), max_length=32, choices=PlatformRoleName.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["role", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["user", "role"], name="platform_role_unique")
        ]

    def __str__(self) -> str:
        return f"{self.user}: {self.role}"


class AuditEvent(models.Model):
    """Who changed what and when; written by services in the same transaction as the change."""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                              on_delete=models.SET_NULL, related_name="+")
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="audit_events")
    action = models.CharField(max_length=64, db_index=True)
    summary = models.CharField(max_length=500)  # English, for search, logs and the admin
    # the summary as a stored text (core.texts), shown in the reader's language; empty
    # for rows written before it existed (their English ``summary`` is shown)
    text = models.JSONField(default=str, blank=True)
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.action}: {self.summary}"

    @property
    def shown(self) -> StoredText:
        """What the audit page shows: the stored text, else the English summary."""
        return self.text or self.summary


class QuotaGrant(models.Model):
    """An approved amount of one catalog resource for one pool, with its history.

    Rows are never edited: a change supersedes the current row (``superseded_at`` set)
    and adds a new one, so the table is the history (who, when, why, from which request,
    until when). The current grant of a (pool, resource) is the row with
    ``superseded_at`` NULL; a partial unique index keeps it single.
    """

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="grants")
    resource = models.CharField(_("resource"), max_length=300)
    amount = models.DecimalField(_("amount"), max_digits=14, decimal_places=3)
    granted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    reason = models.TextField(_("reason"), blank=True)
    # the reason the system gave (a stored text shown in the reader's language; ``reason``
    # keeps its English); None when a person typed the reason
    reason_text = models.JSONField(null=True, blank=True)
    valid_until = models.DateTimeField(_("valid until"), null=True, blank=True)
    # Temporary grants: the amount to return to when ``valid_until`` passes.
    restore_amount = models.DecimalField(max_digits=14, decimal_places=3, null=True, blank=True)
    request = models.ForeignKey("QuotaRequest", null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="grants")
    created_at = models.DateTimeField(auto_now_add=True)
    superseded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["pool_id", "resource", "-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["pool", "resource"],
                                    condition=models.Q(superseded_at__isnull=True),
                                    name="quota_grant_one_current"),
        ]
        indexes = [models.Index(fields=["pool", "resource", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.pool} {self.resource}={self.amount}"

    @property
    def why(self) -> StoredText:
        return self.reason_text or self.reason


class NodeDedication(models.Model):
    """A node reserved for one tenant (labelled and tainted; its jobs tolerate it)."""

    node_name = models.CharField(_("node"), max_length=253, unique=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="dedicated_nodes")
    reason = models.TextField(_("reason"), blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["node_name"]

    def __str__(self) -> str:
        return f"{self.node_name} -> {self.tenant}"


class QuotaRequest(models.Model):
    """A request to change several resources of one pool at once, and its decision.

    Made by a tenant admin (or a member, if the tenant allows it), or proposed by the
    dynamic quota job (``source`` dynamic, with the ``formula`` that produced it). A
    platform admin approves (optionally with amended amounts) or rejects with a reason;
    the requester cannot decide their own request.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="quota_requests")
    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="quota_requests")
    source = models.CharField(max_length=16, choices=RequestSource.choices,
                              default=RequestSource.PERSON)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                     on_delete=models.SET_NULL, related_name="quota_requests")
    justification = models.TextField(_("justification"))
    formula = models.TextField(blank=True)
    valid_until = models.DateTimeField(_("valid until"), null=True, blank=True,
                                       help_text=_("Leave empty for a permanent change."))
    language = models.CharField(max_length=16, default="en")  # for the e-mail back
    status = models.CharField(max_length=16, choices=RequestStatus.choices,
                              default=RequestStatus.PENDING, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.TextField(blank=True)
    # What the system (not a person) wrote into ``justification`` / ``decision_note``, as
    # stored texts shown in the reader's language; the text fields keep the English.
    justification_text = models.JSONField(null=True, blank=True)
    decision_text = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"request #{self.pk} for {self.pool} ({self.status})"

    @property
    def why(self) -> StoredText:
        """The justification to show: a person's words, or the system's stored text."""
        return self.justification_text or self.justification

    @property
    def decision(self) -> StoredText:
        return self.decision_text or self.decision_note


class QuotaRequestItem(models.Model):
    """One resource of a request: the amount at the time, asked for, and approved."""

    request = models.ForeignKey(QuotaRequest, on_delete=models.CASCADE, related_name="items")
    resource = models.CharField(max_length=300)
    current_amount = models.DecimalField(max_digits=14, decimal_places=3)
    requested_amount = models.DecimalField(max_digits=14, decimal_places=3)
    approved_amount = models.DecimalField(max_digits=14, decimal_places=3, null=True,
                                          blank=True)

    class Meta:
        ordering = ["resource"]
        constraints = [models.UniqueConstraint(fields=["request", "resource"],
                                               name="quota_request_item_unique")]

    def __str__(self) -> str:
        return f"{self.resource}: {self.current_amount} -> {self.requested_amount}"


class QuotaLoan(models.Model):
    """Part of one pool's quota lent to another tenant's pool for a period.

    While active, the lender's effective quota is lower and the borrower's higher by
    ``amount``; grants are untouched, so the loan simply ends on ``ends_at``.
    """

    lender = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="loans_out")
    borrower = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="loans_in")
    resource = models.CharField(max_length=300)
    amount = models.DecimalField(max_digits=14, decimal_places=3)
    ends_at = models.DateTimeField(_("ends at"))
    note = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=LoanStatus.choices,
                              default=LoanStatus.PROPOSED, db_index=True)
    proposed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True,
                                    on_delete=models.SET_NULL, related_name="+")
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    # an offer not accepted by then expires (settings.TRAINYARD_LOAN_OFFER_HOURS)
    offer_expires_at = models.DateTimeField(null=True, blank=True)
    # why the offer could not be accepted when last tried (a stored text; "" if never)
    problem = models.JSONField(default=str, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.lender} lends {self.amount} {self.resource} to {self.borrower}"


class Notification(models.Model):
    """A message for one user in the portal (also sent by e-mail where it matters).

    ``text`` is a stored text (:mod:`core.texts`): a code and arguments rendered in the
    reader's language on the page, in the API and in the e-mail; rows from before it
    existed hold their old message as a plain string. ``message`` keeps the English
    rendering for the admin, logs and search.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="notifications")
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.CASCADE)
    message = models.CharField(max_length=500)
    text = models.JSONField(default=str, blank=True)
    link = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "read_at"])]

    def __str__(self) -> str:
        return self.message

    @property
    def shown(self) -> StoredText:
        return self.text or self.message


class UsageDaily(models.Model):
    """The daily peak and mean of what a pool had allocated, per catalog resource.

    Written by the usage sampler from observed pods; the history behind 30-day peaks,
    dynamic quota proposals and the request queue's facts.
    """

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="usage_days")
    resource = models.CharField(max_length=300)
    day = models.DateField()
    peak = models.DecimalField(max_digits=14, decimal_places=3, default=0)
    total = models.DecimalField(max_digits=20, decimal_places=3, default=0)  # sum of samples
    samples = models.PositiveIntegerField(default=0)
    utilised_total = models.DecimalField(max_digits=20, decimal_places=3, default=0)
    utilised_samples = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["pool", "resource", "day"],
                                               name="usage_daily_unique")]
        indexes = [models.Index(fields=["pool", "resource", "-day"])]

    def __str__(self) -> str:
        return f"{self.pool} {self.resource} {self.day}: peak {self.peak}"


class VolumeUse(models.Model):
    """When a dev-pool volume (PVC) was last mounted by a pod, for auto-reclaim."""

    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64)
    last_used_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["namespace", "name"],
                                               name="volume_use_unique")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} last used {self.last_used_at:%Y-%m-%d}"


class UsageSeries(models.Model):
    """A pool's use of one resource over one time bucket: the dashboards' time series.

    Three resolutions of the same shape: one row per minute (the sampler), per hour and
    per day (rolled up from the finer rows and kept up to date as minutes arrive).
    ``allocated`` and ``utilised`` are bucket means, ``peak`` the highest allocation
    seen, ``quota`` the pool's effective quota at the end of the bucket. Units are the
    catalog's: cores, GiB, cards (or instances). ``utilised`` is measured (DCGM): busy
    card-equivalents for ``gpu:*``/``mig:*``/``gpu-shared``, GiB of framebuffer for
    ``gpu-memory``; ``None`` where nothing measures it (CPU, memory) or the metrics
    source was down. Retention: minute rows ``TRAINYARD_USAGE_MINUTE_DAYS``, hourly rows
    ``TRAINYARD_USAGE_HOURLY_DAYS``, daily rows forever, so a 30-day chart reads 30
    daily (or 720 hourly) rows per resource.
    """

    MINUTE, HOUR, DAY = "m", "h", "d"
    RESOLUTIONS = [(MINUTE, _("minute")), (HOUR, _("hour")), (DAY, _("day"))]

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="usage_series")
    resource = models.CharField(max_length=300)
    resolution = models.CharField(max_length=1, choices=RESOLUTIONS)
    start = models.DateTimeField()
    allocated = models.FloatField(default=0)
    peak = models.FloatField(default=0)
    utilised = models.FloatField(null=True, blank=True)
    quota = models.FloatField(null=True, blank=True)
    samples = models.PositiveIntegerField(default=1)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["pool", "resource", "resolution", "start"],
                                               name="usage_series_unique")]
        indexes = [models.Index(fields=["resolution", "start"], name="usage_series_time"),
                   models.Index(fields=["pool", "resolution", "start"],
                                name="usage_series_pool_time")]

    def __str__(self) -> str:
        return f"{self.pool} {self.resource} {self.resolution}@{self.start:%Y-%m-%d %H:%M}"


class JobUtilisation(models.Model):
    """Measured GPU use of one job, accumulated by the minute sampler from DCGM metrics.

    Keyed by the pods' ``trainyard.io/job`` label (the TrainingJob id) and namespace, so
    the tenants app needs no import of jobs. ``gpu_samples`` counts (GPU, minute) pairs;
    the mean utilisation is ``util_sum / gpu_samples``. ``low_since`` is when the job's
    GPU utilisation last fell under 10% and stayed there (None while it is above).
    """

    namespace = models.CharField(max_length=253)
    job = models.CharField(max_length=253)
    gpu_samples = models.PositiveBigIntegerField(default=0)
    util_sum = models.FloatField(default=0)
    fb_used_sum_mib = models.FloatField(default=0)
    last_util = models.FloatField(default=0)
    low_since = models.DateTimeField(null=True, blank=True)
    first_sampled_at = models.DateTimeField()
    last_sampled_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["namespace", "job"],
                                               name="job_utilisation_unique")]
        # last_sampled_at: the cluster page's abnormal jobs read the rows sampled in the
        # last minutes, the retention drops rows unsampled for 60 days (no full scan of
        # every job of the last two months for either)
        indexes = [models.Index(fields=["job"], name="job_utilisation_job"),
                   models.Index(fields=["last_sampled_at"], name="job_utilisation_sampled")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.job}: {self.mean_util:.0f}%"

    @property
    def mean_util(self) -> float:
        return self.util_sum / self.gpu_samples if self.gpu_samples else 0.0
