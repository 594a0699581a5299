"""One job contract: whatever submission accepts, the cluster side can build.

``jobs.selectors.job_spec`` turns a TrainingJob into the ``k8s_sync.specs.JobSpec`` that
``sync_job`` renders (``k8s_sync.manifests.build_workload``: its PyTorchJob or TrainJob).
Submission runs the very
same code on the job it is about to create (an unsaved row), so a value the spec refuses
is refused at submission, against the field the researcher typed, and nothing is created.

``JobSpec`` raises ``ValueError`` whose message starts with the spec field's name
(``"env: 'MASTER_ADDR' is set by the training operator"``). :func:`field_of` maps it to
the submission's field generically: the spec field where the names differ
(:data:`SPEC_FIELDS`), else the same name when the job has such a field, else none (a
non-field error). A new spec field named like its TrainingJob field needs no entry here.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _

from jobs import selectors
from jobs.models import TrainingJob
from jobs.validation import SubmissionError
from k8s_sync import manifests
from tenants.models import Pool

#: Spec fields whose submission field has another name (see ``selectors.job_spec``).
SPEC_FIELDS: dict[str, str] = {
    "job_id": "name", "name_hint": "name",
    "gpus_per_replica": "gpus_per_worker", "gpu_product": "gpu_model",
    "cpu_request": "cpu_per_worker", "cpu_limit": "cpu_per_worker",
    "memory_request_gib": "memory_gib_per_worker", "memory_limit_gib": "memory_gib_per_worker",
    "shm_gib": "memory_gib_per_worker", "gpu_memory_mib_per_card": "gpu_memory_gib_per_card",
    "worker_replicas": "workers",
}
NON_FIELD = "__all__"


def field_of(error: ValueError) -> str:
    """The submission field a spec/manifest ``ValueError`` concerns (:data:`NON_FIELD`
    when it names none the researcher gave)."""
    head, sep, _rest = str(error).partition(":")
    name = head.strip() if sep else ""
    if name in SPEC_FIELDS:
        return SPEC_FIELDS[name]
    submitted = {f.name for f in TrainingJob._meta.get_fields()}
    return name if name in submitted else NON_FIELD


def spec_errors(error: ValueError) -> dict[str, str]:
    """``{field: message}`` for a spec's refusal, in words a researcher can act on (the
    spec's own words, which name the rule, follow)."""
    _head, sep, rest = str(error).partition(":")
    detail = (rest if sep and field_of(error) != NON_FIELD else str(error)).strip()
    return {field_of(error): _("The cluster cannot run this as given: %(problem)s") % {
        "problem": detail}}


def check_buildable(*, tenant: Any, pool: Any, clean: dict[str, Any],
                    annotations: dict[str, str] | None = None, policy: Any = None,
                    dedicated: bool | None = None) -> None:
    """Build the job's spec and manifests exactly as ``sync_job`` will (for the unsaved
    job these cleaned values make); raise :class:`SubmissionError` naming the field when
    the cluster side could not. ``pool`` is a Pool row or its kind; ``policy`` and
    ``dedicated`` as ``selectors.job_spec`` takes them (read there when not given)."""
    if isinstance(pool, str):
        pool = Pool.objects.get(tenant=tenant, kind=pool)
    job = TrainingJob(tenant=tenant, pool=pool, annotations=dict(annotations or {}), **clean)
    try:
        spec = selectors.job_spec(job, policy=policy, dedicated=dedicated)
        manifests.build_checkpoint_pvc(spec)
        manifests.build_workload(spec)
    except ValueError as exc:
        raise SubmissionError(spec_errors(exc)) from None
