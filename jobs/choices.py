"""Enumerations of the jobs app."""

from django.db import models
from django.utils.translation import gettext_lazy as _

from core.choices import PoolKind, Tier


class JobState(models.TextChoices):
    QUEUED = "queued", _("Queued")
    ADMITTED = "admitted", _("Admitted")
    RUNNING = "running", _("Running")
    PREEMPTING = "preempting", _("Preempting")
    SUCCEEDED = "succeeded", _("Succeeded")
    FAILED = "failed", _("Failed")
    CANCELLED = "cancelled", _("Cancelled")


class JobKind(models.TextChoices):
    """What a job runs as in the cluster (``k8s_sync.specs.WORKLOAD_KINDS``)."""

    PYTORCHJOB = "pytorchjob", _("PyTorchJob (Kubeflow training operator)")
    TRAINJOB = "trainjob", _("TrainJob (Kubeflow Trainer v2)")


TERMINAL_STATES = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)
ACTIVE_STATES = (JobState.QUEUED, JobState.ADMITTED, JobState.RUNNING, JobState.PREEMPTING)


# Which pools a tier may run in.
TIER_POOLS = {Tier.PRODUCTION: (PoolKind.PROD,), Tier.DEVELOPMENT: (PoolKind.DEV,),
              Tier.BATCH: (PoolKind.PROD, PoolKind.DEV)}
