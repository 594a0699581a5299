"""The preview's one verdict (fits, waits, refused) against what Submit then does, through
the API against kubesim (issue 29, item 1); and CPU and memory as the pods carry them
(item 2): the job's request and limit in the API equal the pod's, and the preview counts
the same requests."""

from __future__ import annotations

from decimal import Decimal

import pytest
from kubernetes import client as k8s
from kubernetes.utils import parse_quantity

from core.texts import text_code
from jobs.models import TrainingJob
from jobs.tests.conftest import cycle
from jobs.tests.test_lifecycle import _submit, world  # noqa: F401  (the kubesim world)

pytestmark = pytest.mark.timeout(120)
URL = "/api/v1/tenants/acme/jobs/"


def _body(h800: str, **overrides):
    body = {"name": "probe", "pool": "prod", "tier": "production",
            "image": "registry.example.org/ml/trainer:1", "workers": 1, "gpus_per_worker": 4,
            "gpu_model": h800, "cpu_per_worker": "8", "memory_gib_per_worker": "64",
            "max_run_seconds": 3600}
    body.update(overrides)
    return body


def _preview_then_submit(client, body):
    """The preview's answer, then Submit's, for the same body."""
    preview = client.post(f"{URL}preview/", body, format="json")
    submit = client.post(URL, body, format="json")
    return preview, submit


def test_fits_names_where_it_runs_and_submit_admits_it_there(
        world, cluster, api, bob, tenant_a):  # noqa: F811
    client = api(bob)
    preview, submit = _preview_then_submit(client, _body(world["h800"]))
    assert preview.status_code == 200, preview.content
    answer = preview.json()
    assert answer["verdict"] == "fits" and answer["starts_now"]
    # the small profile's one H800 node, under its switch
    assert answer["placement"] == ["h800-0"] and answer["nodes"] == 1
    assert answer["switch"] == "switch-b1"
    assert answer["summary"].startswith("Fits now") and "h800-0" in answer["summary"]
    assert submit.status_code == 201, submit.content
    cycle(world, cluster)
    job = TrainingJob.objects.get(pk=submit.json()["id"])
    assert job.state in ("admitted", "running") and list(job.placement) == answer["placement"]


def test_waits_names_the_one_limit_and_submit_queues_it_with_the_same_reason(
        world, cluster, api, alice, bob, tenant_a):  # noqa: F811
    _submit(world, alice, tenant_a, "holder", "production", "prod", world["h800"], gpus=8,
            run_seconds=3600)
    cycle(world, cluster)
    client = api(bob)
    preview, submit = _preview_then_submit(client, _body(world["h800"]))
    assert preview.status_code == 200, preview.content
    answer = preview.json()
    assert answer["verdict"] == "waits" and not answer["starts_now"]
    assert answer["reason_code"].startswith("jobs.wait.over_quota")
    assert "(8 in use)" in answer["reason"]
    assert answer["eta_p50"] and answer["eta_p90"] and answer["eta_p50_text"]
    assert answer["placement"] == [] and answer["switch"] == ""
    assert answer["summary"] == (f"Waits: {answer['reason']}. Estimated start "
                                 f"{answer['eta_p50_text']} (90% by {answer['eta_p90_text']}).")
    assert submit.status_code == 201, submit.content
    cycle(world, cluster)
    job = client.get(f"{URL}{submit.json()['id']}/").json()
    assert job["state"] == "queued"
    assert job["wait_reason_code"] == answer["reason_code"]
    assert job["wait_reason"] == answer["reason"]
    stored = TrainingJob.objects.get(pk=job["id"])
    assert text_code(stored.wait_reason) == answer["reason_code"]


def test_jobs_ahead_that_the_pass_starts_first_are_counted_beside_the_pools_use(
        world, api, alice, bob, tenant_a):  # noqa: F811
    """The issue's contradiction: "4 of 8 cards with this job" beside "above your prod
    quota of 8 (8 in use)". A queued job ahead takes the 8 cards in the pass that would
    decide this one: the preview's numbers say so, and agree with its one reason."""
    from jobs import services
    from tenants.access import access_for

    # submitted, not yet passed (its on-commit pass has not run): queued ahead
    services.job_submit(access=access_for(alice, tenant_a), actor=alice, pool="prod", data={
        "name": "ahead", "image": "registry.example.org/ml/trainer:1", "tier": "production",
        "workers": 1, "gpus_per_worker": 8, "gpu_model": world["h800"], "cpu_per_worker": 8,
        "memory_gib_per_worker": 32, "max_run_seconds": 3600})
    answer = api(bob).post(f"{URL}preview/", _body(world["h800"]), format="json").json()
    assert answer["verdict"] == "waits" and "(8 in use)" in answer["reason"]
    gpu = next(d for d in answer["dimensions"] if d["key"] == f"gpu:{world['h800']}")
    assert (gpu["in_use"], gpu["ahead"], gpu["wanted"], gpu["quota"]) == (0, 8, 4, 8)
    assert not gpu["fits_quota"] and not answer["fits_quota"]


@pytest.mark.parametrize(("overrides", "field", "words"), [
    # no node has 16 cards (the largest has 8)
    ({"gpus_per_worker": 16}, "gpus_per_worker", "the largest has 8"),
    # 16 cards could never fit the prod pool's quota of 8 (production never borrows)
    ({"workers": 2, "gpus_per_worker": 8}, "gpus_per_worker", "could never start"),
    # so many cores, all workers together, could never fit the pool either
    ({"workers": 2, "gpus_per_worker": 1, "cpu_per_worker": "190"}, "cpu_per_worker",
     "could never start"),
    # a field of its own
    ({"image": "not an image"}, "image", "not a valid image reference"),
])
def test_refused_is_what_submit_answers_at_the_same_field_and_nothing_is_created(
        world, api, bob, tenant_a, overrides, field, words):  # noqa: F811
    client = api(bob)
    preview, submit = _preview_then_submit(client, _body(world["h800"], **overrides))
    assert preview.status_code == submit.status_code == 400, (preview.content, submit.content)
    answer, refusal = preview.json(), submit.json()
    assert answer["verdict"] == "refused" and answer["field"] == field
    assert words in answer["message"]
    # Submit's own words at Submit's field, and the same error body
    assert answer["message"] == refusal["message"] and refusal.get("field") == field
    assert answer["extra"] == refusal["extra"]
    assert answer["errors"] == refusal["extra"].get("errors", {field: refusal["message"]})
    assert not TrainingJob.objects.exists()


def test_a_name_taken_is_refused_with_submits_409(world, api, bob, tenant_a):  # noqa: F811
    client = api(bob)
    assert client.post(URL, _body(world["h800"], name="taken"), format="json").status_code == 201
    preview, submit = _preview_then_submit(client, _body(world["h800"], name="taken"))
    assert preview.status_code == submit.status_code == 409
    assert preview.json()["verdict"] == "refused" and preview.json()["field"] == "name"
    assert preview.json()["message"] == submit.json()["message"]
    assert TrainingJob.objects.filter(name="taken").count() == 1


def test_the_schema_documents_the_verdict(api, platform_admin):
    schema = api(platform_admin).get("/api/schema/?format=json").json()
    operation = schema["paths"]["/api/v1/tenants/{tenant_slug}/jobs/preview/"]["post"]
    answers = operation["responses"]
    assert {"200", "400", "409"} <= set(answers)
    components = schema["components"]["schemas"]
    ok = components[answers["200"]["content"]["application/json"]["schema"]["$ref"]
                    .rsplit("/", 1)[1]]["properties"]
    assert {"verdict", "summary", "placement", "switch", "reason", "reason_code", "eta_p50",
            "eta_p90", "eta_p50_text", "worker", "starts_now", "dimensions"} <= set(ok)
    refused = components[answers["400"]["content"]["application/json"]["schema"]["$ref"]
                         .rsplit("/", 1)[1]]["properties"]
    assert {"verdict", "field", "message", "errors", "extra"} <= set(refused)
    job = components["Job"]["properties"]
    assert {"cpu_request_per_worker", "memory_request_gib_per_worker"} <= set(job)


def _gib(quantity: str) -> Decimal:
    return Decimal(str(parse_quantity(quantity))) / (1 << 30)


@pytest.mark.parametrize(("cpu", "memory"), [("8", "64"), ("0.5", "3"), ("7", "10.5")])
def test_request_and_limit_are_what_the_pods_carry_and_what_the_preview_counts(
        world, cluster, api, login, bob, tenant_a, cpu, memory):  # noqa: F811
    client = api(bob)
    body = _body(world["h800"], pool="dev", tier="development", workers=2, gpus_per_worker=1,
                 cpu_per_worker=cpu, memory_gib_per_worker=memory, name=f"rl-{cpu}-{memory}"
                 .replace(".", "-"))
    preview = client.post(f"{URL}preview/", body, format="json").json()
    created = client.post(URL, body, format="json")
    assert created.status_code == 201, created.content
    for _ in range(6):  # admitted, then the operator creates the pods
        cycle(world, cluster, 10)
        job = client.get(f"{URL}{created.json()['id']}/").json()
        pods = k8s.CoreV1Api(cluster.api_client).list_namespaced_pod(
            job["namespace"], label_selector=f"training.kubeflow.org/job-name={job['k8s_name']}"
        ).items
        if len(pods) == 2:
            break
    assert len(pods) == 2, [p.metadata.name for p in pods]
    for pod in pods:
        container = pod.spec.containers[0].resources
        # the limit is what was typed, the request what the API says, to its 3 decimals
        assert Decimal(str(parse_quantity(container.limits["cpu"]))) == Decimal(cpu)
        assert _gib(container.limits["memory"]) == Decimal(memory)
        assert Decimal(str(parse_quantity(container.requests["cpu"]))) == \
            Decimal(job["cpu_request_per_worker"])
        assert round(_gib(container.requests["memory"]), 3) == \
            Decimal(job["memory_request_gib_per_worker"])
        assert Decimal(job["cpu_per_worker"]) == Decimal(cpu)
        assert Decimal(job["memory_gib_per_worker"]) == Decimal(memory)
        # the preview's per-worker request is the pod's, exactly
        assert Decimal(str(preview["worker"]["cpu_request"])) == \
            Decimal(str(parse_quantity(container.requests["cpu"])))
        assert Decimal(str(preview["worker"]["memory_request_gib"])) == \
            _gib(container.requests["memory"])
    # the job page and the quota page say the same, and which one the quota counts
    from django.utils.html import escape

    from core.numbers import quantity
    from jobs.selectors.spec import worker_resources, worker_resources_text
    lines = worker_resources_text(worker_resources(TrainingJob.objects.get(pk=job["id"])))
    assert lines["cpu"] == (f"CPU per worker: request {quantity(job['cpu_request_per_worker'])}"
                            f" cores, limit {quantity(cpu)} cores")
    assert lines == preview["worker_text"]
    page = login(bob).get(f"/t/acme/jobs/{job['id']}/").content.decode()
    for line in lines.values():
        assert escape(line) in page, line
    quota_page = login(bob).get("/t/acme/quota/").content.decode()
    assert 'data-note="counts-requests"' in quota_page
    # the preview counts both workers' requests against the quota (to the engine's step)
    rows = {row["key"]: row for row in preview["dimensions"]}
    assert Decimal(str(rows["cpu"]["wanted"])) == 2 * Decimal(job["cpu_request_per_worker"])
    memory_requests = sum(_gib(p.spec.containers[0].resources.requests["memory"]) for p in pods)
    assert abs(Decimal(str(rows["memory"]["wanted"])) - memory_requests) < Decimal("0.001")


def test_a_gang_no_switch_could_hold_is_refused_at_workers_and_one_that_fits_is_not(
        world, api, bob, tenant_a):  # noqa: F811
    """The small profile's two A100 nodes (8 cards each) sit under two switches: a
    development gang of 2 × 8 could never be placed (a job's workers run under one switch),
    though the pool may borrow that much; 2 × 4 fits on one node."""
    client = api(bob)
    body = _body(world["a100"], pool="dev", tier="development", workers=2, gpus_per_worker=8,
                 checkpoint_storage_class="", cpu_per_worker="8")
    preview, submit = _preview_then_submit(client, body)
    assert preview.status_code == submit.status_code == 400, (preview.content, submit.content)
    answer = preview.json()
    assert answer["verdict"] == "refused" and answer["field"] == "workers"
    assert "No switch has room for 2 workers × 8" in answer["message"]
    assert "the largest holds 1 such worker" in answer["message"]
    assert answer["message"] == submit.json()["message"]
    assert not TrainingJob.objects.exists()
    preview = client.post(f"{URL}preview/", {**body, "gpus_per_worker": 4}, format="json")
    assert preview.status_code == 200 and preview.json()["verdict"] in ("fits", "waits")
