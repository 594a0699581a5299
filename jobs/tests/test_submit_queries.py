"""A submission's cost in queries is pinned, and what it keeps between submissions
(``jobs.submitcache``) is read again as soon as the database changes."""

import datetime as dt
from decimal import Decimal

import pytest
from django.utils import timezone

from core.exceptions import ApplicationError, Conflict
from jobs import services, submitcache
from jobs.choices import JobState
from jobs.models import JobTransition, TrainingJob
from jobs.tests.conftest import H800, cap_borrowing, submission
from k8s_sync.models import ObservedNode, ObservedStorageClass
from tenants import services as tenant_services
from tenants.access import access_for
from tenants.choices import LoanStatus
from tenants.models import QuotaGrant, QuotaLoan

#: statements of one submission once the snapshot is warm: the pool, whether the name is
#: taken and the snapshot's marker in one, then BEGIN, the job, its k8s name, its
#: transition, COMMIT (SQLite and Postgres alike; BEGIN and COMMIT are counted). It was 14
#: before the snapshot.
SUBMIT_QUERIES = 6


def _submit(user, tenant, pool="dev", **overrides):
    return services.job_submit(access=access_for(user, tenant), actor=user, pool=pool,
                               data=submission(**overrides))


def test_one_submission_takes_a_fixed_number_of_queries(bob, quota, django_assert_max_num_queries,
                                                        django_capture_on_commit_callbacks):
    _submit(bob, quota, name="warm")
    access = access_for(bob, quota)
    with django_capture_on_commit_callbacks() as callbacks, \
            django_assert_max_num_queries(SUBMIT_QUERIES):
        job = services.job_submit(access=access, actor=bob, pool="dev",
                                  data=submission(name="second"))
    # the same rows and the same on-commit tasks as ever: its PyTorchJob, an admission pass
    assert job.state == JobState.QUEUED and job.k8s_name.startswith(f"tj-{job.pk}-")
    assert list(JobTransition.objects.filter(job=job).values_list("to_state", "reason")) == [
        ("queued", "Submitted")]
    assert len(callbacks) == 2


def test_the_query_count_does_not_grow_with_the_cluster_or_the_tenants(
        bob, quota, tenant_b, django_assert_max_num_queries):
    _submit(bob, quota, name="warm")
    now = timezone.now()
    ObservedNode.objects.bulk_create([ObservedNode(
        name=f"extra-{i}", uid=f"x{i}", resource_version="1", observed_at=now,
        gpu_product=H800, gpu_model=H800, gpu_count=8, ready=True,
        allocatable={"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"})
        for i in range(50)])
    _submit(bob, quota, name="rewarm")  # the snapshot is read again once
    access = access_for(bob, quota)
    with django_assert_max_num_queries(SUBMIT_QUERIES):
        services.job_submit(access=access, actor=bob, pool="dev",
                            data=submission(name="third"))


def test_a_duplicate_name_is_still_a_conflict_after_the_other_checks(bob, quota):
    _submit(bob, quota)
    with pytest.raises(ApplicationError) as err:   # a bad field is named first, as before
        _submit(bob, quota, workers=0)
    assert err.value.field == "workers"
    with pytest.raises(Conflict, match="exists already"):
        _submit(bob, quota, name="  llama-ft ")      # the name as validation cleans it
    assert TrainingJob.objects.count() == 1


def test_a_lowered_quota_is_seen_by_the_next_submission(bob, platform_admin, quota):
    cap_borrowing(quota)   # development may not borrow: the grant is its limit
    _submit(bob, quota, name="before", gpus_per_worker=4)
    tenant_services.quota_set(actor=platform_admin, pool=quota.pools.get(kind="dev"),
                              reason="test", amounts={f"gpu:{H800}": 2})
    with pytest.raises(ApplicationError, match="could never start") as err:
        _submit(bob, quota, name="after", gpus_per_worker=4)
    assert err.value.field == "gpus_per_worker"


def test_a_removed_quota_key_is_seen_by_the_next_submission(bob, quota):
    cap_borrowing(quota)   # development may not borrow: the grant is its limit
    _submit(bob, quota, name="before", mig_profile="1g.10gb", gpu_model="", gpus_per_worker=1)
    # as quota_set removes a key no node offers any more: the grant superseded, no new row
    QuotaGrant.objects.filter(pool__tenant=quota, resource="mig:1g.10gb").update(
        superseded_at=timezone.now())
    with pytest.raises(ApplicationError, match="could never start"):
        _submit(bob, quota, name="after", mig_profile="1g.10gb", gpu_model="",
                gpus_per_worker=1)


def test_nodes_observed_or_gone_are_seen_by_the_next_submission(bob, quota):
    _submit(bob, quota, name="before", gpus_per_worker=8)
    ObservedNode.objects.filter(gpu_model=H800).delete()
    with pytest.raises(ApplicationError, match="no GPU model") as err:
        _submit(bob, quota, name="gone", gpus_per_worker=8)
    assert err.value.field == "gpu_model"
    ObservedNode.objects.create(
        name="h800-new", uid="hn", resource_version="1", observed_at=timezone.now(),
        gpu_product=H800, gpu_model=H800, gpu_count=4, gpu_memory_mib=81920, ready=True,
        allocatable={"cpu": "192", "memory": "2Ti", "nvidia.com/gpu": "4"})
    with pytest.raises(ApplicationError, match="the largest has 4"):
        _submit(bob, quota, name="smaller", gpus_per_worker=8)
    assert _submit(bob, quota, name="fits", gpus_per_worker=4).state == JobState.QUEUED


def test_a_storage_class_observed_later_is_seen(bob, quota):
    with pytest.raises(ApplicationError) as err:
        _submit(bob, quota, name="before", checkpoint_storage_class="fast")
    assert err.value.field == "checkpoint_storage_class"
    ObservedStorageClass.objects.create(name="fast", uid="sc1", resource_version="1",
                                        observed_at=timezone.now(), provisioner="x")
    job = _submit(bob, quota, name="after", checkpoint_storage_class="fast")
    assert job.checkpoint_storage_class == "fast"


def test_policy_dedications_and_loans_are_read_again_when_they_change(
        bob, platform_admin, quota, tenant_b):
    pool = quota.pools.get(kind="dev")
    first = submitcache.snapshot()
    assert submitcache.snapshot() is first      # nothing changed: kept
    tenant_services.policy_update(actor=platform_admin, overcommit_factors={"gpu": 3})
    second = submitcache.snapshot()
    assert second is not first and second.policy.overcommit_factors == {"gpu": 3}
    tenant_services.node_dedicate(access=access_for(platform_admin, quota),
                                  actor=platform_admin, node_name="h800-0")
    third = submitcache.snapshot()
    assert quota.pk in third.dedicated and quota.pk not in second.dedicated
    assert third.effective_grants(pool)[f"gpu:{H800}"] == 8
    loan = QuotaLoan.objects.create(
        lender=tenant_b.pools.get(kind="dev"), borrower=pool, resource=f"gpu:{H800}",
        amount=Decimal(3), ends_at=timezone.now() + dt.timedelta(days=1),
        status=LoanStatus.ACTIVE, started_at=timezone.now())
    assert submitcache.snapshot().effective_grants(pool)[f"gpu:{H800}"] == 11
    loan.status, loan.ended_at = LoanStatus.ENDED, timezone.now()
    loan.save(update_fields=["status", "ended_at"])
    assert submitcache.snapshot().effective_grants(pool)[f"gpu:{H800}"] == 8
