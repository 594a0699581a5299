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
