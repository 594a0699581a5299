"""The embedded broker (portal/broker.py): whole messages only, and a bad one is skipped.

Issue 16: a worker took an empty message file (written non-atomically by kombu's
filesystem transport) and died on JSONDecodeError, and with it the whole product.
"""

import json
import os
import uuid
from pathlib import Path

import pytest
from kombu import Connection

from portal.broker import Transport
from portal.celery import app
from portal.tests.workers import heartbeat_through_a_worker, on_broker

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
    monkeypatch.setenv("CELERY_SKIP_CHECKS", "1")  # Django's system checks: seconds, not ours

    queue = f"test-{uuid.uuid4().hex[:8]}"
    _drop_garbage(tmp_path, queue)
    with on_broker(broker_url="filesystem://localhost//",
                   broker_transport="portal.broker:Transport",
                   broker_transport_options=_options(tmp_path, polling_interval=0.05),
                   task_always_eager=False,
                   worker_enable_remote_control=False):  # no broadcast: a faster stop
        assert app.connection_for_read().transport_cls == "portal.broker:Transport"
        assert heartbeat_through_a_worker(queue, stop_at_once=True)
    assert len(os.listdir(tmp_path / "rejected")) == len(GARBAGE)
