"""Writes of the usage ledger: GPU, CPU and memory usage per job and day
(:func:`ledger_ingest_gpu`), storage snapshots and egress samples. Idempotent: rows are
keyed and recomputed, never added to; rows of a closed month are never rewritten."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import connection, transaction
from django.db.models import Max
from django.utils import timezone

from billing import ledger, months, pricebook, selectors
from billing.models import (
    EgressSample,
    GpuUsage,
    StorageSnapshot,
)
from core.choices import EgressClass
from jobs.choices import JobState
from jobs.models import JobTransition, TrainingJob
from k8s_sync.models import ObservedPVC
from tenants.models import Pool, Tenant

CHUNK = 2000



# --- the ledger ---------------------------------------------------------------------------


def ledger_ingest_gpu(*, now: dt.datetime | None = None,
                      job_ids: Iterable[int] | None = None, tenant: Tenant | None = None
                      ) -> int:
    """Recompute the GpuUsage rows (job, day, billed month) of every job with a transition
    the ledger has not taken in yet, or that still runs (or of ``job_ids``).

    Rows are recomputed from the whole transition history and upserted on (job, day,
    billed month), so running this twice changes nothing. Rows billed by a closed month
    are frozen; what a (job, day) of a closed month ran beyond (or short of) them is a
    late row billed by the first open month (see :class:`~billing.models.GpuUsage`).

    Transitions are written once and never changed, so a job's rows change only when it
    gains one, or while it runs. Each transition is marked when the ledger has taken it in
    (``JobTransition.processed_at``, in the same transaction as its job's rows), so the
    ten-minute ingest reads what is new, not the month: a transition recorded late,
    whatever month it is dated in, is still unmarked and is billed (late if its month
    was closed) rather than lost; an ingest that dies half-way leaves the rest unmarked
    for the next. Returns the number of rows written.
    """
    now = now or timezone.now()
    tz = selectors.tz()
    open_from = months.closed_until()
    # (transition id, job id) the ledger has not taken in: marked once their job's rows
    # are written (a transition committed meanwhile stays unmarked for the next ingest)
    pending = JobTransition.objects.filter(processed_at__isnull=True)
    if job_ids is None:
        active = TrainingJob.objects.filter(state__in=[JobState.RUNNING, JobState.PREEMPTING])
        if tenant is not None:
            pending = pending.filter(job__tenant=tenant)
            active = active.filter(tenant=tenant)
        ids = set(active.values_list("pk", flat=True))
    else:
        ids = set(job_ids)
        pending = pending.filter(job_id__in=ids)
    unmarked: dict[int, list[int]] = defaultdict(list)
    for pk, job_id in pending.order_by().values_list("pk", "job_id"):
        unmarked[job_id].append(pk)
    if job_ids is None:
        ids |= set(unmarked)
    ordered = sorted(ids)
    written = 0
    grid, now_epoch = ledger.DayGrid(tz), ledger.epoch_second(now)
    facts: selectors.DeviceFacts | None = None  # read once, when a row needs it
    shapes: dict[int, pricebook.JobShape] = {}
    for index in range(0, len(ordered), CHUNK):
        chunk = ordered[index:index + CHUNK]
        # dense ids (a month close) are read by range, which is far cheaper than a long IN
        dense = chunk[-1] - chunk[0] < 2 * len(chunk)
        wanted = set(chunk)
        in_chunk = ({"pk__gte": chunk[0], "pk__lte": chunk[-1]} if dense
                    else {"pk__in": chunk})
        job_in_chunk = {f"job_id{k[2:]}": v for k, v in in_chunk.items()}
        jobs = {j["pk"]: j for j in TrainingJob.objects.filter(**in_chunk).values(
            "pk", "tenant_id", "pool_id", "gpu_model", "mig_profile", "workers",
            "gpus_per_worker", "cpu_per_worker", "memory_gib_per_worker", "gpu_shared",
            "gpu_memory_gib_per_card")}
        stretches = selectors.running_stretches(
            first_job=chunk[0], last_job=chunk[-1], job_ids=None if dense else chunk)
        days: dict[tuple[int, dt.date], int] = {}
        for job_id, runs in stretches.items():
            if job_id in wanted and job_id in jobs:
                for day, seconds in ledger.stretch_day_seconds(runs, now_epoch, grid).items():
                    days[(job_id, day)] = seconds
        frozen = _frozen_usage(job_in_chunk, wanted, open_from,
                               min((d for _j, d in days), default=None))
        rows: list[tuple[Any, ...]] = []
        for (job_id, day), seconds in sorted(days.items()):
            billed = max(ledger.month_start(day), open_from)
            seconds -= frozen.get((job_id, day), 0)
            if not seconds:
                continue
            job = jobs[job_id]
            shape = shapes.get(job_id)
            if shape is None:  # what a device of the job is (billing.pricebook)
                facts = facts or selectors.device_facts()
                shape = shapes[job_id] = pricebook.JobShape.of(
                    facts.device(gpu_model=job["gpu_model"], mig_profile=job["mig_profile"],
                                 gpu_shared=job["gpu_shared"],
                                 memory_limit_gib=job["gpu_memory_gib_per_card"]),
                    workers=job["workers"], gpus_per_worker=job["gpus_per_worker"],
                    cpu_per_worker=job["cpu_per_worker"],
                    memory_gib_per_worker=job["memory_gib_per_worker"])
            rows.append((job_id, job["tenant_id"], job["pool_id"], day, billed,
                         job["gpu_model"], job["mig_profile"], shape.devices, seconds,
                         shape.millicores, shape.memory_mib, shape.device.kind,
                         shape.device.share.numerator, shape.device.share.denominator))
        with transaction.atomic():
            _drop_stale_usage(job_in_chunk, wanted, open_from,
                              {(r[0], r[3], r[4]) for r in rows})
            _upsert_usage(rows, now)
            _mark_taken_in([pk for job_id in chunk for pk in unmarked.get(job_id, ())], now)
        written += len(rows)
    return written


def _mark_taken_in(transition_ids: list[int], now: dt.datetime) -> None:
    for index in range(0, len(transition_ids), CHUNK):
        JobTransition.objects.filter(pk__in=transition_ids[index:index + CHUNK]).update(
            processed_at=now)


def _frozen_usage(job_in_chunk: Mapping[str, Any], wanted: set[int], open_from: dt.date,
                  first_day: dt.date | None) -> dict[tuple[int, dt.date], int]:
    """Seconds per (job, day) already billed by closed months (frozen rows). One query,
    and none when the recomputed days all lie in open months."""
    if first_day is None or first_day >= open_from:
        return {}
    frozen: dict[tuple[int, dt.date], int] = defaultdict(int)
    for job_id, day, seconds in GpuUsage.objects.filter(
            **job_in_chunk, billed_period__lt=open_from, day__gte=first_day).values_list(
            "job_id", "day", "seconds"):
        if job_id in wanted:
            frozen[(job_id, day)] += seconds
    return frozen


def _drop_stale_usage(job_in_chunk: Mapping[str, Any], wanted: set[int], open_from: dt.date,
                      keep: set[tuple[int, dt.date, dt.date]]) -> None:
    """Delete the open months' rows of these jobs that the history no longer gives (a
    finish the cluster dated before days already counted as running, a late row whose
    difference is back to 0)."""
    stale = [pk for pk, job_id, day, billed in GpuUsage.objects.filter(
        **job_in_chunk, billed_period__gte=open_from).values_list(
        "pk", "job_id", "day", "billed_period")
        if job_id in wanted and (job_id, day, billed) not in keep]
    for index in range(0, len(stale), CHUNK):
        GpuUsage.objects.filter(pk__in=stale[index:index + CHUNK]).delete()


_UPSERT = """
    INSERT INTO billing_gpuusage (job_id, tenant_id, pool_id, day, billed_period, gpu_model,
                                  mig_profile, devices, seconds, cpu_millicores, memory_mib,
                                  device_kind, share_num, share_den, updated_at)
    VALUES {values}
    ON CONFLICT (job_id, day, billed_period) DO UPDATE SET
        gpu_model = excluded.gpu_model, mig_profile = excluded.mig_profile,
        devices = excluded.devices, seconds = excluded.seconds,
        cpu_millicores = excluded.cpu_millicores, memory_mib = excluded.memory_mib,
        device_kind = excluded.device_kind, share_num = excluded.share_num,
        share_den = excluded.share_den, updated_at = excluded.updated_at"""


def _upsert_usage(rows: list[tuple[Any, ...]], now: dt.datetime) -> None:
    """Insert or overwrite GpuUsage rows keyed (job, day, billed month) with one prepared
    statement (SQLite 3.24+ and Postgres share the ON CONFLICT syntax): on Postgres one
    statement of arrays, on SQLite one single-row statement run for every row. The ORM's
    bulk upsert spent most of a month close preparing values."""
    if not rows:
        return
    stamp = connection.ops.adapt_datetimefield_value(now)
    if connection.vendor == "postgresql":  # one statement of arrays: no per-row parsing
        columns = list(zip(*rows, strict=True))
        sql = _UPSERT.format(values="").replace("VALUES ", """
            SELECT u.*, %s::timestamptz FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[],
                %s::date[], %s::date[], %s::text[], %s::text[], %s::int[], %s::int[],
                %s::bigint[], %s::bigint[], %s::text[], %s::bigint[], %s::bigint[]) AS u""")
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, [stamp, *[list(c) for c in columns]])
        return
    # SQLite: one single-row statement, compiled once and run for every row
    day = connection.ops.adapt_datefield_value  # looked up once: the proxy costs per call
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.executemany(
            _UPSERT.format(values="(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"),
            [(*row[:3], day(row[3]), day(row[4]), *row[5:], stamp) for row in rows])


def _pools_by_namespace() -> dict[str, Pool]:
    return {p.namespace: p for p in Pool.objects.select_related("tenant")}


def _snapshot_billed(at: dt.datetime, open_from: dt.date, tz: dt.tzinfo) -> dt.date:
    """The first month that bills a snapshot: its own, or the first open one when its
    month is closed already (a volume first seen, or resized, after its month closed)."""
    return max(ledger.month_start(at.astimezone(tz).date()), open_from)


def storage_snapshots_record(*, now: dt.datetime | None = None) -> int:
    """Record each tenant PVC's size when first seen, resized or gone (size 0).

    Keyed on (uid, at) and written only on change, so recording twice adds nothing.
    A resize is dated when Trainyard observed it; a new volume from its creation time.
    A snapshot dated in a closed month is billed from the first open month (its
    difference to the closed months as "storage from <month>" lines).
    """
    now = now or timezone.now()
    pools = _pools_by_namespace()
    open_from, tz = months.closed_until(), selectors.tz()
    latest_at = dict(StorageSnapshot.objects.values("uid").annotate(m=Max("at"))
                     .values_list("uid", "m"))
    last: dict[str, tuple[int, dt.datetime, StorageSnapshot]] = {}
    for snap in StorageSnapshot.objects.filter(at__in=set(latest_at.values())):
        if latest_at.get(snap.uid) == snap.at:
            last[snap.uid] = (snap.size_bytes, snap.at, snap)
    rows, seen = [], set()
    for pvc in ObservedPVC.objects.filter(namespace__in=list(pools)):
        pool = pools[pvc.namespace]
        seen.add(pvc.uid)
        size = pvc.requested_bytes or 0
        previous = last.get(pvc.uid)
        if previous is None:
            at = pvc.created_at or pvc.observed_at or now
        elif previous[0] != size:
            at = max(pvc.observed_at or now, previous[1] + dt.timedelta(seconds=1))
        else:
            continue
        rows.append(StorageSnapshot(tenant_id=pool.tenant_id, pool=pool, namespace=pvc.namespace,
                                    name=pvc.name, uid=pvc.uid, storage_class=pvc.storage_class,
                                    size_bytes=size, at=at,
                                    billed_period=_snapshot_billed(at, open_from, tz)))
    for uid, (size, at, snap) in last.items():
        if size and uid not in seen:
            rows.append(StorageSnapshot(
                tenant_id=snap.tenant_id, pool_id=snap.pool_id, namespace=snap.namespace,
                name=snap.name, uid=uid, storage_class=snap.storage_class, size_bytes=0,
                at=(gone := max(now, at + dt.timedelta(seconds=1))),
                billed_period=_snapshot_billed(gone, open_from, tz)))
    StorageSnapshot.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def egress_record(*, readings: Mapping[tuple[str, str, str], int], at: dt.datetime) -> int:
    """Record one reading of every pod's egress counters: (namespace, pod, destination
    class) -> bytes sent there so far (``k8s_sync.metrics.pod_egress_bytes``).

    The bytes sent since the previous reading of the same pod and class are stored with
    it (a counter below the previous reading was reset: only the new value counts).
    Keyed on (namespace, pod, destination, at): recording the same reading twice adds
    nothing. Pods outside tenant namespaces and unknown classes are ignored.
    """
    pools = _pools_by_namespace()
    keys = [k for k in readings if k[0] in pools and k[2] in EgressClass.values]
    if not keys:
        return 0
    namespaces, pods = {k[0] for k in keys}, {k[1] for k in keys}
    earlier = EgressSample.objects.filter(namespace__in=namespaces, pod__in=pods, at__lt=at)
    last = earlier.values("namespace", "pod", "destination").annotate(last=Max("at"))
    previous: dict[tuple[str, str, str], int] = {}
    for ns, pod, destination, total in earlier.filter(
            at__in={row["last"] for row in last}).values_list(
            "namespace", "pod", "destination", "transmit_total").order_by("at"):
        previous[(ns, pod, destination)] = total
    rows = []
    for key in keys:
        pool = pools[key[0]]
        total = int(readings[key])
        rows.append(EgressSample(tenant_id=pool.tenant_id, pool=pool, namespace=key[0],
                                 pod=key[1], destination=key[2], at=at, transmit_total=total,
                                 transmit_delta=ledger.counter_delta(previous.get(key), total)))
    EgressSample.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)
