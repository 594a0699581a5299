"""Late usage is never lost (issue 17): what belongs to a closed month but arrives after
it was closed is billed on the next open invoice as a dated "usage from <month>" line with
its own drill-down, finance sees it before closing, and the months add up to the ledger.
A100 at 1.65 per GPU-hour, fast-ssd at 0.10 per GiB-month (billing/tests/conftest.py)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from django.db.models import F, Sum
from django.urls import reverse

from billing import pricing, selectors, selectors_details, services
from billing.choices import LineKind
from billing.models import GpuUsage, Invoice, InvoiceLine
from billing.tests.conftest import at, make_job, run
from jobs import services as job_services
from jobs.choices import JobState
from jobs.models import JobTransition
from k8s_sync.models import ObservedPVC

OCT, NOV = dt.date(2026, 10, 1), dt.date(2026, 11, 1)
GIB = 1024**3


def _gpu_hours(invoice) -> Decimal:
    return sum((line.quantity for line in invoice.lines.filter(kind=LineKind.GPU)),
               Decimal(0))


def _ledger_hours(tenant) -> Decimal:
    seconds = GpuUsage.objects.filter(tenant=tenant).aggregate(
        s=Sum(F("seconds") * F("devices")))["s"]
    return pricing.hours(seconds)


def test_a_transition_recorded_after_its_month_closed_is_billed_on_the_next_invoice(
        tenant_a, rate_card, finance_user, login, api):
    # billed in October: 2 h; a job October saw running to its end (no finish recorded)
    make_job(tenant_a, run(at("2026-10-10", "10:00"), at("2026-10-10", "12:00")))
    unseen = make_job(tenant_a, [("queued", at("2026-10-31", "19:00")),
                                 ("admitted", at("2026-10-31", "19:00"))], name="unseen")
    stale = make_job(tenant_a, run(at("2026-10-31", "20:00")), name="stale")
    services.month_close(actor=finance_user, period=OCT, now=at("2026-11-01", "02:00"))
    october = Invoice.objects.get(tenant=tenant_a, period=OCT)
    assert _gpu_hours(october) == Decimal("6")  # 2 h + Oct 31 20:00-24:00
    # after the close, the cluster's times arrive: "unseen" ran 20:00-23:00 on Oct 31,
    # "stale" finished at 22:00 (October billed it 2 h too many), and stopped Nov 1 too
    for job, start, end in ((unseen, "20:00", "23:00"), (stale, None, "22:00")):
        if start:
            assert job_services.job_transition(
                job_id=job.pk, from_states=[JobState.ADMITTED], to_state=JobState.RUNNING,
                reason="Running", at=at("2026-10-31", start))
        assert job_services.job_transition(
            job_id=job.pk, from_states=[JobState.RUNNING], to_state=JobState.SUCCEEDED,
            reason="Succeeded", at=at("2026-10-31", end))
    late = JobTransition.objects.filter(job=unseen, to_state="succeeded").get()
    assert late.at < at("2026-11-01") < late.observed_at

    draft = services.invoice_draft_refresh(tenant=tenant_a, period=NOV)
    lines = list(draft.lines.filter(kind=LineKind.GPU))
    assert [(line.usage_month, line.quantity) for line in lines] == [(OCT, Decimal("1"))]
    [line] = lines
    assert "usage from 2026-10" in line.description
    assert line.amount == Decimal("1.65")  # 3 h - 2 h at October's price
    assert {d.label: d.quantity for d in selectors_details.line_details(line)} == {
        "unseen": Decimal("3"), "stale": Decimal("-2")}
    assert _gpu_hours(october) + _gpu_hours(draft) == _ledger_hours(tenant_a) == Decimal("7")
    assert Invoice.objects.get(pk=october.pk).total == october.total  # issued stays

    # finance sees the late lines before closing November: page and API
    page = login(finance_user).get(reverse("billing:month") + "?month=2026-11")
    assert page.status_code == 200
    assert b'id="late-lines"' in page.content and b"usage from 2026-10" in page.content
    body = api(finance_user).get("/api/v1/billing/months/2026-11/").json()
    assert [(r["tenant"], r["usage_month"], r["quantity"], r["amount"])
            for r in body["late_lines"] if r["kind"] == "gpu"] == [
        (tenant_a.slug, "2026-10", "1.0000", "1.65")]

    # ingesting again changes nothing; after November closes the rows stay frozen
    services.ledger_ingest_gpu(now=at("2026-12-01", "01:00"))
    services.month_close(actor=finance_user, period=NOV, now=at("2026-12-01", "01:00"))
    november = Invoice.objects.get(tenant=tenant_a, period=NOV)
    assert _gpu_hours(november) == Decimal("1")
    services.ledger_ingest_gpu(now=at("2026-12-02"))
    assert _gpu_hours(october) + _gpu_hours(november) == _ledger_hours(tenant_a)
    assert not InvoiceLine.objects.filter(invoice__period=dt.date(2026, 12, 1)).exists()


def test_a_volume_seen_after_its_month_closed_is_billed_late(tenant_a, rate_card,
                                                             finance_user):
    services.month_close(actor=finance_user, period=OCT, now=at("2026-11-01", "01:00"))
    pool = tenant_a.pools.get(kind="prod")
    ObservedPVC.objects.create(
        namespace=pool.namespace, name="ckpt", uid="pvc-late", resource_version="1",
        storage_class="fast-ssd", requested_bytes=31 * GIB, created_at=at("2026-10-21"),
        observed_at=at("2026-11-03"))
    services.storage_snapshots_record(now=at("2026-11-03"))
    lines = selectors.month_lines(NOV, [tenant_a.pk])[tenant_a.pk]
    storage = [line for line in lines if line.kind == LineKind.STORAGE]
    # November: 31 GiB the whole month; October (late): 31 GiB x 11 of 31 days = 11
    assert [(line.starts, line.quantity, line.amount) for line in storage] == [
        (NOV, Decimal("31"), Decimal("3.10")), (dt.date(2026, 10, 1), Decimal("11"),
                                                Decimal("1.10"))]
    assert "usage from 2026-10" in storage[1].description
    draft = services.invoice_draft_refresh(tenant=tenant_a, period=NOV)
    late = draft.lines.get(kind=LineKind.STORAGE, starts=OCT)
    [volume] = selectors_details.line_details(late)
    assert volume.label == f"{pool.namespace}/ckpt" and volume.quantity == Decimal("11")
