"""What the benchmarks share: Django on a scratch database."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def scratch_django(database_url: str | None = None, *, prefix: str = "trainyard-bench-",
                   **env: str) -> str:
    """Set Django up (test settings) on ``database_url`` or a fresh SQLite file in a new
    temporary folder, migrated; returns the database URL. ``env``: more
    environment variables to set before Django starts (e.g. ``TIME_ZONE``)."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    database = database_url or f"sqlite:///{tmp}/bench.sqlite3"
    os.environ.update(DJANGO_SETTINGS_MODULE="portal.settings_test", TRAINYARD_VAR_DIR=str(tmp),
                      DATABASE_URL=database, **env)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return database


def fresh_database(url: str) -> None:
    """Drop and create the Postgres database of ``url`` (a run starts from an empty one);
    nothing for any other database."""
    if not url.startswith(("postgres://", "postgresql://")):
        return
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    parts = urlsplit(url)
    name = parts.path.strip("/")
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
