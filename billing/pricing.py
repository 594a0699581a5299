"""Pure price arithmetic: rate-card inputs to a price per GPU-hour, and line amounts.

No database, no Django models: plain Decimals in, Decimals out.

Rounding (the only places money is rounded, all ``ROUND_HALF_UP``):

* the price per GPU-hour is the sum of its three components (depreciation, power,
  operations), each rounded to 4 decimal places (:data:`PRICE_PLACES`); the rounded
  price is the one shown and the one billed;
* a MIG slice's price per hour is the card's rounded price times the slice's share,
  rounded again to 4 places;
* each invoice line's amount is ``quantity x unit price`` computed exactly from the
  unrounded quantity (GPU-seconds, byte-seconds, bytes) and rounded once to cents
  (:data:`CENTS`); an invoice's total is the sum of its rounded lines. Quantities are
  shown rounded to 4 places, but never multiplied in rounded form.

Month arithmetic: a month of depreciation and operations is :data:`HOURS_PER_MONTH`
hours (8,760 / 12 = 730), so the hourly price does not vary with the month's length.
Storage is priced per GiB-month of the *calendar* month being billed: 100 GiB held for
the whole of any month is exactly 100 GiB-months.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

HOURS_PER_MONTH = Decimal(730)
PRICE_PLACES = Decimal("0.0001")
CENTS = Decimal("0.01")
QUANTITY_PLACES = Decimal("0.0001")
GIB = 1024**3
SECONDS_PER_HOUR = 3600


def round_price(value: Decimal) -> Decimal:
    return value.quantize(PRICE_PLACES, rounding=ROUND_HALF_UP)


def round_money(value: Decimal) -> Decimal:
    return value.quantize(CENTS, rounding=ROUND_HALF_UP)


@dataclass(frozen=True)
class GpuCostInputs:
    """What one card costs: bought, powered and operated."""

    purchase_price: Decimal        # per card, in the installation's currency
    depreciation_months: int       # straight-line write-off period
    power_watts: Decimal           # average draw under load, per card
    pue: Decimal                   # power usage effectiveness of the data centre (>= 1)
    electricity_kwh: Decimal       # price of one kWh
    operations_month: Decimal      # the card's share of operations cost per month


@dataclass(frozen=True)
class GpuHourPrice:
    depreciation: Decimal
    power: Decimal
    operations: Decimal

    @property
    def total(self) -> Decimal:
        return self.depreciation + self.power + self.operations


def gpu_hour_price(inputs: GpuCostInputs) -> GpuHourPrice:
    """The price of one GPU-hour with its breakdown (each part rounded to 4 places).

    depreciation = purchase / (months x 730 h); power = W / 1000 x PUE x price per kWh;
    operations = monthly share / 730 h.
    """
    if inputs.depreciation_months <= 0:
        raise ValueError("depreciation_months must be positive")
    depreciation = inputs.purchase_price / (inputs.depreciation_months * HOURS_PER_MONTH)
    power = inputs.power_watts / 1000 * inputs.pue * inputs.electricity_kwh
    operations = inputs.operations_month / HOURS_PER_MONTH
    return GpuHourPrice(round_price(depreciation), round_price(power), round_price(operations))


def mig_share(profile: str, *, card_memory_gib: int | None, rule: str = "memory") -> Decimal:
    """The share of a whole card one MIG instance of ``profile`` is priced at.

    ``memory`` (default): the instance's memory over the card's (``1g.10gb`` on an 80 GB
    card = 10/80 = 1/8; ``3g.40gb`` = 1/2). ``slices``: compute slices over 7
    (``1g`` = 1/7, ``7g`` = 1). Memory is used when the card's memory is known, since it
    is what stops others using the rest of the card; otherwise slices.
    """
    compute, _, memory = profile.partition(".")
    try:
        slices = int(compute.rstrip("g"))
        mem_gb = int(memory.rstrip("gb")) if memory else None
    except ValueError:
        raise ValueError(f"not a MIG profile: {profile!r}") from None
    if rule == "memory" and card_memory_gib and mem_gb:
        return min(Decimal(1), Decimal(mem_gb) / Decimal(card_memory_gib))
    return min(Decimal(1), Decimal(slices) / Decimal(7))


def mig_hour_price(card_price: Decimal, share: Decimal) -> Decimal:
    return round_price(card_price * share)


def hours(seconds: int | Decimal) -> Decimal:
    """Seconds as hours, rounded to 4 places for display only."""
    return (Decimal(seconds) / SECONDS_PER_HOUR).quantize(QUANTITY_PLACES, ROUND_HALF_UP)


def hourly_amount(seconds: int | Decimal, price_per_hour: Decimal) -> Decimal:
    """``seconds`` (e.g. GPU-seconds, core-seconds) at a price per hour, in cents."""
    return round_money(Decimal(seconds) * price_per_hour / SECONDS_PER_HOUR)


def gib_months(byte_seconds: int, month_seconds: int) -> Decimal:
    """Byte-seconds as GiB-months of a month of ``month_seconds`` (display only)."""
    return (Decimal(byte_seconds) / GIB / month_seconds).quantize(QUANTITY_PLACES,
                                                                   ROUND_HALF_UP)


def storage_amount(byte_seconds: int, month_seconds: int, price_gib_month: Decimal) -> Decimal:
    return round_money(Decimal(byte_seconds) * price_gib_month / GIB / month_seconds)


def gib(num_bytes: int) -> Decimal:
    return (Decimal(num_bytes) / GIB).quantize(QUANTITY_PLACES, ROUND_HALF_UP)


def egress_amount(num_bytes: int, price_gib: Decimal) -> Decimal:
    """Bytes sent out of the cluster at a price per GiB (ingress is free)."""
    return round_money(Decimal(num_bytes) * price_gib / GIB)


def tax(subtotal: Decimal, rate_percent: Decimal | None) -> Decimal | None:
    """The tax on an invoice's ``subtotal`` at ``rate_percent``, rounded once to cents
    (``ROUND_HALF_UP``); None without a rate (no tax, no tax line)."""
    if rate_percent is None:
        return None
    return round_money(subtotal * rate_percent / 100)
