"""What a submission reads that rarely changes, kept per process between submissions.

Every submission (``jobs.services.job_submit_check``) checks against the observed
inventory (nodes, StorageClasses), the policy (the spec's grace, checkpoint interval and
topology label; batch overcommit factors), the tenants with dedicated nodes and its
pool's effective grants (grants and active loans). Reading all of them again costs six to
eight queries a submission and caps the rate a web process or the benchmark can submit
at. Here they are read once and kept in a :class:`Snapshot`, which every submission
checks with **one** query (:func:`marker`: counts, largest ids and latest timestamps of
those tables, a few scalar subqueries, no ORM compilation; :func:`for_submission` reads
the pool and whether the job's name is taken in the same statement): when anything
changed in the database, since the snapshot was taken, by this process or another, the
marker differs and the snapshot is read again. So a submission still sees the database
as it is when it is checked, as before; only the reading is saved.

A write that bypasses those rules (a queryset ``update()`` of the policy, a node's row
changed without a new ``observed_at``) is not seen until the next change that moves the
marker: write them through their services, or call :func:`clear`.

What makes the marker change, table by table (each is written only as described):

* observed nodes and StorageClasses: the observer stamps ``observed_at`` (now) on every
  row it writes, and a deleted row changes the count (``k8s_sync.observe``);
* the policy: saved with ``save()`` (``updated_at`` is ``auto_now``);
* node dedications: created or deleted, never updated (``tenants.services.cluster``);
* quota grants: a change supersedes the current row and inserts a new one, a removal
  supersedes only (the count of current grants changes) (``tenants.services.quota``);
* loans: start (``started_at``) and end (``ended_at``) are stamped, new ones inserted;
* tenants: saved with ``save()`` or updated with ``updated_at`` (``auto_now``); pools:
  created or deleted (what the admission pass reads of them: tenant, kind).

The admission loop keeps its pools' quotas on the snapshot too (:meth:`Snapshot.memo`,
``jobs.selectors.admission_inputs``): grants, loans, tenants' modes and factors, the
policy's overcommit factors and the nodes' capacity, all covered by the marker.

``set_enabled(False)`` turns the snapshot off (every submission reads everything again,
as before): the benchmark's baseline (``bench/submit_rate.py``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from django.db import connection

from core.models import Policy
from jobs.models import TrainingJob
from jobs.selectors.inventory import _node_shapes, observed_card_facts
from jobs.validation import Inventory
from k8s_sync.models import ObservedNode, ObservedStorageClass
from tenants.choices import LoanStatus
from tenants.models import NodeDedication, Pool, QuotaGrant, QuotaLoan, Tenant
from tenants.storage import storage_class_owners

_ENABLED = True
_LOCK = threading.Lock()
_CURRENT: dict[str, Snapshot] = {}


def set_enabled(on: bool) -> None:
    """Keep snapshots between submissions (the default) or read everything each time."""
    global _ENABLED
    _ENABLED = on
    clear()


def clear() -> None:
    """Forget the snapshot (the next submission reads everything again)."""
    with _LOCK:
        _CURRENT.clear()


def _marker_sql() -> str:
    """Scalar subqueries on the tables' names (from the models, never from input)."""
    tables = {m: m._meta.db_table for m in (ObservedNode, ObservedStorageClass, Policy,
                                             NodeDedication, QuotaGrant, QuotaLoan, Tenant,
                                             Pool)}
    node, sc = tables[ObservedNode], tables[ObservedStorageClass]
    policy, dedication = tables[Policy], tables[NodeDedication]
    grant, loan = tables[QuotaGrant], tables[QuotaLoan]
    tenant, pool = tables[Tenant], tables[Pool]
    parts = [
        ("COUNT(*)", node, ""), ("MAX(id)", node, ""), ("MAX(observed_at)", node, ""),
        ("COUNT(*)", sc, ""), ("MAX(id)", sc, ""), ("MAX(observed_at)", sc, ""),
        ("COUNT(*)", policy, ""), ("MAX(updated_at)", policy, ""),
        ("COUNT(*)", dedication, ""), ("MAX(id)", dedication, ""),
        ("COUNT(*)", grant, " WHERE superseded_at IS NULL"), ("MAX(id)", grant, ""),
        ("COUNT(*)", loan, " WHERE status = %s"), ("MAX(id)", loan, ""),
        ("MAX(started_at)", loan, ""), ("MAX(ended_at)", loan, ""),
        ("COUNT(*)", tenant, ""), ("MAX(updated_at)", tenant, ""),
        ("COUNT(*)", pool, ""), ("MAX(id)", pool, ""),
    ]
    columns = [f"(SELECT {what} FROM {table}{where})" for what, table, where in parts]  # noqa: S608
    return "SELECT " + ", ".join(columns)


_MARKER_SQL: list[str] = []
_POOL_SQL: list[str] = []


def marker() -> tuple[Any, ...]:
    """One query: what changes whenever anything a :class:`Snapshot` holds changes."""
    if not _MARKER_SQL:
        _MARKER_SQL.append(_marker_sql())
    with connection.cursor() as cursor:
        cursor.execute(_MARKER_SQL[0], [LoanStatus.ACTIVE.value])
        row = cursor.fetchone()
    return tuple(row)


def _pool_sql() -> str:
    """:func:`_marker_sql`, then the pool's id and whether the job name is taken."""
    pool, job = Pool._meta.db_table, TrainingJob._meta.db_table
    return (_marker_sql() + f", (SELECT id FROM {pool} WHERE tenant_id = %s AND kind = %s), "  # noqa: S608
            f"(SELECT COUNT(*) FROM (SELECT 1 FROM {job} WHERE tenant_id = %s AND name = %s "
            "LIMIT 1) AS taken)")


def for_submission(tenant: Any, kind: str, name: str
                   ) -> tuple[Snapshot, Pool | None, bool]:
    """What a submission reads, in one statement when the snapshot is current: the
    snapshot, the tenant's pool of ``kind`` (its id, tenant and kind loaded; any other
    field is read if used; None when the tenant has no such pool) and whether the tenant
    has a job named ``name`` already."""
    if not _ENABLED:  # as before it: the pool, the name, everything read again
        pool = Pool.objects.filter(tenant=tenant, kind=kind).first()
        if pool is not None:
            pool.tenant = tenant
        taken = TrainingJob.objects.filter(tenant=tenant, name=name).exists()
        return _read(()), pool, taken
    if not _POOL_SQL:
        _POOL_SQL.append(_pool_sql())
    with connection.cursor() as cursor:
        cursor.execute(_POOL_SQL[0], [LoanStatus.ACTIVE.value, tenant.pk, kind, tenant.pk,
                                      name])
        row = tuple(cursor.fetchone())
    mark, pool_id, taken = row[:-2], row[-2], bool(row[-1])
    pool = None
    if pool_id is not None:
        pool = Pool.from_db(connection.alias, ["id", "tenant_id", "kind"],
                            [pool_id, tenant.pk, kind])
        pool.tenant = tenant
    return _current(mark), pool, taken


@dataclass
class Snapshot:
    """What submissions read, as of :attr:`marker`. ``inventory`` as
    ``jobs.selectors.inventory``; ``dedicated``: the ids of tenants with a dedicated
    node; per pool, its effective grants, read on first use."""

    marker: tuple[Any, ...]
    inventory: Inventory
    policy: Policy
    dedicated: frozenset[int]
    _grants: dict[int, dict[str, Decimal]] = field(default_factory=dict)
    _facts: list[Any] = field(default_factory=list)
    _memo: dict[str, Any] = field(default_factory=dict)

    def memo(self, name: str, build: Any) -> Any:
        """``build()``, once per snapshot: a value computed only from what the marker
        covers (the caller vouches for that). Do not change what it returns."""
        if name not in self._memo:
            self._memo[name] = build()
        return self._memo[name]

    def effective_grants(self, pool: Pool) -> dict[str, Decimal]:
        """``tenants.selectors.effective_grants(pool)`` (a copy)."""
        from tenants.selectors import effective_grants

        grants = self._grants.get(pool.pk)
        if grants is None:
            grants = effective_grants(pool)
            self._grants[pool.pk] = grants
        return dict(grants)

    def card_facts(self) -> Any:
        """``jobs.selectors.observed_card_facts()``."""
        if not self._facts:
            self._facts.append(observed_card_facts())
        return self._facts[0]


def _read(mark: tuple[Any, ...]) -> Snapshot:
    inventory = _node_shapes()
    classes = dict(ObservedStorageClass.objects.values_list("name", "is_default"))
    return Snapshot(marker=mark, inventory=replace(inventory, storage_classes=classes,
                                                   storage_class_owners=storage_class_owners()),
                    policy=Policy.current(),
                    dedicated=frozenset(NodeDedication.objects.values_list("tenant_id",
                                                                           flat=True)))


def snapshot() -> Snapshot:
    """The snapshot as the database is now: one query when nothing changed."""
    if not _ENABLED:  # everything read again (the benchmark's baseline)
        return _read(())
    return _current(marker())


def _current(mark: tuple[Any, ...]) -> Snapshot:
    with _LOCK:
        current = _CURRENT.get("last")
    if current is not None and current.marker == mark:
        return current
    # Read after the marker: a change in between only makes the next marker differ.
    fresh = _read(mark)
    with _LOCK:
        _CURRENT["last"] = fresh
    return fresh
