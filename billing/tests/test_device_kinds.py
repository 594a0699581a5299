"""Every device kind billed by its share (issue 30, item 3): the pure rule
(``billing.pricebook``), the ledger recording each device's kind and share, and the
issue's example as invoice lines."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from fractions import Fraction

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from billing import pricebook, selectors, services
from billing.models import GpuUsage
from billing.pricebook import HAMI, MIG, SHARED, WHOLE, Device, JobShape, PriceTable, UsageRow
from billing.tests.conftest import A100, at, make_job, run
from core.texts import english, render
from k8s_sync.models import ObservedNode

CARD = Decimal("1.6500")
TABLE = PriceTable(card_id=1, cards={A100: CARD}, memory_gib={A100: 80},
                   cpu_core_hour=Decimal("0.05"), memory_gib_hour=Decimal("0.01"))


# --- the pure rule ------------------------------------------------------------------------


@pytest.mark.parametrize(("device", "price", "source"), [
    (Device(A100), CARD, "set"),
    (Device(A100, "1g.10gb", MIG), Decimal("0.2063"), "derived"),     # 10/80 of 1.65
    (Device(A100, "", SHARED, Fraction(1, 4)), Decimal("0.4125"), "derived"),
    (Device(A100, "", HAMI, Fraction(1, 8)), Decimal("0.2063"), "derived"),
    (Device(A100, "", SHARED, Fraction(1, 3)), Decimal("0.5500"), "derived"),
    (Device("NVIDIA-L4"), None, "unpriced"),
    (Device("NVIDIA-L4", "", SHARED, Fraction(1, 4)), None, "unpriced"),
])
def test_one_rule_prices_every_kind_by_its_share(device, price, source):
    priced = pricebook.device_price(TABLE, device)
    assert (priced.price, priced.source) == (price, source)


def test_an_override_replaces_the_derived_price_and_no_card_prices_nothing():
    share = Device(A100, "", SHARED, Fraction(1, 4))
    table = PriceTable(card_id=1, cards={A100: CARD}, overrides={share.key: Decimal("0.5")})
    assert pricebook.device_price(table, share).price == Decimal("0.5")
    assert pricebook.device_price(table, share).source == "override"
    assert pricebook.device_price(None, Device(A100)).price is None


def test_device_of_a_job_and_its_key_round_trip():
    replicas, memory = {A100: 4}, {A100: 81920}
    assert pricebook.device_of(gpu_model=A100, gpu_shared=True, replicas=replicas,
                               card_memory_mib=memory) == Device(A100, "", SHARED,
                                                                 Fraction(1, 4))
    # HAMi: 10 GiB of an 80 GiB card; a cores limit above the memory share wins; capped at 1
    assert pricebook.device_of(gpu_model=A100, memory_limit_gib=Decimal("10"),
                               card_memory_mib=memory).share == Fraction(1, 8)
    assert pricebook.hami_share(Decimal("10"), 81920, cores_percent=50) == Fraction(1, 2)
    assert pricebook.hami_share(Decimal("100"), 81920) == 1
    assert pricebook.hami_share(Decimal("10"), None) == 1   # card memory unknown
    # a shared GPU where no sharing node is known counts as a whole card
    assert pricebook.device_of(gpu_model=A100, gpu_shared=True).share == 1
    for device in (Device(A100), Device(A100, "1g.10gb", MIG),
                   Device(A100, "", SHARED, Fraction(1, 4)),
                   Device(A100, "", HAMI, Fraction(5, 64))):
        assert Device.from_key(device.key) == device
    for bad in ("A100", "A100|shared:0", "A100|shared:3/2", "A100|foo:1/2", "A100|7x"):
        with pytest.raises(ValueError):
            Device.from_key(bad)


def test_the_issues_example_three_lines_by_share():
    """A whole A100, a time-sliced share (1/4) and a HAMi vGPU of 10 GiB (1/8), 10 hours
    each: three lines, 16.50, 4.13 and 2.06 (not 16.50 each in one line)."""
    ten_hours = 36000
    rows = [UsageRow(7, Device(A100), ten_hours),
            UsageRow(7, Device(A100, "", SHARED, Fraction(1, 4)), ten_hours),
            UsageRow(7, Device(A100, "", HAMI, Fraction(1, 8)), ten_hours)]
    lines = pricebook.usage_lines(rows, PriceTable(card_id=1, cards={A100: CARD},
                                                   memory_gib={A100: 80}))[7]
    assert [(line.amount, line.unit) for line in lines] == [
        (Decimal("16.50"), "GPU-hours"), (Decimal("4.13"), "share-hours"),
        (Decimal("2.06"), "vGPU-hours")]
    assert [english(line.text) for line in lines] == [
        A100, f"{A100}, time-sliced/MPS share 1/4 of a card",
        f"{A100} vGPU (HAMi) 10 GiB, 1/8 of a card"]
    assert render(lines[2].text, "zh-hans") == f"{A100} vGPU（HAMi）10 GiB，占一张卡的 1/8"


def test_an_estimate_is_the_invoices_lines_for_the_same_usage():
    shape = JobShape.of(Device(A100, "", SHARED, Fraction(1, 4)), workers=2,
                        gpus_per_worker=1, cpu_per_worker=Decimal("4"),
                        memory_gib_per_worker=Decimal("16"))
    estimate = pricebook.estimate(TABLE, shape, 7200)
    invoice = pricebook.usage_lines([shape.usage(7200, tenant_id=3)], TABLE)[3]
    assert estimate.total == sum(line.amount for line in invoice)
    # 2 shares x 2 h x 0.4125 + 8 cores x 2 h x 0.05 + 32 GiB x 2 h x 0.01
    assert [estimate.amount(k) for k in ("gpu", "cpu", "memory")] == [
        Decimal("1.65"), Decimal("0.80"), Decimal("0.64")]
    assert pricebook.job_rate(TABLE, shape) * 2 == estimate.total


# --- the ledger and the invoice ---------------------------------------------------------------


def _node(name: str, *, sharing: str = "", replicas: int = 1) -> None:
    ObservedNode.objects.create(name=name, gpu_product=A100, gpu_model=A100, gpu_count=8,
                                gpu_memory_mib=81920, sharing_strategy=sharing,
                                gpu_replicas=replicas, observed_at=timezone.now())


def test_ledger_records_each_device_kind_and_the_invoice_bills_by_share(tenant_a, rate_card,
                                                                       client, settings):
    _node("a100-0")
    _node("a100-shared-0", sharing="time-slicing", replicas=4)
    start, end = at("2026-11-02", "08:00"), at("2026-11-02", "18:00")
    whole = make_job(tenant_a, run(start, end))
    shared = make_job(tenant_a, run(start, end))
    vgpu = make_job(tenant_a, run(start, end))
    shared.gpu_shared = True
    vgpu.gpu_memory_gib_per_card = Decimal("10")
    for job in (shared, vgpu):
        job.save(update_fields=["gpu_shared", "gpu_memory_gib_per_card"])
    services.ledger_ingest_gpu(now=at("2026-11-03"))
    recorded = {u.job_id: (u.device_kind, u.device.share)
                for u in GpuUsage.objects.filter(tenant=tenant_a)}
    assert recorded == {whole.pk: (WHOLE, 1), shared.pk: (SHARED, Fraction(1, 4)),
                        vgpu.pk: (HAMI, Fraction(1, 8))}
    lines = [spec for spec in selectors.month_lines(dt.date(2026, 11, 1), [tenant_a.pk])[
        tenant_a.pk] if spec.kind == "gpu"]
    assert [(spec.resource, spec.amount) for spec in lines] == [
        (f"{A100}|", Decimal("16.50")), (f"{A100}|shared:1/4", Decimal("4.13")),
        (f"{A100}|hami:1/8", Decimal("2.06"))]
    assert "1/4" in render(lines[1].text, "zh-hans") != english(lines[1].text)
    # the per-job cost uses the same rule
    costs = selectors.job_costs([whole, shared, vgpu], now=at("2026-11-03"))
    assert costs == {whole.pk: Decimal("16.50"), shared.pk: Decimal("4.13"),
                     vgpu.pk: Decimal("2.06")}
    # and /metrics, from the month's drafts: one series per device
    services.drafts_refresh(now=at("2026-11-15"))
    settings.TRAINYARD_METRICS_TOKEN = "t"
    body = client.get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()
    billed = {s.labels["device"]: s.value for f in text_string_to_metric_families(body)
              for s in f.samples if s.name == "trainyard_billed_month_to_date"}
    assert billed == {f"{A100}|": 16.5, f"{A100}|shared:1/4": 4.13, f"{A100}|hami:1/8": 2.06}


def test_the_preview_prices_a_new_checkpoint_volume_as_the_invoice_does(rate_card):
    """100 GiB of fast-ssd (0.10 per GiB-month) for the whole of November: 10.00, as a
    storage line of November would bill it; an existing claim (no class) is not added."""
    from types import SimpleNamespace

    job = SimpleNamespace(gpu_model=A100, mig_profile="", workers=1, gpus_per_worker=1,
                          cpu_per_worker=Decimal(4), memory_gib_per_worker=Decimal(16),
                          checkpoint_size_gib=100, checkpoint_storage_class="fast-ssd")
    month = 30 * 86400
    cost = selectors.estimate_job_cost(job, month, day=dt.date(2026, 11, 15))
    assert cost.amount("storage") == Decimal("10.00")
    assert cost.amount("gpu") == Decimal("1188.00")   # 720 h x 1.65
    job.checkpoint_storage_class = ""
    assert selectors.estimate_job_cost(job, month).amount("storage") == 0


def test_the_migration_gives_existing_rows_their_jobs_kind(tenant_a, rate_card):
    """Rows written before kinds: whole unless their job says otherwise."""
    import importlib

    from django.apps import apps

    migration = importlib.import_module("billing.migrations.0007_device_kinds")
    _node("a100-shared-0", sharing="time-slicing", replicas=4)
    start, end = at("2026-11-02", "08:00"), at("2026-11-02", "18:00")
    whole, shared, vgpu = (make_job(tenant_a, run(start, end)) for _ in range(3))
    mig = make_job(tenant_a, run(start, end), mig="1g.10gb")
    type(shared).objects.filter(pk=shared.pk).update(gpu_shared=True)
    type(vgpu).objects.filter(pk=vgpu.pk).update(gpu_memory_gib_per_card=Decimal("20"))
    services.ledger_ingest_gpu(now=at("2026-11-03"))
    GpuUsage.objects.update(device_kind=WHOLE, share_num=1, share_den=1)  # as before kinds
    migration.kinds_from_jobs(apps, None)
    assert {u.job_id: (u.device_kind, u.device.share) for u in GpuUsage.objects.all()} == {
        whole.pk: (WHOLE, 1), shared.pk: (SHARED, Fraction(1, 4)),
        vgpu.pk: (HAMI, Fraction(1, 4)), mig.pk: (MIG, 1)}
