"""The utilisation figures' pure definitions (``tenants.utilisation``), without a database."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from tenants.utilisation import (
    FIGURES,
    JobHours,
    Utilisation,
    figures,
    held_hours,
    idle_against_quota,
    is_gpu_kind,
    job_kind,
    total,
)

D = Decimal
T0 = dt.datetime(2026, 10, 1, tzinfo=dt.UTC)


def test_quota_held_is_the_grant_times_the_hours_it_was_in_force_within_the_period():
    lo, hi = T0, T0 + dt.timedelta(days=10)
    assert held_hours(D(4), None, None, lo, hi) == D(960)
    assert held_hours(D(4), T0 + dt.timedelta(days=5), None, lo, hi) == D(480)
    assert held_hours(D(4), T0 - dt.timedelta(days=5), T0 + dt.timedelta(days=1), lo,
                      hi) == D(96)
    assert held_hours(D(4), hi, None, lo, hi) == 0          # granted after the period
    assert held_hours(D("0.5"), None, T0 + dt.timedelta(hours=3), lo, hi) == D("1.5")


def test_figures_split_allocated_weight_busy_and_define_the_rates():
    f = figures("gpu:A100", quota_held=D(200), jobs=[
        JobHours(D(100), False, 80.0), JobHours(D(20), True, 20.0),
        JobHours(D(10), False, None)])
    assert (f.quota_held_hours, f.within_quota_hours, f.borrowed_hours) == (D(200), D(110),
                                                                            D(20))
    assert f.allocated_hours == D(130)
    assert (f.measured_hours, f.busy_hours) == (D(120), D(84))
    assert f.quota_use == D("0.55")                  # 110 / 200: borrowed hours left out
    assert f.idle_rate == D("0.3")                   # 1 - 84 / 120: measured hours only
    assert idle_against_quota(f) == D("0.615")       # 1 - 0.55 x 0.7


def test_figures_when_undefined_and_out_of_range():
    idle = figures("mig:1g.10gb", quota_held=D(50), jobs=[])
    assert idle.quota_use == 0 and idle.idle_rate is None
    assert idle_against_quota(idle) == 1              # held, never allocated
    unheld = figures("gpu-shared", quota_held=D(-3), jobs=[JobHours(D(5), True, 150.0)])
    assert unheld.quota_held_hours == 0 and unheld.quota_use is None
    assert unheld.idle_rate == 0                      # utilisation capped at 100%
    assert idle_against_quota(unheld) is None
    unmeasured = figures("gpu:H800", quota_held=D(10), jobs=[JobHours(D(5), False, None)])
    assert unmeasured.idle_rate is None and idle_against_quota(unmeasured) is None
    over = figures("gpu:H800", quota_held=D(10), jobs=[JobHours(D(15), False, 50.0)])
    assert over.quota_use == D("1.5")                 # shown as it is, never capped


def test_totals_add_hours_and_recompute_the_rates():
    a = figures("gpu:A100", quota_held=D(100), jobs=[JobHours(D(50), False, 100.0)])
    b = figures("mig:1g.10gb", quota_held=D(100), jobs=[JobHours(D(50), False, 0.0)])
    both = total([a, b])
    assert both.kind == "" and both.allocated_hours == D(100)
    assert both.quota_use == D("0.5") and both.idle_rate == D("0.5")
    assert total([]) == Utilisation()
    assert both.as_api() == {
        "kind": "", "quota_held_gpu_hours": "200.00", "allocated_gpu_hours": "100.00",
        "within_quota_gpu_hours": "100.00", "borrowed_gpu_hours": "0.00",
        "busy_gpu_hours": "50.00", "measured_gpu_hours": "100.00", "quota_use": "0.5000",
        "idle_rate": "0.5000"}


def test_gpu_kinds_and_their_names():
    assert job_kind("A100", "", False) == "gpu:A100"
    assert job_kind("A100", "1g.10gb", False) == "mig:1g.10gb"
    assert job_kind("L40S", "", True) == "gpu-shared"
    assert all(is_gpu_kind(k) for k in ("gpu:A100", "mig:3g.40gb", "gpu-shared"))
    assert not any(is_gpu_kind(k) for k in ("cpu", "memory", "gpu-memory", "storage:x"))
    assert set(FIGURES) == {"quota_held", "allocated", "within_quota", "borrowed", "busy",
                            "quota_use", "idle_rate"}
    assert str(FIGURES["quota_use"].definition) == "Allocated within quota ÷ quota held."
