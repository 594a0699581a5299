"""Celery is wired: named tasks on explicit queues, acks_late, one beat schedule."""

import os
import uuid

import pytest
from django.core.cache import cache

from portal.celery import app
from portal.schedules import BEAT_SCHEDULE
from portal.tasks import HEARTBEAT_KEY, heartbeat
from portal.tests.workers import heartbeat_through_a_worker, on_broker


def test_worker_settings_are_safe_for_redelivery():
    assert app.conf.task_acks_late is True
    assert app.conf.worker_prefetch_multiplier == 1
    assert app.conf.task_reject_on_worker_lost is True


def test_every_task_of_ours_has_an_explicit_name_and_queue():
    app.loader.import_default_modules()
    ours = {name: task for name, task in app.tasks.items() if not name.startswith("celery.")}
    assert "portal.heartbeat" in ours
    for name, task in ours.items():
        assert task.queue, f"task {name} has no explicit queue"
        assert not name.startswith(("portal.tasks.", "tenants.tasks.")), name


def test_every_beat_entry_names_a_registered_task_queue_and_expiry():
    app.loader.import_default_modules()
    assert app.conf.beat_schedule == BEAT_SCHEDULE
    for name, entry in BEAT_SCHEDULE.items():
        assert entry["task"] in app.tasks, name
        assert entry["options"]["queue"] and entry["options"]["expires"] > 0, name


def test_heartbeat_records_the_time(settings):
    stamp = heartbeat.apply().result
    assert cache.get(HEARTBEAT_KEY) == stamp


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="REDIS_URL not set")
def test_a_worker_consumes_a_task_through_the_real_redis_broker():
    """Publish to Redis and let a real in-process worker run it."""
    queue = f"test-{uuid.uuid4().hex[:8]}"
    with on_broker(broker_url=os.environ["REDIS_URL"], broker_transport=None,
                   task_always_eager=False):
        assert app.connection_for_read().transport_cls == "redis"
        assert heartbeat_through_a_worker(queue, poll=0.1)
