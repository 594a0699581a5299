"""Reasons are stored as codes and arguments and shown in the reader's language."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone, translation

from core import texts
from core.models import Policy
from core.texts import english, render
from jobs import selectors, services
from jobs.admission import decide, text
from jobs.models import JobTransition, TrainingJob
from jobs.tests.conftest import submission
from jobs.texts import TRANSITION_REASONS, transition_reason_label
from tenants.access import access_for

from .test_admission_helpers import A100, job, node, quota, run

ADMISSION = Path(__file__).resolve().parents[1] / "admission"
CJK = re.compile(r"[\u4e00-\u9fff]")
QUOTA_EN = ("above your prod quota of 8 NVIDIA-H800 (8 in use): ask for more quota or use the "
            "batch tier")
QUOTA_ZH = "超出您生产池的配额 8 块 NVIDIA-H800 GPU（已用 8）：请申请更多配额，或改用批处理级别"


def engine_codes() -> set[str]:
    """Every code the engine can write: the literals in its sources, and the codes its
    text helpers build from tier and pool names."""
    found: set[str] = set()
    for path in ADMISSION.glob("*.py"):
        found.update(re.findall(r'"(jobs\.[a-z_]+(?:\.[a-z_]+)*)"', path.read_text()))
    found.update(t["code"] for t in text._TIER.values())
    found.update(p["code"] for p in text._POOL.values())
    return found


def codes_in(value: Any) -> set[str]:
    if isinstance(value, list):
        return set().union(*(codes_in(v) for v in value)) if value else set()
    if isinstance(value, dict) and "code" in value:
        return {value["code"]} | codes_in(list((value.get("args") or {}).values()))
    return set()


class _Sample(dict):
    """Arguments for any template: an instant, or a number (it formats as %s and %f)."""

    def __missing__(self, key: str) -> Any:
        return "2026-11-30T14:20:00+00:00" if key == "at" else 2


def test_every_code_the_engine_writes_is_registered_and_speaks_chinese():
    codes = engine_codes()
    assert len(codes) > 35 and "jobs.wait.over_quota" in codes and "jobs.tier.batch" in codes
    jobs_codes = {c for c in texts.codes() if c.startswith("jobs.")}
    assert codes - jobs_codes == set(), "register these in jobs/texts.py"
    for code in sorted(jobs_codes):
        template = texts.template(code)
        with translation.override("en"):
            en = str(template % _Sample())
        with translation.override("zh-hans"):
            zh = str(template % _Sample())
        assert "%(" not in en and "%(" not in zh, code
        assert zh != en, f"{code} has no Chinese translation in locale/zh_Hans"


def test_transition_reason_labels_translate_and_unknown_codes_show_as_they_are():
    for code in TRANSITION_REASONS:
        with translation.override("en"):
            assert transition_reason_label(code) == code   # English labels are the codes
        with translation.override("zh-hans"):
            assert CJK.search(transition_reason_label(code)), code
    assert transition_reason_label("SomethingNew") == "SomethingNew"


def test_the_engine_returns_registered_json_texts_not_english():
    nodes = [node("n1", used=8), node("m1", model=A100, gpus=4)]
    jobs = [job(1, gpus=4), job(2, gpus=2), job(3, gpus=16), job(4, tier="batch"),
            job(5, tenant="globex", gpus=2), job(6, model=A100, gpus=8),
            job(7, held=True), job(8, state="running", tier="batch", on="n1", gpus=4),
            job(9, pool="prod", gpus=4)]
    d = run(nodes, jobs, [quota(nominal=8, ceiling=12), quota("globex", 0),
                          quota(pool="prod", nominal=8)])
    reasons = [w.reason for w in d.waiting.values()] + [p.reason for p in d.preempt]
    assert len(reasons) >= 5
    for reason in reasons:
        assert isinstance(reason, dict | list), reason
        json.dumps(reason)   # storable as it is
        assert codes_in(reason) and all(texts.registered(c) for c in codes_in(reason))
        assert english(reason) and CJK.search(render(reason, language="zh-hans"))


def test_an_ordinal_position_reads_naturally_in_both_languages():
    nodes = [node("n1", used=8)]
    d = run(nodes, [job(1, minutes_ago=30), job(2, minutes_ago=20), job(3, minutes_ago=10)],
            [quota()])
    reason = d.waiting[3].reason
    assert english(reason).endswith("; 3rd in the dev queue behind jobs of your own tenant")
    assert render(reason, language="zh-hans").endswith(
        "；在开发池队列中排第 3 位，排在本租户的其他作业之后")


@pytest.fixture
def waiting(bob, quota):
    """Two 8-GPU production jobs against a prod quota of 8: one is admitted, the other
    waits (production never borrows); the real engine decides and its reasons are stored
    as the admission cycle stores them. No watermark applies, so as a batch job it would
    start on the idle GPUs, and the reason says so."""
    policy = Policy.current()
    policy.overcommit_factors = {"gpu": 2}
    policy.eviction_watermark = 1
    policy.save()
    access = access_for(bob, quota)
    first = services.job_submit(access=access, actor=bob, pool="prod", data=submission(
        name="first", gpus_per_worker=8, tier="production"))
    second = services.job_submit(access=access, actor=bob, pool="prod", data=submission(
        name="second", gpus_per_worker=8, tier="production"))
    decisions = decide(**selectors.admission_inputs(timezone.now()))
    assert [a.job_id for a in decisions.admit] == [first.pk]
    services.record_waiting(decisions.waiting)
    second.refresh_from_db()
    assert second.wait_reason["code"] == "jobs.wait.over_quota"
    return second


def test_a_waiting_reason_renders_in_the_readers_language_on_the_job_page(login, bob,
                                                                          waiting):
    client = login(bob)
    url = f"/t/acme/jobs/{waiting.pk}/"
    assert QUOTA_EN in client.get(url).content.decode()
    assert QUOTA_ZH in client.get(url, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    listing = client.get("/t/acme/jobs/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert QUOTA_ZH in listing
    client.cookies["django_language"] = "zh-hans"
    assert QUOTA_ZH in client.get(url).content.decode()


def test_the_api_renders_in_the_requests_language_and_gives_the_code(api, bob, waiting):
    url = f"/api/v1/tenants/acme/jobs/{waiting.pk}/"
    body = api(bob).get(url).json()
    assert body["wait_reason"] == QUOTA_EN and body["wait_reason_code"] == "jobs.wait.over_quota"
    body = api(bob).get(url, HTTP_ACCEPT_LANGUAGE="zh-hans").json()
    assert body["wait_reason"] == QUOTA_ZH and body["wait_reason_code"] == "jobs.wait.over_quota"
    assert body["preempt_reason"] == "" and body["preempt_reason_code"] is None
    transitions = api(bob).get(f"{url}transitions/", HTTP_ACCEPT_LANGUAGE="zh-hans").json()
    assert [(t["reason"], t["reason_code"]) for t in transitions] == [("已提交", "Submitted")]


def test_the_dashboard_json_and_the_platform_queue_render_the_reason(login, bob,
                                                                    platform_admin, waiting):
    from portal import dashboards

    with translation.override("zh-hans"):
        rows = dashboards.waiting_jobs(waiting.tenant, bob)
    assert [r["wait_reason"] for r in rows if r["id"] == waiting.pk] == [QUOTA_ZH]
    page = login(platform_admin).get("/platform/queue/", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert QUOTA_ZH in page.content.decode()


def test_legacy_string_rows_still_render(api, login, bob, waiting):
    TrainingJob.objects.filter(pk=waiting.pk).update(wait_reason="written before codes")
    JobTransition.objects.filter(job=waiting).update(message="an old English message")
    assert "written before codes" in login(bob).get(
        f"/t/acme/jobs/{waiting.pk}/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    body = api(bob).get(f"/api/v1/tenants/acme/jobs/{waiting.pk}/").json()
    assert body["wait_reason"] == "written before codes" and body["wait_reason_code"] is None
    transition = api(bob).get(f"/api/v1/tenants/acme/jobs/{waiting.pk}/transitions/").json()[0]
    assert transition["message"] == "an old English message"
    assert transition["message_code"] is None


def test_a_system_hold_reason_translates_and_a_typed_one_stays(api, login, bob,
                                                               platform_admin, waiting):
    services.job_hold(actor=platform_admin, job=waiting, held=True,
                      reason=texts.message("jobs.hold.abnormal"))
    url = f"/t/acme/jobs/{waiting.pk}/"
    assert "GPU 使用异常" in login(bob).get(url, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert api(bob).get(f"/api/v1/tenants/acme/jobs/{waiting.pk}/").json()[
        "hold_reason_code"] == "jobs.hold.abnormal"
    services.job_hold(actor=platform_admin, job=waiting, held=True, reason="  disk full  ")
    waiting.refresh_from_db()
    assert waiting.hold_reason == "disk full"
    body = api(bob).get(f"/api/v1/tenants/acme/jobs/{waiting.pk}/",
                        HTTP_ACCEPT_LANGUAGE="zh-hans").json()
    assert (body["hold_reason"], body["hold_reason_code"]) == ("disk full", None)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_existing_text_rows_as_plain_strings(tenant_a):
    job_row = TrainingJob.objects.create(tenant=tenant_a, pool=tenant_a.pools.get(kind="dev"),
                                         name="old", image="busybox", tier="development",
                                         max_run_seconds=60)
    JobTransition.objects.create(job=job_row, to_state="queued", reason="Submitted",
                                 at=timezone.now())
    executor = MigrationExecutor(connection)
    executor.migrate([("jobs", "0002_maintenance_window")])
    try:
        with connection.cursor() as cursor:
            cursor.execute("UPDATE jobs_trainingjob SET wait_reason = %s, hold_reason = %s "
                           "WHERE id = %s", ['needs 4 "H800"; 2 free', "", job_row.pk])
            cursor.execute("UPDATE jobs_jobtransition SET message = %s WHERE job_id = %s",
                           ["from the old days", job_row.pk])
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
    job_row.refresh_from_db()
    assert job_row.wait_reason == 'needs 4 "H800"; 2 free' and job_row.hold_reason == ""
    assert job_row.transitions.get().message == "from the old days"
    assert render(job_row.wait_reason, language="zh-hans") == 'needs 4 "H800"; 2 free'


def test_a_one_click_hold_from_the_cluster_page_stores_the_systems_reason(login,
                                                                          platform_admin,
                                                                          tenant_a):
    started = timezone.now() - timezone.timedelta(days=6)
    marathon = TrainingJob.objects.create(
        tenant=tenant_a, pool=tenant_a.pools.get(kind="dev"), name="marathon", image="busybox",
        tier="development", max_run_seconds=10 * 86400, state="running", started_at=started)
    client = login(platform_admin)
    assert client.post(f"/cluster/jobs/{marathon.pk}/hold/").status_code == 302
    marathon.refresh_from_db()
    assert marathon.held and texts.text_code(marathon.hold_reason) == "jobs.hold.abnormal"
    assert english(marathon.hold_reason) == (
        "Held from the cluster page: abnormal GPU use; running for 6.0 days")
    assert render(marathon.hold_reason, language="zh-hans") == (
        "从集群页面挂起：GPU 使用异常；已运行 6.0 天")


def test_cluster_words_on_the_job_page_pod_phases_translate_messages_stay(login, bob,
                                                                          waiting):
    """A pod's phase is Kubernetes' enum, shown as a label; the operator's and the
    cluster's messages are shown as written and marked translate="no"."""
    from k8s_sync.models import ClusterEvent, ObservedPod

    job = waiting
    TrainingJob.objects.filter(pk=job.pk).update(k8s_name="tj-second")
    ObservedPod.objects.create(namespace=job.pool.namespace, name="tj-second-master-0",
                               uid="u1", resource_version="1", observed_at=timezone.now(),
                               phase="Running", job=str(job.pk))
    ClusterEvent.objects.create(
        uid="e1", name="e1", observed_at=timezone.now(), resource_version="1",
        involved_namespace=job.pool.namespace, involved_kind="Pod",
        involved_name="tj-second-master-0", reason="FailedScheduling", type="Warning",
        message="0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
        first_seen=timezone.now(), last_seen=timezone.now(), count=1)
    JobTransition.objects.create(job=job, from_state="running", to_state="succeeded",
                                 reason="succeeded", at=timezone.now(),
                                 message="PyTorchJob tj-second is successfully completed.")
    client = login(bob)
    client.cookies["django_language"] = "zh-hans"
    body = client.get(f"/t/acme/jobs/{job.pk}/").content.decode()
    with translation.override("zh-hans"):
        assert f"<td>{translation.pgettext('pod phase', 'Running')}</td>" in body
    assert '<span translate="no">PyTorchJob tj-second is successfully completed.</span>' in body
    assert ('<span translate="no">0/4 nodes are available: 4 Insufficient nvidia.com/gpu.'
            '</span>') in body
    new = client.get("/t/acme/jobs/new/").content.decode()
    assert re.search(r'<label for="id_template">[^<]+</label>', new)
