"""The month's idle-while-waiting total by cause (``jobs.idle_waiting``) on finance's month
page and API."""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse

from jobs.admission.waste import KeyIdle
from jobs.idle_waiting import idle_waiting_record

from .conftest import at

pytestmark = pytest.mark.django_db

H800 = "gpu:NVIDIA-H800"


def test_the_month_shows_gpu_hours_idle_while_work_waited_by_cause(login, api, finance_user):
    figure = {H800: KeyIdle(H800, 16, 8, {"soft_limit": 6, "own_quota": 2})}
    for minute in range(60):   # an hour of October: 6 + 2 of 16 GPUs
        idle_waiting_record(figures=figure, seconds=60,
                            now=at("2026-10-10", "08:00:00") + dt.timedelta(minutes=minute))
    idle_waiting_record(figures=figure, seconds=60, now=at("2026-11-01", "00:00:30"))
    month = api(finance_user).get("/api/v1/billing/months/2026-10/").json()
    idle = month["idle_while_waiting"]
    assert idle["gpu_hours"] == 8.0 and idle["share_of_capacity"] == 0.5
    assert idle["causes"]["soft_limit"] == {"gpu_hours": 6.0, "share_of_capacity": 0.375}
    assert idle["causes"]["own_quota"]["gpu_hours"] == 2.0
    assert idle["causes"]["watermark"] == {"gpu_hours": 0.0, "share_of_capacity": 0.0}
    body = login(finance_user).get(reverse("billing:month") + "?month=2026-10").content.decode()
    assert '<strong data-field="idle_waiting_hours">8</strong>' in body
    assert '<strong data-field="idle_waiting_percent">50%</strong>' in body
    assert "Production above its own quota" in body
