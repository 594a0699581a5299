"""Reads of the rate card and of what the cluster says a device is: the rate cards in
effect (:class:`Schedule`), each as a pure :class:`billing.pricebook.PriceTable`, and the
facts the device rule needs (card memory and sharing replicas by GPU model). No writes;
imports no other selectors module (``billing.selectors`` imports this one)."""

from __future__ import annotations

import datetime as dt
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from itertools import pairwise

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from billing import ledger, pricebook
from billing.choices import MigPricing
from billing.models import DevicePrice, GpuPrice, GpuUsage, RateCard, StoragePrice
from billing.pricebook import Device, Priced, PriceTable
from k8s_sync.models import ObservedNode, ObservedStorageClass


def tz() -> dt.tzinfo:
    return timezone.get_default_timezone()


def currency() -> str:
    return settings.TRAINYARD_CURRENCY


@dataclass
class Schedule:
    """Every rate card with its prices, to find the one in effect on a day."""

    cards: list[RateCard]
    gpus: dict[int, dict[str, GpuPrice]] = field(default_factory=dict)
    storage: dict[int, dict[str, Decimal]] = field(default_factory=dict)
    overrides: dict[int, dict[str, Decimal]] = field(default_factory=dict)
    # GiB per card by GPU model as the cluster reports it; read on first need
    observed: dict[str, int] | None = None
    _tables: dict[int, PriceTable] = field(default_factory=dict)

    @property
    def observed_memory(self) -> dict[str, int]:
        if self.observed is None:
            self.observed = observed_card_memory()
        return self.observed

    def observe(self, facts: DeviceFacts) -> None:
        """Take the cards' memory from ``facts`` (already read) instead of reading it."""
        self.observed = {m: int((Decimal(mib) / 1024).to_integral_value())
                         for m, mib in facts.card_memory_mib.items()}

    def card_for(self, day: dt.date) -> RateCard | None:
        index = bisect_right([c.effective_from for c in self.cards], day) - 1
        return self.cards[index] if index >= 0 else None

    def periods(self, start: dt.date, end: dt.date
                ) -> list[tuple[RateCard | None, dt.date, dt.date]]:
        """[(card, from, to)) covering the days [start, end), split where a card starts."""
        cuts = sorted({start, end} | {c.effective_from for c in self.cards
                                      if start < c.effective_from < end})
        return [(self.card_for(a), a, b) for a, b in pairwise(cuts)]

    def table(self, card: RateCard | None) -> PriceTable | None:
        """``card`` as the pure price table (None: no card in effect)."""
        if card is None:
            return None
        if card.pk not in self._tables:
            prices = self.gpus.get(card.pk, {})
            self._tables[card.pk] = PriceTable(
                card_id=card.pk, effective_from=card.effective_from,
                cards={m: p.price_per_hour for m, p in prices.items()},
                memory_gib={**self.observed_memory,
                            **{m: p.memory_gib for m, p in prices.items() if p.memory_gib}},
                mig_rule=card.mig_pricing, cpu_core_hour=card.cpu_core_hour,
                memory_gib_hour=card.memory_gib_hour,
                overrides=self.overrides.get(card.pk, {}))
        return self._tables[card.pk]

    def device_price(self, card: RateCard | None, device: Device) -> Priced:
        """The one device price rule (:func:`billing.pricebook.device_price`)."""
        return pricebook.device_price(self.table(card), device)


def schedule() -> Schedule:
    cards = list(RateCard.objects.order_by("effective_from"))
    sched = Schedule(cards=cards)
    for price in GpuPrice.objects.all():
        sched.gpus.setdefault(price.card_id, {})[price.gpu_model] = price
    for sp in StoragePrice.objects.all():
        sched.storage.setdefault(sp.card_id, {})[sp.storage_class] = sp.gib_month
    for dp in DevicePrice.objects.all():
        sched.overrides.setdefault(dp.card_id, {})[dp.device] = dp.price_per_hour
    return sched


def rate_cards() -> QuerySet[RateCard]:
    return RateCard.objects.prefetch_related("gpu_prices", "storage_prices", "device_prices")


def current_rate_card(day: dt.date | None = None) -> RateCard | None:
    day = day or timezone.localdate()
    return rate_cards().filter(effective_from__lte=day).order_by("-effective_from").first()


# --- what the cluster says ------------------------------------------------------------


def observed_card_memory() -> dict[str, int]:
    """GiB of one card per GPU model as the cluster reports it (the ``nvidia.com/gpu.memory``
    node label the watcher records), rounded to whole GiB; the largest where nodes differ."""
    out: dict[str, int] = {}
    for model, mib in ObservedNode.objects.exclude(gpu_model="").filter(
            gpu_memory_mib__isnull=False).values_list("gpu_model", "gpu_memory_mib"):
        out[model] = max(out.get(model, 0), int((Decimal(mib or 0) / 1024).to_integral_value()))
    return out


@dataclass(frozen=True)
class DeviceFacts:
    """What the device rule needs of the cluster, by GPU model: one card's memory (MiB),
    the sharing profile's replicas (the largest where nodes differ), and the MIG
    profiles and sharing the nodes advertise."""

    card_memory_mib: Mapping[str, int]
    replicas: Mapping[str, int]
    mig_profiles: Mapping[str, frozenset[str]]
    models: frozenset[str] = frozenset()

    def advertised(self) -> list[Device]:
        """Every device the nodes advertise: each model's whole card, its MIG profiles
        and its share (where its nodes share cards)."""
        out = [Device(m) for m in self.models]
        out += [Device(m, p, pricebook.MIG) for m, ps in self.mig_profiles.items() for p in ps]
        out += [pricebook.device_of(gpu_model=m, gpu_shared=True, replicas=self.replicas)
                for m in self.replicas]
        return out

    def device(self, *, gpu_model: str, mig_profile: str = "", gpu_shared: bool = False,
               memory_limit_gib: Decimal | None = None) -> Device:
        return pricebook.device_of(gpu_model=gpu_model, mig_profile=mig_profile,
                                   gpu_shared=gpu_shared, memory_limit_gib=memory_limit_gib,
                                   replicas=self.replicas,
                                   card_memory_mib=self.card_memory_mib)


def device_facts() -> DeviceFacts:
    """:class:`DeviceFacts` from the observed nodes (one query)."""
    memory: dict[str, int] = {}
    replicas: dict[str, int] = {}
    profiles: dict[str, set[str]] = {}
    models: set[str] = set()
    for model, mib, strategy, count, alloc in ObservedNode.objects.exclude(
            gpu_model="").values_list("gpu_model", "gpu_memory_mib", "sharing_strategy",
                                      "gpu_replicas", "allocatable"):
        models.add(model)
        if mib:
            memory[model] = max(memory.get(model, 0), mib)
        if strategy not in ("", "none"):
            replicas[model] = max(replicas.get(model, 0), count or 1)
        for key in alloc or {}:
            if key.startswith("nvidia.com/mig-"):
                profiles.setdefault(model, set()).add(key.removeprefix("nvidia.com/mig-"))
    return DeviceFacts(memory, replicas, {m: frozenset(p) for m, p in profiles.items()},
                       frozenset(models))


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


# --- devices in use, priced or not --------------------------------------------------------


def used_devices(period: dt.date) -> dict[Device, set[dt.date]]:
    """The devices the month of ``period`` bills usage of (device-seconds above 0), each
    with the days it was used on (to find each day's rate card)."""
    out: dict[Device, set[dt.date]] = {}
    rows = GpuUsage.objects.filter(billed_period=ledger.month_start(period), devices__gt=0,
                                   seconds__gt=0).values_list(
        "gpu_model", "mig_profile", "device_kind", "share_num", "share_den", "day").distinct()
    for model, profile, kind, num, den, day in rows:
        out.setdefault(Device.of_row(model, profile, kind, num, den), set()).add(day)
    return out


def unpriced_devices(period: dt.date, sched: Schedule | None = None
                     ) -> list[pricebook.DeviceRow]:
    """The devices used in the month of ``period`` that the rate card of some day of
    their use does not price (their lines would bill 0), by key, each with its line
    text."""
    sched = sched or schedule()
    out: dict[str, pricebook.DeviceRow] = {}
    for device, days in used_devices(period).items():
        for day in sorted(days):
            priced = sched.device_price(sched.card_for(day), device)
            if priced.price is None:
                out.setdefault(device.key, pricebook.DeviceRow(device, priced, True))
                break
    return [out[k] for k in sorted(out)]


def rate_card_devices(card: RateCard | None, period: dt.date | None = None
                      ) -> list[pricebook.DeviceRow]:
    """The rate card page's device rows: every device the cluster advertises, every
    device used in the month of ``period`` (today's), every model and override the card
    prices, each with its price under ``card`` and where it comes from."""
    sched = schedule()
    facts = device_facts()
    sched.observe(facts)
    period = period or ledger.month_start(timezone.localdate())
    listed = facts.advertised()
    if card is not None:
        listed += [Device(m) for m in sched.gpus.get(card.pk, {})]
        for key in sched.overrides.get(card.pk, {}):
            try:
                listed.append(Device.from_key(key))
            except ValueError:
                continue
    return pricebook.device_rows(sched.table(card), listed, used_devices(period))
