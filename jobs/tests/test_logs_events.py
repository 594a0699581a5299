"""A running job's page against kubesim over HTTP: its pods' logs (portal and API, scoped to
the tenant and the job), the cluster's events through the observer, per-pod GPU utilisation,
and the pods' truth after a cancel."""

import datetime as dt
import re

import pytest
from django.utils import timezone

from core.when import when_text
from jobs.tests.conftest import cycle
from jobs.tests.test_lifecycle import _submit, world  # noqa: F401 - the fixture
from k8s_sync.client import get_client
from k8s_sync.observe import relist_all
from tenants.series import usage_sample

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def running(world, cluster, bob, tenant_a):  # noqa: F811 - the fixture above
    job = _submit(world, bob, tenant_a, "llama", "development", "dev", world["h800"], gpus=2,
                  run_seconds=3600)
    cycle(world, cluster)
    cluster.advance(700, step=50)
    cycle(world, cluster)
    job.refresh_from_db()
    assert job.state == "running"
    return job


def test_logs_of_the_jobs_own_pods_only(running, login, api, alice, charlie, settings):
    pod = f"{running.k8s_name}-master-0"
    url = f"/t/acme/jobs/{running.pk}/logs/"
    client = login(alice)
    data = client.get(url, {"pod": pod}).json()
    assert data["problem"] == "" and data["active"] is True
    text = "\n".join(line["text"] for line in data["lines"])
    assert "torchrun: MASTER_ADDR=" in text and "saved checkpoint step" in text
    assert not any(re.match(r"^\S+\.\d{9}Z ", line["text"]) for line in data["lines"])
    # each line's time: the cluster's stamp, in the one format of times (core.when)
    times = [dt.datetime.fromisoformat(line["at"]) for line in data["lines"]]
    assert times == sorted(times) and all(
        line["when"] == when_text(at, seconds=True) for line, at in zip(data["lines"], times,
                                                                        strict=True))
    assert data["today"] == timezone.localdate().isoformat()
    # following: only what came after the last line shown
    assert client.get(url, {"pod": pod, "after": data["last"]}).json()["lines"] == []
    page = client.get(f"/t/acme/jobs/{running.pk}/").content.decode()
    assert f'<option value="{pod}">' in page and 'data-logs-url="' + url in page

    previous = client.get(url, {"pod": pod, "previous": "1"}).json()
    assert previous["problem"] == "no_previous" and previous["lines"] == []
    assert "previous terminated container" in previous["detail"] and previous["message"]

    download = client.get(url, {"pod": pod, "download": "1"})
    assert download.status_code == 200
    assert download["Content-Disposition"] == f'attachment; filename="{pod}.log"'
    assert download.content.decode().count("\n") >= len(data["lines"])
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z \[", download.content.decode())

    body = api(alice).get(f"/api/v1/tenants/acme/jobs/{running.pk}/logs/",
                          {"pod": pod, "tail": 3}).json()
    assert body["problem"] == "" and body["text"].count("\n") == 3
    assert api(alice).get(f"/api/v1/tenants/acme/jobs/{running.pk}/logs/",
                          {"pod": pod, "tail": "x"}).status_code == 400

    # another tenant's job, a pod not the job's, no pod: 404
    assert login(charlie).get(url, {"pod": pod}).status_code == 404
    assert api(charlie).get(f"/api/v1/tenants/acme/jobs/{running.pk}/logs/",
                            {"pod": pod}).status_code == 404
    for other in ("tj-999-other-master-0", "kube-apiserver", f"{running.k8s_name}-evil", ""):
        assert login(alice).get(url, {"pod": other}).status_code == 404
        assert api(alice).get(f"/api/v1/tenants/acme/jobs/{running.pk}/logs/",
                              {"pod": other}).status_code == 404

    # a Worker that does not exist (the job has none): the pod is gone, said plainly
    gone = login(alice).get(url, {"pod": f"{running.k8s_name}-worker-0"}).json()
    assert gone["problem"] == "gone" and gone["message"]

    # the cluster unreachable: a clear message, never a 500
    settings.TRAINYARD_CLUSTER = {"mode": "url", "url": "http://127.0.0.1:9"}
    down = login(alice).get(url, {"pod": pod})
    assert down.status_code == 200 and down.json()["problem"] == "unreachable"
    assert login(alice).get(url, {"pod": pod, "download": "1"}).status_code == 409


def test_events_utilisation_and_cancel_on_the_job_page(running, cluster, login, alice,
                                                        django_capture_on_commit_callbacks):
    client = login(alice)
    # the observer (over HTTP) keeps the job's and its pods' events
    page = client.get(f"/t/acme/jobs/{running.pk}/").content.decode()
    events = page[page.index("data-live=\"events\""):page.index('id="logs"')]
    for reason in ("SuccessfulCreatePod", "Scheduled", "Pulled", "Started"):
        assert f">{reason}</span>" in events
    assert "No events." not in events

    # per-pod GPU utilisation from the DCGM metrics, and the job's mean after a sample
    pods = page[page.index('data-live="pods"'):page.index('data-live="events"')]
    util = re.search(r"data-pod-util>([0-9.]+)%", pods)
    assert util and 0 < float(util.group(1)) <= 100
    usage_sample()
    listing = client.get("/t/acme/jobs/").content.decode()
    row = listing[listing.index(">llama</a>"):]
    row = row[:row.index("</tr>")]
    assert re.search(r"<td>([0-9.]+)%", row)

    # cancel: the pods panel says Terminating through the grace period, then they go
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/t/acme/jobs/{running.pk}/cancel/")
    cluster.advance(5, step=1)
    relist_all(get_client())
    pods = client.get(f"/t/acme/jobs/{running.pk}/").content.decode()
    pods = pods[pods.index('data-live="pods"'):pods.index('data-live="events"')]
    assert "Terminating" in pods and ">Running<" not in pods
    cluster.advance(400, step=10)
    relist_all(get_client())
    pods = client.get(f"/t/acme/jobs/{running.pk}/").content.decode()
    pods = pods[pods.index('data-live="pods"'):pods.index('data-live="events"')]
    assert "No pods" in pods
