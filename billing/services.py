"""Writes of the billing app: ``<entity>_<verb>``, keyword-only.

Ledger ingestion is idempotent (rows are keyed and recomputed, never added to), so the
periodic tasks and a month close may run it any number of times. Rows of a closed
month are never rewritten. Invoices are written as drafts, refreshed during the month,
and issued (numbered, immutable) only by :func:`month_close`; corrections of an issued
invoice are credit notes (:func:`credit_note_issue`).
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import Max
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _

from billing import ledger, pricebook, selectors, texts
from billing.choices import (
    BUDGET_MAX,
    BUDGET_THRESHOLDS,
    GPU_PRICE_BOUNDS,
    UNIT_PRICE_MAX,
    InvoiceKind,
    InvoiceStatus,
    LineKind,
    MigPricing,
)
from billing.models import (
    Adjustment,
    Budget,
    BudgetAlert,
    DevicePrice,
    EgressSample,
    GpuPrice,
    GpuUsage,
    Invoice,
    InvoiceLine,
    MonthClose,
    NumberSequence,
    RateCard,
    StoragePrice,
    StorageSnapshot,
)
from billing.recommend import IdleRule, recommend_gpu_quota
from core.choices import EgressClass
from core.exceptions import ApplicationError, Conflict, NotAllowed
from core.texts import english, message, render
from jobs.choices import JobState
from jobs.models import JobTransition, TrainingJob
from k8s_sync.models import ObservedPVC
from tenants.access import AnyUser, TenantAccess, is_finance, require_platform_admin
from tenants.audit import record_audit
from tenants.choices import MembershipRole, TenantStatus
from tenants.models import Membership, Pool, Tenant
from tenants.selectors import current_grants
from tenants.services import quota_request_propose
from tenants.services.notify import notify
from tenants.utilisation import Utilisation, idle_against_quota, is_gpu_kind

CHUNK = 2000


def require_finance(actor: AnyUser) -> None:
    if not is_finance(actor):
        raise NotAllowed(_("Only finance can do this."))


def _closed_until() -> dt.date:
    """The first day not in a closed month (ledger rows before it are frozen)."""
    last = MonthClose.objects.aggregate(m=Max("period"))["m"]
    return ledger.next_month(last) if last else dt.date.min


def _require_open(day: dt.date) -> None:
    if MonthClose.objects.filter(period=ledger.month_start(day)).exists():
        raise Conflict(_("%(month)s is closed; its invoices can only be corrected with "
                         "credit notes.") % {"month": f"{day:%Y-%m}"})


# --- the rate card ------------------------------------------------------------------------


GPU_PRICE_FIELDS = ("gpu_model", "memory_gib", "purchase_price", "depreciation_months",
                    "power_watts", "pue", "electricity_kwh", "operations_month")
STORAGE_PRICE_FIELDS = ("storage_class", "gib_month")
DEVICE_PRICE_FIELDS = ("device", "price_per_hour")
GPU_MODEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
STORAGE_CLASS_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def _first(exc: ValidationError) -> dict[str, str]:
    return {name: str(msgs[0]) for name, msgs in exc.message_dict.items() if msgs}


EGRESS_PRICE_FIELDS = ("egress_gib", "egress_region_gib", "egress_zone_gib")


def _device_errors(devices: Iterable[Mapping]) -> dict[str, str]:
    """Problems of a card's device price overrides, keyed ``devices-<i>-<field>``: a
    device key (``billing.pricebook.Device.key``) listed once, a price per device-hour
    from 0 to :data:`~billing.choices.UNIT_PRICE_MAX`."""
    errors: dict[str, str] = {}
    seen: set[str] = set()
    for i, row in enumerate(devices):
        key = f"devices-{i}-"
        unknown = set(row) - set(DEVICE_PRICE_FIELDS)
        if unknown:
            errors[key + sorted(unknown)[0]] = _("Unknown field.")
            continue
        raw = str(row.get("device") or "").strip()
        try:
            device = pricebook.Device.from_key(raw)
            if not device.gpu_model or not GPU_MODEL_RE.match(device.gpu_model):
                raise ValueError(raw)
        except (ValueError, ZeroDivisionError):
            errors[key + "device"] = _(
                "A device as <GPU model>|<MIG profile>, <GPU model>|shared:<share> or "
                "<GPU model>|hami:<share> (a share such as 1/4), or <GPU model>| for a "
                "whole card.")
        else:
            if device.key in seen:
                errors[key + "device"] = _("Device %(d)s is listed twice.") % {"d": device.key}
            seen.add(device.key)
        try:
            price = Decimal(str(row.get("price_per_hour")))
        except ArithmeticError:
            price = None
        if price is None or not price.is_finite() or not 0 <= price <= UNIT_PRICE_MAX \
                or price != price.quantize(Decimal("0.0001")):
            errors[key + "price_per_hour"] = _(
                "A price per device-hour from 0 to %(max)s, at most 4 decimals.") % {
                "max": UNIT_PRICE_MAX}
    return errors


def rate_card_errors(*, gpus: Iterable[Mapping], storage: Iterable[Mapping] = (),
                     egress: Mapping[str, Any] | None = None,
                     devices: Iterable[Mapping] = ()) -> dict[str, str]:
    """Every problem of a rate card's price rows, keyed ``gpus-<i>-<field>``,
    ``storage-<i>-<field>`` and ``devices-<i>-<field>`` (the device price overrides:
    :func:`_device_errors`; the page's formset names; the API returns the same keys),
    and of its egress prices per destination class (``egress``: ``egress_gib`` to the
    internet, ``egress_region_gib``, ``egress_zone_gib``; keyed by those names).
    The one validation of a rate card's rows: the page and the API both get it from
    :func:`rate_card_create`. Writes nothing."""
    errors: dict[str, str] = _device_errors(devices)
    egress = dict(egress or {})
    for name in sorted(set(egress) - set(EGRESS_PRICE_FIELDS)):
        errors[name] = _("Unknown field.")
    prices = {name: egress[name] for name in EGRESS_PRICE_FIELDS if name in egress}
    try:
        RateCard(**prices).clean_fields(
            exclude=[f.name for f in RateCard._meta.fields if f.name not in prices])
    except ValidationError as exc:
        errors.update(_first(exc))
    for name, value in prices.items():
        if name not in errors and (value is None or Decimal(value) < 0):
            errors[name] = _("Enter zero or more.")
    seen: set[str] = set()
    for i, row in enumerate(gpus):
        key = f"gpus-{i}-"
        unknown = set(row) - set(GPU_PRICE_FIELDS)
        if unknown:
            errors[key + sorted(unknown)[0]] = _("Unknown field.")
            continue
        model = str(row.get("gpu_model") or "").strip()
        price = GpuPrice(**{**row, "gpu_model": model})
        try:
            price.full_clean(exclude=["card"], validate_unique=False)
        except ValidationError as exc:
            errors.update({key + name: msg for name, msg in _first(exc).items()})
        if model and not GPU_MODEL_RE.match(model):
            errors.setdefault(key + "gpu_model", _(
                "A GPU model as the cluster names it (nvidia.com/gpu.product), e.g. "
                "NVIDIA-A100-SXM4-80GB."))
        elif model in seen:
            errors.setdefault(key + "gpu_model", _("GPU model %(m)s is listed twice.")
                              % {"m": model})
        seen.add(model)
        wording = {
            "depreciation_months": _("The depreciation period must be between 1 and 240 "
                                     "months."),
            "pue": _("PUE is between 1 and 3."),
            "power_watts": _("Power draw is between 0 and 5,000 W per card."),
            "memory_gib": _("Card memory is between 1 and 1,024 GiB (empty: as the cluster "
                            "reports it)."),
        }
        for name, (low, high) in GPU_PRICE_BOUNDS.items():
            value = getattr(price, name)
            if key + name in errors or value is None or not isinstance(value, int | Decimal):
                continue
            if value < low or value > high:
                # the money fields' upper bound is their column's width (full_clean says so)
                errors[key + name] = wording.get(name, _("Enter zero or more."))
    names: set[str] = set()
    for i, row in enumerate(storage):
        key = f"storage-{i}-"
        cls = str(row.get("storage_class") or "").strip()
        sp = StoragePrice(storage_class=cls, gib_month=row.get("gib_month"))  # type: ignore[misc]
        try:
            sp.full_clean(exclude=["card"], validate_unique=False)
        except ValidationError as exc:
            errors.update({key + name: msg for name, msg in _first(exc).items()})
        if cls and not STORAGE_CLASS_RE.match(cls):
            errors.setdefault(key + "storage_class", _("Not a StorageClass name."))
        elif cls in names:
            errors.setdefault(key + "storage_class", _("StorageClass %(c)s is listed twice.")
                              % {"c": cls})
        names.add(cls)
        if isinstance(sp.gib_month, Decimal) and sp.gib_month < 0 and \
                key + "gib_month" not in errors:
            errors[key + "gib_month"] = _("Enter zero or more.")
    return errors


def rate_card_create(*, actor: AnyUser, effective_from: dt.date, gpus: Iterable[Mapping],
                     storage: Iterable[Mapping] = (), egress_gib: Decimal = Decimal(0),
                     egress_region_gib: Decimal = Decimal(0),
                     egress_zone_gib: Decimal = Decimal(0),
                     cpu_core_hour: Decimal | None = None,
                     memory_gib_hour: Decimal | None = None,
                     mig_pricing: str = MigPricing.MEMORY, note: str = "",
                     devices: Iterable[Mapping] = ()) -> RateCard:
    """A new rate card from ``effective_from`` (00:00 local). Never in a closed month; a
    card in effect is never edited, a new one replaces it from its day. A problem with a
    price row is an ApplicationError whose ``extra["errors"]`` names every field
    (:func:`rate_card_errors`); nothing is written then. Egress is priced per GiB by
    destination: ``egress_gib`` to the internet (and every byte of a source that cannot
    tell destinations apart), ``egress_region_gib`` to other regions, ``egress_zone_gib``
    to other zones; traffic within the zone is free."""
    require_platform_admin(actor)
    _require_open(effective_from)
    if MigPricing(mig_pricing) is None:  # pragma: no cover - ValueError first
        raise ApplicationError(_("Unknown MIG pricing."))
    gpus = [{k: (v.strip() if k == "gpu_model" and isinstance(v, str) else v)
             for k, v in g.items()} for g in gpus]
    storage = list(storage)
    devices = [dict(d) for d in devices]
    if not gpus:
        raise ApplicationError(_("Price at least one GPU model."), field="gpus")
    egress = {"egress_gib": egress_gib, "egress_region_gib": egress_region_gib,
              "egress_zone_gib": egress_zone_gib}
    errors = rate_card_errors(gpus=gpus, storage=storage, egress=egress, devices=devices)
    if errors:
        first = next(iter(errors))
        raise ApplicationError(errors[first], field=first, extra={"errors": errors})
    with transaction.atomic():
        try:
            card = RateCard.objects.create(
                effective_from=effective_from, **egress,
                cpu_core_hour=cpu_core_hour or None, memory_gib_hour=memory_gib_hour or None,
                mig_pricing=mig_pricing, note=note, created_by=actor)
        except IntegrityError:
            raise Conflict(_("A rate card already starts on %(day)s.")
                           % {"day": effective_from.isoformat()}, field="effective_from") from None
        GpuPrice.objects.bulk_create(GpuPrice(card=card, **g) for g in gpus)
        StoragePrice.objects.bulk_create(StoragePrice(card=card, **st) for st in storage)
        DevicePrice.objects.bulk_create(
            DevicePrice(card=card, device=pricebook.Device.from_key(str(d["device"]).strip()).key,
                        price_per_hour=Decimal(str(d["price_per_hour"]))) for d in devices)
        record_audit(actor=actor, action="billing.rate_card.create",
                     text=message(texts.AUDIT_RATE_CARD, day=str(effective_from)), card=card.pk)
    return card


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
    open_from = _closed_until()
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
    open_from, tz = _closed_until(), selectors.tz()
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


# --- invoices -----------------------------------------------------------------------------


def _next_numbers(prefix: str, year: int, count: int) -> list[str]:
    """``count`` consecutive numbers ``<prefix>-<year>-00001``..., under a row lock."""
    if count == 0:
        return []
    NumberSequence.objects.get_or_create(prefix=prefix, year=year)
    seq = NumberSequence.objects.select_for_update().get(prefix=prefix, year=year)
    first = seq.last + 1
    seq.last += count
    seq.save(update_fields=["last"])
    return [f"{prefix}-{year}-{n:05d}" for n in range(first, first + count)]


def _write_invoices(*, period: dt.date, lines: Mapping[int, list[selectors.LineSpec]],
                    tenant_ids: Iterable[int], now: dt.datetime) -> list[Invoice]:
    """Replace the drafts of ``tenant_ids`` for ``period`` by ``lines`` (inside a
    transaction). A tenant without lines has no draft."""
    tenant_ids = list(tenant_ids)
    # the tenant rows are locked (in id order) so a page refresh, the hourly task and a
    # month close never write the same draft at once
    tenants = {t.pk: t for t in Tenant.objects.select_for_update().filter(
        pk__in=tenant_ids).order_by("pk")}
    drafts = {i.tenant_id: i for i in Invoice.objects.filter(
        period=period, kind=InvoiceKind.INVOICE, tenant_id__in=tenant_ids)}
    if any(i.is_issued for i in drafts.values()):
        raise Conflict(_("This month's invoices are already issued."))
    InvoiceLine.objects.filter(invoice__in=list(drafts.values())).delete()
    Invoice.objects.filter(pk__in=[i.pk for t, i in drafts.items() if not lines.get(t)]).delete()
    new: list[Invoice] = []
    keep: list[Invoice] = []
    for tenant_id in tenant_ids:
        if not lines.get(tenant_id):
            continue
        tenant = tenants[tenant_id]
        invoice = drafts.get(tenant_id) or Invoice(tenant=tenant, period=period,
                                                    kind=InvoiceKind.INVOICE)
        invoice.tenant_name, invoice.cost_center = tenant.name, tenant.cost_center
        invoice.currency = settings.TRAINYARD_CURRENCY
        invoice.total = sum((spec.amount for spec in lines[tenant_id]), Decimal(0))
        invoice.computed_at = now
        (keep if invoice.pk else new).append(invoice)
    Invoice.objects.bulk_create(new, batch_size=500)
    if keep:
        Invoice.objects.bulk_update(keep, ["tenant_name", "cost_center", "currency", "total",
                                           "computed_at"], batch_size=500)
    invoices = new + keep
    InvoiceLine.objects.bulk_create((
        InvoiceLine(invoice=invoice, position=n, kind=spec.kind, text=spec.text,
                    description=spec.description[:300],
                    resource=spec.resource, starts=spec.starts, ends=spec.ends,
                    quantity=spec.quantity, unit=spec.unit, unit_price=spec.unit_price,
                    amount=spec.amount, rate_card_id=spec.rate_card_id)
        for invoice in invoices for n, spec in enumerate(lines[invoice.tenant_id])),
        batch_size=2000)
    return invoices


def invoice_draft_refresh(*, tenant: Tenant, period: dt.date | None = None,
                          now: dt.datetime | None = None, ingest: bool = True
                          ) -> Invoice | None:
    """Recompute the tenant's running draft for ``period`` (this month by default) from
    the ledger (brought up to date first). None when nothing is billable yet."""
    now = now or timezone.now()
    period = ledger.month_start(period or selectors.current_period(now))
    if selectors.month_is_closed(period):
        raise Conflict(_("%(month)s is closed.") % {"month": f"{period:%Y-%m}"})
    if ingest:
        ledger_ingest_gpu(now=now, tenant=tenant)
    lines = selectors.month_lines(period, [tenant.pk])
    with transaction.atomic():
        invoices = _write_invoices(period=period, lines=lines, tenant_ids=[tenant.pk], now=now)
    return invoices[0] if invoices else None


def drafts_refresh(*, now: dt.datetime | None = None) -> int:
    """Bring the ledger up to date and recompute every tenant's draft of this month."""
    now = now or timezone.now()
    period = selectors.current_period(now)
    if selectors.month_is_closed(period):
        return 0
    ledger_ingest_gpu(now=now)
    storage_snapshots_record(now=now)
    lines = selectors.month_lines(period)
    ids = set(lines) | set(Invoice.objects.filter(period=period, kind=InvoiceKind.INVOICE)
                           .values_list("tenant_id", flat=True))
    with transaction.atomic():
        return len(_write_invoices(period=period, lines=lines, tenant_ids=ids, now=now))


def month_close_unpriced(*, period: dt.date, confirm_unpriced: bool) -> list[str]:
    """The devices the month bills usage of that the rate card does not price (their
    lines bill 0), in the reader's language. Unless ``confirm_unpriced``, any such device
    is an ApplicationError on ``confirm_unpriced`` naming them (``extra``: ``unpriced``,
    their descriptions, and ``devices``, their keys), before anything of the close is
    written (the ledger is brought up to date first, idempotently)."""
    rows = selectors.unpriced_devices(period)
    unpriced = [render(row.priced.text) for row in rows]
    if unpriced and not confirm_unpriced:
        raise ApplicationError(
            _("The rate card has no price for %(devices)s, used in %(month)s: their usage "
              "would be billed 0. Price them on the rate card, or confirm that the month "
              "closes with them unpriced.") % {"devices": "; ".join(unpriced),
                                               "month": f"{period:%Y-%m}"},
            field="confirm_unpriced",
            extra={"unpriced": unpriced, "devices": [row.device.key for row in rows]})
    return unpriced


def month_close(*, actor: AnyUser, period: dt.date, now: dt.datetime | None = None,
                confirm_unpriced: bool = False) -> MonthClose:
    """Finance closes a month that has ended: the ledger is brought up to date, every
    tenant with charges gets its invoice issued (numbered, immutable), the month's
    ledger is frozen. Closing a closed month is a Conflict. Usage of a device the rate
    card does not price needs ``confirm_unpriced`` (:func:`month_close_unpriced`); its
    lines then say "no price on the rate card: billed 0"."""
    require_finance(actor)
    started = time.perf_counter()
    now = now or timezone.now()
    period = ledger.month_start(period)
    _start, end = ledger.month_bounds(period, selectors.tz())
    if now < end:
        raise ApplicationError(_("%(month)s has not ended yet.") % {"month": f"{period:%Y-%m}"})
    if selectors.month_is_closed(period):
        raise Conflict(_("%(month)s is already closed.") % {"month": f"{period:%Y-%m}"})
    if MonthClose.objects.filter(period__lt=period).exists() and not MonthClose.objects.filter(
            period=ledger.month_start(period - dt.timedelta(days=1))).exists():
        raise ApplicationError(_("Close the previous month first."))
    ledger_ingest_gpu(now=now)
    month_close_unpriced(period=period, confirm_unpriced=confirm_unpriced)
    storage_snapshots_record(now=now)
    lines = selectors.month_lines(period)
    with transaction.atomic():
        try:
            with transaction.atomic():
                closing = MonthClose.objects.create(period=period, closed_at=now,
                                                    closed_by=actor)
        except IntegrityError:
            raise Conflict(_("%(month)s is already closed.")
                           % {"month": f"{period:%Y-%m}"}) from None
        ids = set(lines) | set(Invoice.objects.filter(period=period, kind=InvoiceKind.INVOICE)
                               .values_list("tenant_id", flat=True))
        invoices = sorted(_write_invoices(period=period, lines=lines, tenant_ids=ids, now=now),
                          key=lambda i: (i.tenant_name, i.tenant_id))
        numbers = _next_numbers(settings.TRAINYARD_INVOICE_PREFIX, period.year, len(invoices))
        for invoice, number in zip(invoices, numbers, strict=True):
            invoice.number, invoice.status = number, InvoiceStatus.ISSUED
            invoice.issued_at, invoice.issued_by = now, actor
        Invoice.objects.bulk_update(invoices, ["number", "status", "issued_at", "issued_by"],
                                    batch_size=500)
        closing.invoices = len(invoices)
        closing.total = sum((i.total for i in invoices), Decimal(0))
        closing.seconds = time.perf_counter() - started
        closing.save()
        record_audit(actor=actor, action="billing.month.close",
                     text=message(texts.AUDIT_MONTH_CLOSE, month=f"{period:%Y-%m}",
                                  n=len(invoices)),
                     period=period.isoformat(), total=str(closing.total))
    return closing


def credit_note_issue(*, actor: AnyUser, invoice: Invoice, amount: Decimal, reason: str
                      ) -> Invoice:
    """Correct an issued invoice: a numbered credit note of ``-amount``. The credits of an
    invoice never exceed its total."""
    require_finance(actor)
    if not reason.strip():
        raise ApplicationError(_("Say why the invoice is credited."), field="reason")
    if amount <= 0:
        raise ApplicationError(_("The credit must be a positive amount."), field="amount")
    with transaction.atomic():
        locked = Invoice.objects.select_for_update().get(pk=invoice.pk)
        if locked.kind != InvoiceKind.INVOICE or not locked.is_issued:
            raise Conflict(_("Only an issued invoice can be credited."))
        remaining = locked.total + selectors.credited_total(locked)
        if amount > remaining:
            raise ApplicationError(_("At most %(left)s %(cur)s is left to credit.")
                                   % {"left": remaining, "cur": locked.currency},
                                   field="amount")
        note = Invoice.objects.create(
            tenant_id=locked.tenant_id, period=locked.period, kind=InvoiceKind.CREDIT_NOTE,
            tenant_name=locked.tenant_name, cost_center=locked.cost_center,
            currency=locked.currency, total=-amount, credits=locked, reason=reason,
            computed_at=timezone.now())
        text = message(texts.LINE_CREDIT, number=locked.number, reason=reason)
        InvoiceLine.objects.create(
            invoice=note, kind=LineKind.CREDIT, quantity=Decimal(1), unit_price=-amount,
            amount=-amount, text=text, description=english(text)[:300])
        note.number = _next_numbers(f"{settings.TRAINYARD_INVOICE_PREFIX}C",
                                    locked.period.year, 1)[0]
        note.status, note.issued_at, note.issued_by = InvoiceStatus.ISSUED, timezone.now(), actor
        note.save()
        record_audit(actor=actor, action="billing.credit_note", tenant=locked.tenant,
                     text=message(texts.AUDIT_CREDIT_NOTE, number=note.number, amount=str(amount),
                                  invoice=locked.number))
    return note


def adjustment_add(*, actor: AnyUser, tenant: Tenant, period: dt.date, description: str,
                   amount: Decimal) -> Adjustment:
    """A manual charge or discount on an open month's invoice (finance)."""
    require_finance(actor)
    period = ledger.month_start(period)
    _require_open(period)
    if not description.strip() or not amount:
        raise ApplicationError(_("An adjustment needs a description and a non-zero amount."))
    with transaction.atomic():
        adj = Adjustment.objects.create(tenant=tenant, period=period, description=description,
                                        amount=amount, created_by=actor)
        record_audit(actor=actor, action="billing.adjustment", tenant=tenant,
                     text=message(texts.AUDIT_ADJUSTMENT, amount=str(amount),
                                  month=f"{period:%Y-%m}", description=description))
    return adj


# --- budgets ------------------------------------------------------------------------------


def budget_set(*, access: TenantAccess, actor: AnyUser, amount: Decimal | None) -> Budget | None:
    """A tenant admin sets (or with None/0 removes) the tenant's monthly budget."""
    access.require_admin()
    tenant = access.tenant
    with transaction.atomic():
        if not amount:
            Budget.objects.filter(tenant=tenant).delete()
            record_audit(actor=actor, action="billing.budget", tenant=tenant,
                         text=message(texts.AUDIT_BUDGET_REMOVED))
            return None
        if amount < 0:
            raise ApplicationError(_("A budget cannot be negative."), field="amount")
        if amount > BUDGET_MAX:
            raise ApplicationError(_("A budget is at most %(max)s a month.")
                                   % {"max": f"{BUDGET_MAX:,}"}, field="amount")
        budget, _created = Budget.objects.update_or_create(
            tenant=tenant, defaults={"monthly_amount": amount, "updated_by": actor})
        record_audit(actor=actor, action="billing.budget", tenant=tenant,
                     text=message(texts.AUDIT_BUDGET_SET, amount=str(amount)))
    return budget


def budget_alerts_check(*, now: dt.datetime | None = None) -> int:
    """Tell tenant admins (in the portal and by e-mail) when this month's spending passes
    50, 80 and 100% of their budget; each threshold once per month. Returns alerts sent."""
    now = now or timezone.now()
    period = selectors.current_period(now)
    sent = 0
    for budget in Budget.objects.select_related("tenant").exclude(
            tenant__status=TenantStatus.DELETED):
        status = selectors.budget_status(budget.tenant, now)
        if not budget.monthly_amount:
            continue
        crossed = [t for t in BUDGET_THRESHOLDS
                   if status.spent * 100 >= budget.monthly_amount * t]
        if not crossed:
            continue
        threshold = max(crossed)
        done = set(BudgetAlert.objects.filter(tenant=budget.tenant, period=period)
                   .values_list("threshold", flat=True))
        if threshold in done:
            continue
        with transaction.atomic():
            BudgetAlert.objects.bulk_create(
                [BudgetAlert(tenant=budget.tenant, period=period, threshold=t,
                             spent=status.spent, sent_at=now) for t in crossed if t not in done],
                ignore_conflicts=True)
            admins = [m.user for m in Membership.objects.filter(
                tenant=budget.tenant, role=MembershipRole.ADMIN).select_related("user")]
            notify(users=admins, tenant=budget.tenant, email=True,
                   link=reverse("billing:tenant_invoices", kwargs={"slug": budget.tenant.slug}),
                   text=message(texts.BUDGET_ALERT, tenant=budget.tenant.name, pct=threshold,
                                spent=str(status.spent), budget=str(budget.monthly_amount),
                                cur=settings.TRAINYARD_CURRENCY,
                                forecast=str(status.forecast)))
        sent += 1
    return sent


# --- quota recommendation -----------------------------------------------------------------


def quota_recommend_quarterly(*, today: dt.date | None = None,
                              rule: IdleRule | None = None) -> int:
    """For every tenant, whatever its quota mode (static, overcommitted, dynamic), lower
    the GPU grants that sat idle last quarter against the quota held, of every GPU kind
    (whole cards ``gpu:<model>``, MIG profiles ``mig:<profile>``, shared GPUs
    ``gpu-shared``): one proposal per pool (a QuotaRequest through
    ``tenants.services.quota_request_propose``), applied only when a platform admin
    approves it. The measure is ``tenants.utilisation.idle_against_quota``, from the
    utilisation figures (``billing.selectors.utilisation_figures`` per pool and kind):
    1 - quota use x (1 - idle rate). Returns the number of proposals filed."""
    today = today or timezone.localdate()
    rule = rule or IdleRule.from_settings()
    end = selectors.quarter_start(today)
    start = selectors.quarter_start(end - dt.timedelta(days=1))
    pools = list(Pool.objects.select_related("tenant").filter(
        tenant__status=TenantStatus.ACTIVE))
    figures = selectors.utilisation_figures(start, end, {p.tenant_id for p in pools},
                                            by_pool=True,
                                            now=ledger.local_midnight(end, selectors.tz()))
    filed = 0
    for pool in pools:
        amounts, formulas = {}, []
        for key, current in sorted(current_grants(pool).items()):
            figure = figures.get(pool.pk, {}).get(key)
            if not is_gpu_kind(key) or figure is None:
                continue
            result = recommend_gpu_quota(current=Decimal(current),
                                         idle_rate=idle_against_quota(figure), rule=rule)
            if result is not None:
                amounts[key], formula = result
                formulas.append(f"{key}: {utilisation_formula(figure)}; {formula}")
        if amounts:
            quota_request_propose(pool=pool, amounts=amounts, formula="\n".join(
                [f"quarterly recommendation for {start:%Y-%m}..{end:%Y-%m} "
                 f"({pool.tenant.get_quota_mode_display()} quota mode)", *formulas]))
            filed += 1
    return filed


def utilisation_formula(figure: Utilisation) -> str:
    """The figures behind a proposal, spelled out (English, like the rule's formula)."""
    return (f"quota held {_n(figure.quota_held_hours)} GPU-h, allocated "
            f"{_n(figure.allocated_hours)} (within quota {_n(figure.within_quota_hours)}, "
            f"borrowed {_n(figure.borrowed_hours)}), busy {_n(figure.busy_hours)} of "
            f"{_n(figure.measured_hours)} measured; quota use {_pct(figure.quota_use)}, "
            f"idle rate {_pct(figure.idle_rate)}, so idle against quota "
            f"1 - quota use x (1 - idle rate) = {_pct(idle_against_quota(figure))}")


def _n(value: Decimal) -> str:
    return f"{value.normalize():f}"


def _pct(value: Decimal | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"
