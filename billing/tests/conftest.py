"""Fixtures of the billing tests: a rate card with round prices, jobs with histories."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
import time_machine

from billing import services
from jobs.models import JobTransition, TrainingJob

A100 = "NVIDIA-A100-SXM4-80GB"
UTC = dt.UTC


def at(day: str, clock: str = "00:00:00") -> dt.datetime:
    return dt.datetime.fromisoformat(f"{day}T{clock}").replace(tzinfo=UTC)


# A100: 26,280 / (36 x 730 h) = 1.0000 depreciation; 500 W / 1000 x 1.5 PUE x 0.20 = 0.1500
# power; 365 / 730 h = 0.5000 operations: 1.6500 per GPU-hour.
A100_PRICE = {"gpu_model": A100, "memory_gib": 80, "purchase_price": Decimal("26280"),
              "depreciation_months": 36, "power_watts": Decimal("500"), "pue": Decimal("1.5"),
              "electricity_kwh": Decimal("0.20"), "operations_month": Decimal("365")}


#: The billing tests' clock: mid-November 2026, so "October" is an ended month and
#: "November" the running one whatever today's date is (the dates below are literal).
FROZEN_NOW = dt.datetime(2026, 11, 15, 12, 0, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def frozen_clock():
    with time_machine.travel(FROZEN_NOW, tick=True) as traveller:
        yield traveller


@pytest.fixture(autouse=True)
def utc(settings):
    settings.TIME_ZONE = "UTC"
    settings.TRAINYARD_CURRENCY = "USD"


@pytest.fixture
def rate_card(platform_admin):
    return services.rate_card_create(
        actor=platform_admin, effective_from=dt.date(2026, 1, 1), gpus=[A100_PRICE],
        storage=[{"storage_class": "fast-ssd", "gib_month": Decimal("0.10")}],
        egress_gib=Decimal("0.08"))


_counter = iter(range(10**6))


def make_job(tenant, history: list[tuple[str, dt.datetime]], *, workers: int = 1,
             gpus: int = 1, gpu_model: str = A100, mig: str = "", name: str = "") -> TrainingJob:
    """A job with the given (to_state, at) history; its state is the last one."""
    job = TrainingJob.objects.create(
        tenant=tenant, pool=tenant.pools.get(kind="prod"), name=name or f"job-{next(_counter)}",
        image="trainer:1", tier="production", max_run_seconds=86400 * 30, workers=workers,
        gpus_per_worker=gpus, gpu_model=gpu_model, mig_profile=mig,
        state=history[-1][0] if history else "queued")
    previous = ""
    for state, when in history:
        JobTransition.objects.create(job=job, from_state=previous, to_state=state,
                                     reason="test", at=when)
        previous = state
    return job


def run(start: dt.datetime, end: dt.datetime | None = None) -> list[tuple[str, dt.datetime]]:
    history = [("queued", start - dt.timedelta(minutes=5)), ("admitted", start),
               ("running", start)]
    if end is not None:
        history.append(("succeeded", end))
    return history
