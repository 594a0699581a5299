"""The month close's fast path gives the same seconds as the plain rules.

The close reads running stretches as epoch seconds from the database
(:func:`billing.selectors.running_stretches`, :func:`core.db.epoch_seconds_sql`) and splits
them on a grid of local midnights (:class:`billing.ledger.DayGrid`); these tests hold
each part against the straightforward version it replaces, on Postgres in CI and on
SQLite locally.
"""

from __future__ import annotations

import datetime as dt
import random
from collections import defaultdict
from zoneinfo import ZoneInfo

import pytest
from django.db import connection

from billing import ledger, selectors
from billing.tests.conftest import at, make_job
from core.db import epoch_seconds_sql
from jobs.models import JobTransition
from jobs.timeline import running_intervals

pytestmark = pytest.mark.django_db


def _reference_split(start: dt.datetime, end: dt.datetime, tz: dt.tzinfo
                     ) -> dict[dt.date, int]:
    """Seconds per local date, walking [start, end) a minute at a time (both ends on whole
    minutes): slow and obviously right."""
    days: dict[dt.date, int] = defaultdict(int)
    cursor = start
    while cursor < end:
        days[cursor.astimezone(tz).date()] += 60
        cursor += dt.timedelta(minutes=1)
    return dict(days)


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "America/Santiago", "Asia/Shanghai"])
def test_day_grid_matches_a_minute_by_minute_walk_across_daylight_saving(zone):
    """Berlin's days of 23 and 25 hours (29 March, 25 October 2026) and Santiago's, whose
    clocks change at midnight (6 September 2026 has no 00:00; on 4 April the hour before
    midnight happens twice): the parts add up to the interval and fall on the days a clock
    on the wall shows."""
    tz = ZoneInfo(zone)
    rng = random.Random(zone)
    grid = ledger.DayGrid(tz)
    anchors = [at("2026-03-28"), at("2026-04-04"), at("2026-09-05"), at("2026-10-24")]
    for _ in range(60):
        start = rng.choice(anchors) + dt.timedelta(minutes=rng.randrange(0, 3 * 1440))
        end = start + dt.timedelta(minutes=rng.randrange(0, 3 * 1440))
        parts = grid.split(ledger.epoch_second(start), ledger.epoch_second(end))
        assert sum(seconds for _day, seconds in parts) == int((end - start).total_seconds())
        assert dict(parts) == _reference_split(start, end, tz)


def test_epoch_seconds_truncates_to_the_second_in_the_database(tenant_a):
    job = make_job(tenant_a, [("queued", at("2026-11-02", "09:00:00.999999")),
                            ("running", at("1999-12-31", "23:59:59.5"))])
    sql, params = epoch_seconds_sql("at", connection.vendor)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {sql} FROM jobs_jobtransition WHERE job_id = %s ORDER BY 1",
                       [*params, job.pk])
        epochs = [row[0] for row in cursor.fetchall()]
    assert epochs == [ledger.epoch_second(at("1999-12-31", "23:59:59")),
                      ledger.epoch_second(at("2026-11-02", "09:00:00"))]
    assert epochs[1] - epochs[0] == int((at("2026-11-02", "09:00") - at("1999-12-31",
                                                                      "23:59:59"))
                                        .total_seconds())


def test_running_stretches_from_the_database_match_the_timeline_rule(tenant_a):
    """Random histories with repeated "running", ties in time, open stretches and jobs
    that never ran: the database's stretches cover exactly the seconds of
    :func:`jobs.timeline.running_intervals`, day by day."""
    rng = random.Random(17)
    states = ["queued", "admitted", "running", "running", "preempting", "succeeded"]
    histories = {}
    for _ in range(25):
        when = at("2026-11-01") + dt.timedelta(seconds=rng.randrange(0, 86400 * 5))
        history = []
        for _step in range(rng.randrange(1, 9)):
            history.append((rng.choice(states), when))
            when += dt.timedelta(seconds=rng.choice([0, 1, 59, 3600, 40000]),
                                 microseconds=rng.randrange(0, 10**6))
        job = make_job(tenant_a, history)
        histories[job.pk] = history
    ids = sorted(histories)
    now = at("2026-11-09", "12:00:00.7")
    grid = ledger.DayGrid(ZoneInfo("UTC"))
    for subset in (None, ids[::3]):
        stretches = selectors.running_stretches(first_job=ids[0], last_job=ids[-1],
                                                job_ids=subset)
        for job_id in subset or ids:
            expected = ledger.running_day_seconds(histories[job_id], now, ZoneInfo("UTC"))
            got = ledger.stretch_day_seconds(stretches.get(job_id, []),
                                             ledger.epoch_second(now), grid)
            assert got == expected, (job_id, histories[job_id])
        if subset is not None:
            assert set(stretches) <= set(subset)
    # and the day seconds add up to the plain running time of each history, truncated
    for history in histories.values():
        seconds = sum(ledger.epoch_second(end) - ledger.epoch_second(start)
                      for start, end in running_intervals(history, now))
        assert sum(ledger.running_day_seconds(history, now, ZoneInfo("UTC")).values()) == \
            seconds


def _rows(job) -> dict[tuple[dt.date, dt.date], tuple[int, dt.datetime]]:
    return {(u.day, u.billed_period): (u.seconds, u.updated_at) for u in job.usage_days.all()}


def test_ten_minute_ingest_reads_only_what_is_new(tenant_a):
    """The beat's ingest recomputes a job when it gained a transition or while it runs,
    not every job of the month every ten minutes."""
    from billing import services

    done = make_job(tenant_a, [("queued", at("2026-11-02", "08:00")),
                               ("running", at("2026-11-02", "09:00")),
                               ("succeeded", at("2026-11-02", "11:00"))])
    resumed = make_job(tenant_a, [("running", at("2026-11-03", "09:00")),
                                  ("preempting", at("2026-11-03", "10:00"))])
    running = make_job(tenant_a, [("running", at("2026-11-04", "09:00"))])
    assert services.ledger_ingest_gpu(now=at("2026-11-04", "10:00")) == 3
    assert not JobTransition.objects.filter(processed_at__isnull=True).exists()
    before = _rows(done)
    assert before == {(dt.date(2026, 11, 2), dt.date(2026, 11, 1)): (7200, before[
        (dt.date(2026, 11, 2), dt.date(2026, 11, 1))][1])}

    # nothing new: only the jobs still holding GPUs (running, preempting) are recomputed
    assert services.ledger_ingest_gpu(now=at("2026-11-04", "11:00")) == 2
    assert _rows(done) == before
    assert _rows(running)[(dt.date(2026, 11, 4), dt.date(2026, 11, 1))][0] == 7200

    # the preempted job resumes and finishes: it alone (and the running one) is redone
    JobTransition.objects.create(job=resumed, from_state="preempting", to_state="running",
                                 reason="test", at=at("2026-11-04", "12:00"))
    JobTransition.objects.create(job=resumed, from_state="running", to_state="succeeded",
                                 reason="test", at=at("2026-11-04", "12:30"))
    assert services.ledger_ingest_gpu(now=at("2026-11-04", "13:00")) == 3
    assert {k: v[0] for k, v in _rows(resumed).items()} == {
        (dt.date(2026, 11, 3), dt.date(2026, 11, 1)): 3600,
        (dt.date(2026, 11, 4), dt.date(2026, 11, 1)): 1800}
    assert _rows(done) == before


def test_an_ingest_that_dies_half_way_leaves_the_rest_for_the_next(tenant_a, monkeypatch):
    from billing import ingest, services

    jobs = [make_job(tenant_a, [("running", at("2026-11-02", f"0{n}:00")),
                                ("succeeded", at("2026-11-02", f"0{n}:30"))])
            for n in range(1, 4)]
    monkeypatch.setattr(ingest, "CHUNK", 1)
    real, calls = ingest._upsert_usage, []

    def dies_on_the_second(rows, now):
        calls.append(rows)
        if len(calls) == 2:
            raise ConnectionError("database went away")
        return real(rows, now)

    monkeypatch.setattr(ingest, "_upsert_usage", dies_on_the_second)
    with pytest.raises(ConnectionError):
        services.ledger_ingest_gpu(now=at("2026-11-03"))
    assert [bool(_rows(job)) for job in jobs] == [True, False, False]
    assert [JobTransition.objects.filter(job=job, processed_at__isnull=True).count()
            for job in jobs] == [0, 2, 2]
    monkeypatch.setattr(ingest, "_upsert_usage", real)
    assert services.ledger_ingest_gpu(now=at("2026-11-03")) == 2
    assert [sum(s for s, _u in _rows(job).values()) for job in jobs] == [1800] * 3
