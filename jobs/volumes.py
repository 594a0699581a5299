"""The jobs app's answer to the dev-volume reclaim (``tenants.signals.volumes_held``):
the checkpoint volumes of its active jobs are held, even while no pod mounts them."""

from __future__ import annotations

from typing import Any

from django.dispatch import receiver

from jobs.choices import ACTIVE_STATES
from jobs.models import TrainingJob
from k8s_sync.naming import job_name
from tenants.signals import volumes_held


def checkpoint_claims(job: Any) -> set[str]:
    """The PVC a job's checkpoints live on: the existing claim it names, or the
    ``<job>-ckpt`` claim Trainyard creates for it (``k8s_sync.specs.JobSpec``)."""
    if job.checkpoint_claim:
        return {job.checkpoint_claim}
    if job.checkpoint_storage_class:
        return {f"{job.k8s_name or job_name(job.pk, job.name)}-ckpt"}
    return set()


@receiver(volumes_held, dispatch_uid="jobs.checkpoint_volumes_held")
def checkpoint_volumes_held(sender: Any, pool: Any, **kwargs: Any) -> set[str]:
    """Checkpoint volumes of the pool's queued, admitted, running and preempting jobs."""
    held: set[str] = set()
    for job in TrainingJob.objects.filter(pool=pool, state__in=list(ACTIVE_STATES)).only(
            "pk", "name", "k8s_name", "checkpoint_claim", "checkpoint_storage_class"):
        held |= checkpoint_claims(job)
    return held
