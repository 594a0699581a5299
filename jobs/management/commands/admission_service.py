"""``manage.py admission_service``: the admission service (``jobs.service``), one per
cluster. Several may run (``deploy/k8s/admission.yaml`` runs two): one holds the lease
and decides, the others wait to take over. SIGTERM or SIGINT stops it at once (the
lease is given up, so a standby takes over within its next look). ``--heartbeat-file``
is touched every few seconds while the loop lives (a container healthcheck).
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from jobs.backends import backend_name
from jobs.service import AdmissionService, Timing

HEARTBEAT_SECONDS = 5.0


class Command(BaseCommand):
    help = "Decide admissions: keep the queue in memory and pass on every change."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--identity", default="",
                            help="this replica's name in the lease (default host:pid)")
        parser.add_argument("--heartbeat-file", default="",
                            help="touch this file every few seconds while the loop lives")

    def handle(self, *args: Any, **options: Any) -> None:
        timing = Timing.from_settings()
        if min(timing.poll_seconds, timing.min_pass_seconds, timing.idle_seconds,
               timing.verify_seconds, timing.lease_seconds) <= 0:
            raise CommandError("TRAINYARD_ADMISSION_SERVICE: every period must be > 0")
        service = AdmissionService(identity=options["identity"] or None, timing=timing)
        stop = threading.Event()

        def shutdown(signum: int, _frame: Any) -> None:
            stop.set()

        previous = {sig: signal.signal(sig, shutdown) for sig in (signal.SIGTERM, signal.SIGINT)}
        beat = None
        if options["heartbeat_file"]:
            beat = threading.Thread(target=_heartbeat, args=(Path(options["heartbeat_file"]),
                                                             stop), daemon=True)
            beat.start()
        if backend_name() != "trainyard":
            self.stdout.write(f"admission service {service.identity}: "
                              f"TRAINYARD_ADMISSION_BACKEND={backend_name()}: that backend "
                              "admits, so this service idles and decides nothing")
        else:
            self.stdout.write(f"admission service {service.identity}: waiting for the lease")
        try:
            service.run(stop)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        f = service.figures
        self.stdout.write(f"admission service {service.identity}: {f.passes} passes, "
                          f"{f.explained} explanations, {f.writes} cluster writes; stopped")


def _heartbeat(path: Path, stop: threading.Event) -> None:
    while not stop.is_set():
        path.touch()
        stop.wait(HEARTBEAT_SECONDS)
        time.sleep(0)
