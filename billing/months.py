"""Months in order (issue 30): which months have charges, which open month must be closed
first, which months finance may look at. Reads only; the month close
(``billing.services.month_close``) and finance's month page and API call it.

A month **has charges** when its invoices would have a line: GPU, CPU or memory usage it
bills (``GpuUsage.billed_period``, late rows included), a volume that held storage during
it or a storage snapshot it bills, egress sent to a priced destination during it, an
adjustment, or a draft invoice of it. Closing it issues those invoices; a month without
charges issues none.
"""

from __future__ import annotations

import datetime as dt
from bisect import bisect_right
from collections.abc import Iterable

from django.db.models import Max, Min
from django.utils import timezone
from django.utils.translation import gettext as _

from billing import ledger, texts
from billing.choices import InvoiceKind, InvoiceStatus
from billing.models import (
    Adjustment,
    EgressSample,
    GpuUsage,
    Invoice,
    MonthClose,
    StorageSnapshot,
)
from core.exceptions import Conflict


def _tz() -> dt.tzinfo:
    return timezone.get_default_timezone()


def _month_of(at: dt.datetime) -> dt.date:
    return ledger.month_start(timezone.localtime(at, _tz()).date())


def _months(first: dt.date, before: dt.date) -> list[dt.date]:
    out, month = [], first
    while month < before:
        out.append(month)
        month = ledger.next_month(month)
    return out


def _earliest(before: dt.date) -> dt.date | None:
    """The first month anything billable is known of, before ``before`` (cheap: the
    smallest date of each table that has an index for it)."""
    start, _end = ledger.month_bounds(before, _tz())
    candidates: list[dt.date] = []
    for value in (
            GpuUsage.objects.filter(billed_period__lt=before).aggregate(m=Min("billed_period"))["m"],
            Adjustment.objects.filter(period__lt=before).aggregate(m=Min("period"))["m"],
            Invoice.objects.filter(period__lt=before, kind=InvoiceKind.INVOICE,
                                   status=InvoiceStatus.DRAFT).aggregate(m=Min("period"))["m"]):
        if value is not None:
            candidates.append(ledger.month_start(value))
    # egress is sent by jobs' pods, whose months the GPU ledger already starts from (its
    # samples have no index on the time alone, so they are not scanned for the first)
    first_volume = StorageSnapshot.objects.filter(at__lt=start).aggregate(m=Min("at"))["m"]
    if first_volume is not None:
        candidates.append(_month_of(first_volume))
    return min(candidates) if candidates else None


def _storage_months(months: list[dt.date]) -> set[dt.date]:
    """Which of ``months`` (sorted) had a volume holding storage, or bill a snapshot."""
    if not months:
        return set()
    tz = _tz()
    lo = ledger.local_midnight(months[0], tz)
    hi = ledger.local_midnight(ledger.next_month(months[-1]), tz)
    starts = [ledger.local_midnight(m, tz) for m in months]
    ends = [ledger.local_midnight(ledger.next_month(m), tz) for m in months]
    found: set[dt.date] = {m for m in StorageSnapshot.objects.filter(
        billed_period__in=months).values_list("billed_period", flat=True).distinct() if m}
    volumes: dict[str, list[tuple[dt.datetime, int]]] = {}
    for uid, at, size in StorageSnapshot.objects.filter(at__lt=hi).order_by(
            "uid", "at").values_list("uid", "at", "size_bytes"):
        volumes.setdefault(uid, []).append((at, size))
    for snapshots in volumes.values():
        for index, (at, size) in enumerate(snapshots):
            if not size:
                continue
            until = snapshots[index + 1][0] if index + 1 < len(snapshots) else hi
            a, b = max(at, lo), min(until, hi)
            if a >= b:
                continue
            # every month of the list whose [start, end) meets [a, b)
            for i in range(max(bisect_right(starts, a) - 1, 0), len(months)):
                if starts[i] >= b:
                    break
                if ends[i] > a:
                    found.add(months[i])
    return found


def _has_charges(month: dt.date, tz: dt.tzinfo) -> bool:
    """Whether one month has charges, storage aside: one ``exists`` query each, the
    cheapest first, stopping at the first that answers yes."""
    start, end = ledger.month_bounds(month, tz)
    return (Adjustment.objects.filter(period=month).exists()
            or Invoice.objects.filter(period=month, kind=InvoiceKind.INVOICE).exists()
            or GpuUsage.objects.filter(billed_period=month).exclude(seconds=0).exists()
            or EgressSample.objects.filter(at__gte=start, at__lt=end, transmit_delta__gt=0,
                                           destination__in=list(texts.LINE_EGRESS_TO)).exists())


def months_with_charges(months: Iterable[dt.date]) -> set[dt.date]:
    """Which of ``months`` (first days) have charges (see the module docstring)."""
    months = sorted({ledger.month_start(m) for m in months})
    tz = _tz()
    found = {month for month in months if _has_charges(month, tz)}
    return found | _storage_months([m for m in months if m not in found])


def first_open_month_with_charges(before: dt.date) -> dt.date | None:
    """The earliest month before ``before`` that is open and has charges: it must be
    closed first (``month_close`` refuses ``before`` until then). None: nothing is."""
    before = ledger.month_start(before)
    first = _earliest(before)
    if first is None:
        return None
    closed = set(MonthClose.objects.filter(period__gte=first, period__lt=before)
                 .values_list("period", flat=True))
    open_months = [m for m in _months(first, before) if m not in closed]
    # oldest first, a few months at a time: the answer is usually the first
    for index in range(0, len(open_months), 3):
        batch = open_months[index:index + 3]
        found = months_with_charges(batch)
        if found:
            return min(found)
    return None


def closed_after(period: dt.date) -> dt.date | None:
    """The first closed month after ``period``, if any."""
    return MonthClose.objects.filter(period__gt=ledger.month_start(period)).aggregate(
        m=Min("period"))["m"]


def is_future(period: dt.date, now: dt.datetime | None = None) -> bool:
    """Whether ``period`` starts after the current month (nothing to bill or show yet)."""
    today = timezone.localtime(now or timezone.now(), _tz()).date()
    return ledger.month_start(period) > ledger.month_start(today)


def closed_until() -> dt.date:
    """The first day not in a closed month (ledger rows before it are frozen)."""
    last = MonthClose.objects.aggregate(m=Max("period"))["m"]
    return ledger.next_month(last) if last else dt.date.min



def require_open(day: dt.date) -> None:
    if MonthClose.objects.filter(period=ledger.month_start(day)).exists():
        raise Conflict(_("%(month)s is closed; its invoices can only be corrected with "
                         "credit notes.") % {"month": f"{day:%Y-%m}"})
