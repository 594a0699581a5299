"""SQL the apps share that Django does not ship."""

from __future__ import annotations


def epoch_seconds_sql(column: str, vendor: str) -> tuple[str, tuple[str, ...]]:
    """SQL and parameters for the whole seconds since 1970-01-01 UTC of a datetime
    ``column``, truncated, computed by the database: reading many timestamps as integers
    skips building a datetime per row (the month close reads every running stretch).

    SQLite stores an aware datetime as UTC text, which ``strftime('%s', ...)`` reads;
    Postgres's ``EXTRACT(EPOCH ...)`` of a ``timestamptz`` is UTC seconds with a fraction.
    """
    if vendor == "sqlite":
        # "YYYY-MM-DD HH:MM:SS[.ffffff]": strftime would round a fraction of .9995 or more
        # up to the next second, so it reads the first 19 characters only. The format is a
        # parameter: a literal %s would be taken for a placeholder.
        return f"CAST(strftime(%s, substr({column}, 1, 19)) AS INTEGER)", ("%s",)
    if vendor == "postgresql":
        return f"FLOOR(EXTRACT(EPOCH FROM {column}))::bigint", ()
    raise NotImplementedError(f"epoch seconds: no SQL for {vendor}")
