"""The one pricing rule of every device kind, and invoice lines from usage: pure.

No ORM, no queries: plain data in (a :class:`PriceTable` built from one rate card, usage
rows already summed by the database), Decimals and :class:`LineSpec` out. The invoice
(``billing.selectors.month_lines``), the per-job cost (``job_costs``), the preview
(``estimate_job_cost``) and the rate card page all price a device with
:func:`device_price`, and the preview computes its figures with :func:`usage_lines`, the
invoice's own function, so the two agree to the cent.

What a device is (:class:`Device`, recorded by the ledger on each ``GpuUsage`` row):

* ``whole``: a whole card of ``gpu_model``, at the card's price per GPU-hour;
* ``mig``: one MIG instance of ``mig_profile``, at its share of the card (by memory, or
  by compute slices of 7: the rate card's ``mig_pricing``; :func:`billing.pricing.mig_share`);
* ``shared``: one share of a time-sliced or MPS card (``TrainingJob.gpu_shared``), at
  ``1 / replicas`` of the card, the replicas of the sharing profile of the nodes of that
  model (``nvidia.com/gpu.replicas``; the largest where nodes differ); a share priced
  where no sharing node is known counts as a whole card (``share`` 1);
* ``hami``: a HAMi vGPU (``TrainingJob.gpu_memory_gib_per_card``), at the larger of its
  memory limit over the card's memory and its cores limit (``nvidia.com/gpucores``, per
  cent; Trainyard's jobs set none today) over 100, never above 1; a card whose memory is
  not known counts the vGPU as a whole card.

The share is an exact fraction (``fractions.Fraction``; the ledger keeps numerator and
denominator). A share's price per device-hour is the card's (rounded) price times the
share, rounded to 4 places, as a MIG instance's always was; an admin's override on the
rate card (:attr:`PriceTable.overrides`, by :attr:`Device.key`) replaces any derived price.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction

from billing import pricing, texts
from core.texts import StoredText, english, message

WHOLE, MIG, SHARED, HAMI = "whole", "mig", "shared", "hami"
DEVICE_KINDS = (WHOLE, MIG, SHARED, HAMI)
#: the unit (an English key of ``billing.texts.UNITS``) a line of each kind counts in
UNITS = {WHOLE: "GPU-hours", MIG: "instance-hours", SHARED: "share-hours", HAMI: "vGPU-hours"}
_MIG_NAME = re.compile(r"^(\d+)g\.(\d+)gb$")


def fraction_text(share: Fraction | Decimal) -> str:
    """``1/4``; a whole number as itself."""
    share = Fraction(share)
    return str(share.numerator) if share.denominator == 1 else \
        f"{share.numerator}/{share.denominator}"


def parse_fraction(raw: str) -> Fraction:
    """``1/4`` or ``1`` to a Fraction (ValueError when it is neither, or not in (0, 1])."""
    share = Fraction(raw)
    if not 0 < share <= 1:
        raise ValueError(f"a share of a card is in (0, 1]: {raw!r}")
    return share


@dataclass(frozen=True)
class Device:
    """What one device of a job is, as the ledger records it."""

    gpu_model: str
    mig_profile: str = ""
    kind: str = WHOLE
    share: Fraction = Fraction(1)  # of a card, per device (shared and hami only)

    @property
    def key(self) -> str:
        """The device's key on the rate card and in an invoice line's ``resource``:
        ``<model>|`` (a card), ``<model>|<profile>`` (MIG; the model may be blank),
        ``<model>|shared:1/4``, ``<model>|hami:1/8``."""
        if self.kind in (SHARED, HAMI):
            return f"{self.gpu_model}|{self.kind}:{fraction_text(self.share)}"
        return f"{self.gpu_model}|{self.mig_profile}"

    @classmethod
    def of_row(cls, gpu_model: str, mig_profile: str, kind: str, share_num: int,
               share_den: int) -> Device:
        """The device of a ledger row (a MIG profile makes it a MIG instance; a whole
        card or a MIG instance has no share)."""
        if mig_profile:
            return cls(gpu_model, mig_profile, MIG)
        if kind in (SHARED, HAMI):
            return cls(gpu_model, "", kind, Fraction(share_num, share_den or 1))
        return cls(gpu_model)

    @classmethod
    def from_key(cls, key: str) -> Device:
        """The device of a :attr:`key` (ValueError when it is not one)."""
        model, sep, rest = key.partition("|")
        if not sep:
            raise ValueError(f"not a device key: {key!r}")
        kind, colon, share = rest.partition(":")
        if colon and kind in (SHARED, HAMI):
            return cls(model, "", kind, parse_fraction(share))
        if colon:
            raise ValueError(f"not a device key: {key!r}")
        if rest and not _MIG_NAME.match(rest):
            raise ValueError(f"not a MIG profile: {rest!r}")
        return cls(model, rest, MIG if rest else WHOLE)


def device_of(*, gpu_model: str, mig_profile: str = "", gpu_shared: bool = False,
              memory_limit_gib: Decimal | None = None, cores_percent: int | None = None,
              replicas: Mapping[str, int] | None = None,
              card_memory_mib: Mapping[str, int] | None = None) -> Device:
    """The device a job's GPUs per worker are (see the module's rule). ``replicas``: the
    sharing profile's replicas by GPU model; ``card_memory_mib``: one card's memory by
    model (both from the observed nodes)."""
    if mig_profile:
        return Device(gpu_model, mig_profile, MIG)
    if gpu_shared:
        count = (replicas or {}).get(gpu_model) or 1
        return Device(gpu_model, "", SHARED, Fraction(1, max(1, int(count))))
    if memory_limit_gib or cores_percent:
        return Device(gpu_model, "", HAMI, hami_share(
            memory_limit_gib, (card_memory_mib or {}).get(gpu_model), cores_percent))
    return Device(gpu_model)


def hami_share(memory_limit_gib: Decimal | None, card_memory_mib: int | None,
               cores_percent: int | None = None) -> Fraction:
    """A HAMi vGPU's share of its card: max(memory limit / card memory, cores / 100),
    at most 1; 1 when neither can be told (the card's memory unknown, no cores limit)."""
    parts: list[Fraction] = []
    if memory_limit_gib and card_memory_mib:
        parts.append(Fraction(Decimal(memory_limit_gib)) * 1024 / card_memory_mib)
    if cores_percent:
        parts.append(Fraction(int(cores_percent), 100))
    return min(Fraction(1), max(parts)) if parts else Fraction(1)


# --- one rate card's prices -----------------------------------------------------------


@dataclass(frozen=True)
class PriceTable:
    """One rate card as plain data: price per card-hour and card memory (GiB: the rate
    card's, else the cluster's) by GPU model, the MIG rule, CPU and memory prices, and
    the admin's overrides per device key."""

    card_id: int | None = None
    effective_from: dt.date | None = None
    cards: Mapping[str, Decimal] = field(default_factory=dict)
    memory_gib: Mapping[str, int] = field(default_factory=dict)
    mig_rule: str = "memory"
    cpu_core_hour: Decimal | None = None
    memory_gib_hour: Decimal | None = None
    overrides: Mapping[str, Decimal] = field(default_factory=dict)


@dataclass(frozen=True)
class Priced:
    """A device's price per device-hour (None: no price) and its line text; ``source``:
    ``set`` (the card's own row), ``derived`` (from ``base``), ``override`` or
    ``unpriced``."""

    price: Decimal | None
    text: StoredText
    source: str
    base: str = ""


def _card_for_mig(table: PriceTable, profile: str) -> str | None:
    """When a MIG job names no priced card: the smallest priced card that holds the
    profile (by its memory)."""
    match = _MIG_NAME.match(profile)
    need = int(match.group(2)) if match else 0
    fits = sorted((table.memory_gib[m], m) for m in table.cards
                  if table.memory_gib.get(m) and table.memory_gib[m] >= need)
    return fits[0][1] if fits else None


def _gib_text(value: Fraction) -> str:
    """GiB without trailing zeros, to 3 places: ``10``, ``10.5``."""
    exact = Decimal(value.numerator) / Decimal(value.denominator)
    text = format(exact.quantize(Decimal("0.001")), "f").rstrip("0").rstrip(".")
    return text or "0"


def device_text(device: Device, base: str, share: Fraction | Decimal,
                card_memory_gib: int | None = None) -> StoredText:
    """The line text naming the device kind, e.g. "NVIDIA-A100, time-sliced/MPS share
    1/4 of a card"; a vGPU with its memory where the card's is known ("NVIDIA-A100 vGPU
    (HAMi) 10 GiB, 1/8 of a card")."""
    if device.kind == HAMI and card_memory_gib:
        return message(texts.LINE_VGPU_GIB, model=base, share=fraction_text(share),
                       gib=_gib_text(Fraction(share) * card_memory_gib))
    if device.kind == MIG:
        return message(texts.LINE_MIG, profile=device.mig_profile, model=base,
                       share=fraction_text(share))
    if device.kind == SHARED:
        return message(texts.LINE_SHARED, model=base, share=fraction_text(share))
    if device.kind == HAMI:
        return message(texts.LINE_VGPU, model=base, share=fraction_text(share))
    return base


def device_price(table: PriceTable | None, device: Device) -> Priced:
    """**The price of one device-hour** of any kind under ``table`` (None: no rate card
    in effect), with its line text and where the price comes from."""
    if table is None:
        return Priced(None, message(texts.LINE_NO_RATE_CARD), "unpriced")
    override = table.overrides.get(device.key)
    if device.kind == MIG:
        base = device.gpu_model if device.gpu_model in table.cards else \
            _card_for_mig(table, device.mig_profile)
        if base is None:
            if override is not None:
                return Priced(override, message(texts.LINE_MIG_UNPRICED,
                                                profile=device.mig_profile), "override")
            if table.cards and not any(table.memory_gib.get(m) for m in table.cards):
                return Priced(None, message(texts.LINE_MIG_NO_MEMORY,
                                            profile=device.mig_profile), "unpriced")
            return Priced(None, message(texts.LINE_MIG_UNPRICED,
                                        profile=device.mig_profile), "unpriced")
        share = pricing.mig_share(device.mig_profile,
                                  card_memory_gib=table.memory_gib.get(base),
                                  rule=table.mig_rule)
        text = device_text(device, base, share)
        if override is not None:
            return Priced(override, text, "override", base)
        return Priced(pricing.mig_hour_price(table.cards[base], share), text, "derived", base)
    text = device_text(device, device.gpu_model, device.share,
                       table.memory_gib.get(device.gpu_model))
    if override is not None:
        return Priced(override, text, "override", device.gpu_model)
    card = table.cards.get(device.gpu_model)
    if card is None:
        return Priced(None, text, "unpriced")
    if device.kind == WHOLE:
        return Priced(card, text, "set", device.gpu_model)
    return Priced(pricing.round_price(card * Decimal(device.share.numerator)
                                      / Decimal(device.share.denominator)),
                  text, "derived", device.gpu_model)


# --- invoice lines ----------------------------------------------------------------------


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


@dataclass(frozen=True)
class UsageRow:
    """One tenant's usage of one device over some days, summed: device-seconds, CPU
    millicore-seconds and memory MiB-seconds (exact integers, as the ledger keeps them)."""

    tenant_id: int
    device: Device
    device_seconds: int
    milli_seconds: int = 0
    mib_seconds: int = 0


#: wraps a line's text: (text, priced) -> text (the month split, late usage)
Wrap = Callable[[StoredText, bool], StoredText]


def _plain(text: StoredText, priced: bool) -> StoredText:
    return text if priced else message(texts.NO_PRICE_BILLED_0, what=text)


def usage_lines(rows: Iterable[UsageRow], table: PriceTable | None, *,
                starts: dt.date | None = None, ends: dt.date | None = None,
                wrap: Wrap = _plain) -> dict[int, list[LineSpec]]:
    """**Invoice lines from usage**: one GPU line per tenant and device (a whole card, a
    MIG profile, a share and a vGPU of one model are separate lines), then one CPU and
    one memory line per tenant when the card prices them. Amounts: exact quantity times
    unit price, rounded once to cents (``billing.pricing``)."""
    out: dict[int, list[LineSpec]] = defaultdict(list)
    cpu: dict[int, int] = defaultdict(int)
    mem: dict[int, int] = defaultdict(int)
    card_id = table.card_id if table is not None else None
    for row in rows:
        cpu[row.tenant_id] += row.milli_seconds
        mem[row.tenant_id] += row.mib_seconds
        if not row.device_seconds:
            continue
        priced = device_price(table, row.device)
        price = priced.price if priced.price is not None else Decimal(0)
        out[row.tenant_id].append(LineSpec(
            kind="gpu", text=wrap(priced.text or message(texts.LINE_GPU),
                                         priced.price is not None),
            resource=row.device.key, starts=starts, ends=ends,
            quantity=pricing.hours(row.device_seconds), unit=UNITS[row.device.kind],
            unit_price=price, amount=pricing.hourly_amount(row.device_seconds, price),
            rate_card_id=card_id))
    if table is not None:
        # CPU core-seconds from millicore-seconds, memory GiB-seconds from MiB-seconds
        for totals, per_unit, rate, what, unit, kind in (
                (cpu, 1000, table.cpu_core_hour, texts.LINE_CPU, "core-hours", "cpu"),
                (mem, 1024, table.memory_gib_hour, texts.LINE_MEMORY, "GiB-hours", "memory")):
            if not rate:
                continue
            for tenant_id, raw in totals.items():
                if raw:
                    unit_s = Decimal(raw) / per_unit
                    out[tenant_id].append(LineSpec(
                        kind=kind, text=wrap(message(what), True), starts=starts, ends=ends,
                        quantity=pricing.hours(unit_s), unit=unit, unit_price=rate,
                        amount=pricing.hourly_amount(unit_s, rate), rate_card_id=card_id))
    return dict(out)


# --- a job --------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobShape:
    """What a job holds while it runs: its devices and each worker's CPU and memory (the
    ledger's integers: millicores and MiB of the whole job)."""

    device: Device
    devices: int
    millicores: int
    memory_mib: int

    @classmethod
    def of(cls, device: Device, *, workers: int, gpus_per_worker: int,
           cpu_per_worker: Decimal, memory_gib_per_worker: Decimal) -> JobShape:
        """As the ledger records a job (``billing.services.ledger_ingest_gpu``)."""
        return cls(device, workers * gpus_per_worker,
                   int(Decimal(cpu_per_worker) * 1000) * workers,
                   int(Decimal(memory_gib_per_worker) * 1024) * workers)

    def usage(self, seconds: int, tenant_id: int = 0) -> UsageRow:
        """The ledger's row of this job running ``seconds``."""
        return UsageRow(tenant_id, self.device, self.devices * seconds,
                        self.millicores * seconds, self.memory_mib * seconds)


def job_rate(table: PriceTable | None, job: JobShape) -> Decimal:
    """Price per hour of running ``job`` (devices, CPU and memory), unrounded: the rate
    behind a job's cost so far (no price: 0)."""
    rate = Decimal(0)
    if job.devices:
        rate += (device_price(table, job.device).price or Decimal(0)) * job.devices
    if table is not None and table.cpu_core_hour:
        rate += table.cpu_core_hour * Decimal(job.millicores) / 1000
    if table is not None and table.memory_gib_hour:
        rate += table.memory_gib_hour * Decimal(job.memory_mib) / 1024
    return rate


@dataclass(frozen=True)
class Estimate:
    """What running a job for ``seconds`` would be billed, line by line, as the invoice
    would bill it (storage added by the caller where the job asks for a volume)."""

    seconds: int
    lines: tuple[LineSpec, ...]
    unpriced: bool  # a device of the job has no price (its line bills 0)

    @property
    def total(self) -> Decimal:
        return sum((line.amount for line in self.lines), Decimal(0))

    def amount(self, kind: str) -> Decimal:
        return sum((line.amount for line in self.lines if line.kind == kind), Decimal(0))


def estimate(table: PriceTable | None, job: JobShape, seconds: int,
             extra: Iterable[LineSpec] = ()) -> Estimate:
    """The invoice's lines for ``job`` running ``seconds`` (:func:`usage_lines` of the
    ledger row it would write), plus ``extra`` lines (its storage)."""
    lines = usage_lines([job.usage(seconds)], table).get(0, [])
    unpriced = bool(job.devices) and device_price(table, job.device).price is None
    return Estimate(seconds, (*lines, *extra), unpriced)


# --- the rate card's device rows --------------------------------------------------------


@dataclass(frozen=True)
class DeviceRow:
    """One device on the rate card page: its price and where it comes from, and whether
    it was used in the month (``in_use``: an unpriced device in use is flagged)."""

    device: Device
    priced: Priced
    in_use: bool

    @property
    def unpriced_in_use(self) -> bool:
        return self.in_use and self.priced.price is None


def device_rows(table: PriceTable | None, devices: Iterable[Device],
                in_use: Iterable[Device] = ()) -> list[DeviceRow]:
    """Every device of ``devices`` and ``in_use`` (deduplicated), priced by ``table``;
    by model, then whole cards, MIG profiles, shares and vGPUs."""
    used = set(in_use)
    every = set(devices) | used
    return [DeviceRow(d, _priced_row(table, d), d in used) for d in sorted(
        every, key=lambda d: (d.gpu_model, DEVICE_KINDS.index(d.kind), d.mig_profile,
                              -d.share))]


def _priced_row(table: PriceTable | None, device: Device) -> Priced:
    """:func:`device_price`, naming the device itself where no card is in effect."""
    if table is not None:
        return device_price(table, device)
    if device.kind == MIG:
        return Priced(None, message(texts.LINE_MIG_UNPRICED, profile=device.mig_profile),
                      "unpriced")
    return Priced(None, device_text(device, device.gpu_model, device.share), "unpriced")
