"""Nothing stuck, nothing silent, against kubesim over HTTP.

A job submitted before its pool is in the cluster waits for it (queued, holding no
quota), says why on its page and on the cluster page's abnormal list, and runs once the
pool is set up, which the waiting job itself asks for. A job admitted into a namespace
the cluster turns out not to have goes back to the queue with that reason instead of
holding its quota. The pool's state comes from what the cluster shows, not from what
Trainyard sent.
"""

import pytest
from django.urls import reverse

from core.texts import english
from jobs.models import TrainingJob
from jobs.tasks import admission_cycle
from jobs.tests.conftest import cycle as _cycle
from jobs.tests.conftest import states as _states
from jobs.tests.conftest import submission
from k8s_sync.client import get_client
from k8s_sync.observe import relist_all
from tenants import services as tenant_services
from tenants.tasks import reconcile_cluster, reconcile_pool

from .test_lifecycle import _model, _submit

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def early(cluster, platform_admin, tenant_a, django_capture_on_commit_callbacks):
    """tenant_a's dev pool has quota in the database, but its reconcile never ran (as in
    the first seconds of ``make run``): no namespace ``ty-acme-dev`` in the cluster."""
    reconcile_cluster.apply().get()  # the tiers' PriorityClasses
    h800 = _model(cluster, "H800")
    pool = tenant_a.pools.get(kind="dev")
    tenant_services.quota_set(actor=platform_admin, pool=pool, reason="test", amounts={
        f"gpu:{h800}": 8, "cpu": 128, "memory": 1024})  # its on-commit reconcile never runs
    relist_all(get_client())
    return {"h800": h800, "pool": pool, "capture": django_capture_on_commit_callbacks}


def test_a_job_submitted_before_its_pool_exists_waits_for_it_says_why_and_then_runs(
        early, cluster, bob, tenant_a, platform_admin, login, api):
    job = _submit(early, bob, tenant_a, "early-bird", "development", "dev", early["h800"],
                  gpus=1, run_seconds=600)
    job.refresh_from_db()
    assert job.state == "queued" and not job.in_cluster
    assert 'namespaces "ty-acme-dev" not found' in job.last_error
    # The failed create asked for the pool's reconcile, which applied it; until the
    # watcher records it, the pool is not shown "In sync"
    sync = api(bob).get("/api/v1/tenants/acme/pools/dev/").json()["sync"]
    assert sync["state"] == "missing" and sync["last_synced_at"]
    # the form's preview says the same as the loop will do: not now, and why
    preview = api(bob).post("/api/v1/tenants/acme/jobs/preview/", submission(
        name="another", pool="dev", gpu_model=early["h800"], gpus_per_worker=1),
        format="json").json()
    assert preview["starts_now"] is False and preview["eta_p50"] is None
    assert "waiting for its pool to be set up in the cluster" in preview["reason"]

    with early["capture"](execute=True):  # an admission pass before the watcher saw the pool:
        admission_cycle.apply().get()
    job.refresh_from_db()  # not admitted, holding nothing, saying why
    assert job.state == "queued" and job.admitted_at is None
    assert "waiting for its pool to be set up in the cluster" in english(job.wait_reason)
    assert list(job.transitions.values_list("to_state", flat=True)) == ["queued"]

    # its own page and the platform's abnormal list say why and what happens next
    page = login(bob).get(reverse("jobs:detail", kwargs={"slug": "acme", "pk": job.pk}))
    banner = page.content.decode().split('id="job-health"')[1].split("</div>")[0]
    assert "Waiting for its pool to be set up in the cluster." in banner
    assert 'namespaces &quot;ty-acme-dev&quot; not found' in banner
    assert "it is admitted once the cluster shows the pool (checked every 5 s" in banner
    cluster_page = login(platform_admin).get(reverse("cluster")).content.decode()
    row = cluster_page.split(f'data-job="{job.pk}"')[1].split("</tr>")[0]
    assert "acme/early-bird" in row and 'data-trouble="pool_absent"' in row
    assert "ty-acme-dev" in row and "Since" in row and "Nothing abnormal" not in cluster_page

    _cycle(early, cluster)  # the watcher has recorded the pool: admitted, created
    job.refresh_from_db()
    assert job.state == "admitted" and job.in_cluster and job.last_error == ""
    assert api(bob).get("/api/v1/tenants/acme/pools/dev/").json()["sync"]["state"] == "in_sync"
    _cycle(early, cluster, 30)
    assert _states(job) == ["running"]
    cluster_page = login(platform_admin).get(reverse("cluster")).content.decode()
    assert f'data-job="{job.pk}"' not in cluster_page and "Nothing abnormal" in cluster_page


def test_an_admitted_job_whose_namespace_is_missing_goes_back_to_the_queue(
        early, cluster, bob, tenant_a):
    reconcile_pool.apply(args=[early["pool"].pk]).get()
    relist_all(get_client())  # the pool is in the cluster, as observed ...
    # ... yet the cluster says its namespace is gone when the job is created, twice (at
    # submission and on admission), as when the namespace was lost after the watcher saw it
    cluster.faults.add(method="POST", path_regex=r"/ty-acme-dev/pytorchjobs$", status=404,
                       message='namespaces "ty-acme-dev" not found', times=2)
    # (the submission's own admission pass admits it, and its create fails)
    job = _submit(early, bob, tenant_a, "unlucky", "development", "dev", early["h800"], gpus=1)
    job = TrainingJob.objects.get(pk=job.pk)
    assert job.state == "queued" and job.admitted_at is None and not job.placement
    step = job.transitions.order_by("-at", "-id").first()
    assert (step.from_state, step.to_state, step.reason) == ("admitted", "queued", "PoolAbsent")
    assert "no namespace ty-acme-dev" in english(step.message)
    assert "a sync of the pool was requested" in english(step.message)
    assert "waiting for its pool" in english(job.wait_reason)
    _cycle(early, cluster)  # the namespace is there (the fault is spent): admitted again
    job.refresh_from_db()
    assert job.state == "admitted" and job.in_cluster and job.last_error == ""
