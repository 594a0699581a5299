"""A job's log panel before its first pod runs, against kubesim over HTTP: "not started
yet", never "this pod no longer exists" for a pod that never existed (issue 29)."""

import pytest

from jobs import services
from jobs.tests.conftest import cycle
from jobs.tests.test_lifecycle import _submit, world  # noqa: F401 - the fixture
from tenants.access import access_for

pytestmark = pytest.mark.timeout(120)


def test_a_queued_job_has_not_started_and_a_cancelled_one_never_ran(world, cluster, login,  # noqa: F811
                                                                      api, bob, tenant_a):
    first = _submit(world, bob, tenant_a, "first", "production", "prod", world["h800"], gpus=8,
                    run_seconds=3600)
    waiting = _submit(world, bob, tenant_a, "second", "production", "prod", world["h800"],
                      gpus=8)
    cycle(world, cluster)
    cycle(world, cluster, 30)
    first.refresh_from_db()
    waiting.refresh_from_db()
    assert first.state == "running" and waiting.state == "queued"
    client = login(bob)
    url = f"/t/acme/jobs/{waiting.pk}/logs/"
    pod = f"{waiting.k8s_name}-master-0"
    page = client.get(f"/t/acme/jobs/{waiting.pk}/").content.decode()
    assert f'<option value="{pod}">' in page   # the panel offers the pod it will have
    data = client.get(url, {"pod": pod}).json()
    assert data["problem"] == "job_not_started" and data["lines"] == []
    assert data["message"] == ("The job has not started yet: logs appear when its first "
                               "pod runs.")
    assert data["detail"] == ""   # not the cluster's "not found"
    body = api(bob).get(f"/api/v1/tenants/acme/jobs/{waiting.pk}/logs/", {"pod": pod}).json()
    assert body["problem"] == "job_not_started"
    assert client.get(url, {"pod": pod, "download": "1"}).status_code == 409

    # the running job's pods exist: a pod of it that is not there is gone, said plainly
    gone = client.get(f"/t/acme/jobs/{first.pk}/logs/",
                      {"pod": f"{first.k8s_name}-worker-0"}).json()
    assert gone["problem"] == "gone"

    with world["capture"](execute=True):
        services.job_cancel(access=access_for(bob, tenant_a), actor=bob, job=waiting)
    ended = client.get(url, {"pod": pod}).json()
    assert ended["problem"] == "job_never_ran" and "no logs" in ended["message"]
