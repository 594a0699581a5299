"""``manage.py static_ready``: ``collectstatic`` only when a static file changed.

``make run`` calls it at every start: the first start (and the first after a static file,
a package or the storage settings changed) collects and compresses, about 5 s; later
starts compare a fingerprint of every source file (path, size, mtime) with the one saved in
``STATIC_ROOT`` and return at once.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.core.management.base import BaseCommand

STAMP = ".trainyard-static-fingerprint"


def fingerprint() -> str:
    digest = hashlib.sha256(repr((settings.STORAGES["staticfiles"],
                                  settings.STATIC_BROTLI_QUALITY)).encode())
    for finder in finders.get_finders():
        for path, storage in sorted(finder.list(["CVS", ".*", "*~"]), key=lambda x: x[0]):
            stat = Path(storage.path(path)).stat()
            prefix = getattr(storage, "prefix", "") or ""
            digest.update(f"{prefix}/{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


class Command(BaseCommand):
    help = "Run collectstatic unless no static file changed since the last run."

    def handle(self, *args: Any, **options: Any) -> None:
        root = Path(settings.STATIC_ROOT)
        stamp = root / STAMP
        current = fingerprint()
        if stamp.exists() and stamp.read_text() == current:
            return
        call_command("collectstatic", interactive=False, verbosity=0)
        stamp.write_text(current)
