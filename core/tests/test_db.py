"""``core.db.update_rows`` and ``insert_rows``: many rows, each with its own values, by one
prepared statement."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core.db import insert_rows, update_rows
from jobs.models import AdmissionState


@pytest.mark.django_db
def test_update_rows_sets_each_row_its_own_values_in_one_statement():
    user_model = get_user_model()
    a = user_model.objects.create_user("a", first_name="old")
    b = user_model.objects.create_user("b", first_name="old")
    c = user_model.objects.create_user("c", first_name="untouched")
    when = timezone.now().replace(microsecond=123456) - dt.timedelta(days=3)
    with CaptureQueriesContext(connection) as ctx:
        assert update_rows(user_model, ["first_name", "last_login"],
                           [(a.pk, "Ann", when), (b.pk, "Bo", None)]) == 2
    assert len(ctx.captured_queries) == 1
    a.refresh_from_db(), b.refresh_from_db(), c.refresh_from_db()
    assert (a.first_name, a.last_login) == ("Ann", when)   # aware datetimes kept exactly
    assert (b.first_name, b.last_login) == ("Bo", None)
    assert c.first_name == "untouched"


@pytest.mark.django_db
def test_update_rows_prepares_json_as_save_does_and_does_nothing_for_no_rows():
    state = AdmissionState.objects.create(pk=1)
    value = {"admitted": 3, "reason": {"code": "jobs.wait.quota", "args": {"n": [1, "二"]}}}
    update_rows(AdmissionState, ["last_decisions", "explain_ms"], [(state.pk, value, 2.5)])
    state.refresh_from_db()
    assert (state.last_decisions, state.explain_ms) == (value, 2.5)
    with CaptureQueriesContext(connection) as ctx:
        assert update_rows(AdmissionState, ["explain_ms"], []) == 0
    assert ctx.captured_queries == []


@pytest.mark.django_db
def test_insert_rows_writes_each_row_as_save_would_in_one_statement():
    from tenants.models import AuditEvent

    when = timezone.now().replace(microsecond=654321) - dt.timedelta(hours=5)
    text = {"code": "jobs.audit.hold", "args": {"job": "二", "n": [1, 2]}}
    with CaptureQueriesContext(connection) as ctx:
        assert insert_rows(AuditEvent, ["at", "action", "summary", "text", "data"], [
            (when, "job.hold", "held", text, {"job": 7}),
            (when, "job.priority", "moved", "plain", {})]) == 2
    assert len(ctx.captured_queries) == 1
    rows = list(AuditEvent.objects.order_by("id").values_list("at", "action", "text", "data"))
    assert rows == [(when, "job.hold", text, {"job": 7}), (when, "job.priority", "plain", {})]
    assert insert_rows(AuditEvent, ["action"], []) == 0
