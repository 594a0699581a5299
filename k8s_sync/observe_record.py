"""Recording what the cluster says into k8s_sync's tables: a list result or watch events.

* :func:`record_relist` and :func:`record_events` apply a list result or watch events
  to the table of a kind (:data:`~k8s_sync.observe_kinds.KINDS`). Idempotent: an object
  whose ``uid`` and ``resourceVersion`` match its row is not written again, so recording
  the same list or events twice writes nothing the second time. A relist deletes the rows
  of objects that vanished (Events excepted: they are kept, see
  :class:`~k8s_sync.models.ClusterEvent`). After a change,
  :data:`~k8s_sync.signals.observed_changed` is sent on commit with the keys written.
* A batch of events is coalesced: only the last state of each object is written, once
  (a DELETED after its modifications removes the row; an ADDED of the same name after a
  DELETED is the new object's row).
* :class:`RowIndex`: what the reflector knows its kind's table holds, (namespace, name)
  -> (uid, resourceVersion), loaded by each relist and kept by its own writes, so a
  batch of watch events reads nothing before writing. Without one (``record_event`` from
  a test or a task), the rows of the batch are looked up first, as the index would say.
* Rows are written by their unique key (``INSERT ... ON CONFLICT DO UPDATE``, one
  ``executemany`` a batch), with the JSON columns encoded by orjson
  (:mod:`k8s_sync.fastjson`), not through a model instance each. A write therefore never
  needs the row's id, and an index that another process made stale (a relist task)
  costs at most a needless write, never a lost one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import (
    BooleanField,
    CharField,
    DateTimeField,
    Field,
    IntegerField,
    JSONField,
    TextField,
)
from django.db.models.constraints import UniqueConstraint
from django.utils import timezone

from k8s_sync import fastjson
from k8s_sync.models import Observed, ObservedKind
from k8s_sync.observe_kinds import EVENT_RETENTION, KINDS, KindSpec, _time
from k8s_sync.signals import observed_changed

__all__ = [
    "RowIndex", "record_activity", "record_error", "record_event", "record_events",
    "record_relist",
]

Key = tuple[str, str]  # (namespace or "", name)
Ident = tuple[str, str]  # (uid, resourceVersion) of the object a row holds


@dataclass
class RowIndex:
    """What one kind's table holds, as far as its reflector knows: key -> (uid,
    resourceVersion). ``loaded`` once a relist filled it; :meth:`reset` (after a
    failure) makes the next batch look its rows up until the next relist fills it again.
    Used from one thread (its reflector's)."""

    rows: dict[Key, Ident] = field(default_factory=dict)
    loaded: bool = False

    def load(self, rows: dict[Key, Ident]) -> None:
        self.rows, self.loaded = rows, True

    def reset(self) -> None:
        self.rows, self.loaded = {}, False


def _key(obj: Mapping[str, Any]) -> Key:
    meta = obj["metadata"]
    return meta.get("namespace") or "", meta["name"]


def _ident(obj: Mapping[str, Any]) -> Ident:
    meta = obj["metadata"]
    return meta.get("uid", ""), str(meta.get("resourceVersion", ""))


def _label(key: Key) -> str:
    return f"{key[0]}/{key[1]}" if key[0] else key[1]


def _columns(spec: KindSpec, obj: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "uid": meta.get("uid", ""), "resource_version": str(meta.get("resourceVersion", "")),
        "labels": dict(meta.get("labels") or {}), "raw": dict(obj),
        "created_at": _time(meta.get("creationTimestamp")), "observed_at": now,
        **spec.scope(), **spec.parse(obj),
    }


def _announce(kind: str, keys: list[str]) -> None:
    if keys:
        transaction.on_commit(
            lambda: observed_changed.send(sender=KINDS[kind].model, kind=kind, keys=keys))


# --- relist -----------------------------------------------------------------------------


def record_relist(spec: KindSpec, items: Iterable[Mapping[str, Any]], resource_version: str,
                  *, now: datetime | None = None, index: RowIndex | None = None) -> list[str]:
    """Make the kind's table equal to a full list; returns the keys that changed.

    Creates rows for new objects, updates rows whose uid or resourceVersion moved,
    deletes rows of objects no longer listed (Events: only rows older than
    ``EVENT_RETENTION``) and stores the bookkeeping. Idempotent; one transaction.
    ``index`` is loaded with what the table holds afterwards.
    """
    now = now or timezone.now()
    model = spec.model
    with transaction.atomic():
        existing = _existing(spec.rows())
        known = {key: row[1:] for key, row in existing.items()}
        listed = {_key(obj): obj for obj in items if spec.keep(obj)}
        written = _upsert(spec, known, listed, now)
        changed = [_label(key) for key in written]
        gone = [existing[k][0] for k in existing.keys() - listed.keys()]
        if gone:
            doomed = model.objects.filter(pk__in=gone)
            if not spec.prune:
                # kept kinds (Events) carry last_seen; only old ones go
                doomed = doomed.filter(**{"last_seen__lt": now - EVENT_RETENTION})
            doomed_keys = list(doomed.values_list("namespace", "name"))
            doomed.delete()
            changed += [_label(k) for k in doomed_keys]
            for key in doomed_keys:
                known.pop(key, None)
        known.update(written)
        ObservedKind.objects.update_or_create(kind=spec.name, defaults={
            "resource_version": resource_version, "last_list_at": now,
            "object_count": spec.rows().count()})
        _announce(spec.name, changed)
    if index is not None:
        index.load(known)
    return changed


def _existing(rows: Any) -> dict[Key, tuple[int, str, str]]:
    """(namespace, name) -> (pk, uid, resourceVersion) of the recorded rows."""
    return {(ns, name): (pk, uid, rv) for pk, ns, name, uid, rv in
            rows.values_list("pk", "namespace", "name", "uid", "resource_version")}


# --- watch events -----------------------------------------------------------------------


def record_event(spec: KindSpec, event_type: str, obj: Mapping[str, Any], *,
                 now: datetime | None = None, index: RowIndex | None = None) -> list[str]:
    """Apply one watch event to the kind's table; returns the keys that changed.

    ADDED/MODIFIED upsert the row unless it already holds this uid and resourceVersion;
    DELETED removes it (Events are kept); BOOKMARK and objects ``spec.keep`` rejects
    change nothing. Idempotent. See :func:`record_events` for a batch.
    """
    return record_events(spec, [(event_type, obj)], now=now, index=index)


def record_events(spec: KindSpec, events: Iterable[tuple[str, Mapping[str, Any]]], *,
                  now: datetime | None = None, index: RowIndex | None = None) -> list[str]:
    """Apply watch events, in order, in one transaction; returns the keys that changed.

    The end state equals applying :func:`record_event` to each in turn, with one write
    per object: only the last event per object matters, except that a DELETED removes
    the row only if it holds one of the uids this batch saw for that name (a late DELETED
    of an old object never removes the row of a newer one that a relist already
    recorded). With a loaded ``index`` nothing is read first, and the index follows the
    writes once they are done (it is left alone when the transaction fails).
    """
    last: dict[Key, tuple[str, Mapping[str, Any]]] = {}
    uids: dict[Key, set[str]] = defaultdict(set)
    for event_type, obj in events:
        if event_type in ("ADDED", "MODIFIED", "DELETED") and spec.keep(obj):
            key = _key(obj)
            last[key] = (event_type, obj)
            uids[key].add(obj["metadata"].get("uid", ""))
    if not last:
        return []
    now = now or timezone.now()
    with transaction.atomic():
        known = index.rows if index is not None and index.loaded else _known(spec, last)
        doomed = [key for key, (event_type, _obj) in last.items()
                  if event_type == "DELETED" and spec.prune
                  and (row := known.get(key)) is not None and row[0] in uids[key]]
        _delete_rows(spec, doomed)
        written = _upsert(spec, known, {key: obj for key, (event_type, obj) in last.items()
                                        if event_type != "DELETED"}, now)
        changed = [_label(key) for key in doomed] + [_label(key) for key in written]
        _announce(spec.name, changed)
    if index is not None and index.loaded:
        for key in doomed:
            index.rows.pop(key, None)
        index.rows.update(written)
    return changed


def _known(spec: KindSpec, keys: Iterable[Key]) -> dict[Key, Ident]:
    """Look up the rows of ``keys`` (no index): key -> (uid, resourceVersion)."""
    keys = list(keys)
    rows = spec.rows().filter(namespace__in={k[0] for k in keys}, name__in={k[1] for k in keys})
    return {key: row[1:] for key, row in _existing(rows).items()}


# --- writing rows -----------------------------------------------------------------------


def _upsert(spec: KindSpec, known: Mapping[Key, Ident],
            objects: Mapping[Key, Mapping[str, Any]], now: datetime) -> dict[Key, Ident]:
    """Write the rows of ``objects`` whose uid or resourceVersion moved (rows that already
    hold both are left alone); returns what the written rows now hold."""
    rows: list[tuple[Key, dict[str, Any]]] = []
    written: dict[Key, Ident] = {}
    for key, obj in objects.items():
        ident = _ident(obj)
        if known.get(key) == ident:
            continue
        rows.append((key, _columns(spec, obj, now)))
        written[key] = ident
    if rows:
        _upsert_rows(spec.model, rows)
    return written


def _upsert_rows(model: type[Observed], rows: list[tuple[Key, dict[str, Any]]]) -> None:
    """``INSERT ... ON CONFLICT (<the table's unique key>) DO UPDATE`` of many rows in one
    ``executemany`` (SQLite and Postgres speak the same syntax).

    What the ORM would do row by row (``bulk_create``, then ``UPDATE ... WHERE id``), cost
    most of a watch event's CPU: a model instance per row and each value through its
    field; here a plain value goes as it is, a JSON column through orjson, and the rest
    through the field's ``get_db_prep_save`` as in a save. A field the columns omit gets
    its default on insert and is left alone on update, as before.
    """
    conn = connections[DEFAULT_DB_ALIAS]  # the connection itself, not the per-thread proxy
    names = ("namespace", "name", *rows[0][1])
    plan = _plans.get((model, names, id(conn)))
    if plan is None:
        if len(_plans) > 256:  # threads come and go (each has its connection): stay small
            _plans.clear()
        plan = _plans[(model, names, id(conn))] = _plan(model, names, conn)
    sql, adapters, defaults = plan
    params = []
    for key, values in rows:
        given = [key[0], key[1], *(values[n] for n in names[2:])]
        params.append([adapt(v) for adapt, v in zip(adapters, given + defaults, strict=True)])
    with conn.cursor() as cursor:
        cursor.executemany(sql, params)


Plan = tuple[str, list[Callable[[Any], Any]], list[Any]]
#: (model, columns given, connection) -> the statement, each column's adapter, the defaults
#: of the columns not given: built once, not at each batch.
_plans: dict[tuple[type[Observed], tuple[str, ...], int], Plan] = {}


def _plan(model: type[Observed], names: tuple[str, ...], conn: BaseDatabaseWrapper) -> Plan:
    meta = model._meta
    unique = _unique_columns(model)
    by_name = {f.name: f for f in meta.concrete_fields}
    fields: list[Field[Any, Any]] = [
        *(by_name[n] for n in names),
        *(f for f in meta.concrete_fields if f.name not in names and not f.primary_key),
    ]
    quote = conn.ops.quote_name
    columns = [str(f.column) for f in fields]
    assign = ", ".join(f"{quote(c)} = EXCLUDED.{quote(c)}"
                       for c in columns[:len(names)] if c not in unique)
    # Identifiers from the model's own metadata, quoted; every value is a parameter.
    sql = (f"INSERT INTO {quote(meta.db_table)} ({', '.join(map(quote, columns))}) "  # noqa: S608
           f"VALUES ({', '.join(['%s'] * len(columns))}) "
           f"ON CONFLICT ({', '.join(map(quote, unique))}) DO UPDATE SET {assign}")
    return sql, [_adapter(f, conn) for f in fields], [f.get_default() for f in fields[len(names):]]


def _delete_rows(spec: KindSpec, keys: list[Key]) -> None:
    """Delete the kind's rows of ``keys`` (nothing refers to an observed row)."""
    if not keys:
        return
    meta, quote = spec.model._meta, connection.ops.quote_name
    scope = spec.scope()
    where = " AND ".join(f"{quote(c)} = %s" for c in ["namespace", "name", *scope])
    sql = f"DELETE FROM {quote(meta.db_table)} WHERE {where}"  # noqa: S608
    with connection.cursor() as cursor:
        cursor.executemany(sql, [[*key, *scope.values()] for key in keys])


def _unique_columns(model: type[Observed]) -> list[str]:
    """The columns of the table's unique key (its one ``UniqueConstraint``)."""
    by_name = {f.name: f for f in model._meta.concrete_fields}
    for constraint in model._meta.constraints:
        if isinstance(constraint, UniqueConstraint) and not constraint.condition:
            return [str(by_name[n].column) for n in constraint.fields]
    raise LookupError(f"{model.__name__} has no unique key")


def _adapter(f: Field[Any, Any], conn: BaseDatabaseWrapper) -> Callable[[Any], Any]:
    """How a value of field ``f`` becomes a query parameter: a str, int or bool of a
    field of that type as it is (what ``get_db_prep_save`` returns for it), a JSON value
    as orjson's text (Postgres: psycopg's ``Jsonb``, as Django's ``adapt_json_value``),
    anything else (datetimes) through the field's ``get_db_prep_save``."""
    if isinstance(f, JSONField):
        if conn.vendor == "postgresql":
            from psycopg.types.json import Jsonb

            return lambda v: None if v is None else Jsonb(v, dumps=fastjson.dumps_bytes)
        return lambda v: None if v is None else fastjson.dumps(v)
    prep = f.get_db_prep_save
    plain: type | None = (bool if isinstance(f, BooleanField) else
                          int if isinstance(f, IntegerField) else
                          str if isinstance(f, CharField | TextField) else None)
    if plain is not None:
        return lambda v: v if v is None or type(v) is plain else prep(v, conn)
    if isinstance(f, DateTimeField):  # a batch's rows share observed_at: adapt it once
        seen: dict[Any, Any] = {}

        def adapt(v: Any) -> Any:
            found = seen.get(v, seen)
            if found is seen:
                if len(seen) > 1024:
                    seen.clear()
                found = seen[v] = prep(v, conn)
            return found
        return adapt
    return lambda v: prep(v, conn)


def record_error(kind: str, error: BaseException, *, now: datetime | None = None) -> None:
    """Remember the last failure of a kind's observer (shown on the health page)."""
    ObservedKind.objects.update_or_create(kind=kind, defaults={
        "last_error": str(error)[:2000], "last_error_at": now or timezone.now()})


def record_activity(kind: str, resource_version: str, *, now: datetime | None = None) -> None:
    """Remember that a kind's watch delivered events up to ``resource_version``."""
    ObservedKind.objects.update_or_create(kind=kind, defaults={
        "resource_version": resource_version, "last_event_at": now or timezone.now()})
