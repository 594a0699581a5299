"""GET /metrics: protected by a bearer token or an allow-list; Prometheus text of
quota hard/used, queues, waits, jobs by state, sync errors."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from jobs.models import JobTransition, TrainingJob
from tenants.models import Pool, QuotaGrant

pytestmark = pytest.mark.django_db


def _samples(body: bytes) -> dict[str, list]:
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def test_unconfigured_is_404(client, settings):
    settings.TRAINYARD_METRICS_TOKEN = ""
    settings.TRAINYARD_METRICS_ALLOW = []
    assert client.get("/metrics").status_code == 404


def test_token_and_allow_list(client, settings, db):
    settings.TRAINYARD_METRICS_TOKEN = "s3cret"
    settings.TRAINYARD_METRICS_ALLOW = []
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer nope").status_code == 401
    ok = client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret")
    assert ok.status_code == 200 and ok["Content-Type"].startswith("text/plain")
    settings.TRAINYARD_METRICS_TOKEN = ""
    settings.TRAINYARD_METRICS_ALLOW = ["10.0.0.0/8", "not-an-ip"]
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.168.1.1").status_code == 401


def test_families(client, settings, tenant_a, tenant_b, bob):
    settings.TRAINYARD_METRICS_TOKEN = "t"
    prod = tenant_a.pools.get(kind="prod")
    QuotaGrant.objects.create(pool=prod, resource="gpu:NVIDIA-H800", amount=8)
    Pool.objects.filter(pk=prod.pk).update(sync_error="403 Forbidden")
    now = timezone.now()
    for i, state in enumerate(["queued", "queued", "running", "failed"]):
        job = TrainingJob.objects.create(
            tenant=tenant_a, pool=prod, name=f"j{i}", image="x", tier="production",
            max_run_seconds=60, state=state, workers=1, gpus_per_worker=1,
            gpu_model="NVIDIA-H800", submitted_by=bob)
        TrainingJob.objects.filter(pk=job.pk).update(submitted_at=now - dt.timedelta(hours=1))
        if state == "running":
            JobTransition.objects.create(job=job, from_state="admitted", to_state="running",
                                         reason="Running", at=now - dt.timedelta(minutes=30))
    samples = _samples(client.get("/metrics", HTTP_AUTHORIZATION="Bearer t").content)
    hard = {(lab["tenant"], lab["pool"], lab["resource"]): v
            for lab, v in samples["trainyard_quota_hard"]}
    assert hard[("acme", "prod", "gpu:NVIDIA-H800")] == 8
    assert ("acme", "prod", "gpu:NVIDIA-H800") in {
        (lab["tenant"], lab["pool"], lab["resource"]) for lab, _ in samples["trainyard_quota_used"]}
    queue = {(lab["tenant"], lab["gpu_model"], lab["tier"]): v
             for lab, v in samples["trainyard_queue_length"]}
    assert queue == {("acme", "NVIDIA-H800", "production"): 2}
    (oldest,) = samples["trainyard_queue_oldest_wait_seconds"]
    assert 3500 < oldest[1] < 3700
    waits = {lab["quantile"]: v for lab, v in samples["trainyard_job_wait_seconds"]}
    assert waits["0.5"] == pytest.approx(1800, abs=5)
    states = {(lab["tenant"], lab["state"]): v for lab, v in samples["trainyard_jobs"]}
    assert states[("acme", "queued")] == 2 and states[("acme", "failed")] == 1
    errors = {(lab["tenant"], lab["pool"]): v for lab, v in samples["trainyard_pool_sync_error"]}
    assert errors[("acme", "prod")] == 1 and errors[("globex", "prod")] == 0
    assert "trainyard_observer_failing" in samples
    assert "trainyard_usage_sample_timestamp_seconds" in samples


def test_grafana_dashboard_has_a_tenant_variable_and_uses_exposed_metrics(client, settings,
                                                                        tenant_a):
    import json
    import re
    from pathlib import Path

    settings.TRAINYARD_METRICS_TOKEN = "t"
    QuotaGrant.objects.create(pool=tenant_a.pools.get(kind="prod"), resource="cpu", amount=1)
    body = client.get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()
    exposed = {f.name for f in text_string_to_metric_families(body)}
    path = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "trainyard.json"
    board = json.loads(path.read_text())
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert "label_values(trainyard_quota_hard, tenant)" in variables["tenant"]["definition"]
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    assert any("$tenant" in e and "DCGM_FI_DEV_GPU_UTIL" in e for e in exprs)
    used = {m for e in exprs for m in re.findall(r"\btrainyard_[a-z_]+", e)}
    assert used and used <= exposed, used - exposed


def test_idle_while_waiting_counter(client, settings):
    from jobs.admission.waste import KeyIdle
    from jobs.idle_waiting import idle_waiting_record

    settings.TRAINYARD_METRICS_TOKEN = "t"
    now = timezone.now()
    figures = {"gpu:NVIDIA-H800": KeyIdle("gpu:NVIDIA-H800", 16, 8,
                                          {"soft_limit": 4, "reservation": 2}),
               "mig:1g.10gb": KeyIdle("mig:1g.10gb", 12, 3, {"own_quota": 1})}
    idle_waiting_record(figures=figures, seconds=10, now=now)
    idle_waiting_record(figures=figures, seconds=5, now=now)   # the same minute: added
    idle_waiting_record(figures=figures, seconds=5, now=now - dt.timedelta(hours=2))
    body = client.get("/metrics", HTTP_AUTHORIZATION="Bearer t").content
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    assert families["trainyard_gpu_idle_while_waiting_seconds"].type == "counter"
    samples = _samples(body)["trainyard_gpu_idle_while_waiting_seconds_total"]
    values = {(lab["key"], lab["cause"]): v for lab, v in samples}
    assert values == {("gpu:NVIDIA-H800", "soft_limit"): 80.0,
                      ("gpu:NVIDIA-H800", "reservation"): 40.0,
                      ("mig:1g.10gb", "own_quota"): 20.0}
