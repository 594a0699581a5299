"""API serializers of the jobs app."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.utils import timezone
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.choices import PoolKind, Tier
from core.models import Policy
from core.resources import extended
from core.texts import render, text_code
from core.when import eta_text
from jobs import problem_text, progress
from jobs import validation as v
from jobs.choices import JobKind, JobState
from jobs.models import JobTransition, TrainingJob
from jobs.problems import words as problem_words
from jobs.selectors.eta import eta_accuracy
from jobs.selectors.spec import worker_resources
from jobs.texts import transition_reason_label
from k8s_sync.specs import MAX_RUN_SECONDS
from tenants.tiers import reclaim_grace_seconds


@extend_schema_field(OpenApiTypes.STR)
class RenderedTextField(serializers.Field):
    """A stored text (``core.texts``) rendered in the request's language (read only)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs["read_only"] = True
        super().__init__(**kwargs)

    def to_representation(self, value: Any) -> str:
        return render(value)


@extend_schema_field({"type": "string", "nullable": True})
class TextCodeField(serializers.Field):
    """The code of a stored text (machine-readable; the first part's for a list), or null
    for free text: what a person typed, a message from Kubernetes, a legacy row."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs["read_only"] = True
        super().__init__(**kwargs)

    def to_representation(self, value: Any) -> str | None:
        return text_code(value)


class JobTransitionSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor.username", default=None, read_only=True)
    reason = serializers.SerializerMethodField(
        help_text="The reason in the request's language.")
    reason_code = serializers.CharField(
        source="reason", read_only=True,
        help_text="The reason's code: Submitted, Admitted, Running, Preempted, Requeued, ...")
    message = RenderedTextField()
    message_code = TextCodeField(source="message")

    class Meta:
        model = JobTransition
        fields = ["from_state", "to_state", "reason", "reason_code", "message", "message_code",
                  "actor", "at"]

    def get_reason(self, obj: JobTransition) -> str:
        return transition_reason_label(obj.reason)


PROGRESS_SCHEMA = {
    "type": "object", "nullable": True,
    "properties": {
        "percent": {"type": "number", "nullable": True, "minimum": 0, "maximum": 100},
        "remaining_seconds": {"type": "integer", "nullable": True, "minimum": 0},
        "expected_end": {"type": "string", "format": "date-time", "nullable": True},
        "step": {"type": "integer", "nullable": True, "minimum": 0},
        "total_steps": {"type": "integer", "nullable": True, "minimum": 0},
        "metrics": {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"}, "value": {"type": "string"}}}},
        "reported_at": {"type": "string", "format": "date-time", "nullable": True},
        "source": {"type": "string", "enum": ["trainer_status", "log"]},
        "current": {"type": "boolean"},
    },
}
def _decimal3(value: Decimal) -> str:
    """A request as the model's decimal fields are written (three decimals)."""
    return f"{value.quantize(Decimal('0.001')):f}"


class JobSerializer(serializers.ModelSerializer):
    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    pool = serializers.CharField(source="pool.kind", read_only=True)
    namespace = serializers.CharField(source="pool.namespace", read_only=True)
    submitted_by = serializers.CharField(source="submitted_by.username", default=None,
                                         read_only=True)
    hold_reason = RenderedTextField()
    hold_reason_code = TextCodeField(source="hold_reason")
    wait_reason = RenderedTextField()
    wait_reason_code = TextCodeField(source="wait_reason")
    preempt_reason = RenderedTextField()
    preempt_reason_code = TextCodeField(source="preempt_reason")
    gpu_kind = serializers.CharField(
        read_only=True, help_text='"" (CPU only), "whole", "mig", "shared" (time-slicing/MPS '
                                  'shares) or "hami" (cards limited to gpu_memory_gib_per_card)')
    eta_p50_text = serializers.SerializerMethodField(
        help_text='eta_p50 for people: its day and time in the active time zone, e.g. '
                  '"tomorrow 03:10 UTC" ("" for none)')
    eta_p90_text = serializers.SerializerMethodField(help_text="eta_p90 likewise")
    progress = serializers.SerializerMethodField(
        help_text="What the job itself last reported of its progress (a TrainJob's "
                  "status.trainerStatus, Kubeflow Trainer 2.2+, or the TRAINYARD_PROGRESS line "
                  "of its rank-0 log; docs/guides/checkpoints.md), or null before any report: "
                  "percent (0-100), remaining_seconds as of reported_at, expected_end "
                  "(reported_at + remaining_seconds), step, total_steps, metrics "
                  "([{name, value}], values as text), source (trainer_status or log), "
                  "current (from its current run and fresh: the estimated starts of the jobs "
                  "waiting behind it use remaining_seconds).")
    cpu_request_per_worker = serializers.SerializerMethodField(
        help_text="The CPU (cores) each worker's pod requests, which the quota, admission, "
                  "the gauges and the ResourceQuota count; cpu_per_worker is its limit, "
                  "what was typed.")
    memory_request_gib_per_worker = serializers.SerializerMethodField(
        help_text="The memory (GiB) each worker's pod requests, which the quota counts; "
                  "memory_gib_per_worker is its limit, what was typed.")
    reclaim_grace_seconds = serializers.SerializerMethodField(
        help_text="When the job runs on borrowed idle capacity (a batch job, or a "
                  "development job admitted above its pool's quota): the seconds it gets to "
                  "checkpoint when the owner needs its quota back; null when it runs on its "
                  "own quota. Production never borrows.")

    problem = serializers.SerializerMethodField(
        help_text="What stops the job's pods as the cluster reports it, null when nothing "
                  "does (the state stays what admission says): code (image_missing, "
                  "image_invalid, image_denied, image_pull, config, unschedulable, "
                  "create_failed), the cluster's reason and message, pod, since, next "
                  "(requeue, fail, fail_now, readmit, failed) and at, attempt of attempts, "
                  "and text: all of it in the request's language.")
    last_error = serializers.SerializerMethodField(
        help_text="The cluster's last error about this job: a change it refused, else what "
                  "stopped its pods (reason: message), as written; \"\" for none.")

    @extend_schema_field({"type": "object", "nullable": True, "additionalProperties": True})
    def get_problem(self, job: TrainingJob) -> dict[str, Any] | None:
        shown = problem_text.shown(job)
        return shown.as_api(job.problem or {}) if shown is not None else None

    def get_last_error(self, job: TrainingJob) -> str:
        return job.last_error or problem_words(job.problem)

    def get_reclaim_grace_seconds(self, job: TrainingJob) -> int | None:
        policy = self.context.get("policy")
        if policy is None:
            policy = self.context["policy"] = Policy.current()
        return reclaim_grace_seconds(job.tier, job.borrowing, policy)

    @extend_schema_field(PROGRESS_SCHEMA)
    def get_progress(self, job: TrainingJob) -> dict[str, Any] | None:
        found = progress.shown(job, now=timezone.now())
        if found is None:
            return None
        out = found.as_dict()
        for key in ("reported_at", "expected_end"):  # as every other time of the API
            out[key] = serializers.DateTimeField().to_representation(out[key]) if out[
                key] is not None else None
        return out
    @extend_schema_field(serializers.DecimalField(max_digits=8, decimal_places=3))
    def get_cpu_request_per_worker(self, job: TrainingJob) -> str:
        return _decimal3(worker_resources(job)["cpu_request"])

    @extend_schema_field(serializers.DecimalField(max_digits=10, decimal_places=3))
    def get_memory_request_gib_per_worker(self, job: TrainingJob) -> str:
        return _decimal3(worker_resources(job)["memory_request_gib"])

    eta_accuracy = serializers.SerializerMethodField(
        help_text="For a queued job with an ETA: how far the ETAs shown in its pool (its "
                  "tier alone when it has enough samples) were right, for jobs admitted in "
                  "the last window_days: {samples, jobs, median_error_seconds (|p50 - "
                  "start|), median_relative_error (that over the median wait), "
                  "p90_coverage (share started by p90), window_days, tier, enough (samples "
                  "enough to judge)}; null otherwise")

    def get_eta_accuracy(self, job: TrainingJob) -> dict[str, Any] | None:
        if job.state != JobState.QUEUED or job.eta_p50 is None:
            return None
        memo = self.context.setdefault("eta_accuracy", {})
        key = (job.pool_id, job.tier)
        if key not in memo:
            memo[key] = eta_accuracy(job.pool_id, job.tier).as_dict()
        return memo[key]

    def get_eta_p50_text(self, job: TrainingJob) -> str:
        return eta_text(job.eta_p50)

    def get_eta_p90_text(self, job: TrainingJob) -> str:
        return eta_text(job.eta_p90)

    class Meta:
        model = TrainingJob
        fields = ["id", "name", "tenant", "pool", "namespace", "kind", "runtime", "k8s_name",
                  "tier", "state",
                  "image", "command", "args", "env", "workers", "gpus_per_worker", "gpu_model",
                  "mig_profile", "cpu_per_worker", "memory_gib_per_worker",
                  "cpu_request_per_worker", "memory_request_gib_per_worker", "max_run_seconds",
                  "checkpoint_claim", "checkpoint_storage_class", "checkpoint_size_gib",
                  "checkpoint_iops", "checkpoint_path", "priority", "held", "hold_reason",
                  "hold_reason_code", "borrowing", "reclaim_grace_seconds", "restart_count",
                  "submitted_by",
                  "submitted_at", "admitted_at",
                  "started_at", "finished_at", "position_in_pool", "position_in_model",
                  "eta_p50", "eta_p90", "eta_p50_text", "eta_p90_text", "eta_accuracy",
                  "wait_reason",
                  "wait_reason_code", "preempt_reason",
                  "preempt_reason_code", "preempt_deadline", "last_error", "problem",
                  "gpu_shared", "gpu_memory_gib_per_card", "gpu_kind", "progress",
                  *(d.job_field for d in extended())]


class JobInput(serializers.Serializer):
    """A submission; the service checks the values and names the field at fault. The
    bounds here are the widest a submission can have (``jobs.validation``); the largest
    node, the quota and the GPU models the cluster has narrow them further."""

    name = serializers.CharField(max_length=60)
    pool = serializers.ChoiceField(choices=PoolKind.choices)
    kind = serializers.ChoiceField(
        choices=JobKind.choices, required=False, default=JobKind.PYTORCHJOB,
        help_text="What the job runs as: a Kubeflow training-operator PyTorchJob (Master "
                  "plus Workers) or a Kubeflow Trainer v2 TrainJob (trainer.numNodes = "
                  "workers). Same quota, tiers, checkpoint contract and billing.")
    runtime = serializers.CharField(
        required=False, default="", allow_blank=True, max_length=253,
        help_text="A TrainJob's ClusterTrainingRuntime (empty: torch-distributed); empty "
                  "for a PyTorchJob.")
    tier = serializers.ChoiceField(choices=Tier.choices)
    image = serializers.CharField(max_length=500)
    command = serializers.ListField(child=serializers.CharField(max_length=v.MAX_VALUE_CHARS),
                                    required=False, default=list, max_length=v.MAX_ITEMS)
    args = serializers.ListField(child=serializers.CharField(max_length=v.MAX_VALUE_CHARS),
                                 required=False, default=list, max_length=v.MAX_ITEMS)
    env = serializers.DictField(
        child=serializers.CharField(allow_blank=True, max_length=v.MAX_VALUE_CHARS),
        required=False, default=dict,
        help_text=f"At most {v.MAX_ITEMS} variables; TRAINYARD_* and the training "
                  "operator's names are reserved.")
    workers = serializers.IntegerField(min_value=1, max_value=v.MAX_WORKERS)
    gpus_per_worker = serializers.IntegerField(default=0, min_value=0,
                                               max_value=v.MAX_GPUS_PER_WORKER)
    gpu_model = serializers.CharField(required=False, default="", allow_blank=True,
                                      max_length=200)
    mig_profile = serializers.CharField(required=False, default="", allow_blank=True,
                                        max_length=20)
    gpu_shared = serializers.BooleanField(
        required=False, default=False,
        help_text="gpus_per_worker are shares of a time-sliced/MPS card of gpu_model "
                  "(nvidia.com/gpu.shared).")
    gpu_memory_gib_per_card = serializers.DecimalField(
        max_digits=8, decimal_places=3, required=False, allow_null=True, default=None,
        min_value=Decimal("0.001"), max_value=v.MAX_GPU_MEMORY_GIB_PER_CARD,
        help_text="HAMi: limit each card to this much GPU memory (nvidia.com/gpumem); "
                  "null = whole cards.")
    cpu_per_worker = serializers.DecimalField(max_digits=8, decimal_places=3, default=4,
                                              min_value=Decimal("0.1"),
                                              max_value=v.MAX_CPU_PER_WORKER)
    memory_gib_per_worker = serializers.DecimalField(max_digits=10, decimal_places=3,
                                                     default=16, min_value=Decimal("0.25"),
                                                     max_value=v.MAX_MEMORY_GIB_PER_WORKER)
    max_run_seconds = serializers.IntegerField(min_value=60, max_value=MAX_RUN_SECONDS)
    expected_seconds = serializers.IntegerField(required=False, allow_null=True, default=None,
                                                min_value=1, max_value=MAX_RUN_SECONDS)
    checkpoint_claim = serializers.CharField(
        required=False, default="", allow_blank=True, max_length=253,
        help_text="An existing PVC of the tenant's for checkpoints.")
    checkpoint_storage_class = serializers.CharField(
        required=False, default="", allow_blank=True, max_length=253,
        help_text="Or: Trainyard creates a checkpoint PVC of this StorageClass with the job.")
    checkpoint_size_gib = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=1,
        max_value=v.MAX_CHECKPOINT_GIB,
        help_text=f"Size of the new checkpoint PVC (default {v.CHECKPOINT_GIB} GiB).")
    checkpoint_iops = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=1, max_value=10**9,
        help_text="Provisioned IOPS of the new checkpoint PVC: one of the tiers "
                  "(TRAINYARD_IOPS_TIERS), or null for the class's default. Counted against "
                  "the pool's IOPS grant of the class, the sum over its volumes.")
    checkpoint_path = serializers.CharField(
        required=False, default="/checkpoints", max_length=500,
        help_text="An absolute path of the container, not a system directory (/proc, /sys, "
                  "/dev, /etc, /var/run/secrets, ...).")
    annotations = serializers.DictField(
        child=serializers.CharField(max_length=v.MAX_VALUE_CHARS), required=False,
        default=dict,
        help_text="Simulator hints (kubesim.trainyard.io/*) are kept, others ignored; a "
                  "scheduler-owned key (trainyard.io/*, kueue.x-k8s.io/*) is refused.")
    labels = serializers.DictField(
        child=serializers.CharField(max_length=63, allow_blank=True), required=False,
        default=dict,
        help_text="Not applied (Trainyard labels the pods itself); a scheduler-owned key "
                  "(trainyard.io/*, kueue.x-k8s.io/*) is refused.")

    def validate_annotations(self, value: dict[str, str]) -> dict[str, str]:
        if len(value) > v.MAX_ITEMS:
            raise serializers.ValidationError(
                _("Give at most %(n)s annotations.") % {"n": v.MAX_ITEMS})
        return value


for _dim in extended():  # RDMA NICs ... per worker, declared once (core.resources)
    JobInput._declared_fields[_dim.job_field] = serializers.IntegerField(
        required=False, default=0, min_value=0, max_value=_dim.max_per_worker,
        help_text=f"{_dim.node_resource} per worker (its pods request it; the pool's "
                  f"{_dim.kind} quota counts workers x this).")


class HoldInput(serializers.Serializer):
    reason = serializers.CharField(max_length=2000)


class PriorityInput(serializers.Serializer):
    priority = serializers.IntegerField(min_value=-1000, max_value=1000)
    reason = serializers.CharField(max_length=2000)
