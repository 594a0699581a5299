"""A job's frozen spec for the cluster (``k8s_sync.specs.JobSpec``), from its row and the
policy in force."""

from __future__ import annotations

from decimal import Decimal

from django.utils import timezone
from django.utils.translation import gettext as _

from core.choices import Tier
from core.models import Policy
from core.numbers import gib, quantity
from core.resources import by_kind
from jobs.choices import JobKind, JobState
from jobs.models import TrainingJob
from jobs.selectors.use import extended_per_worker
from jobs.selectors.windows import target_windows
from jobs.volume_iops import checkpoint_volume_attributes_class
from k8s_sync.maintenance import hold_tolerations
from k8s_sync.placement import dedicated_placement, switch_label
from k8s_sync.specs import JobSpec
from tenants import demand
from tenants.models import NodeDedication
from tenants.tiers import tier_rules


def job_spec(job: TrainingJob, *, policy: Policy | None = None,  # type: ignore[no-untyped-def]
             dedicated: bool | None = None):
    """The plain spec of the job's PyTorchJob or TrainJob (k8s_sync builds the manifest);
    also of an unsaved job, which is how submission proves it can be built
    (``jobs.contract``). ``policy`` and ``dedicated`` (whether the tenant has a dedicated
    node) when the caller has them already (a submission: ``jobs.submitcache``)."""
    policy = policy if policy is not None else Policy.current()
    rules = tier_rules(policy)[Tier(job.tier)]
    if dedicated is None:
        dedicated = NodeDedication.objects.filter(tenant=job.tenant).exists()
    placement = dedicated_placement(job.tenant.slug) if dedicated else {}
    window = target_windows(timezone.now()).get(job.pk) if job.pk is not None else None
    if window is not None:  # the target of a window: its pods tolerate the held nodes
        placement = {**placement, "tolerations": [*placement.get("tolerations", []),
                                                  *hold_tolerations(window)]}
    return JobSpec(
        # An unsaved job (submission checks it with this same code: jobs.contract) has no
        # id yet; 0 stands in for it.
        job_id=job.pk if job.pk is not None else 0, tenant_slug=job.tenant.slug,
        pool=job.pool.kind,  # type: ignore[arg-type]
        tier=Tier(job.tier), name_hint=job.name, image=job.image,
        command=tuple(job.command), args=tuple(job.args), env=dict(job.env),
        worker_replicas=job.workers - 1, gpus_per_replica=job.gpus_per_worker,
        gpu_product=job.gpu_model if not job.mig_profile else "",
        mig_profile=job.mig_profile,
        gpu_shared=bool(job.gpu_shared and job.gpus_per_worker and not job.mig_profile),
        gpu_memory_mib_per_card=(int(job.gpu_memory_gib_per_card * 1024)
                                 if job.gpu_memory_gib_per_card else None),
        # requests as tenants.demand defines them: what quota, admission and gauges count
        cpu_request=demand.cpu_request(job.cpu_per_worker),
        cpu_limit=job.cpu_per_worker,
        memory_request_gib=demand.memory_request_gib(job.memory_gib_per_worker),
        memory_limit_gib=job.memory_gib_per_worker,
        extended={by_kind(kind).node_resource: n for kind, n in extended_per_worker(
            lambda name: getattr(job, name, 0)).items() if n > 0},
        grace_seconds=rules.termination_grace_seconds, max_run_seconds=job.max_run_seconds,
        checkpoint_claim=job.checkpoint_claim,
        checkpoint_path=job.checkpoint_path,
        checkpoint_storage_class=job.checkpoint_storage_class if not job.checkpoint_claim
        else "",
        checkpoint_size_gib=job.checkpoint_size_gib if not job.checkpoint_claim else None,
        checkpoint_volume_attributes_class=checkpoint_volume_attributes_class(job),
        checkpoint_interval_seconds=rules.checkpoint_interval_seconds,
        resume=job.restart_count > 0, restart_count=job.restart_count,
        switch=job.switch if job.workers > 1 else "",
        switch_label=switch_label(policy.topology_levels),
        # Admitted: the nodes the engine counted the replicas on (pinned by node name, so
        # kube-scheduler cannot put them elsewhere); a resume re-renders the new ones.
        nodes=tuple(job.placement or ()) if job.state == JobState.ADMITTED else (),
        placement=placement, annotations=dict(job.annotations),
        suspend=job.state not in (JobState.ADMITTED, JobState.RUNNING),
        kind=job.kind or JobKind.PYTORCHJOB,
        runtime=job.runtime if job.kind == JobKind.TRAINJOB else "",
    )


def worker_resources(job: object) -> dict[str, Decimal]:
    """CPU and memory of one worker's pod as the cluster gets them (``job_spec`` renders
    the same requests and limits into every replica), from a TrainingJob or a cleaned
    submission: what was typed is the limit, the request is ``tenants.demand``'s, and the
    quota, admission, the gauges and the ResourceQuota count the requests (every page
    says both: ``worker_resources_text``)."""
    get = job.get if isinstance(job, dict) else lambda name: getattr(job, name, None)
    cpu = Decimal(str(get("cpu_per_worker") or 0))
    memory = Decimal(str(get("memory_gib_per_worker") or 0))
    return {"cpu_request": demand.cpu_request(cpu), "cpu_limit": cpu,
            "memory_request_gib": demand.memory_request_gib(memory),
            "memory_limit_gib": memory}


def worker_resources_text(resources: dict[str, Decimal]) -> dict[str, str]:
    """The per-worker lines every page shows (job form preview, job page), in the active
    language: ``cpu``, ``memory`` and ``counted`` (which of the two the quota counts)."""
    return {
        "cpu": _("CPU per worker: request %(request)s cores, limit %(limit)s cores") % {
            "request": quantity(resources["cpu_request"]),
            "limit": quantity(resources["cpu_limit"])},
        "memory": _("Memory per worker: request %(request)s, limit %(limit)s") % {
            "request": gib(resources["memory_request_gib"]),
            "limit": gib(resources["memory_limit_gib"])},
        "counted": counted_text(),
    }


def counted_text() -> str:
    """Which of request and limit the quota counts, in one sentence."""
    return _("Your quota counts the requests (every worker together); the limits cap each "
             "worker.")
