"""Trainyard's own admission engine as a backend: delegates to ``jobs.tasks`` and
``jobs.services``, where the engine's loop lives (nothing is moved here)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone

from core.choices import Tier
from core.models import Policy
from jobs import services
from jobs.choices import JobState
from jobs.models import TrainingJob
from tenants.tiers import tier_rules


class TrainyardBackend:
    name = "trainyard"

    def submit(self, job_id: int) -> None:
        services.schedule_sync(job_id)  # the PyTorchJob, suspended
        services.kick_admission()

    def cycle(self) -> dict[str, Any]:
        from jobs.tasks import admission_cycle
        return admission_cycle()  # type: ignore[no-any-return]

    def sync_job(self, task: Any, job_id: int) -> str:
        from jobs.tasks import sync_job
        return sync_job.run(job_id)  # type: ignore[no-any-return]

    def preempt(self, *, job_id: int, reason: Any, actor: Any = None) -> bool:
        job = TrainingJob.objects.filter(pk=job_id).only("tier").first()
        if job is None:
            return False
        grace = tier_rules(Policy.current())[Tier(job.tier)].termination_grace_seconds
        moved = services.job_transition(
            job_id=job_id, from_states=[JobState.RUNNING, JobState.ADMITTED],
            to_state=JobState.PREEMPTING, reason="Preempted", message=reason, actor=actor,
            preempt_reason=reason,
            preempt_deadline=timezone.now() + dt.timedelta(seconds=grace))
        if moved:
            services.schedule_sync(job_id)  # suspended: its pods get the grace
        return moved

    def sync_queues(self) -> None:
        return None
