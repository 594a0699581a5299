"""What is behind one invoice line (the drill-down): the jobs of a GPU, CPU or memory
line, the volumes of a storage line, the pods of an egress line. Reads only; imports
:mod:`billing.selectors` (never the other way)."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal

from django.db.models import F, Sum

from billing import ledger, pricebook, pricing
from billing.choices import LineKind
from billing.models import EgressSample, GpuUsage, Invoice, InvoiceLine, StorageSnapshot
from billing.pricebook import Device
from billing.selectors import (
    EGRESS_ORDER,
    _month_seconds,
    known_snapshots,
    late_storage,
    schedule,
    tz,
)
from core.choices import EgressClass


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
            device = Device.from_key(line.resource)
            usage = usage.filter(gpu_model=device.gpu_model, mig_profile=device.mig_profile,
                                 devices__gt=0)
            if device.kind in (pricebook.SHARED, pricebook.HAMI):
                usage = usage.filter(device_kind=device.kind,
                                     share_num=device.share.numerator,
                                     share_den=device.share.denominator)
            elif not device.mig_profile:  # a whole card (rows before kinds are whole)
                usage = usage.filter(device_kind=pricebook.WHOLE)
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
