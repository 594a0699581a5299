"""Fifty simultaneous submissions from one tenant never admit beyond its quota."""

import threading

import pytest
from django.db import connection
from django.utils import timezone

from jobs import services
from jobs.models import TrainingJob
from jobs.tasks import admission_cycle
from k8s_sync.models import ObservedNode, ObservedQuota
from k8s_sync.naming import RESOURCE_QUOTA_NAME
from tenants.access import access_for


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="needs Postgres and row locks")
@pytest.mark.timeout(180)
def test_fifty_parallel_submissions_never_admit_beyond_the_quota(django_user_model, settings,
                                                                  monkeypatch):
    from tenants.models import Membership, PlatformRole, Pool, QuotaGrant, Tenant

    settings.TRAINYARD_CLUSTER = {"mode": "url", "url": "http://127.0.0.1:9",
                                  "request_timeout": 0.2}  # no cluster: sync fails fast
    now = timezone.now()
    for i in range(3):  # 24 GPUs of capacity, far more than the quota
        ObservedNode.objects.create(name=f"h{i}", uid=f"u{i}", resource_version="1",
                                    observed_at=now, gpu_model="NVIDIA-H800", gpu_count=8,
                                    ready=True, allocatable={"nvidia.com/gpu": "8",
                                                             "cpu": "96", "memory": "1Ti"})
    tenant = Tenant.objects.create(slug="busy", name="Busy", cost_center="c",
                                   contact_email="b@x.org",
                                   borrowing_cap=1)   # the grant binds: no borrowing
    pool = Pool.objects.create(tenant=tenant, kind="dev")
    # the pool is set up in the cluster: the watcher has recorded its ResourceQuota
    ObservedQuota.objects.create(namespace=pool.namespace, name=RESOURCE_QUOTA_NAME, uid="q",
                                 resource_version="1", observed_at=now)
    QuotaGrant.objects.create(pool=pool, resource="gpu:NVIDIA-H800", amount=8)
    # CPU and memory bind too (what is not granted is zero): enough for every job here
    QuotaGrant.objects.create(pool=pool, resource="cpu", amount=64)
    QuotaGrant.objects.create(pool=pool, resource="memory", amount=64)
    user = django_user_model.objects.create_user("eager")
    Membership.objects.create(user=user, tenant=tenant, role="member")
    admin = django_user_model.objects.create_user("root")
    PlatformRole.objects.create(user=admin, role="platform_admin")

    # Each worker process has its own cache in the worst case: only the database row lock
    # keeps cycles apart, so take the cache lock out of the picture.
    from django.core.cache import cache

    monkeypatch.setattr(cache, "add", lambda *a, **k: True)
    barrier, errors = threading.Barrier(50), []

    def submit(i: int) -> None:
        try:
            barrier.wait()
            services.job_submit(access=access_for(user, tenant), actor=user, pool="dev", data={
                "name": f"job-{i}", "image": "trainer:1", "tier": "development", "workers": 1,
                "gpus_per_worker": 1, "gpu_model": "NVIDIA-H800", "cpu_per_worker": 1,
                "memory_gib_per_worker": 1, "max_run_seconds": 3600})
            admission_cycle.apply()  # as a worker would, right after each submit
        except Exception as exc:  # collected and asserted below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    admission_cycle.apply()
    assert TrainingJob.objects.count() == 50
    admitted = TrainingJob.objects.filter(state="admitted")
    assert sum(j.workers * j.gpus_per_worker for j in admitted) == 8
    assert TrainingJob.objects.filter(state="queued").count() == 42
