"""SQL the apps share that Django does not ship."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connections, router


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


def update_rows(model: type, names: Sequence[str], rows: Iterable[tuple[Any, ...]]) -> int:
    """Set the fields ``names`` of many rows of ``model``, each to its own values: ``rows``
    are ``(pk, value, ...)`` in the order of ``names``. One prepared UPDATE by primary key,
    run for every row by the driver's ``executemany`` (psycopg 3 pipelines it; SQLite
    steps one statement). Values are prepared as ``Model.save()`` prepares them.

    What ``QuerySet.bulk_update`` does, without its ``CASE WHEN`` per row and field: Django
    builds and resolves an expression per value there, which made a pass's bulk writes
    (thousands of waiting jobs' positions) cost seconds of CPU. No signals, no ``pre_save``
    (``auto_now`` is not applied), as with ``bulk_update``. Returns the rows given."""
    meta = model._meta  # type: ignore[attr-defined]
    fields = [meta.get_field(name) for name in names]
    connection = connections[router.db_for_write(model)]
    quote = connection.ops.quote_name
    # Table and column names come from the model, never from input.
    assignments = ", ".join(f"{quote(f.column)} = %s" for f in fields)
    sql = f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {quote(meta.pk.column)} = %s"  # noqa: S608
    params = [[f.get_db_prep_save(v, connection) for f, v in zip(fields, row[1:], strict=True)]
              + [meta.pk.get_db_prep_save(row[0], connection)] for row in rows]
    if params:
        with connection.cursor() as cursor:
            cursor.executemany(sql, params)
    return len(params)


def insert_rows(model: type, names: Sequence[str], rows: Iterable[tuple[Any, ...]]) -> int:
    """Insert many rows of ``model`` with the fields ``names`` (``rows``: values in that
    order; the primary key from the database). One prepared INSERT run for every row by
    ``executemany``, values prepared as ``Model.save()`` prepares them: what
    ``QuerySet.bulk_create`` does without building a model instance and resolving every
    field of each (a pass's JobTransitions cost more in ``bulk_create`` than the rest of
    their transaction). No signals, no ``pre_save`` (``auto_now_add`` is not applied: give
    such values). Returns the rows inserted."""
    meta = model._meta  # type: ignore[attr-defined]
    fields = [meta.get_field(name) for name in names]
    connection = connections[router.db_for_write(model)]
    quote = connection.ops.quote_name
    columns = ", ".join(quote(f.column) for f in fields)
    marks = ", ".join(["%s"] * len(fields))
    sql = f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES ({marks})"  # noqa: S608
    params = [[f.get_db_prep_save(v, connection) for f, v in zip(fields, row, strict=True)]
              for row in rows]
    if params:
        with connection.cursor() as cursor:
            cursor.executemany(sql, params)
    return len(params)
