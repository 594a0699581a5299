"""Job pages and API: anonymous and outsider checks, submit from the form and the API."""

from types import SimpleNamespace

import pytest

from core.tests.html import form_values
from jobs import selectors as job_selectors
from jobs import services
from jobs.forms import TEMPLATES, default_gpu_model, template_values
from jobs.models import TrainingJob
from jobs.tests.conftest import H800, submission
from tenants.access import access_for

PAGES = ["/t/acme/jobs/", "/t/acme/jobs/new/"]


@pytest.fixture
def job(bob, quota):
    return services.job_submit(access=access_for(bob, quota), actor=bob, pool="dev",
                               data=submission())


@pytest.mark.parametrize("url", PAGES)
def test_anonymous_is_sent_to_login(client, tenant_a, url):
    response = client.get(url)
    assert response.status_code == 302 and "/login/" in response.url


def test_outsiders_get_404_on_every_job_page_and_endpoint(login, api, charlie, tenant_b, job):
    client = login(charlie)
    for url in [*PAGES, f"/t/acme/jobs/{job.pk}/"]:
        assert client.get(url).status_code == 404, url
    assert client.post(f"/t/acme/jobs/{job.pk}/cancel/").status_code == 404
    assert client.post("/t/acme/jobs/preview/", {}).status_code == 404
    # tenant B's own URL does not reach tenant A's job either
    assert client.get(f"/t/globex/jobs/{job.pk}/").status_code == 404
    for url in ["/api/v1/tenants/acme/jobs/", f"/api/v1/tenants/acme/jobs/{job.pk}/",
                f"/api/v1/tenants/globex/jobs/{job.pk}/"]:
        assert api(charlie).get(url).status_code == 404, url
    assert api(charlie).post(f"/api/v1/tenants/globex/jobs/{job.pk}/cancel/").status_code == 404
    job.refresh_from_db()
    assert job.state == "queued"


def test_anonymous_api_is_401(api, job):
    for url in ["/api/v1/tenants/acme/jobs/", f"/api/v1/tenants/acme/jobs/{job.pk}/",
                "/api/v1/jobs/"]:
        assert api().get(url).status_code == 401


def test_submit_from_the_form(login, bob, quota):
    client = login(bob)
    page = client.get("/t/acme/jobs/new/?template=ddp-8gpu").content.decode()
    assert "torchrun /workspace/train_resumable.py" in page and H800 in page
    response = client.post("/t/acme/jobs/new/", {
        "name": "ddp-run", "pool": "dev", "tier": "development",
        "image": "pytorch/pytorch:2.4.0", "command": "torchrun train.py", "args": "--lr 3e-4",
        "env": "SEED=1", "workers": "1", "gpus_per_worker": "8", "gpu_model": H800,
        "mig_profile": "", "cpu_per_worker": "32", "memory_gib_per_worker": "256",
        "max_run_hours": "2", "checkpoint_claim": "", "checkpoint_path": "/checkpoints"})
    assert response.status_code == 302, response.content.decode()[:3000]
    job = TrainingJob.objects.get(name="ddp-run")
    assert job.command == ["torchrun", "train.py"] and job.args == ["--lr", "3e-4"]
    assert job.env == {"SEED": "1"} and job.max_run_seconds == 7200
    detail = client.get(f"/t/acme/jobs/{job.pk}/").content.decode()
    assert "ddp-run" in detail and "Submitted" in detail


def test_the_form_shows_field_errors(login, bob, quota):
    response = login(bob).post("/t/acme/jobs/new/", {
        "name": "x", "pool": "dev", "tier": "development", "image": "Bad Image",
        "workers": "1", "gpus_per_worker": "12", "gpu_model": H800, "cpu_per_worker": "8",
        "memory_gib_per_worker": "16", "max_run_hours": "1", "checkpoint_path": "/c"})
    body = response.content.decode()
    assert response.status_code == 400
    assert "not a valid image reference" in body and "the largest has 8" in body
    assert not TrainingJob.objects.exists()


def test_submit_and_cancel_through_the_api(api, bob, quota):
    data = {**submission(name="api-job"), "pool": "dev"}
    created = api(bob).post("/api/v1/tenants/acme/jobs/", data, format="json")
    assert created.status_code == 201, created.json()
    pk = created.json()["id"]
    bad = api(bob).post("/api/v1/tenants/acme/jobs/", {**data, "name": "other",
                                                        "gpu_model": "TPU"}, format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "gpu_model"
    dup = api(bob).post("/api/v1/tenants/acme/jobs/", data, format="json")
    assert dup.status_code == 409
    cancelled = api(bob).post(f"/api/v1/tenants/acme/jobs/{pk}/cancel/")
    assert cancelled.json()["state"] == "cancelled"
    states = [t["to_state"] for t in api(bob).get(
        f"/api/v1/tenants/acme/jobs/{pk}/transitions/").json()]
    assert states == ["queued", "cancelled"]


def test_platform_admins_see_every_queue(api, login, bob, platform_admin, alice, job):
    assert api(alice).get("/api/v1/jobs/").status_code == 404
    listed = api(platform_admin).get("/api/v1/jobs/").json()["results"]
    assert [j["id"] for j in listed] == [job.pk]
    held = api(platform_admin).post(f"/api/v1/jobs/{job.pk}/hold/", {"reason": "maintenance"},
                                    format="json")
    assert held.json()["held"] is True
    assert "llama-ft" in login(platform_admin).get("/platform/queue/").content.decode()
    assert login(alice).get("/platform/queue/").status_code == 404


def test_the_live_preview_answers_quota_fit_start_and_cost(login, api, bob, platform_admin,
                                                           quota):
    import datetime as dt
    from decimal import Decimal

    from billing import services as billing_services

    billing_services.rate_card_create(
        actor=platform_admin, effective_from=dt.date(2026, 1, 1), gpus=[{
            "gpu_model": H800, "purchase_price": Decimal("30000"), "depreciation_months": 48,
            "power_watts": 700, "pue": Decimal("1.3"), "electricity_kwh": Decimal("0.20"),
            "operations_month": Decimal("365")}], cpu_core_hour=Decimal("0.031"),
        memory_gib_hour=Decimal("0.0043"))
    form = {"name": "probe", "pool": "dev", "tier": "development", "image": "trainer:1",
            "workers": "1", "gpus_per_worker": "2", "gpu_model": H800, "cpu_per_worker": "8",
            "memory_gib_per_worker": "64", "max_run_hours": "10", "checkpoint_path": "/c"}
    body = login(bob).post("/t/acme/jobs/preview/", form).json()
    preview = body["preview"]
    assert body["errors"] == {} and preview["fits_quota"] and preview["quota"] == 8
    assert preview["starts_now"] and preview["nodes"] == 1
    assert Decimal(preview["max_cost"]) > 0 and preview["currency"]
    bad = login(bob).post("/t/acme/jobs/preview/", {**form, "gpus_per_worker": "12"}).json()
    assert "the largest has 8" in bad["errors"]["gpus_per_worker"]
    assert not TrainingJob.objects.exists()
    # the cost, part by part, for the maximum and the expected run time: the total the
    # invoice would charge for the same usage (the ledger and the month's lines)
    cost = preview["cost"]
    assert cost["max"]["seconds"] == 36000 and preview["max_cost"] == cost["max"]["total"]
    assert 0 < cost["expected"]["seconds"] == preview["expected_run_seconds"] <= 36000
    assert all(Decimal(cost["max"][part]) > 0 for part in ("gpu", "cpu", "memory"))
    invoice = _invoice_of_a_run(bob, seconds=36000, workers=1, gpus_per_worker=2,
                                cpu_per_worker=8, memory_gib_per_worker=64)
    assert {part: Decimal(cost["max"][part]) for part in ("gpu", "cpu", "memory")} == invoice
    assert Decimal(cost["max"]["total"]) == sum(invoice.values())
    # the API's preview answers the same cost
    api_form = {"name": "probe", "pool": "dev", "tier": "development", "image": "trainer:1",
                "workers": 1, "gpus_per_worker": 2, "gpu_model": H800, "cpu_per_worker": 8,
                "memory_gib_per_worker": 64, "max_run_seconds": 36000}
    answer = api(bob).post("/api/v1/tenants/acme/jobs/preview/", api_form, format="json")
    assert answer.status_code == 200, answer.json()
    assert answer.json()["cost"]["max"] == cost["max"]


def _invoice_of_a_run(user, *, seconds, **shape):
    """What the month's invoice lines charge, per line kind, for a job of ``shape`` that
    ran ``seconds`` (a past October day, at the same rate card)."""
    import datetime as dt
    from decimal import Decimal

    from billing import selectors as billing_selectors
    from billing import services as billing_services
    from billing.tests.conftest import make_job, run

    tenant = user.memberships.get().tenant
    start = dt.datetime(2026, 10, 5, 8, 0, tzinfo=dt.UTC)
    job = make_job(tenant, run(start, start + dt.timedelta(seconds=seconds)),
                   workers=shape.pop("workers"), gpus=shape.pop("gpus_per_worker"),
                   gpu_model=H800)
    TrainingJob.objects.filter(pk=job.pk).update(**shape)
    billing_services.ledger_ingest_gpu(now=start + dt.timedelta(days=2))
    out: dict[str, Decimal] = {}
    for line in billing_selectors.month_lines(dt.date(2026, 10, 1), [tenant.pk])[tenant.pk]:
        out[str(line.kind)] = out.get(str(line.kind), Decimal(0)) + line.amount
    return out


def test_the_demo_load_submits_jobs_the_pools_may_run(quota, bob):
    """As its own account (never a researcher's name), each job named after the shape it
    was submitted with, and its template recorded only when that shape was kept (two
    H800 nodes: the 4 x 8 multi-node template shrinks to one worker)."""
    from django.core.management import call_command

    from portal.management.commands.seed_demo import LOADGEN, loadgen_user
    from tenants.models import Membership

    call_command("demo_load", "--count", "1", "--every", "0.01", "--seed", "7")
    assert not TrainingJob.objects.exists()   # no account of its own in acme: nothing
    Membership.objects.create(user=loadgen_user(), tenant=quota, role="member")
    call_command("demo_load", "--count", "12", "--every", "0.01", "--seed", "7")
    jobs = list(TrainingJob.objects.select_related("submitted_by"))
    assert len(jobs) == 12
    shapes = set()
    for job in jobs:
        assert job.gpu_model == H800 and job.tier in ("production", "development", "batch")
        assert job.gpus_per_worker <= 8
        assert "kubesim.trainyard.io/run-seconds" in job.annotations
        assert job.submitted_by.username == LOADGEN
        prefix = job.name.rsplit("-", 1)[0]
        assert prefix == ("multinode" if job.workers > 1 else
                          "ddp" if job.gpus_per_worker > 1 else "finetune"), job.name
        if job.template:
            assert (TEMPLATES[job.template]["workers"],
                    TEMPLATES[job.template]["gpus_per_worker"]) == (job.workers,
                                                                   job.gpus_per_worker)
        shapes.add((job.workers, job.gpus_per_worker, job.template))
    assert (1, 8, "") in shapes   # a shrunk multi-node job: named ddp, no template


def test_a_template_submits_as_it_stands(login, bob, quota):
    """A template fills in a GPU model the cluster has: what the page shows, posted
    unchanged but for the name, is a job."""
    client = login(bob)
    values = form_values(client.get("/t/acme/jobs/new/?template=ddp-8gpu").content.decode(),
                         "")
    assert values["gpu_model"] == H800 and values["gpus_per_worker"] == "8"
    response = client.post("/t/acme/jobs/new/", {**values, "name": "from-template"})
    assert response.status_code == 302, response.content.decode()[:3000]
    assert TrainingJob.objects.get(name="from-template").gpu_model == H800


def test_every_template_gets_a_model_with_nodes_big_enough(login, bob, quota):
    stock = job_selectors.inventory()
    values = template_values(stock)
    assert set(values) == set(TEMPLATES)
    for key, fields in values.items():
        if int(fields["gpus_per_worker"]):
            assert stock.gpus_per_node[fields["gpu_model"]] >= int(fields["gpus_per_worker"]), key
        assert fields["template"] == key and "max_run_hours" in fields


def test_a_refused_submit_lists_its_reasons_at_the_top(login, bob, quota):
    response = login(bob).post("/t/acme/jobs/new/", {
        "name": "too-big", "pool": "dev", "tier": "development", "image": "Bad Image",
        "workers": "1", "gpus_per_worker": "12", "gpu_model": H800, "cpu_per_worker": "8",
        "memory_gib_per_worker": "16", "max_run_hours": "1", "checkpoint_path": "/c"})
    assert response.status_code == 400
    body = response.content.decode()
    summary = body[body.index('id="form-errors"'):body.index("</ul>", body.index(
        'id="form-errors"'))]
    assert "The job was not submitted." in summary
    assert "Container image" in summary and "not a valid image reference" in summary
    assert "GPUs per worker" in summary and "the largest has 8" in summary


def test_the_command_is_shown_as_a_shell_takes_it(login, bob, quota):
    job = services.job_submit(access=access_for(bob, quota), actor=bob, pool="dev",
                              data=submission(args=["--note", "two words", "--x=$HOME"]))
    detail = login(bob).get(f"/t/acme/jobs/{job.pk}/").content.decode()
    assert "python train.py --note &#x27;two words&#x27; &#x27;--x=$HOME&#x27;" in detail
    clone = login(bob).get(f"/t/acme/jobs/new/?clone={job.pk}").content.decode()
    assert form_values(clone, "")["args"] == "--note 'two words' '--x=$HOME'"


def test_a_template_prefers_a_gpu_model_the_tenant_holds_quota_for():
    stock = SimpleNamespace(gpus_per_node={"A100": 8, "H800": 8, "L4": 4})
    assert default_gpu_model(stock, 8) == "A100"  # the most cards per node, then the name
    assert default_gpu_model(stock, 8, {"H800"}) == "H800"
    assert default_gpu_model(stock, 2, {"L4"}) == "L4"
    assert default_gpu_model(stock, 8, {"L4"}) == "A100"  # L4 nodes are too small
    assert default_gpu_model(stock, 16, {"H800"}) == ""


def test_the_preview_refuses_what_a_submit_would(login, bob, job):
    """One check for both: a name taken already is refused live, at its field."""
    answer = login(bob).post("/t/acme/jobs/preview/", {
        "name": job.name, "pool": "dev", "tier": "development", "image": "trainer:1",
        "workers": "1", "gpus_per_worker": "1", "gpu_model": H800, "cpu_per_worker": "8",
        "memory_gib_per_worker": "16", "max_run_hours": "1", "checkpoint_path": "/c"}).json()
    assert answer["preview"]["verdict"] == "refused" and answer["preview"]["field"] == "name"
    assert "exists already" in answer["errors"]["name"]
