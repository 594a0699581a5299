"""The pure arithmetic: prices from rate-card inputs, rounding, day splits, sizes, counters."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest

from billing import ledger, pricing
from billing.recommend import IdleRule, recommend_gpu_quota
from billing.tests.conftest import at


def test_gpu_hour_price_breakdown_by_hand():
    price = pricing.gpu_hour_price(pricing.GpuCostInputs(
        Decimal("26280"), 36, Decimal("500"), Decimal("1.5"), Decimal("0.20"), Decimal("365")))
    assert (price.depreciation, price.power, price.operations) == (
        Decimal("1.0000"), Decimal("0.1500"), Decimal("0.5000"))
    assert price.total == Decimal("1.6500")


def test_components_round_half_up_to_four_places():
    # 10,000 / (12 x 730) = 1.141552... ; 700 W x 1.2 x 0.1234 / 1000 = 0.103656
    price = pricing.gpu_hour_price(pricing.GpuCostInputs(
        Decimal("10000"), 12, Decimal("700"), Decimal("1.2"), Decimal("0.1234"), Decimal("0")))
    assert price.depreciation == Decimal("1.1416")
    assert price.power == Decimal("0.1037")
    with pytest.raises(ValueError):
        pricing.gpu_hour_price(pricing.GpuCostInputs(Decimal(1), 0, Decimal(1), Decimal(1),
                                                     Decimal(1), Decimal(0)))


def test_mig_share_by_memory_and_by_slices():
    assert pricing.mig_share("1g.10gb", card_memory_gib=80) == Decimal("0.125")
    assert pricing.mig_share("3g.40gb", card_memory_gib=80) == Decimal("0.5")
    assert pricing.mig_share("1g.10gb", card_memory_gib=80, rule="slices") == Decimal(1) / 7
    assert pricing.mig_share("7g.80gb", card_memory_gib=None) == Decimal(1)
    assert pricing.mig_hour_price(Decimal("1.65"), Decimal("0.125")) == Decimal("0.2063")


def test_line_amounts_round_once_per_line():
    # 2.5 GPU-hours x 1.65 = 4.125 -> 4.13 (half up)
    assert pricing.hourly_amount(9000, Decimal("1.65")) == Decimal("4.13")
    assert pricing.hours(9001) == Decimal("2.5003")
    # 150 GiB-months in a 30-day month at 0.10
    month = 30 * 86400
    assert pricing.storage_amount(150 * pricing.GIB * month, month, Decimal("0.10")) == \
        Decimal("15.00")
    assert pricing.egress_amount(int(3.5 * pricing.GIB), Decimal("0.08")) == Decimal("0.28")


def test_split_at_midnight_and_month_boundary_exact_to_the_second():
    utc = ZoneInfo("UTC")
    parts = ledger.split_by_day(at("2026-10-31", "22:00:00.900"),
                                at("2026-11-01", "03:00:00.100"), utc)
    assert parts == [(dt.date(2026, 10, 31), 7200), (dt.date(2026, 11, 1), 10800)]
    assert ledger.split_by_day(at("2026-11-01", "10:00"), at("2026-11-01", "10:00"), utc) == []


def test_split_follows_the_installation_time_zone():
    berlin = ZoneInfo("Europe/Berlin")  # UTC+1 in November: local midnight is 23:00 UTC
    parts = ledger.split_by_day(at("2026-11-30", "22:00"), at("2026-12-01", "00:00"), berlin)
    assert parts == [(dt.date(2026, 11, 30), 3600), (dt.date(2026, 12, 1), 3600)]


def test_preempted_job_pays_only_while_running():
    history = [("queued", at("2026-11-02", "08:55")), ("admitted", at("2026-11-02", "09:00")),
               ("running", at("2026-11-02", "09:00")), ("preempting", at("2026-11-02", "10:30")),
               ("queued", at("2026-11-02", "10:35")), ("admitted", at("2026-11-02", "11:00")),
               ("running", at("2026-11-02", "11:00:10")),
               ("succeeded", at("2026-11-02", "12:00:10"))]
    days = ledger.running_day_seconds(history, at("2026-11-03"), ZoneInfo("UTC"))
    assert days == {dt.date(2026, 11, 2): 9000}


def test_open_interval_ends_now():
    days = ledger.running_day_seconds([("running", at("2026-11-02", "23:00"))],
                                      at("2026-11-03", "01:30"), ZoneInfo("UTC"))
    assert days == {dt.date(2026, 11, 2): 3600, dt.date(2026, 11, 3): 5400}


def test_size_byte_seconds_with_resize_and_deletion():
    snaps = [(at("2026-10-20"), 100), (at("2026-11-16"), 200), (at("2026-11-21"), 0)]
    total = ledger.size_byte_seconds(snaps, at("2026-11-01"), at("2026-12-01"))
    assert total == 100 * 15 * 86400 + 200 * 5 * 86400
    assert ledger.size_byte_seconds(snaps, at("2026-12-01"), at("2027-01-01")) == 0


def test_counter_deltas_and_resets():
    assert ledger.counter_delta(None, 500) == 500
    assert ledger.counter_delta(500, 800) == 300
    assert ledger.counter_delta(800, 100) == 100  # reset: the pod restarted
    assert ledger.counter_delta(800, 800) == 0


def test_month_helpers():
    assert ledger.next_month(dt.date(2026, 12, 15)) == dt.date(2027, 1, 1)
    start, end = ledger.month_bounds(dt.date(2026, 2, 10), ZoneInfo("UTC"))
    assert (end - start).days == 28


def test_recommendation_lowers_idle_grants_by_the_rule():
    rule = IdleRule(threshold=Decimal("0.4"), headroom=Decimal("0.2"), max_cut=Decimal("0.5"))
    # 16 cards, 60% idle: 16 x 0.4 x 1.2 = 7.68 -> floor 8 (at most half cut) -> 8
    amount, formula = recommend_gpu_quota(current=Decimal(16), idle_rate=Decimal("0.6"),
                                          rule=rule)
    assert amount == 8 and "60%" in formula
    # 45% idle: 16 x 0.55 x 1.2 = 10.56 -> 11
    assert recommend_gpu_quota(current=Decimal(16), idle_rate=Decimal("0.45"),
                               rule=rule)[0] == 11
    assert recommend_gpu_quota(current=Decimal(16), idle_rate=Decimal("0.3"), rule=rule) is None
    assert recommend_gpu_quota(current=Decimal(16), idle_rate=None, rule=rule) is None
    assert recommend_gpu_quota(current=Decimal(2), idle_rate=Decimal("0.41"), rule=rule) is None
