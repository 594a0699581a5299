"""Reads of the billing app: prices in effect, a month's invoice lines, job costs, idle
rates, budgets. Tenant-scoped where they take a tenant; no writes."""

from __future__ import annotations

import datetime as dt
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

from django.db.models import F, Q, QuerySet, Sum
from django.shortcuts import get_object_or_404
from django.utils import timezone
from django.utils.translation import gettext as _

from billing import ledger, pricebook, pricing, texts
from billing.choices import InvoiceKind, InvoiceStatus, LineKind
from billing.models import (
    Adjustment,
    Budget,
    EgressSample,
    GpuUsage,
    Invoice,
    InvoiceLine,
    MonthClose,
    RateCard,
    StorageSnapshot,
)
from billing.pricebook import Device, LineSpec, UsageRow
from billing.selectors_rates import (  # noqa: F401 - re-exported: billing's read API
    DeviceFacts,
    Schedule,
    currency,
    current_rate_card,
    device_facts,
    observed_card_memory,
    observed_gpu_models,
    observed_storage_classes,
    rate_card_devices,
    rate_card_warnings,
    rate_cards,
    schedule,
    tz,
    unpriced_devices,
)
from billing.selectors_usage import (  # noqa: F401 - re-exported
    quarter_start,
    running_stretches,
    tenant_utilisation,
    tenant_utilisation_by_kind,
    utilisation_figures,
    utilisation_totals,
)
from core.choices import EgressClass
from core.exceptions import ApplicationError
from core.texts import StoredText, message
from jobs import idle_waiting
from jobs.models import JobTransition
from tenants.choices import TenantStatus
from tenants.models import Tenant

MIB = 1024**2
#: egress destination classes in the order lines and drill-downs list them
EGRESS_ORDER: list[str] = [EgressClass.INTERNET, EgressClass.CROSS_REGION,
                           EgressClass.CROSS_ZONE, EgressClass.UNCLASSIFIED,
                           EgressClass.IN_CLUSTER]


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


# --- a month's lines ----------------------------------------------------------------------


def _described(what: StoredText, card: RateCard | None, split: bool,
               priced: bool = True) -> StoredText:
    """A line's text: ``what``, with the day its prices start when the month is split
    between rate cards, and a note when the card has no price for it (billed 0)."""
    if split and card is not None:
        what = message(texts.PRICES_FROM, what=what, day=card.effective_from.isoformat())
    return what if priced else message(texts.NO_PRICE_BILLED_0, what=what)


def _month_seconds(first: dt.date) -> int:
    start, end = ledger.month_bounds(first, tz())
    return int((end - start).total_seconds())


def usage_rows(billed: dt.date, a: dt.date, b: dt.date, ids: list[int] | None
               ) -> list[UsageRow]:
    """The GpuUsage rows of the days [a, b) that the month ``billed`` bills, summed per
    tenant and device (exact integers)."""
    usage = GpuUsage.objects.filter(billed_period=billed, day__gte=a, day__lt=b)
    if ids is not None:
        usage = usage.filter(tenant_id__in=ids)
    keys = ("tenant_id", "gpu_model", "mig_profile", "device_kind", "share_num", "share_den")
    rows = [UsageRow(r["tenant_id"], Device.of_row(*(r[k] for k in keys[1:])),
                     int(r["device_seconds"] or 0), int(r["milli_seconds"] or 0),
                     int(r["mib_seconds"] or 0))
            for r in usage.values(*keys).annotate(
                device_seconds=Sum(F("seconds") * F("devices")),
                milli_seconds=Sum(F("seconds") * F("cpu_millicores")),
                mib_seconds=Sum(F("seconds") * F("memory_mib"))).order_by(*keys)]
    # per tenant and model: whole cards, MIG, shares, vGPUs, larger shares first
    return sorted(rows, key=lambda r: (r.tenant_id, r.device.gpu_model, r.device.mig_profile,
                                       pricebook.DEVICE_KINDS.index(r.device.kind),
                                       -r.device.share))


def _usage_lines(out: dict[int, list[LineSpec]], sched: Schedule, card: RateCard | None,
                 a: dt.date, b: dt.date, billed: dt.date, ids: list[int] | None, split: bool,
                 late: dt.date | None = None) -> None:
    """GPU lines (per device), CPU and memory lines of the GpuUsage rows of the days
    [a, b) that the month ``billed`` bills, priced by ``card``
    (:func:`billing.pricebook.usage_lines`). ``late``: the closed month the days belong
    to (the lines say "usage from <month>")."""

    def text(what: StoredText, priced: bool) -> StoredText:
        desc = _described(what, card, split, priced=priced)
        return message(texts.LATE_USAGE, what=desc, month=f"{late:%Y-%m}") if late else desc

    for tenant_id, specs in pricebook.usage_lines(
            usage_rows(billed, a, b, ids), sched.table(card), starts=a, ends=b,
            wrap=text).items():
        out[tenant_id].extend(specs)


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


# --- per job ------------------------------------------------------------------------------


def job_shape(job: Any, facts: DeviceFacts | None = None) -> pricebook.JobShape:
    """What ``job`` (a TrainingJob or anything with its fields) holds while it runs, as
    the ledger records it."""
    facts = facts or device_facts()
    device = facts.device(gpu_model=job.gpu_model, mig_profile=job.mig_profile,
                          gpu_shared=bool(getattr(job, "gpu_shared", False)),
                          memory_limit_gib=getattr(job, "gpu_memory_gib_per_card", None))
    return pricebook.JobShape.of(device, workers=job.workers,
                                 gpus_per_worker=job.gpus_per_worker,
                                 cpu_per_worker=job.cpu_per_worker,
                                 memory_gib_per_worker=job.memory_gib_per_worker)


def job_costs(jobs: Iterable[Any], now: dt.datetime | None = None) -> dict[int, Decimal]:
    """Cost so far per job id, from its transitions (running now counts up to ``now``),
    each day at the rate card in effect that day (:func:`billing.pricebook.job_rate`);
    rounded to cents per job. (Invoices round per line, so a sum of job costs may differ
    from a line by a few cents.)"""
    jobs = list(jobs)
    if not jobs:
        return {}
    now = now or timezone.now()
    sched = schedule()
    facts = device_facts()
    sched.observe(facts)
    transitions: dict[int, list[tuple[str, dt.datetime]]] = defaultdict(list)
    for job_id, state, at in JobTransition.objects.filter(job__in=[j.pk for j in jobs]).order_by(
            "job_id", "at", "id").values_list("job_id", "to_state", "at"):
        transitions[job_id].append((state, at))
    out: dict[int, Decimal] = {}
    for job in jobs:
        cost = Decimal(0)
        shape = job_shape(job, facts)
        days = ledger.running_day_seconds(transitions.get(job.pk, []), now, tz())
        for day, seconds in days.items():
            cost += pricebook.job_rate(sched.table(sched.card_for(day)), shape) * seconds / 3600
        out[job.pk] = pricing.round_money(cost)
    return out


def estimate_job_cost(job: Any, seconds: int, *, day: dt.date | None = None,
                      sched: Schedule | None = None, facts: DeviceFacts | None = None
                      ) -> pricebook.Estimate:
    """What ``job`` (a TrainingJob or the job form's cleaned fields as attributes) would
    be billed for running ``seconds`` at the rate card of ``day`` (today): the invoice's
    own lines (:func:`billing.pricebook.estimate`: GPU, CPU, memory), plus its checkpoint
    volume's storage (``checkpoint_size_gib`` of ``checkpoint_storage_class``) where it
    asks for one, priced per GiB-month of the current month as the invoice prices it."""
    sched = sched or schedule()
    day = day or timezone.localdate()
    card = sched.card_for(day)
    extra: list[LineSpec] = []
    size = getattr(job, "checkpoint_size_gib", None)
    cls = getattr(job, "checkpoint_storage_class", "") or ""
    if size and cls and seconds:  # a new volume (an existing claim is billed already)
        price = sched.storage.get(card.pk, {}).get(cls) if card is not None else None
        month_seconds = _month_seconds(ledger.month_start(day))
        byte_seconds = int(size) * pricing.GIB * int(seconds)
        extra.append(LineSpec(
            kind=LineKind.STORAGE, text=_described(message(texts.LINE_STORAGE, cls=cls or "-"),
                                                   card, False, priced=price is not None),
            resource=cls, quantity=pricing.gib_months(byte_seconds, month_seconds),
            unit="GiB-months", unit_price=price or Decimal(0),
            amount=pricing.storage_amount(byte_seconds, month_seconds, price or Decimal(0)),
            rate_card_id=card.pk if card else None))
    return pricebook.estimate(sched.table(card), job_shape(job, facts), seconds, extra)


def preview_costs(clean: Mapping[str, Any], runs: Mapping[str, int]) -> dict[str, Any] | None:
    """The preview's cost (job form and API): per named run time (``max``, ``expected``),
    what the invoice would charge for GPU, CPU, memory and storage
    (:func:`estimate_job_cost`), as decimal strings in the installation's currency; None
    when no rate card is in effect."""
    job = SimpleNamespace(**clean)
    sched = schedule()
    if sched.card_for(timezone.localdate()) is None:
        return None  # no rate card in effect: nothing is priced
    facts = device_facts()
    sched.observe(facts)
    out: dict[str, Any] = {"currency": currency(), "unpriced": False}
    for name, seconds in runs.items():
        estimate = estimate_job_cost(job, int(seconds), sched=sched, facts=facts)
        out["unpriced"] = out["unpriced"] or estimate.unpriced
        out[name] = {"seconds": int(seconds),
                     **{kind: f"{estimate.amount(kind):.2f}"
                        for kind in (LineKind.GPU, LineKind.CPU, LineKind.MEMORY,
                                     LineKind.STORAGE)},
                     "total": f"{estimate.total:.2f}"}
    return out


def draft_amounts(period: dt.date | None = None) -> dict[tuple[str, str, str], Decimal]:
    """The month's draft invoices (recomputed by every ledger refresh with
    :func:`month_lines`) per (tenant slug, line kind, resource: the device key of a GPU
    line) : amount, for ``/metrics``."""
    out: dict[tuple[str, str, str], Decimal] = defaultdict(Decimal)
    for slug, kind, resource, amount in InvoiceLine.objects.filter(
            invoice__period=ledger.month_start(period or current_period()),
            invoice__kind=InvoiceKind.INVOICE).values_list(
            "invoice__tenant__slug", "kind", "resource", "amount"):
        out[(slug, kind, resource if kind == LineKind.GPU else "")] += amount
    return dict(out)


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


def month_summary(period: dt.date) -> dict[str, Any]:
    """Finance's month: every invoice with idle rates, totals per kind and status, and
    ``rows``, one per tenant of the month (:func:`month_tenants`) with its invoices (none
    yet: an empty list) and its billed GPU-hours and idle rates."""
    invoices = list(invoices_for_month(period))
    first = ledger.month_start(period)
    idle = utilisation_totals(first, ledger.next_month(first))
    quarter = utilisation_totals(quarter_start(first), ledger.next_month(first))
    issued = sum((i.total for i in invoices if i.is_issued), Decimal(0))
    for invoice in invoices:  # for the template: each row's idle rates without a lookup
        invoice.idle = idle.get(invoice.tenant_id)  # type: ignore[attr-defined]
        invoice.idle_quarter = quarter.get(invoice.tenant_id)  # type: ignore[attr-defined]
    by_tenant: dict[int, list[Invoice]] = defaultdict(list)
    for invoice in invoices:
        by_tenant[invoice.tenant_id].append(invoice)
    rows = [{"tenant": t, "invoices": by_tenant.get(t.pk, []),
             "idle": idle.get(t.pk), "idle_quarter": quarter.get(t.pk),
             "billed_hours": idle[t.pk].allocated_hours if t.pk in idle else Decimal(0)}
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
        "total": sum((i.total for i in invoices), Decimal(0)),
        "issued_total": issued,
        "closed": MonthClose.objects.filter(period=first).first(),
        "tenants_without": Tenant.objects.exclude(status=TenantStatus.DELETED).exclude(
            Q(invoices__period=first)).order_by("name"),
    }
