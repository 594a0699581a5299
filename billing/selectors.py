"""Reads of the billing app: prices in effect, a month's invoice lines, job costs, idle
rates, budgets. Tenant-scoped where they take a tenant; no writes."""

from __future__ import annotations

import datetime as dt
import re
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from itertools import pairwise
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import F, Q, QuerySet, Sum
from django.shortcuts import get_object_or_404
from django.utils import timezone
from django.utils.translation import gettext as _

from billing import ledger, pricing, texts
from billing.choices import InvoiceKind, InvoiceStatus, LineKind, MigPricing
from billing.models import (
    Adjustment,
    Budget,
    EgressSample,
    GpuPrice,
    GpuUsage,
    Invoice,
    InvoiceLine,
    MonthClose,
    RateCard,
    StoragePrice,
    StorageSnapshot,
)
from core.choices import EgressClass, Tier
from core.db import epoch_seconds_sql
from core.exceptions import ApplicationError
from core.texts import StoredText, english, message
from jobs import idle_waiting
from jobs.choices import JobState
from jobs.models import JobTransition
from k8s_sync.models import ObservedNode, ObservedStorageClass
from k8s_sync.selectors import mig_profile_memory_mib
from tenants import utilisation
from tenants.choices import TenantStatus
from tenants.models import JobUtilisation, Pool, QuotaGrant, QuotaLoan, Tenant
from tenants.utilisation import Utilisation

MIB = 1024**2
#: egress destination classes in the order lines and drill-downs list them
EGRESS_ORDER: list[str] = [EgressClass.INTERNET, EgressClass.CROSS_REGION,
                           EgressClass.CROSS_ZONE, EgressClass.UNCLASSIFIED,
                           EgressClass.IN_CLUSTER]


def running_stretches(*, first_job: int, last_job: int, job_ids: Iterable[int] | None = None
                      ) -> dict[int, list[tuple[int, int | None]]]:
    """Each job's stretches in state "running" as (start, end) in whole epoch seconds (end
    None: still running), for jobs ``first_job``..``last_job`` (or only ``job_ids`` of
    them), in time order.

    The database pairs each transition with the next one (a window over the job's
    history), so only the running stretches travel to Python, as integers. The same
    stretches as :func:`jobs.timeline.running_intervals` of the (to_state, at) history:
    a stretch ends at the job's next transition (tested against it).
    """
    vendor = connection.vendor
    start_sql, start_params = epoch_seconds_sql("at", vendor)
    end_sql, end_params = epoch_seconds_sql("nxt", vendor)
    wanted = "" if job_ids is None else " AND job_id IN ({})".format(
        ", ".join(["%s"] * len(ids := list(job_ids))))
    # only fixed SQL and placeholders are formatted in
    sql = f"""
        SELECT job_id, {start_sql}, {end_sql} FROM (
            SELECT job_id, to_state, at,
                   LEAD(at) OVER (PARTITION BY job_id ORDER BY at, id) AS nxt
            FROM jobs_jobtransition WHERE job_id >= %s AND job_id <= %s{wanted}) t
        WHERE to_state = %s ORDER BY job_id, at"""  # noqa: S608
    params = [*start_params, *end_params, first_job, last_job,
              *(ids if job_ids is not None else ()), JobState.RUNNING]
    stretches: dict[int, list[tuple[int, int | None]]] = defaultdict(list)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for job_id, start, end in cursor.fetchall():
            stretches[job_id].append((start, end))
    return stretches


def tz() -> dt.tzinfo:
    return timezone.get_default_timezone()


def currency() -> str:
    return settings.TRAINYARD_CURRENCY


def current_period(now: dt.datetime | None = None) -> dt.date:
    return ledger.month_start(timezone.localtime(now or timezone.now(), tz()).date())


#: The months billing can name: a four-digit year in this range, a two-digit month.
PERIOD_YEARS = (1970, 2999)
_PERIOD = re.compile(r"([0-9]{4})-([0-9]{2})")


def parse_period(raw: str | None) -> dt.date:
    """``YYYY-MM`` to the first day of that month; the current month when empty. Anything
    else (``2026-1``, ``2026-13``, ``9999-12``) is an ApplicationError on ``month``, never
    a guess: ``2026-1`` is not read as January."""
    if not raw:
        return current_period()
    match = _PERIOD.fullmatch(raw)
    if match and PERIOD_YEARS[0] <= int(match[1]) <= PERIOD_YEARS[1] \
            and 1 <= int(match[2]) <= 12:
        return dt.date(int(match[1]), int(match[2]), 1)
    raise ApplicationError(_("“%(raw)s” is not a month: give it as YYYY-MM, from %(first)s-01 "
                             "to %(last)s-12.") % {"raw": raw[:20], "first": PERIOD_YEARS[0],
                                                     "last": PERIOD_YEARS[1]}, field="month")


# --- the rate card ------------------------------------------------------------------------


@dataclass
class Schedule:
    """Every rate card with its prices, to find the one in effect on a day."""

    cards: list[RateCard]
    gpus: dict[int, dict[str, GpuPrice]] = field(default_factory=dict)
    storage: dict[int, dict[str, Decimal]] = field(default_factory=dict)
    # GiB per card by GPU model as the cluster reports it; read on first need (MIG only)
    observed: dict[str, int] | None = None

    @property
    def observed_memory(self) -> dict[str, int]:
        if self.observed is None:
            self.observed = observed_card_memory()
        return self.observed

    def card_for(self, day: dt.date) -> RateCard | None:
        index = bisect_right([c.effective_from for c in self.cards], day) - 1
        return self.cards[index] if index >= 0 else None

    def periods(self, start: dt.date, end: dt.date
                ) -> list[tuple[RateCard | None, dt.date, dt.date]]:
        """[(card, from, to)) covering the days [start, end), split where a card starts."""
        cuts = sorted({start, end} | {c.effective_from for c in self.cards
                                      if start < c.effective_from < end})
        return [(self.card_for(a), a, b) for a, b in pairwise(cuts)]

    def device_price(self, card: RateCard | None, gpu_model: str, mig_profile: str
                     ) -> tuple[Decimal | None, StoredText]:
        """Price per device-hour (a card or one MIG instance) and how it was derived (a
        stored text: the GPU model, which card a MIG slice is priced from, or why a slice
        has no price)."""
        if card is None:
            return None, message(texts.LINE_NO_RATE_CARD)
        prices = self.gpus.get(card.pk, {})
        if not mig_profile:
            price = prices.get(gpu_model)
            return (price.price_per_hour, gpu_model) if price else (None, gpu_model)
        base = prices.get(gpu_model) or _card_for_mig(prices.values(), mig_profile,
                                                      self.observed_memory)
        if base is None:
            if prices and not any(self.card_memory(p) for p in prices.values()):
                return None, message(texts.LINE_MIG_NO_MEMORY, profile=mig_profile)
            return None, message(texts.LINE_MIG_UNPRICED, profile=mig_profile)
        share = pricing.mig_share(mig_profile, card_memory_gib=self.card_memory(base),
                                  rule=card.mig_pricing)
        return (pricing.mig_hour_price(base.price_per_hour, share),
                message(texts.LINE_MIG, profile=mig_profile, model=base.gpu_model,
                        share=_fraction(share)))

    def card_memory(self, price: GpuPrice) -> int | None:
        """A priced card's memory in GiB: the rate card's, else what the cluster reports
        for that GPU model (``nvidia.com/gpu.memory``), else None."""
        return price.memory_gib or self.observed_memory.get(price.gpu_model)


def _fraction(share: Decimal) -> str:
    frac = share.as_integer_ratio()
    return f"{frac[0]}/{frac[1]}" if frac[1] != 1 else str(frac[0])


def _card_for_mig(prices: Iterable[GpuPrice], profile: str,
                  observed: Mapping[str, int]) -> GpuPrice | None:
    """When a MIG job names no card: the smallest priced card that holds the profile (its
    memory from the rate card, else as the cluster reports it)."""
    need = (mig_profile_memory_mib(profile) or 0) / 1024
    sized = [(p.memory_gib or observed.get(p.gpu_model), p) for p in prices]
    fits = sorted(((m, p.gpu_model, p) for m, p in sized if m and m >= need),
                  key=lambda t: (t[0], t[1]))
    return fits[0][2] if fits else None


def observed_card_memory() -> dict[str, int]:
    """GiB of one card per GPU model as the cluster reports it (the ``nvidia.com/gpu.memory``
    node label the watcher records), rounded to whole GiB; the largest where nodes differ."""
    out: dict[str, int] = {}
    for model, mib in ObservedNode.objects.exclude(gpu_model="").filter(
            gpu_memory_mib__isnull=False).values_list("gpu_model", "gpu_memory_mib"):
        out[model] = max(out.get(model, 0), int((Decimal(mib or 0) / 1024).to_integral_value()))
    return out


def observed_storage_classes() -> list[str]:
    """StorageClasses the cluster reports."""
    return sorted(ObservedStorageClass.objects.values_list("name", flat=True))


def observed_gpu_models() -> list[str]:
    """GPU models the cluster reports (whole-card names, MIG and sharing suffixes removed)."""
    return sorted(set(ObservedNode.objects.exclude(gpu_model="").values_list(
        "gpu_model", flat=True)))


def rate_card_warnings(card: RateCard | None, observed: Mapping[str, int] | None = None
                       ) -> list[str]:
    """GPU models on ``card`` whose MIG slices cannot be priced by memory: the card's
    memory is blank and the cluster reports none (their slices fall back to 1/7 per
    compute slice, and a slice naming no card finds no price)."""
    if card is None or card.mig_pricing != MigPricing.MEMORY:
        return []
    observed = observed_card_memory() if observed is None else observed
    return [p.gpu_model for p in card.gpu_prices.all()
            if not p.memory_gib and not observed.get(p.gpu_model)]


def schedule() -> Schedule:
    cards = list(RateCard.objects.order_by("effective_from"))
    sched = Schedule(cards=cards)
    for price in GpuPrice.objects.all():
        sched.gpus.setdefault(price.card_id, {})[price.gpu_model] = price
    for sp in StoragePrice.objects.all():
        sched.storage.setdefault(sp.card_id, {})[sp.storage_class] = sp.gib_month
    return sched


def rate_cards() -> QuerySet[RateCard]:
    return RateCard.objects.prefetch_related("gpu_prices", "storage_prices")


def current_rate_card(day: dt.date | None = None) -> RateCard | None:
    day = day or timezone.localdate()
    return rate_cards().filter(effective_from__lte=day).order_by("-effective_from").first()


# --- a month's lines ----------------------------------------------------------------------


@dataclass
class LineSpec:
    kind: str
    text: StoredText  # the description, a stored text shown in the reader's language
    amount: Decimal
    resource: str = ""
    starts: dt.date | None = None
    ends: dt.date | None = None
    quantity: Decimal = Decimal(0)
    unit: str = ""
    unit_price: Decimal = Decimal(0)
    rate_card_id: int | None = None

    @property
    def description(self) -> str:
        return english(self.text)

    @property
    def unit_label(self) -> str:
        return texts.unit(self.unit)


def _described(what: StoredText, card: RateCard | None, split: bool,
               priced: bool = True) -> StoredText:
    """A line's text: ``what``, with the day its prices start when the month is split
    between rate cards, and a warning when the card has no price for it."""
    if split and card is not None:
        what = message(texts.PRICES_FROM, what=what, day=card.effective_from.isoformat())
    return what if priced else message(texts.NO_PRICE, what=what)


def _month_seconds(first: dt.date) -> int:
    start, end = ledger.month_bounds(first, tz())
    return int((end - start).total_seconds())


def _usage_lines(out: dict[int, list[LineSpec]], sched: Schedule, card: RateCard | None,
                 a: dt.date, b: dt.date, billed: dt.date, ids: list[int] | None, split: bool,
                 late: dt.date | None = None) -> None:
    """GPU lines (per device kind), CPU and memory lines of the GpuUsage rows of the days
    [a, b) that the month ``billed`` bills, priced by ``card``. ``late``: the closed month
    the days belong to (the lines say "usage from <month>")."""
    usage = GpuUsage.objects.filter(billed_period=billed, day__gte=a, day__lt=b)
    if ids is not None:
        usage = usage.filter(tenant_id__in=ids)
    rows = usage.values("tenant_id", "gpu_model", "mig_profile").annotate(
        device_seconds=Sum(F("seconds") * F("devices")),
        milli_seconds=Sum(F("seconds") * F("cpu_millicores")),
        mib_seconds=Sum(F("seconds") * F("memory_mib"))).order_by(
        "tenant_id", "gpu_model", "mig_profile")

    def text(what: StoredText, priced: bool = True) -> StoredText:
        desc = _described(what, card, split, priced=priced)
        return message(texts.LATE_USAGE, what=desc, month=f"{late:%Y-%m}") if late else desc

    cpu_totals: dict[int, int] = defaultdict(int)
    mem_totals: dict[int, int] = defaultdict(int)
    for row in rows:
        tenant_id, device_seconds = row["tenant_id"], int(row["device_seconds"] or 0)
        cpu_totals[tenant_id] += int(row["milli_seconds"] or 0)
        mem_totals[tenant_id] += int(row["mib_seconds"] or 0)
        if not device_seconds:
            continue
        price, label = sched.device_price(card, row["gpu_model"], row["mig_profile"])
        unit = "instance-hours" if row["mig_profile"] else "GPU-hours"
        out[tenant_id].append(LineSpec(
            kind=LineKind.GPU, text=text(label or message(texts.LINE_GPU), price is not None),
            resource=f"{row['gpu_model']}|{row['mig_profile']}", starts=a, ends=b,
            quantity=pricing.hours(device_seconds), unit=unit,
            unit_price=price or Decimal(0),
            amount=pricing.hourly_amount(device_seconds, price or Decimal(0)),
            rate_card_id=card.pk if card else None))
    if card is not None and card.cpu_core_hour:
        for tenant_id, milli in cpu_totals.items():
            if milli:
                out[tenant_id].append(LineSpec(
                    kind=LineKind.CPU, text=text(message(texts.LINE_CPU)),
                    starts=a, ends=b, quantity=pricing.hours(Decimal(milli) / 1000),
                    unit="core-hours", unit_price=card.cpu_core_hour,
                    amount=pricing.hourly_amount(Decimal(milli) / 1000, card.cpu_core_hour),
                    rate_card_id=card.pk))
    if card is not None and card.memory_gib_hour:
        for tenant_id, mib in mem_totals.items():
            if mib:
                gib_s = Decimal(mib) / 1024
                out[tenant_id].append(LineSpec(
                    kind=LineKind.MEMORY, text=text(message(texts.LINE_MEMORY)),
                    starts=a, ends=b, quantity=pricing.hours(gib_s), unit="GiB-hours",
                    unit_price=card.memory_gib_hour,
                    amount=pricing.hourly_amount(gib_s, card.memory_gib_hour),
                    rate_card_id=card.pk))


def late_months(billed: dt.date, ids: Iterable[int] | None = None) -> list[dt.date]:
    """The closed months whose GPU, CPU and memory usage found since the month
    ``billed`` bills (late GpuUsage rows), oldest first."""
    rows = GpuUsage.objects.filter(billed_period=billed, day__lt=billed)
    if ids is not None:
        rows = rows.filter(tenant_id__in=list(ids))
    return sorted({ledger.month_start(d) for d in rows.dates("day", "month")})


def known_snapshots(billed: dt.date, *, before: bool = False) -> QuerySet[StorageSnapshot]:
    """The storage snapshots known when the month ``billed`` is billed (recorded before
    it closes): billed by it or an earlier month; ``before``: only by earlier months."""
    cond = Q(billed_period__lt=billed) if before else Q(billed_period__lte=billed)
    start, _end = ledger.month_bounds(billed, tz())
    legacy = Q(billed_period__isnull=True) & (Q(at__lt=start) if before else Q())
    return StorageSnapshot.objects.filter(cond | legacy)


def late_storage(billed: dt.date, ids: Iterable[int] | None, sched: Schedule,
                 uid: str | None = None
                 ) -> dict[tuple[int, int | None, str, dt.date, dt.date], int]:
    """What snapshots recorded after their month closed, and billed by ``billed``, change
    in the closed months: byte-seconds per (tenant, card, StorageClass, [a, b)) of each
    closed month from the earliest such snapshot's month on, as the snapshots known now
    minus those known when the previous month was billed (negative: a volume that went,
    or shrank, earlier than billed). ``uid``: one volume only (the drill-down)."""
    start, _end = ledger.month_bounds(billed, tz())
    late = StorageSnapshot.objects.filter(billed_period=billed, at__lt=start)
    if ids is not None:
        late = late.filter(tenant_id__in=list(ids))
    if uid is not None:
        late = late.filter(uid=uid)
    earliest: dict[str, dt.datetime] = {}
    for snap_uid, at in late.values_list("uid", "at"):
        earliest[snap_uid] = min(at, earliest.get(snap_uid, at))
    out: dict[tuple[int, int | None, str, dt.date, dt.date], int] = defaultdict(int)
    if not earliest:
        return out
    now_known: dict[str, list[tuple[dt.datetime, int]]] = defaultdict(list)
    then_known: dict[str, list[tuple[dt.datetime, int]]] = defaultdict(list)
    owner: dict[str, tuple[int, str]] = {}
    for snapshots, before in ((now_known, False), (then_known, True)):
        for snap_uid, tenant_id, cls, size, at in known_snapshots(billed, before=before).filter(
                uid__in=list(earliest), at__lt=start).order_by("uid", "at").values_list(
                "uid", "tenant_id", "storage_class", "size_bytes", "at"):
            snapshots[snap_uid].append((at, size))
            owner[snap_uid] = (tenant_id, cls)
    for snap_uid, first_at in earliest.items():
        tenant_id, cls = owner[snap_uid]
        month = ledger.month_start(first_at.astimezone(tz()).date())
        while month < billed:
            for card, a, b in sched.periods(month, ledger.next_month(month)):
                lo, hi = ledger.local_midnight(a, tz()), ledger.local_midnight(b, tz())
                delta = (ledger.size_byte_seconds(now_known[snap_uid], lo, hi)
                         - ledger.size_byte_seconds(then_known[snap_uid], lo, hi))
                if delta:
                    out[(tenant_id, card.pk if card else None, cls, a, b)] += delta
            month = ledger.next_month(month)
    return out


def _storage_lines(out: dict[int, list[LineSpec]], sched: Schedule,
                   storage: Mapping[tuple[int, int | None, str, dt.date, dt.date], int],
                   billed: dt.date, split: bool) -> None:
    """Storage lines from byte-seconds per (tenant, card, StorageClass, [a, b)); days of
    an earlier month than ``billed`` are late ("storage from <month>"), in GiB-months
    of their own month."""
    cards_by_id = {c.pk: c for c in sched.cards}
    for (tenant_id, card_id, storage_class, a, b), byte_seconds in sorted(
            storage.items(), key=lambda kv: (kv[0][0], kv[0][3], kv[0][2])):
        if not byte_seconds:
            continue
        price = sched.storage.get(card_id, {}).get(storage_class) if card_id else None
        origin = ledger.month_start(a)
        if origin != billed:
            split = len(sched.periods(origin, ledger.next_month(origin))) > 1
        desc = _described(message(texts.LINE_STORAGE, cls=storage_class or "-"),
                          cards_by_id.get(card_id) if card_id else None, split,
                          priced=price is not None)
        if origin != billed:
            desc = message(texts.LATE_USAGE, what=desc, month=f"{origin:%Y-%m}")
        seconds_of_month = _month_seconds(origin)
        out[tenant_id].append(LineSpec(
            kind=LineKind.STORAGE, text=desc, resource=storage_class, starts=a, ends=b,
            quantity=pricing.gib_months(byte_seconds, seconds_of_month), unit="GiB-months",
            unit_price=price or Decimal(0),
            amount=pricing.storage_amount(byte_seconds, seconds_of_month, price or Decimal(0)),
            rate_card_id=card_id))


def late_lines(period: dt.date, tenant_ids: Iterable[int] | None = None,
               sched: Schedule | None = None) -> dict[int, list[LineSpec]]:
    """The late lines the month of ``period`` bills: usage of closed months found since
    they closed (GPU, CPU, memory and storage, "usage from <month>"), priced by the card
    of their own days. Computed from the ledger, so finance sees them before closing
    (the month page, ``GET /api/v1/billing/months/<month>/``)."""
    sched = sched or schedule()
    first = ledger.month_start(period)
    ids = list(tenant_ids) if tenant_ids is not None else None
    out: dict[int, list[LineSpec]] = defaultdict(list)
    for origin in late_months(first, ids):
        origin_periods = sched.periods(origin, ledger.next_month(origin))
        for card, a, b in origin_periods:
            _usage_lines(out, sched, card, a, b, first, ids, len(origin_periods) > 1,
                         late=origin)
    _storage_lines(out, sched, late_storage(first, ids, sched), first, False)
    return dict(out)


def month_lines(period: dt.date, tenant_ids: Iterable[int] | None = None,
                sched: Schedule | None = None) -> dict[int, list[LineSpec]]:
    """Every tenant's invoice lines for the month of ``period``, from the ledger.

    GPU lines per card period and device kind; CPU and memory when the card prices them;
    then the same for usage of closed months found since they closed ("usage from
    <month>", priced by the card of its own days); storage per StorageClass (and its late
    part); egress per destination class (to the internet, other regions, other zones, or
    unclassified; within the zone is free and has no line); then the month's adjustments.
    Amounts are rounded per line (see billing.pricing).
    """
    sched = sched or schedule()
    first = ledger.month_start(period)
    after = ledger.next_month(first)
    _start_dt, end_dt = ledger.month_bounds(first, tz())
    ids = list(tenant_ids) if tenant_ids is not None else None
    out: dict[int, list[LineSpec]] = defaultdict(list)
    periods = sched.periods(first, after)
    split = len(periods) > 1

    for card, a, b in periods:
        _usage_lines(out, sched, card, a, b, first, ids, split)

    # storage: each volume's size over the month (as known when this month is billed),
    # per card period and StorageClass; then the late lines (:func:`late_lines`)
    snaps = known_snapshots(first).filter(at__lt=end_dt)
    if ids is not None:
        snaps = snaps.filter(tenant_id__in=ids)
    volumes: dict[str, list[tuple[dt.datetime, int]]] = defaultdict(list)
    owner: dict[str, tuple[int, str]] = {}
    for uid, tenant_id, storage_class, size, at in snaps.order_by("uid", "at").values_list(
            "uid", "tenant_id", "storage_class", "size_bytes", "at"):
        volumes[uid].append((at, size))
        owner[uid] = (tenant_id, storage_class)
    storage: dict[tuple[int, int | None, str, dt.date, dt.date], int] = defaultdict(int)
    for uid, snapshots in volumes.items():
        tenant_id, storage_class = owner[uid]
        for card, a, b in periods:
            byte_seconds = ledger.size_byte_seconds(
                snapshots, ledger.local_midnight(a, tz()), ledger.local_midnight(b, tz()))
            if byte_seconds:
                storage[(tenant_id, card.pk if card else None, storage_class, a, b)] += \
                    byte_seconds
    _storage_lines(out, sched, storage, first, split)
    for tenant_id, specs in late_lines(first, ids, sched).items():
        out[tenant_id].extend(specs)

    # egress: bytes sent per card period and destination class, one line per class
    # (resource: the class); traffic within the zone is free and has no line
    for card, a, b in periods:
        samples = EgressSample.objects.filter(
            at__gte=ledger.local_midnight(a, tz()), at__lt=ledger.local_midnight(b, tz()),
            destination__in=list(texts.LINE_EGRESS_TO))
        if ids is not None:
            samples = samples.filter(tenant_id__in=ids)
        sent_by = samples.values("tenant_id", "destination").annotate(
            sent=Sum("transmit_delta")).values_list("tenant_id", "destination", "sent")
        for tenant_id, destination, sent in sorted(
                sent_by, key=lambda r: (r[0], EGRESS_ORDER.index(r[1]))):
            if sent:
                price = (card.egress_price(destination) if card else None) or Decimal(0)
                out[tenant_id].append(LineSpec(
                    kind=LineKind.EGRESS, resource=destination,
                    text=_described(message(texts.LINE_EGRESS_TO[EgressClass(destination)]),
                                    card, split),
                    starts=a, ends=b, quantity=pricing.gib(sent), unit="GiB",
                    unit_price=price, amount=pricing.egress_amount(sent, price),
                    rate_card_id=card.pk if card else None))

    adjustments = Adjustment.objects.filter(period=first)
    if ids is not None:
        adjustments = adjustments.filter(tenant_id__in=ids)
    for adj in adjustments:
        out[adj.tenant_id].append(LineSpec(
            kind=LineKind.ADJUSTMENT, text=adj.description, quantity=Decimal(1),
            unit_price=adj.amount, amount=adj.amount))
    return dict(out)


# --- invoices -----------------------------------------------------------------------------


def invoices_for_tenant(tenant: Tenant) -> QuerySet[Invoice]:
    return Invoice.objects.filter(tenant=tenant).select_related("credits").order_by(
        "-period", "kind", "id")


def invoice_for_tenant_or_404(tenant: Tenant, pk: int) -> Invoice:
    return get_object_or_404(Invoice.objects.select_related("tenant", "credits"),
                             tenant=tenant, pk=pk)


def invoices_for_month(period: dt.date) -> QuerySet[Invoice]:
    return Invoice.objects.filter(period=ledger.month_start(period)).select_related(
        "tenant", "credits").order_by("tenant_name", "kind", "id")


def month_is_closed(period: dt.date) -> bool:
    return MonthClose.objects.filter(period=ledger.month_start(period)).exists()


def credited_total(invoice: Invoice) -> Decimal:
    """What credit notes have taken off ``invoice`` so far (a negative amount or 0)."""
    return Invoice.objects.filter(credits=invoice, status=InvoiceStatus.ISSUED).aggregate(
        s=Sum("total"))["s"] or Decimal(0)


@dataclass(frozen=True)
class LineDetail:
    label: str
    quantity: Decimal
    amount: Decimal
    job_id: int | None = None
    #: egress lines: the pod's GiB to every destination class in the line's days,
    #: [(class, GiB)] in EGRESS_ORDER (the free ones included)
    destinations: tuple[tuple[EgressClass, Decimal], ...] = ()


def line_details(line: InvoiceLine) -> list[LineDetail]:
    """What is behind one line: the jobs (GPU, CPU, memory), volumes, or pods."""
    invoice = line.invoice
    if line.starts is None or line.ends is None:
        return []
    if line.kind in (LineKind.GPU, LineKind.CPU, LineKind.MEMORY):
        usage = GpuUsage.objects.filter(tenant_id=invoice.tenant_id, day__gte=line.starts,
                                        day__lt=line.ends, billed_period=invoice.period)
        if line.kind == LineKind.GPU:
            gpu_model, _sep, mig = line.resource.partition("|")
            usage = usage.filter(gpu_model=gpu_model, mig_profile=mig, devices__gt=0)
            metric = Sum(F("seconds") * F("devices"))
        elif line.kind == LineKind.CPU:
            metric = Sum(F("seconds") * F("cpu_millicores"))
        else:
            metric = Sum(F("seconds") * F("memory_mib"))
        rows = usage.values("job_id", "job__name").annotate(q=metric).order_by("-q", "job_id")
        scale = {"gpu": 1, "cpu": 1000, "memory": 1024}[str(line.kind)]
        return [LineDetail(label=r["job__name"], job_id=r["job_id"],
                           quantity=pricing.hours(Decimal(r["q"] or 0) / scale),
                           amount=pricing.hourly_amount(Decimal(r["q"] or 0) / scale,
                                                        line.unit_price))
                for r in rows if r["q"]]
    if line.kind == LineKind.STORAGE:
        return _storage_details(line, invoice)
    if line.kind == LineKind.EGRESS:
        # the line's class (every class for a line of one price, written before classes)
        sent: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for ns, pod, destination, total in EgressSample.objects.filter(
                tenant_id=invoice.tenant_id, at__gte=ledger.local_midnight(line.starts, tz()),
                at__lt=ledger.local_midnight(line.ends, tz())).values(
                "namespace", "pod", "destination").annotate(s=Sum("transmit_delta")).values_list(
                "namespace", "pod", "destination", "s"):
            sent[(ns, pod)][destination] += int(total or 0)
        details = []
        for (ns, pod), classes in sent.items():
            billed = (classes.get(line.resource, 0) if line.resource
                      else sum(classes.values()))
            if billed:
                details.append(LineDetail(
                    label=f"{ns}/{pod}", quantity=pricing.gib(billed),
                    amount=pricing.egress_amount(billed, line.unit_price),
                    destinations=tuple((EgressClass(c), pricing.gib(classes[c]))
                                       for c in EGRESS_ORDER if classes.get(c))))
        return sorted(details, key=lambda d: (-d.quantity, d.label))
    return []


def _storage_details(line: InvoiceLine, invoice: Invoice) -> list[LineDetail]:
    """The volumes behind a storage line: their GiB-months over the line's days as known
    when the invoice's month was billed, or, for a late line ("storage from <month>"),
    what each volume's late snapshots changed in those days."""
    assert line.starts is not None and line.ends is not None
    origin = ledger.month_start(line.starts)
    seconds_of_month = _month_seconds(origin)
    start = ledger.local_midnight(line.starts, tz())
    end = ledger.local_midnight(line.ends, tz())
    snaps = known_snapshots(invoice.period).filter(
        tenant_id=invoice.tenant_id, storage_class=line.resource, at__lt=end)
    late = origin < invoice.period
    if late:
        snaps = snaps.filter(uid__in=StorageSnapshot.objects.filter(
            billed_period=invoice.period, at__lt=ledger.local_midnight(invoice.period, tz()),
            tenant_id=invoice.tenant_id, storage_class=line.resource).values("uid"))
    volumes: dict[str, list[tuple[dt.datetime, int]]] = defaultdict(list)
    names: dict[str, str] = {}
    for uid, ns, name, size, at in snaps.order_by("uid", "at").values_list(
            "uid", "namespace", "name", "size_bytes", "at"):
        volumes[uid].append((at, size))
        names[uid] = f"{ns}/{name}"
    sched = schedule() if late else None
    details = []
    for uid, snapshots in volumes.items():
        if sched is not None:
            bs = sum(v for k, v in late_storage(invoice.period, [invoice.tenant_id], sched,
                                                uid=uid).items()
                     if k[2] == line.resource and k[3] == line.starts and k[4] == line.ends)
        else:
            bs = ledger.size_byte_seconds(snapshots, start, end)
        if bs:
            details.append(LineDetail(
                label=names[uid], quantity=pricing.gib_months(bs, seconds_of_month),
                amount=pricing.storage_amount(bs, seconds_of_month, line.unit_price)))
    return sorted(details, key=lambda d: -d.quantity)


# --- per job ------------------------------------------------------------------------------


def _job_rate(sched: Schedule, card: RateCard | None, job: Any) -> Decimal:
    """Price per hour of running ``job`` under ``card`` (devices, CPU and memory)."""
    devices = job.workers * job.gpus_per_worker
    rate = Decimal(0)
    if devices:
        price, _label = sched.device_price(card, job.gpu_model, job.mig_profile)
        rate += (price or Decimal(0)) * devices
    if card is not None and card.cpu_core_hour:
        rate += card.cpu_core_hour * job.cpu_per_worker * job.workers
    if card is not None and card.memory_gib_hour:
        rate += card.memory_gib_hour * job.memory_gib_per_worker * job.workers
    return rate


def job_costs(jobs: Iterable[Any], now: dt.datetime | None = None) -> dict[int, Decimal]:
    """Cost so far per job id, from its transitions (running now counts up to ``now``),
    each day at the rate card in effect that day; rounded to cents per job. (Invoices
    round per line, so a sum of job costs may differ from a line by a few cents.)"""
    jobs = list(jobs)
    if not jobs:
        return {}
    now = now or timezone.now()
    sched = schedule()
    transitions: dict[int, list[tuple[str, dt.datetime]]] = defaultdict(list)
    for job_id, state, at in JobTransition.objects.filter(job__in=[j.pk for j in jobs]).order_by(
            "job_id", "at", "id").values_list("job_id", "to_state", "at"):
        transitions[job_id].append((state, at))
    out: dict[int, Decimal] = {}
    for job in jobs:
        cost = Decimal(0)
        days = ledger.running_day_seconds(transitions.get(job.pk, []), now, tz())
        for day, seconds in days.items():
            cost += _job_rate(sched, sched.card_for(day), job) * seconds / 3600
        out[job.pk] = pricing.round_money(cost)
    return out


def estimate_job_cost(gpu_model: str, mig_profile: str, gpus: int, seconds: int
                      ) -> Decimal | None:
    """What ``gpus`` devices (cards or MIG instances) for ``seconds`` would cost at today's
    rate card; None when the device has no price."""
    sched = schedule()
    price, _label = sched.device_price(sched.card_for(timezone.localdate()), gpu_model,
                                       mig_profile)
    if price is None:
        return None
    return pricing.hourly_amount(Decimal(gpus) * seconds, price)


# --- utilisation figures ---------------------------------------------------------------
# The figures are defined once in ``tenants.utilisation`` (pure); these read their inputs.


def quarter_start(day: dt.date) -> dt.date:
    return day.replace(month=(day.month - 1) // 3 * 3 + 1, day=1)


_PoolKind = tuple[int, int, str]   # (tenant id, pool id, GPU kind)


def _quota_held_hours(lo: dt.datetime, hi: dt.datetime, tenant_ids: list[int] | None
                      ) -> dict[_PoolKind, Decimal]:
    """Device-hours of quota each pool held per GPU kind over [lo, hi): every grant row
    times the hours it was in force (the table is the history), plus the hours of the
    loans it borrowed, minus the ones it lent."""
    out: dict[_PoolKind, Decimal] = defaultdict(Decimal)
    gpu = Q(resource__startswith="gpu:") | Q(resource__startswith="mig:") | Q(
        resource=utilisation.GPU_SHARED)
    grants = QuotaGrant.objects.filter(gpu, created_at__lt=hi).filter(
        Q(superseded_at__isnull=True) | Q(superseded_at__gt=lo))
    if tenant_ids is not None:
        grants = grants.filter(pool__tenant_id__in=tenant_ids)
    for tenant_id, pool_id, resource, amount, since, until in grants.values_list(
            "pool__tenant_id", "pool_id", "resource", "amount", "created_at", "superseded_at"):
        out[(tenant_id, pool_id, resource)] += utilisation.held_hours(amount, since, until,
                                                                      lo, hi)
    loans = QuotaLoan.objects.filter(gpu, started_at__isnull=False, started_at__lt=hi).filter(
        Q(ended_at__isnull=True) | Q(ended_at__gt=lo))
    for l_tenant, l_pool, b_tenant, b_pool, resource, amount, began, ended in loans.values_list(
            "lender__tenant_id", "lender_id", "borrower__tenant_id", "borrower_id", "resource",
            "amount", "started_at", "ended_at"):
        held = utilisation.held_hours(amount, began, ended, lo, hi)
        if tenant_ids is None or l_tenant in tenant_ids:
            out[(l_tenant, l_pool, resource)] -= held
        if tenant_ids is None or b_tenant in tenant_ids:
            out[(b_tenant, b_pool, resource)] += held
    return out


def _allocated_hours(start: dt.date, end: dt.date, tenant_ids: list[int] | None
                     ) -> dict[_PoolKind, dict[int, tuple[Decimal, bool]]]:
    """(tenant, pool, GPU kind) -> job id -> (device-hours billed over the days [start,
    end), beyond quota): the ledger's rows (``GpuUsage``), a job beyond quota when the
    engine admitted it borrowing or in the batch tier."""
    rows = GpuUsage.objects.filter(day__gte=start, day__lt=end, devices__gt=0).exclude(
        gpu_model="", mig_profile="")
    if tenant_ids is not None:
        rows = rows.filter(tenant_id__in=tenant_ids)
    out: dict[_PoolKind, dict[int, tuple[Decimal, bool]]] = defaultdict(dict)
    for tenant_id, pool_id, job_id, model, profile, shared, borrowing, tier, ds in (
            rows.values("tenant_id", "pool_id", "job_id", "gpu_model", "mig_profile",
                        "job__gpu_shared", "job__borrowing", "job__tier")
            .annotate(ds=Sum(F("devices") * F("seconds")))
            .values_list("tenant_id", "pool_id", "job_id", "gpu_model", "mig_profile",
                         "job__gpu_shared", "job__borrowing", "job__tier", "ds")):
        key = (tenant_id, pool_id, utilisation.job_kind(model, profile, shared))
        hours = out[key].get(job_id, (Decimal(0), False))[0] + Decimal(ds or 0) / 3600
        out[key][job_id] = (hours, bool(borrowing) or tier == Tier.BATCH)
    return out


def _job_utilisation(job_ids: set[int], lo: dt.datetime, hi: dt.datetime,
                     tenant_ids: list[int] | None) -> dict[int, float]:
    """Job id -> its mean GPU utilisation (0..100) as the minute sampler measured it
    (``JobUtilisation``), for the jobs sampled around [lo, hi)."""
    out: dict[int, float] = {}
    rows = JobUtilisation.objects.filter(gpu_samples__gt=0, last_sampled_at__gte=lo,
                                         first_sampled_at__lt=hi)
    if tenant_ids is not None:
        rows = rows.filter(namespace__in=[p.namespace for p in Pool.objects.filter(
            tenant_id__in=tenant_ids).select_related("tenant")])
    for job, total, samples in rows.values_list("job", "util_sum", "gpu_samples").iterator():
        if job.isdigit() and int(job) in job_ids:
            out[int(job)] = total / samples
    return out


def utilisation_figures(start: dt.date, end: dt.date, tenant_ids: Iterable[int] | None = None,
                        *, by_pool: bool = False, now: dt.datetime | None = None
                        ) -> dict[int, dict[str, Utilisation]]:
    """**The utilisation figures** (``tenants.utilisation``) over the days [start, end),
    up to ``now``: tenant id (pool id with ``by_pool``) -> GPU kind (``gpu:<model>``,
    ``mig:<profile>``, ``gpu-shared``) -> quota held, allocated (within quota, borrowed),
    busy, quota use and idle rate. The one computation behind the tenant dashboard, the
    request facts, the invoice, finance's month, the API, ``/metrics`` and the quarterly
    review. Keys with quota held or allocated hours."""
    ids = list(tenant_ids) if tenant_ids is not None else None
    zone = tz()
    lo = ledger.local_midnight(start, zone)
    hi = min(ledger.local_midnight(end, zone), now or timezone.now())
    quota = _quota_held_hours(lo, hi, ids) if hi > lo else {}
    allocated = _allocated_hours(start, end, ids)
    util = _job_utilisation({j for jobs in allocated.values() for j in jobs}, lo,
                            ledger.local_midnight(end, zone), ids) if allocated else {}
    out: dict[int, dict[str, Utilisation]] = defaultdict(dict)
    for key in set(allocated) | {k for k, v in quota.items() if v > 0}:
        tenant_id, pool_id, kind = key
        jobs = [utilisation.JobHours(hours, beyond, util.get(job_id))
                for job_id, (hours, beyond) in allocated.get(key, {}).items()]
        figure = utilisation.figures(kind, quota_held=quota.get(key, Decimal(0)), jobs=jobs)
        group = out[pool_id if by_pool else tenant_id]
        group[kind] = group[kind] + figure if kind in group else figure
    return dict(out)


def utilisation_totals(start: dt.date, end: dt.date, tenant_ids: Iterable[int] | None = None
                       ) -> dict[int, Utilisation]:
    """Tenant id -> the figures of all its GPU kinds together over the days [start, end)."""
    return {tenant_id: utilisation.total(kinds.values())
            for tenant_id, kinds in utilisation_figures(start, end, tenant_ids).items()}


def tenant_utilisation(tenant: Tenant, today: dt.date | None = None
                       ) -> dict[str, Utilisation | None]:
    """One tenant's figures, all GPU kinds, this month and this quarter so far."""
    today = today or timezone.localdate()
    tomorrow = today + dt.timedelta(days=1)
    month = utilisation_totals(ledger.month_start(today), tomorrow, [tenant.pk]).get(tenant.pk)
    quarter = utilisation_totals(quarter_start(today), tomorrow, [tenant.pk]).get(tenant.pk)
    return {"month": month, "quarter": quarter}


def tenant_utilisation_by_kind(tenant: Tenant, start: dt.date, end: dt.date
                               ) -> list[Utilisation]:
    """One tenant's figures per GPU kind over the days [start, end), by kind."""
    kinds = utilisation_figures(start, end, [tenant.pk]).get(tenant.pk, {})
    return [kinds[k] for k in sorted(kinds)]


# --- budgets ------------------------------------------------------------------------------


@dataclass(frozen=True)
class BudgetStatus:
    budget: Decimal | None
    spent: Decimal
    forecast: Decimal

    @property
    def percent(self) -> int | None:
        return int(self.spent * 100 / self.budget) if self.budget else None

    @property
    def forecast_percent(self) -> int | None:
        return int(self.forecast * 100 / self.budget) if self.budget else None


def forecast_month_end(spent: Decimal, elapsed_seconds: float, month_seconds: float) -> Decimal:
    """Linear forecast: the month's spending so far, extended at the same pace."""
    if elapsed_seconds <= 0:
        return spent
    return pricing.round_money(spent * Decimal(month_seconds) / Decimal(elapsed_seconds))


def budget_status(tenant: Tenant, now: dt.datetime | None = None) -> BudgetStatus:
    """This month's spending (the draft's total), the budget and the month-end forecast."""
    now = now or timezone.now()
    period = current_period(now)
    start, end = ledger.month_bounds(period, tz())
    draft = Invoice.objects.filter(tenant=tenant, period=period,
                                   kind=InvoiceKind.INVOICE).values_list("total", flat=True)
    spent = next(iter(draft), Decimal(0))
    budget = Budget.objects.filter(tenant=tenant).values_list("monthly_amount", flat=True)
    return BudgetStatus(budget=next(iter(budget), None), spent=spent,
                        forecast=forecast_month_end(spent, (now - start).total_seconds(),
                                                    (end - start).total_seconds()))


def month_tenants(first: dt.date, *, with_invoices: set[int], with_usage: set[int]
                  ) -> list[Tenant]:
    """The tenants finance's month lists: every tenant not deleted that has a pool
    (whether or not it has an invoice or any usage that month), and deleted ones with an
    invoice or billed usage that month."""
    return list(Tenant.objects.filter(
        (~Q(status=TenantStatus.DELETED) & Q(pools__isnull=False))
        | Q(pk__in=with_invoices | with_usage)).distinct().order_by("name", "slug"))


def gpu_hours_billed(lines: Iterable[Any]) -> Decimal:
    """**GPU-hours billed**: the sum of the quantities of an invoice's GPU lines (every
    device kind as billed: whole cards, MIG instances, shares; late usage included), each
    the line's stored quantity. Not the utilisation figures' *allocated* hours, which
    count the days of the period, whichever invoice bills them."""
    return sum((line.quantity for line in lines if line.kind == LineKind.GPU), Decimal(0))


def month_gpu_hours_billed(first: dt.date) -> dict[int, Decimal]:
    """Tenant id -> GPU-hours billed by its invoice of the month (:func:`gpu_hours_billed`)."""
    by_tenant: dict[int, list[InvoiceLine]] = defaultdict(list)
    for tenant_id, kind, quantity in InvoiceLine.objects.filter(
            invoice__period=first, invoice__kind=InvoiceKind.INVOICE,
            kind=LineKind.GPU).values_list("invoice__tenant_id", "kind", "quantity"):
        by_tenant[tenant_id].append(InvoiceLine(kind=kind, quantity=quantity))
    return {tenant_id: gpu_hours_billed(lines) for tenant_id, lines in by_tenant.items()}


def month_summary(period: dt.date) -> dict[str, Any]:
    """Finance's month: every invoice with idle rates, totals per kind and status, and
    ``rows``, one per tenant of the month (:func:`month_tenants`) with its invoices (none
    yet: an empty list) and its billed GPU-hours and idle rates."""
    invoices = list(invoices_for_month(period))
    first = ledger.month_start(period)
    idle = utilisation_totals(first, ledger.next_month(first))
    quarter = utilisation_totals(quarter_start(first), ledger.next_month(first))
    # what the invoices ask to be paid (tax included, ``Invoice.total_due``)
    issued = sum((i.total_due for i in invoices if i.is_issued), Decimal(0))
    for invoice in invoices:  # for the template: each row's idle rates without a lookup
        invoice.idle = idle.get(invoice.tenant_id)  # type: ignore[attr-defined]
        invoice.idle_quarter = quarter.get(invoice.tenant_id)  # type: ignore[attr-defined]
    by_tenant: dict[int, list[Invoice]] = defaultdict(list)
    for invoice in invoices:
        by_tenant[invoice.tenant_id].append(invoice)
    billed = month_gpu_hours_billed(first)
    rows = [{"tenant": t, "invoices": by_tenant.get(t.pk, []),
             "idle": idle.get(t.pk), "idle_quarter": quarter.get(t.pk),
             "billed_hours": billed.get(t.pk, Decimal(0))}
            for t in month_tenants(first, with_invoices=set(by_tenant),
                                   with_usage={k for k, v in idle.items() if v.allocated_hours})]
    late = late_lines(first) if not MonthClose.objects.filter(period=first).exists() else {}
    month_start, month_end = ledger.month_bounds(first, dt.UTC)
    names = dict(Tenant.objects.filter(pk__in=list(late)).values_list("pk", "slug"))
    return {
        "rows": rows,
        # finance's list before closing: what this month bills of closed months
        "late_lines": [{"tenant": names[t], "line": spec} for t in sorted(
            late, key=lambda t: names[t]) for spec in late[t]],
        "invoices": invoices,
        "idle": idle,
        "idle_quarter": quarter,
        # GPU-hours idle while work that fits them waited, by cause (jobs.idle_waiting;
        # UTC minutes, as recorded)
        "idle_waiting": idle_waiting.window_totals(month_start, month_end),
        "total": sum((i.total_due for i in invoices), Decimal(0)),
        "issued_total": issued,
        "closed": MonthClose.objects.filter(period=first).first(),
        "tenants_without": Tenant.objects.exclude(status=TenantStatus.DELETED).exclude(
            Q(invoices__period=first)).order_by("name"),
    }
