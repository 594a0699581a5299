"""A job the cluster refuses for good (invalid, forbidden) fails with the cluster's words
instead of waiting forever; a refusal a retry may cure leaves it queued."""

from __future__ import annotations

from django.utils import translation

from core.texts import english
from jobs.models import TrainingJob

from .test_lifecycle import _cycle, _submit, world  # noqa: F401  (the kubesim world)


def test_a_refused_job_fails_with_the_clusters_reason(world, cluster, bob, tenant_a):  # noqa: F811
    cluster.faults.add(method="POST", path_regex=r"/pytorchjobs$", status=422, times=1)
    job = _submit(world, bob, tenant_a, "refused", "development", "dev", world["h800"], gpus=1)
    job.refresh_from_db()
    assert job.state == "failed" and not job.in_cluster
    step = job.transitions.order_by("-at", "-id").first()
    assert (step.from_state, step.to_state, step.reason) == ("queued", "failed", "Rejected")
    assert english(step.message).startswith("The cluster refused the job (422 ")
    with translation.override("zh-hans"):
        assert step.reason_label == "被集群拒绝"
    _cycle(world, cluster)  # admission never admits it
    assert TrainingJob.objects.get(pk=job.pk).state == "failed"


def test_a_missing_namespace_is_not_a_refusal(world, cluster, bob, tenant_a):  # noqa: F811
    cluster.faults.add(method="POST", path_regex=r"/pytorchjobs$", status=404, times=1)
    job = _submit(world, bob, tenant_a, "later", "development", "dev", world["h800"], gpus=1)
    job.refresh_from_db()
    assert job.state in ("queued", "admitted")
    _cycle(world, cluster)  # a later sync creates it
    job.refresh_from_db()
    assert job.in_cluster and job.state != "failed" and job.last_error == ""
