"""``manage.py k8s_watch``: observe the cluster into the database (one per cluster).

One thread per kind runs a :class:`~k8s_sync.observe.Reflector` (list, then watch,
relist on 410 or error with capped exponential backoff). SIGTERM or SIGINT stops every
watch at once and the command exits 0. ``--once`` relists every kind and exits (non-zero
if a kind failed). With ``--max-failures N`` the command exits non-zero after N failures
in a row of one kind, for a supervisor to restart it; by default it retries forever.
``--heartbeat-file`` is touched every 10 s while every watch thread lives.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from k8s_sync.client import K8sError, KubeClient, get_client
from k8s_sync.observe import (
    KINDS,
    Backoff,
    Reflector,
    TooManyFailures,
    freeze_heap,
    record_error,
    relist_all,
)

HEARTBEAT_SECONDS = 10.0


def _kinds(value: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    unknown = sorted(set(names) - set(KINDS))
    if unknown or not names:
        raise CommandError(f"unknown kinds {unknown}; choose from {', '.join(KINDS)}")
    return names


class Command(BaseCommand):
    help = ("Watch the cluster (nodes, pods, quotas, PVCs, storage classes, events, "
            "Trainyard's PyTorchJobs) into the database.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true",
                            help="relist every kind once and exit")
        parser.add_argument("--kinds", default=",".join(KINDS),
                            help=f"comma-separated subset of: {', '.join(KINDS)}")
        parser.add_argument("--watch-timeout", type=int, default=300,
                            help="seconds before a watch is reopened (default 300)")
        parser.add_argument("--relist-interval", type=float, default=600.0,
                            help="seconds between full relists (default 600)")
        parser.add_argument("--backoff-cap", type=float, default=60.0,
                            help="longest wait between retries, seconds (default 60)")
        parser.add_argument("--max-failures", type=int, default=0,
                            help="exit non-zero after this many failures in a row (0: never)")
        parser.add_argument("--heartbeat-file", default="",
                            help="touch this file every few seconds while every watch thread "
                                 "lives (for a container healthcheck)")

    def handle(self, *args: Any, **options: Any) -> None:
        kinds = _kinds(options["kinds"])
        if options["watch_timeout"] <= 0 or options["relist_interval"] <= 0:
            raise CommandError("--watch-timeout and --relist-interval must be > 0")
        if options["once"]:
            try:
                client = get_client()
            except (K8sError, ValueError) as exc:
                raise CommandError(f"cannot reach the cluster: {exc}") from exc
            result = relist_all(client, kinds)
            for kind, outcome in result.items():
                self.stdout.write(f"{kind}: {outcome}")
            failed = [k for k, v in result.items() if isinstance(v, str)]
            if failed:
                raise CommandError(f"relist failed for {', '.join(failed)}")
            return
        stop = threading.Event()

        def shutdown(signum: int, _frame: Any) -> None:
            stop.set()

        previous = {sig: signal.signal(sig, shutdown) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            connected = self._connect(kinds, stop, options["backoff_cap"])
            if connected is None:
                return
            reflectors = [
                Reflector(connected, KINDS[kind], backoff=Backoff(cap=options["backoff_cap"]),
                          watch_timeout=options["watch_timeout"],
                          relist_interval=options["relist_interval"],
                          max_failures=options["max_failures"] or None, manage_connections=True)
                for kind in kinds]
            self._run(reflectors, stop, heartbeat=options["heartbeat_file"])
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _connect(self, kinds: list[str], stop: threading.Event,
                 cap: float) -> KubeClient | None:
        """The client; while the configuration cannot be loaded (a kubeconfig not written
        yet), record the error and retry, so the health page says what is wrong."""
        backoff = Backoff(cap=cap)
        while not stop.is_set():
            try:
                return get_client()
            except ValueError as exc:  # TRAINYARD_CLUSTER itself is wrong: no retry helps
                raise CommandError(f"invalid TRAINYARD_CLUSTER: {exc}") from exc
            except K8sError as exc:
                self.stderr.write(f"cannot reach the cluster: {exc}")
                for kind in kinds:
                    record_error(kind, exc)
                stop.wait(backoff.next())
        return None

    def _run(self, reflectors: list[Reflector], stop: threading.Event, *,
             heartbeat: str = "") -> None:
        failures: list[BaseException] = []

        def loop(reflector: Reflector) -> None:
            try:
                reflector.run()
            except TooManyFailures as exc:
                failures.append(exc)
            except Exception as exc:  # a bug in one kind stops everything
                failures.append(exc)
                raise
            finally:
                connection.close()
                stop.set()

        threads = [threading.Thread(target=loop, args=(r,), name=f"k8s_watch-{r.spec.name}",
                                    daemon=True) for r in reflectors]
        freeze_heap()  # what is alive now needs no more garbage collection
        for thread in threads:
            thread.start()
        self.stdout.write(f"watching {', '.join(r.spec.name for r in reflectors)}", ending="\n")
        self.stdout.flush()
        beat_at = 0.0
        try:
            while not stop.wait(0.5):
                if heartbeat and time.monotonic() - beat_at >= HEARTBEAT_SECONDS and all(
                        t.is_alive() for t in threads):
                    Path(heartbeat).touch()
                    beat_at = time.monotonic()
        finally:
            for reflector in reflectors:
                reflector.stop()
            for thread in threads:
                thread.join(timeout=10)
        if failures:
            raise CommandError(f"stopped after repeated failures: {failures[0]}")
        self.stdout.write("stopped")
