"""Enumerations of the billing app."""

from decimal import Decimal

from django.db import models
from django.utils.translation import gettext_lazy as _


class MigPricing(models.TextChoices):
    MEMORY = "memory", _("By memory share of the card")
    SLICES = "slices", _("By compute slices (of 7)")


class InvoiceKind(models.TextChoices):
    INVOICE = "invoice", _("Invoice")
    CREDIT_NOTE = "credit_note", _("Credit note")


class InvoiceStatus(models.TextChoices):
    DRAFT = "draft", _("Draft")
    ISSUED = "issued", _("Issued")


class LineKind(models.TextChoices):
    GPU = "gpu", _("GPU")
    CPU = "cpu", _("CPU")
    MEMORY = "memory", _("Memory")
    STORAGE = "storage", _("Storage")
    EGRESS = "egress", _("Egress")
    ADJUSTMENT = "adjustment", _("Adjustment")
    CREDIT = "credit", _("Credit")


BUDGET_THRESHOLDS = (50, 80, 100)
#: The largest monthly budget (Budget.monthly_amount holds 14 digits, 2 after the point).
BUDGET_MAX = Decimal("999999999999.99")
#: The range of each number of a GPU's price row, inclusive, as
#: ``billing.services.rate_card_errors`` checks it (the upper bound of a money field is its
#: column's width: 14 digits and 2 decimals for the purchase price, and so on).
GPU_PRICE_BOUNDS: dict[str, tuple[Decimal, Decimal]] = {
    "memory_gib": (Decimal(1), Decimal(1024)),
    "purchase_price": (Decimal(0), Decimal("999999999999.99")),
    "depreciation_months": (Decimal(1), Decimal(240)),
    "power_watts": (Decimal(0), Decimal(5000)),
    "pue": (Decimal(1), Decimal(3)),
    "electricity_kwh": (Decimal(0), Decimal("999999.9999")),
    "operations_month": (Decimal(0), Decimal("9999999999.99")),
}
#: a price per unit (GiB-month of storage, GiB of egress, core-hour, GiB-hour): 12 digits, 6
#: decimals
UNIT_PRICE_MAX = Decimal("999999.999999")
#: a credit note's amount (the invoice's remainder narrows it)
CREDIT_RANGE = (Decimal("0.01"), Decimal("999999999999.99"))
