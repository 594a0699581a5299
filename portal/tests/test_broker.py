"""The embedded broker (portal/broker.py): whole messages only, and a bad one is skipped.

Issue 16: a worker took an empty message file (written non-atomically by kombu's
filesystem transport) and died on JSONDecodeError, and with it the whole product.
"""

import json
import os
import time
import uuid
from pathlib import Path

import pytest
from django.core.cache import cache
from kombu import Connection

from portal.broker import Transport
from portal.celery import app
from portal.tasks import HEARTBEAT_KEY, heartbeat

GARBAGE = [b"", b'{"body": "half-writ', b"\xff\xfe not utf-8", b"[]", b'{"body": "x"}',
           b'{"properties": {}}']


def _options(root: Path, **extra) -> dict:
    return {"data_folder_in": str(root / "out"), "data_folder_out": str(root / "out"),
            "processed_folder": str(root / "processed"), "control_folder": str(root / "control"),
            "tmp_folder": str(root / "tmp"), "rejected_folder": str(root / "rejected"),
            "store_processed": False, **extra}


def _drop_garbage(root: Path, queue: str) -> list[str]:
    """Unreadable files that sort before any message the transport writes."""
    (root / "out").mkdir(parents=True, exist_ok=True)
    names = [f"{0:020d}_{uuid.uuid4()}.{queue}.msg" for _ in GARBAGE]
    for name, data in zip(names, GARBAGE, strict=True):
        (root / "out" / name).write_bytes(data)
    return names


def test_a_message_is_written_whole_and_unreadable_ones_are_set_aside(tmp_path):
    names = _drop_garbage(tmp_path, "jobs")
    with Connection("filesystem://", transport=Transport,
                    transport_options=_options(tmp_path)) as conn:
        queue = conn.SimpleQueue("jobs")
        queue.put({"n": 1})
        queue.put({"n": 2})
        # Written through tmp/ and renamed: nothing is left there, the queue holds both.
        assert list((tmp_path / "tmp").iterdir()) == []
        assert queue.qsize() == len(GARBAGE) + 2
        first = queue.get(timeout=1)
        assert first.payload == {"n": 1}
        first.ack()
        second = queue.get(timeout=1)
        assert second.payload == {"n": 2}
        second.ack()
        queue.close()
    assert sorted(p.name for p in (tmp_path / "rejected").iterdir()) == sorted(names)
    assert list((tmp_path / "out").iterdir()) == []
    assert list((tmp_path / "processed").iterdir()) == []


def test_a_damaged_exchange_table_counts_as_empty_and_the_next_bind_rebuilds_it(tmp_path):
    (tmp_path / "control").mkdir()
    (tmp_path / "control" / "fan.exchange").write_bytes(b"")
    with Connection("filesystem://", transport=Transport,
                    transport_options=_options(tmp_path)) as conn:
        channel = conn.default_channel
        assert channel.get_table("fan") == []
        channel._queue_bind("fan", "", "", "q1")
        channel._queue_bind("fan", "", "", "q1")
        channel._queue_bind("fan", "", "", "q2")
        assert [q.queue for q in channel.get_table("fan")] == ["q2", "q1"]
    table = json.loads((tmp_path / "control" / "fan.exchange").read_text())
    assert len(table) == 2


@pytest.mark.timeout(30)
def test_a_worker_skips_an_unreadable_message_and_runs_the_next_task(tmp_path, monkeypatch):
    """A real worker on the embedded transport, with a bad file ahead of a good task."""
    from celery.contrib.testing.worker import start_worker
    from celery.worker import state as worker_state

    monkeypatch.setenv("CELERY_SKIP_CHECKS", "1")  # Django's system checks: seconds, not ours

    queue = f"test-{uuid.uuid4().hex[:8]}"
    _drop_garbage(tmp_path, queue)
    # The app reads Django settings with the CELERY_ namespace: update those keys.
    saved = {f"CELERY_{k.upper()}": app.conf[k] for k in (
        "broker_url", "broker_transport", "broker_transport_options", "task_always_eager",
        "worker_enable_remote_control")}
    app.conf.update(CELERY_BROKER_URL="filesystem://localhost//",
                    CELERY_BROKER_TRANSPORT="portal.broker:Transport",
                    CELERY_BROKER_TRANSPORT_OPTIONS=_options(tmp_path, polling_interval=0.05),
                    CELERY_TASK_ALWAYS_EAGER=False,
                    CELERY_WORKER_ENABLE_REMOTE_CONTROL=False)  # no broadcast: a faster stop
    # Forget connections and producers an earlier test made for the test broker
    # (memory://), or the task would be published there instead.
    app._pool = None
    app.amqp._producer_pool = None
    assert app.connection_for_read().transport_cls == "portal.broker:Transport"
    try:
        cache.delete(HEARTBEAT_KEY)
        with start_worker(app, pool="solo", perform_ping_check=False, queues=[queue],
                          loglevel="WARNING", shutdown_timeout=10):
            heartbeat.apply_async(queue=queue)
            deadline = time.monotonic() + 20
            while cache.get(HEARTBEAT_KEY) is None and time.monotonic() < deadline:
                time.sleep(0.05)
            # The worker's loop looks at the stop flag between deliveries (or every 2 s):
            # raise it and deliver one more message, so the worker stops at once.
            worker_state.should_terminate = 0
            heartbeat.apply_async(queue=queue)
        assert cache.get(HEARTBEAT_KEY) is not None
        assert len(os.listdir(tmp_path / "rejected")) == len(GARBAGE)
    finally:
        from celery._state import _set_task_join_will_block

        _set_task_join_will_block(False)
        app.conf.update(saved)
        app._pool = None
        app.amqp._producer_pool = None
