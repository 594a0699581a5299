"""A real Celery worker in the test process, on a broker the test chooses.

``on_broker(**settings)`` points the app at another broker for the duration (the app reads
Django settings under the ``CELERY_`` namespace, so those are the keys set) and forgets the
connections and producers an earlier test made for the test broker (``memory://``);
``heartbeat_through_a_worker(queue)`` publishes the heartbeat task and lets an in-process
worker run it, and says whether it ran.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from django.core.cache import cache

from portal.celery import app
from portal.tasks import HEARTBEAT_KEY, heartbeat


def _forget_connections() -> None:
    app._pool = None
    app.amqp._producer_pool = None


@contextlib.contextmanager
def on_broker(**settings: Any) -> Iterator[None]:
    """``settings``: Celery settings by their lower-case names (``broker_url`` ...)."""
    saved = {f"CELERY_{k.upper()}": app.conf[k] for k in settings}
    app.conf.update({f"CELERY_{k.upper()}": v for k, v in settings.items()})
    _forget_connections()
    try:
        yield
    finally:
        from celery._state import _set_task_join_will_block

        # The in-process worker marks this process as "inside a worker"; undo it so later
        # tests may wait on results again.
        _set_task_join_will_block(False)
        app.conf.update(saved)
        _forget_connections()


def heartbeat_through_a_worker(queue: str, *, poll: float = 0.05,
                               stop_at_once: bool = False) -> bool:
    """Publish the heartbeat on ``queue`` and run a solo worker until it ran (at most 20 s).
    ``stop_at_once``: raise the worker's stop flag and deliver one more message, so it stops
    without waiting out its loop (the filesystem transport polls)."""
    from celery.contrib.testing.worker import start_worker
    from celery.worker import state as worker_state

    cache.delete(HEARTBEAT_KEY)
    with start_worker(app, pool="solo", perform_ping_check=False, queues=[queue],
                      loglevel="WARNING", shutdown_timeout=10):
        heartbeat.apply_async(queue=queue)
        deadline = time.monotonic() + 20
        while cache.get(HEARTBEAT_KEY) is None and time.monotonic() < deadline:
            time.sleep(poll)
        if stop_at_once:
            worker_state.should_terminate = 0
            heartbeat.apply_async(queue=queue)
    return cache.get(HEARTBEAT_KEY) is not None
