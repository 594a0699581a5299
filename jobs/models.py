"""Training jobs and their history.

A TrainingJob is one PyTorchJob (or Kubeflow Trainer v2 TrainJob: ``kind``) a researcher
submitted. Its life:
``queued -> admitted -> running -> succeeded | failed | cancelled`` and
``running -> preempting -> queued`` (resumed later from its checkpoint). Every change is
one JobTransition row: the audit log, the notification outbox and the billing source
(GPU-seconds are the sum of running intervals). Writes go through ``jobs.services``.
"""

from __future__ import annotations

import shlex

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from core.choices import Tier
from jobs.choices import ACTIVE_STATES, JobKind, JobState
from jobs.texts import transition_reason_label


class TrainingJob(models.Model):
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.PROTECT, related_name="jobs")
    pool = models.ForeignKey("tenants.Pool", on_delete=models.PROTECT, related_name="jobs")
    submitted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True,
                                     on_delete=models.SET_NULL, related_name="jobs")
    name = models.CharField(_("name"), max_length=60)
    k8s_name = models.CharField(max_length=63, blank=True)
    template = models.CharField(max_length=40, blank=True)
    # what it runs as: a PyTorchJob, or a TrainJob on the ClusterTrainingRuntime ``runtime``
    # (blank for a PyTorchJob; k8s_sync.specs.DEFAULT_TRAINING_RUNTIME when not given)
    kind = models.CharField(_("job kind"), max_length=16, choices=JobKind.choices,
                            default=JobKind.PYTORCHJOB)
    runtime = models.CharField(_("training runtime"), max_length=253, blank=True)
    # what to run
    image = models.CharField(_("image"), max_length=500)
    command = models.JSONField(default=list, blank=True)
    args = models.JSONField(default=list, blank=True)
    env = models.JSONField(default=dict, blank=True)
    # how much of what
    workers = models.PositiveIntegerField(_("workers"), default=1)  # replicas (pods), >= 1
    gpus_per_worker = models.PositiveIntegerField(_("GPUs per worker"), default=0)
    gpu_model = models.CharField(_("GPU model"), max_length=200, blank=True)
    mig_profile = models.CharField(_("MIG profile"), max_length=20, blank=True)
    # gpus_per_worker counts shares of a shared GPU (time-slicing or MPS,
    # nvidia.com/gpu.shared on nodes of gpu_model) instead of whole cards.
    gpu_shared = models.BooleanField(_("shared GPU"), default=False)
    # An explicit GPU-memory limit per card (HAMi's nvidia.com/gpumem), when the cluster
    # runs HAMi; None: the card's (or slice's, or share's) own memory.
    gpu_memory_gib_per_card = models.DecimalField(_("GPU memory GiB per card"), max_digits=8,
                                                  decimal_places=3, null=True, blank=True)
    cpu_per_worker = models.DecimalField(_("CPU cores per worker"), max_digits=8,
                                         decimal_places=3, default=4)
    rdma_per_worker = models.PositiveSmallIntegerField(_("RDMA NICs per worker"), default=0)
    memory_gib_per_worker = models.DecimalField(_("memory GiB per worker"), max_digits=10,
                                                decimal_places=3, default=16)
    tier = models.CharField(_("tier"), max_length=16, choices=Tier.choices)
    max_run_seconds = models.PositiveIntegerField(_("maximum run time (seconds)"))
    expected_seconds = models.PositiveIntegerField(null=True, blank=True)
    checkpoint_claim = models.CharField(_("checkpoint volume"), max_length=253, blank=True)
    checkpoint_path = models.CharField(_("checkpoint path"), max_length=500,
                                       default="/checkpoints")
    checkpoint_size_gib = models.PositiveIntegerField(null=True, blank=True)
    checkpoint_storage_class = models.CharField(max_length=253, blank=True)
    # the new volume's provisioned IOPS (a tier; null: the class's default), counted
    # against the pool's IOPS grant of the class (tenants.storage)
    checkpoint_iops = models.PositiveIntegerField(null=True, blank=True)
    annotations = models.JSONField(default=dict, blank=True)  # e.g. simulator hints
    # where it stands
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.QUEUED,
                             db_index=True)
    priority = models.IntegerField(default=0)
    held = models.BooleanField(default=False)
    # Stored texts (core.texts): {"code", "args"}, a list of them, or a plain string (a
    # reason a person typed, a message from Kubernetes, a row from before codes); shown with
    # ``|render_text`` / ``core.texts.render`` in the reader's language.
    hold_reason = models.JSONField(default=str, blank=True)
    borrowing = models.BooleanField(default=False)
    # the quota loan it was admitted on (its pool's use above the pool's own grant): when
    # the loan ends, admission may reclaim the job for whoever needs the room
    loan = models.ForeignKey("tenants.QuotaLoan", null=True, blank=True,
                             on_delete=models.SET_NULL, related_name="jobs")
    placement = models.JSONField(default=list, blank=True)  # node per replica, when admitted
    switch = models.CharField(max_length=200, blank=True)
    restart_count = models.PositiveIntegerField(default=0)
    preempt_deadline = models.DateTimeField(null=True, blank=True)
    preempt_reason = models.JSONField(default=str, blank=True)
    submitted_at = models.DateTimeField(auto_now_add=True)
    admitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # What the job itself last reported of its progress (jobs.progress: a Trainer v2
    # TrainJob's status.trainerStatus, or the TRAINYARD_PROGRESS line of its rank-0 log):
    # {percent, remaining_seconds, step, total_steps, metrics: [{name, value}], reported_at,
    # observed_at, source}; None until it reports.
    progress = models.JSONField(null=True, blank=True, default=None)
    # the admission engine's view of a waiting job, refreshed every cycle
    position_in_pool = models.PositiveIntegerField(null=True, blank=True)
    position_in_model = models.PositiveIntegerField(null=True, blank=True)
    eta_p50 = models.DateTimeField(null=True, blank=True)
    eta_p90 = models.DateTimeField(null=True, blank=True)
    wait_reason = models.JSONField(default=str, blank=True)   # a stored text
    # the cluster side
    in_cluster = models.BooleanField(default=False)   # the PyTorchJob (TrainJob) was created
    cluster_suspended = models.BooleanField(default=True)
    last_error = models.TextField(blank=True)
    # What stops its pods as the cluster reports it (jobs.problems: code, the cluster's
    # reason and message, since, the next step and when); None when nothing does.
    problem = models.JSONField(null=True, blank=True, default=None)
    # Kueue mode: the evictions of its Workload it last saw, per "reason/underlyingCause"
    # (status.schedulingStats.evictions): each new one is recorded as a transition, even
    # one undone between two passes (jobs.backends.kueue_evictions)
    kueue_evictions = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-submitted_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="job_unique_name"),
        ]
        indexes = [
            models.Index(fields=["state"], name="job_active_state",
                         condition=models.Q(state__in=list(ACTIVE_STATES))),
            models.Index(fields=["tenant", "-submitted_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.tenant.slug}/{self.name} ({self.state})"

    @property
    def replicas(self) -> int:
        return self.workers

    @property
    def command_line(self) -> str:
        """The command and its arguments as a shell would take them (quoted where needed,
        so copying it into a terminal or the form runs the same thing)."""
        return shlex.join([*(self.command or []), *(self.args or [])])

    @property
    def total_gpus(self) -> int:
        return self.workers * self.gpus_per_worker

    @property
    def gpu_kind(self) -> str:
        """What the GPUs per worker are: "" (CPU only), "whole" cards, "mig" slices,
        "shared" (shares of time-sliced/MPS cards) or "hami" (cards limited to
        ``gpu_memory_gib_per_card`` by HAMi)."""
        if not self.gpus_per_worker:
            return ""
        if self.mig_profile:
            return "mig"
        if self.gpu_shared:
            return "shared"
        return "hami" if self.gpu_memory_gib_per_card else "whole"

    @property
    def resource_key(self) -> str:
        """The quota resource this job's accelerators count against ("" for CPU only)."""
        if self.mig_profile:
            return f"mig:{self.mig_profile}"
        return f"gpu:{self.gpu_model}" if self.gpus_per_worker else ""

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_STATES


class JobTransition(models.Model):
    """One change of a job's state: the audit log, the outbox and the billing source."""

    job = models.ForeignKey(TrainingJob, on_delete=models.CASCADE, related_name="transitions")
    from_state = models.CharField(max_length=16, blank=True)
    to_state = models.CharField(max_length=16)
    reason = models.CharField(max_length=100)   # a short code; shown as ``reason_label``
    message = models.JSONField(default=str, blank=True)   # a stored text
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                              on_delete=models.SET_NULL, related_name="+")
    # When it happened: for what the cluster reports (running, succeeded, failed) the
    # cluster's own time (a condition's lastTransitionTime, a container's startedAt or
    # finishedAt), for Trainyard's own decisions the moment it made them. The billing
    # source. ``observed_at`` is when Trainyard recorded it (None on rows from before it
    # existed: the same as ``at``); a late one (recorded after its month was closed) is
    # billed on the next open invoice.
    at = models.DateTimeField(db_index=True)
    observed_at = models.DateTimeField(null=True, blank=True, db_index=True)
    # When the billing ledger took it in (None: not yet; ``billing.services.
    # ledger_ingest_gpu`` reads the unmarked ones through the partial index below)
    processed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["processed_at"], name="transition_unprocessed",
                                condition=models.Q(processed_at__isnull=True))]

    def __str__(self) -> str:
        return f"{self.job_id}: {self.from_state or '-'} -> {self.to_state} ({self.reason})"

    @property
    def reason_label(self) -> str:
        """The reason code's label in the active language (the code itself if unknown)."""
        return transition_reason_label(self.reason)

    @property
    def to_state_label(self) -> str:
        """The state's display name in the active language (the raw value if unknown)."""
        try:
            return str(JobState(self.to_state).label)
        except ValueError:
            return self.to_state


class AdmissionState(models.Model):
    """One row, locked by each admission cycle so cycles never overlap (several workers)."""

    last_cycle_at = models.DateTimeField(null=True, blank=True)
    last_cycle_ms = models.FloatField(default=0)
    last_decisions = models.JSONField(default=dict, blank=True)
    # The last pass that also explained the queue (positions, ETAs, reasons), and what that
    # pass cost: passes explain every TRAINYARD_EXPLAIN_SECONDS at most (jobs.tasks).
    explained_at = models.DateTimeField(null=True, blank=True)
    explain_ms = models.FloatField(default=0)
    # The admission service (jobs.service) that decides while its lease lasts: one per
    # cluster; the Celery cycle leaves the deciding to it then. ``drift``: the active jobs
    # its memory held differently from the database, found by its full reads and healed.
    leader = models.CharField(max_length=200, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    drift = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"admission cycle at {self.last_cycle_at}"


class MaintenanceWindow(models.Model):
    """A window in which preemptible jobs are moved so whole nodes free up (defrag)."""

    class Status(models.TextChoices):
        SCHEDULED = "scheduled", _("Scheduled")
        APPLIED = "applied", _("Applied")
        CANCELLED = "cancelled", _("Cancelled")

    gpu_model = models.CharField(_("GPU model"), max_length=200)
    nodes_wanted = models.PositiveIntegerField(_("whole nodes to free"))
    starts_at = models.DateTimeField(_("starts at"))
    ends_at = models.DateTimeField(_("ends at"))
    reason = models.TextField(_("reason"), blank=True)
    plan = models.JSONField(default=dict, blank=True)  # the plan as reviewed
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.SCHEDULED)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    applied_at = models.DateTimeField(null=True, blank=True)
    # nodes cordoned for the window (released when it ends)
    nodes = models.JSONField(default=list, blank=True)
    released_at = models.DateTimeField(null=True, blank=True)
    # the job the freed nodes are held for: it alone may run there during the window
    target_job = models.ForeignKey("jobs.TrainingJob", null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+",
                                   verbose_name=_("held for job"))

    class Meta:
        ordering = ["-starts_at"]

    def __str__(self) -> str:
        return f"defrag {self.gpu_model} x{self.nodes_wanted} at {self.starts_at:%Y-%m-%d %H:%M}"


class IdleWhileWaiting(models.Model):
    """Units of a resource key idle while a job that fits them waited, per minute and
    cause (``jobs.admission.waste``), in unit-seconds: GPU-seconds for ``gpu:`` keys,
    instance-seconds for ``mig:``, share-seconds for ``shared:``. Written by the admission
    loop on every pass that explains (``jobs.idle_waiting.idle_waiting_record``, an upsert
    that adds). The row of ``cause`` "" carries the key's idle and capacity unit-seconds of
    the minute (its ``waiting_seconds`` is 0), so a share of capacity can be shown."""

    minute = models.DateTimeField()
    key = models.CharField(max_length=200)
    cause = models.CharField(max_length=16, blank=True)
    waiting_seconds = models.FloatField(default=0)
    idle_seconds = models.FloatField(default=0)
    capacity_seconds = models.FloatField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["minute", "key", "cause"],
                                               name="jobs_idle_waiting_minute_key_cause")]

    def __str__(self) -> str:
        return f"{self.minute:%Y-%m-%d %H:%M} {self.key} {self.cause or 'total'}"


class EtaRecord(models.Model):
    """One ETA a waiting job was shown (``jobs.eta_records``): at its first explanation and
    at each one that moved it by more than a tolerance; ``started_at`` is filled when the
    job is next admitted (the start the engine's ETA predicts). The accuracy of recent
    estimates (``jobs.selectors.eta_accuracy``) is read from these rows; rows older than
    ``RETENTION_DAYS`` are pruned."""

    RETENTION_DAYS = 30

    job = models.ForeignKey(TrainingJob, on_delete=models.CASCADE, related_name="+")
    pool = models.ForeignKey("tenants.Pool", on_delete=models.CASCADE, related_name="+")
    tier = models.CharField(max_length=16, choices=Tier.choices)
    predicted_at = models.DateTimeField()
    eta_p50 = models.DateTimeField()
    eta_p90 = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["pool", "started_at"], name="eta_record_pool_started"),
            models.Index(fields=["job"], name="eta_record_open",
                         condition=models.Q(started_at__isnull=True)),
            models.Index(fields=["predicted_at"], name="eta_record_predicted"),
        ]

    def __str__(self) -> str:
        return f"{self.job_id}: {self.eta_p50:%Y-%m-%d %H:%M} at {self.predicted_at:%H:%M}"
