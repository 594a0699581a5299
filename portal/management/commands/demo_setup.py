"""``make run``'s first step in one process: migrate, seed the demo cast and tenants, and
(with ``--history``) the 30 days of demo history. Each is idempotent, so a second run only
migrates what is new. One Django start-up instead of three saves about 4 s per start."""

from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Migrate and seed the demo (idempotent); used by `make run`."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--history", action="store_true",
                            help="also seed 30 days of demo history (once)")

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        call_command("seed_demo", stdout=self.stdout, stderr=self.stderr)
        if options["history"]:
            call_command("seed_history", stdout=self.stdout, stderr=self.stderr)
