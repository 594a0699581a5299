"""Invoice arithmetic against cases computed by hand (A100 at 1.65 per GPU-hour)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from types import SimpleNamespace

import pytest

from billing import selectors, selectors_details, services
from billing.choices import LineKind
from billing.models import EgressSample, GpuUsage, Invoice, StorageSnapshot
from billing.tests.conftest import A100, A100_PRICE, at, make_job, run
from core.texts import english
from k8s_sync.models import ObservedPVC

NOV = dt.date(2026, 11, 1)
OCT = dt.date(2026, 10, 1)
GIB = 1024**3


def lines_of(tenant, period):
    return selectors.month_lines(period, [tenant.pk]).get(tenant.pk, [])


def amounts(lines, kind=None):
    return [(line.quantity, line.unit_price, line.amount) for line in lines
            if kind is None or line.kind == kind]


@pytest.fixture
def now():
    return at("2026-12-02")


def test_job_crossing_a_month_boundary_is_split(tenant_a, rate_card, now):
    # 2 workers x 4 GPUs from Oct 31 22:00 to Nov 1 03:00: 16 GPU-h in Oct, 24 in Nov
    make_job(tenant_a, run(at("2026-10-31", "22:00"), at("2026-11-01", "03:00")),
             workers=2, gpus=4)
    services.ledger_ingest_gpu(now=now)
    assert amounts(lines_of(tenant_a, OCT)) == [(Decimal("16"), Decimal("1.65"),
                                                 Decimal("26.40"))]
    assert amounts(lines_of(tenant_a, NOV)) == [(Decimal("24"), Decimal("1.65"),
                                                 Decimal("39.60"))]


def test_preempted_and_resumed_job_pays_only_running_time(tenant_a, rate_card, now):
    make_job(tenant_a, [
        ("queued", at("2026-11-02", "08:55")), ("admitted", at("2026-11-02", "09:00")),
        ("running", at("2026-11-02", "09:00")), ("preempting", at("2026-11-02", "10:30")),
        ("queued", at("2026-11-02", "10:35")), ("admitted", at("2026-11-02", "11:00")),
        ("running", at("2026-11-02", "11:00:10")), ("succeeded", at("2026-11-02", "12:00:10"))])
    services.ledger_ingest_gpu(now=now)
    # 1.5 h + 1 h = 2.5 GPU-h x 1.65 = 4.125 -> 4.13
    assert amounts(lines_of(tenant_a, NOV)) == [(Decimal("2.5"), Decimal("1.65"),
                                                 Decimal("4.13"))]


def test_price_change_mid_month_bills_each_part_at_its_price(tenant_a, rate_card,
                                                            platform_admin, now):
    # from Nov 16 operations 620.50/month: 1 + 0.15 + 0.85 = 2.00 per GPU-hour
    services.rate_card_create(actor=platform_admin, effective_from=dt.date(2026, 11, 16),
                              gpus=[{**A100_PRICE, "operations_month": Decimal("620.50")}],
                              egress_gib=Decimal("0.08"))
    make_job(tenant_a, run(at("2026-11-15", "20:00"), at("2026-11-16", "04:00")))
    services.ledger_ingest_gpu(now=now)
    lines = lines_of(tenant_a, NOV)
    assert amounts(lines) == [(Decimal("4"), Decimal("1.65"), Decimal("6.60")),
                              (Decimal("4"), Decimal("2.00"), Decimal("8.00"))]
    assert "2026-11-16" in lines[1].description


def test_mig_slices_priced_as_their_share_of_the_card(tenant_a, rate_card, now):
    # 2 workers x 1 instance of 1g.10gb for 10 h: 20 instance-hours x 1.65/8 (0.2063) = 4.126
    make_job(tenant_a, run(at("2026-11-03", "08:00"), at("2026-11-03", "18:00")), workers=2,
             gpus=1, mig="1g.10gb")
    # a MIG job that names no card is priced on the smallest card that holds the profile
    make_job(tenant_a, run(at("2026-11-04", "08:00"), at("2026-11-04", "12:00")), gpus=1,
             gpu_model="", mig="3g.40gb")
    services.ledger_ingest_gpu(now=now)
    lines = lines_of(tenant_a, NOV)
    assert amounts(lines) == [(Decimal("4"), Decimal("0.825"), Decimal("3.30")),
                              (Decimal("20"), Decimal("0.2063"), Decimal("4.13"))]
    assert "1/8" in lines[1].description and "1/2" in lines[0].description


def test_storage_resized_mid_month(tenant_a, rate_card):
    pool = tenant_a.pools.get(kind="prod")
    pvc = ObservedPVC.objects.create(
        namespace=pool.namespace, name="ckpt", uid="pvc-1", resource_version="1",
        storage_class="fast-ssd", requested_bytes=100 * GIB, created_at=at("2026-11-01"),
        observed_at=at("2026-11-01", "00:05"))
    assert services.storage_snapshots_record(now=at("2026-11-01", "00:05")) == 1
    assert services.storage_snapshots_record(now=at("2026-11-02")) == 0  # unchanged
    pvc.requested_bytes, pvc.observed_at = 200 * GIB, at("2026-11-16")
    pvc.save()
    services.storage_snapshots_record(now=at("2026-11-16"))
    services.storage_snapshots_record(now=at("2026-11-17"))
    assert StorageSnapshot.objects.count() == 2
    # 100 GiB x 15/30 + 200 GiB x 15/30 = 150 GiB-months x 0.10 = 15.00
    assert amounts(lines_of(tenant_a, NOV), LineKind.STORAGE) == [
        (Decimal("150"), Decimal("0.1"), Decimal("15.00"))]
    # deleted on Dec 11: December bills 200 GiB x 10/31 = 64.5161 GiB-months = 6.45
    pvc.delete()
    services.storage_snapshots_record(now=at("2026-12-11"))
    assert amounts(lines_of(tenant_a, dt.date(2026, 12, 1)), LineKind.STORAGE) == [
        (Decimal("64.5161"), Decimal("0.1"), Decimal("6.45"))]


def test_egress_from_counter_deltas_with_reset_and_replay(tenant_a, tenant_b, rate_card):
    ns = tenant_a.pools.get(kind="prod").namespace
    key, peers = (ns, "llama-master-0", "internet"), (ns, "llama-master-0", "in_cluster")
    zone = (ns, "llama-master-0", "cross_zone")
    services.egress_record(readings={key: 1 * GIB, peers: 50 * GIB,
                                     ("kube-system", "x", "internet"): GIB,
                                     (ns, "llama-master-0", "bogus"): GIB},
                           at=at("2026-11-05", "00:00"))
    services.egress_record(readings={key: 3 * GIB, peers: 90 * GIB, zone: 2 * GIB},
                           at=at("2026-11-05", "01:00"))
    services.egress_record(readings={key: 3 * GIB, peers: 90 * GIB},
                           at=at("2026-11-05", "01:00"))
    services.egress_record(readings={key: GIB // 2, peers: 95 * GIB},
                           at=at("2026-11-05", "02:00"))  # reset of the internet counter
    assert EgressSample.objects.count() == 7
    # internet 1 + 2 + 0.5 = 3.5 GiB x 0.08 = 0.28; other zones 2 GiB at this card's 0;
    # the 95 GiB within the zone are free and have no line
    lines = lines_of(tenant_a, NOV)
    assert [(line.resource, line.quantity, line.unit_price, line.amount) for line in lines] == [
        ("internet", Decimal("3.5"), Decimal("0.08"), Decimal("0.28")),
        ("cross_zone", Decimal("2"), Decimal("0"), Decimal("0.00"))]
    assert [english(line.text) for line in lines] == ["Egress to the internet",
                                                      "Egress to other zones"]
    assert lines_of(tenant_b, NOV) == []


def test_ingesting_twice_never_counts_twice(tenant_a, rate_card, now):
    make_job(tenant_a, run(at("2026-11-10", "10:00"), at("2026-11-10", "12:00")), gpus=2)
    services.ledger_ingest_gpu(now=now)
    services.ledger_ingest_gpu(now=now)
    assert GpuUsage.objects.count() == 1
    assert amounts(lines_of(tenant_a, NOV)) == [(Decimal("4"), Decimal("1.65"),
                                                 Decimal("6.60"))]


def test_running_job_is_updated_not_added(tenant_a, rate_card):
    make_job(tenant_a, run(at("2026-11-10", "10:00")))
    services.ledger_ingest_gpu(now=at("2026-11-10", "11:00"))
    services.ledger_ingest_gpu(now=at("2026-11-10", "12:00"))
    assert list(GpuUsage.objects.values_list("seconds", flat=True)) == [7200]


def test_cpu_and_memory_prices_are_optional(tenant_a, platform_admin, now):
    services.rate_card_create(actor=platform_admin, effective_from=dt.date(2026, 1, 1),
                              gpus=[A100_PRICE], cpu_core_hour=Decimal("0.01"),
                              memory_gib_hour=Decimal("0.001"))
    # default 4 cores and 16 GiB per worker, 2 workers, 10 h: 80 core-h, 320 GiB-h
    make_job(tenant_a, run(at("2026-11-03", "08:00"), at("2026-11-03", "18:00")), workers=2,
             gpus=0, gpu_model="")
    services.ledger_ingest_gpu(now=now)
    assert amounts(lines_of(tenant_a, NOV)) == [(Decimal("80"), Decimal("0.01"), Decimal("0.80")),
                                                (Decimal("320"), Decimal("0.001"),
                                                 Decimal("0.32"))]


def test_whole_invoice_total_and_cost_center(tenant_a, rate_card, finance_user, now):
    make_job(tenant_a, run(at("2026-10-31", "22:00"), at("2026-11-01", "03:00")),
             workers=2, gpus=4)
    make_job(tenant_a, run(at("2026-11-03", "08:00"), at("2026-11-03", "18:00")), workers=2,
             mig="1g.10gb")
    services.adjustment_add(actor=finance_user, tenant=tenant_a, period=NOV,
                            description="Support hours", amount=Decimal("10.00"))
    services.ledger_ingest_gpu(now=now)
    services.month_close(actor=finance_user, period=OCT, now=now)
    closing = services.month_close(actor=finance_user, period=NOV, now=now)
    invoice = Invoice.objects.get(tenant=tenant_a, period=NOV)
    # 39.60 (A100) + 4.13 (MIG) + 10.00 (adjustment)
    assert invoice.total == Decimal("53.73") == closing.total
    assert invoice.cost_center == "CC-acme" and invoice.currency == "USD"
    assert invoice.number.startswith("TY-2026-")
    assert [line.kind for line in invoice.lines.all()] == ["gpu", "gpu", "adjustment"]


def test_job_costs_and_estimate(tenant_a, rate_card, now):
    job = make_job(tenant_a, run(at("2026-11-02", "09:00"), at("2026-11-02", "11:30")))
    running = make_job(tenant_a, run(at("2026-11-30", "23:00")), gpus=2)
    costs = selectors.job_costs([job, running], now=at("2026-12-01", "01:00"))
    assert costs == {job.pk: Decimal("4.13"), running.pk: Decimal("6.60")}
    assert selectors.estimate_job_cost(_shape(A100, "", 8), 3600).total == Decimal("13.20")
    assert selectors.estimate_job_cost(_shape(A100, "1g.10gb", 1), 36000).total == \
        Decimal("2.06")
    unknown = selectors.estimate_job_cost(_shape("unknown", "", 1), 3600)
    assert unknown.unpriced and unknown.total == 0


def _shape(model: str, mig: str, gpus: int) -> SimpleNamespace:
    return SimpleNamespace(gpu_model=model, mig_profile=mig, workers=1, gpus_per_worker=gpus,
                           cpu_per_worker=Decimal(4), memory_gib_per_worker=Decimal(16))


def test_drill_down_of_storage_and_egress_lines(tenant_a, rate_card, finance_user):
    pool = tenant_a.pools.get(kind="prod")
    ObservedPVC.objects.create(
        namespace=pool.namespace, name="data", uid="pvc-9", resource_version="1",
        storage_class="fast-ssd", requested_bytes=30 * GIB, created_at=at("2026-10-01"),
        observed_at=at("2026-10-01"))
    services.storage_snapshots_record(now=at("2026-10-01", "00:01"))
    services.egress_record(readings={(pool.namespace, "web-0", "internet"): 2 * GIB,
                                     (pool.namespace, "web-0", "in_cluster"): 40 * GIB},
                           at=at("2026-10-09"))
    services.month_close(actor=finance_user, period=OCT, now=at("2026-11-01", "01:00"))
    invoice = Invoice.objects.get(tenant=tenant_a, period=OCT)
    storage, egress = invoice.lines.all()
    assert (storage.amount, egress.amount) == (Decimal("3.00"), Decimal("0.16"))
    [volume] = selectors_details.line_details(storage)
    assert volume.label == f"{pool.namespace}/data" and volume.quantity == Decimal("30")
    [pod] = selectors_details.line_details(egress)
    assert pod.label == f"{pool.namespace}/web-0" and pod.amount == Decimal("0.16")
    assert pod.destinations == (("internet", Decimal("2")), ("in_cluster", Decimal("40")))
