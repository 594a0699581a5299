"""Billing: the rate card, the usage ledger, invoices and budgets.

* **Rate card** (effective-dated): a RateCard applies from 00:00 of its
  ``effective_from`` day (installation time zone) until the next card's day, so a price
  change mid-month bills each part of the month at its own price. Cards are never edited
  once in effect; a new card replaces them.
* **Ledger**: GpuUsage (one row per job and day: running seconds and the job's devices,
  recomputed from the JobTransitions, keyed (job, day) so ingesting twice never counts
  twice), StorageSnapshot (a PVC's size from a moment on, keyed (uid, at)), EgressSample
  (a pod's counter of bytes sent to one destination class at a moment and the bytes
  sent since the previous reading, keyed (namespace, pod, destination, at)).
* **Invoices**: one per tenant and month, a draft that is refreshed during the month and
  issued (numbered, immutable) when finance closes the month; corrections are credit
  notes. Issued rows refuse ``save()``/``delete()`` and queryset updates/deletes, and the
  database refuses them too (triggers, ``migrations/0004_issued_invoices_immutable``):
  an issued invoice's row and its lines are never updated or deleted, and no line is
  added to it; the one change allowed is ``issued_by`` set to NULL when that user is
  deleted (``on_delete=SET_NULL``).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from billing import pricing
from billing.choices import InvoiceKind, InvoiceStatus, LineKind, MigPricing
from billing.pricebook import Device
from billing.texts import unit
from core.choices import EgressClass
from core.texts import render


class IssuedInvoiceError(Exception):
    """An issued invoice (or its lines) was about to be changed."""


class RateCard(models.Model):
    effective_from = models.DateField(_("effective from"), unique=True)
    cpu_core_hour = models.DecimalField(_("price per CPU core-hour"), max_digits=12,
                                        decimal_places=6, null=True, blank=True)
    memory_gib_hour = models.DecimalField(_("price per memory GiB-hour"), max_digits=12,
                                          decimal_places=6, null=True, blank=True)
    # egress per GiB by destination (core.choices.EgressClass); within the zone is free
    egress_gib = models.DecimalField(_("price per GiB of egress to the internet"),
                                     max_digits=12, decimal_places=6, default=Decimal(0))
    egress_region_gib = models.DecimalField(_("price per GiB of egress to other regions"),
                                            max_digits=12, decimal_places=6,
                                            default=Decimal(0))
    egress_zone_gib = models.DecimalField(_("price per GiB of egress to other zones"),
                                          max_digits=12, decimal_places=6, default=Decimal(0))
    mig_pricing = models.CharField(_("MIG pricing"), max_length=8, choices=MigPricing.choices,
                                   default=MigPricing.MEMORY)
    note = models.TextField(_("note"), blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-effective_from"]

    def __str__(self) -> str:
        return f"rate card from {self.effective_from}"

    #: the card's field that prices each destination class; in-cluster traffic is free
    EGRESS_PRICE_FIELDS = {EgressClass.INTERNET: "egress_gib",
                           EgressClass.UNCLASSIFIED: "egress_gib",
                           EgressClass.CROSS_REGION: "egress_region_gib",
                           EgressClass.CROSS_ZONE: "egress_zone_gib"}

    def egress_price(self, destination: str) -> Decimal | None:
        """Price per GiB sent to ``destination``; None: not billed (within the zone)."""
        name = self.EGRESS_PRICE_FIELDS.get(EgressClass(destination))
        return getattr(self, name) if name else None


class GpuPrice(models.Model):
    card = models.ForeignKey(RateCard, on_delete=models.CASCADE, related_name="gpu_prices")
    gpu_model = models.CharField(_("GPU model"), max_length=200)
    memory_gib = models.PositiveIntegerField(_("card memory (GiB)"), null=True, blank=True)
    purchase_price = models.DecimalField(_("purchase price"), max_digits=14, decimal_places=2)
    depreciation_months = models.PositiveIntegerField(_("depreciation period (months)"))
    power_watts = models.DecimalField(_("power draw (W)"), max_digits=8, decimal_places=1)
    pue = models.DecimalField(_("PUE"), max_digits=4, decimal_places=2, default=Decimal("1.4"))
    electricity_kwh = models.DecimalField(_("electricity price per kWh"), max_digits=10,
                                          decimal_places=4)
    operations_month = models.DecimalField(_("operations cost per card-month"), max_digits=12,
                                           decimal_places=2, default=Decimal(0))

    class Meta:
        ordering = ["gpu_model"]
        constraints = [models.UniqueConstraint(fields=["card", "gpu_model"],
                                               name="billing_gpu_price_unique")]

    def __str__(self) -> str:
        return f"{self.gpu_model} ({self.card})"

    def inputs(self) -> pricing.GpuCostInputs:
        return pricing.GpuCostInputs(self.purchase_price, self.depreciation_months,
                                     self.power_watts, self.pue, self.electricity_kwh,
                                     self.operations_month)

    @property
    def breakdown(self) -> pricing.GpuHourPrice:
        return pricing.gpu_hour_price(self.inputs())

    @property
    def price_per_hour(self) -> Decimal:
        return self.breakdown.total


class DevicePrice(models.Model):
    """An admin's price per device-hour for one device (``billing.pricebook.Device.key``:
    ``<model>|``, ``<model>|<MIG profile>``, ``<model>|shared:1/4``, ``<model>|hami:1/8``),
    overriding the price derived from its card."""

    card = models.ForeignKey(RateCard, on_delete=models.CASCADE, related_name="device_prices")
    device = models.CharField(_("device"), max_length=300)
    price_per_hour = models.DecimalField(_("price per device-hour"), max_digits=12,
                                         decimal_places=4)

    class Meta:
        ordering = ["device"]
        constraints = [models.UniqueConstraint(fields=["card", "device"],
                                               name="billing_device_price_unique")]

    def __str__(self) -> str:
        return f"{self.device} ({self.card})"


class StoragePrice(models.Model):
    card = models.ForeignKey(RateCard, on_delete=models.CASCADE, related_name="storage_prices")
    storage_class = models.CharField(_("StorageClass"), max_length=253)
    gib_month = models.DecimalField(_("price per GiB-month"), max_digits=12, decimal_places=6)

    class Meta:
        ordering = ["storage_class"]
        constraints = [models.UniqueConstraint(fields=["card", "storage_class"],
                                               name="billing_storage_price_unique")]

    def __str__(self) -> str:
        return f"{self.storage_class} ({self.card})"


# --- ledger -------------------------------------------------------------------------------


class GpuUsage(models.Model):
    """Seconds one job ran on one local day, with the devices it held (recomputed), and
    the month whose invoice bills them (``billed_period``).

    A day is billed by its own month's invoice (``billed_period`` = its month) until
    that month is closed; then its row is frozen. Usage of that day found later (a
    transition recorded after the close) is a *late* row (job, day, the first open
    month) holding the difference (negative when the day ran less than was billed), so
    the rows of a (job, day) always add up to what the transitions say, and the late row
    is billed as "usage from <month>" on the next open invoice.
    """

    # no index of their own for job and tenant: the unique (job, ...) and the (tenant, day)
    # indexes serve their lookups, and every index costs the month close's inserts
    job = models.ForeignKey("jobs.TrainingJob", on_delete=models.CASCADE,
                            related_name="usage_days", db_index=False)
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+",
                               db_index=False)
    pool = models.ForeignKey("tenants.Pool", on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    billed_period = models.DateField()  # first day of the month whose invoice bills it
    gpu_model = models.CharField(max_length=200, blank=True)
    mig_profile = models.CharField(max_length=20, blank=True)
    devices = models.PositiveIntegerField(default=0)  # cards, MIG instances, shares, vGPUs
    # what a device is (billing.pricebook: whole, mig, shared, hami) and, for a share or a
    # vGPU, its exact fraction of a card (share_num / share_den; 1 otherwise)
    device_kind = models.CharField(max_length=8, default="whole")
    share_num = models.PositiveBigIntegerField(default=1)
    share_den = models.PositiveBigIntegerField(default=1)
    # wall-clock seconds running that day (a late row: the difference, maybe negative)
    seconds = models.IntegerField()
    # the job's CPU and memory in integers, so ledger sums stay exact in any database
    cpu_millicores = models.PositiveBigIntegerField(default=0)
    memory_mib = models.PositiveBigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "day", "billed_period"],
                                               name="billing_gpu_usage_job_day_billed")]
        indexes = [models.Index(fields=["day", "tenant"]),
                   models.Index(fields=["tenant", "day"]),
                   models.Index(fields=["billed_period", "tenant"])]

    def __str__(self) -> str:
        return f"job {self.job_id} {self.day}: {self.seconds}s x {self.devices}"

    @property
    def device(self) -> Device:
        """The device as :class:`billing.pricebook.Device`."""
        return Device.of_row(self.gpu_model, self.mig_profile, self.device_kind,
                             self.share_num, self.share_den)


class StorageSnapshot(models.Model):
    """A PVC's requested size from ``at`` on (0: deleted), and the first month whose
    invoice may bill it (``billed_period``: the month of ``at``, or the first open month
    when it was recorded after ``at``'s month was closed: then the difference it makes to
    the closed months is billed late, as "storage from <month>")."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    pool = models.ForeignKey("tenants.Pool", on_delete=models.CASCADE, related_name="+")
    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64)
    storage_class = models.CharField(max_length=253, blank=True)
    size_bytes = models.BigIntegerField()
    at = models.DateTimeField()
    billed_period = models.DateField(null=True, blank=True)  # None: the month of ``at``

    class Meta:
        ordering = ["uid", "at"]
        constraints = [models.UniqueConstraint(fields=["uid", "at"],
                                               name="billing_storage_snapshot_key")]
        indexes = [models.Index(fields=["tenant", "at"])]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} {self.size_bytes} B from {self.at}"


class EgressSample(models.Model):
    """A pod's counter of bytes sent to one ``destination`` class at ``at``;
    ``transmit_delta`` is what it sent there since the previous reading (ingress is free
    and not recorded). Rows from before destinations were told apart are
    ``unclassified``."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    pool = models.ForeignKey("tenants.Pool", on_delete=models.CASCADE, related_name="+")
    namespace = models.CharField(max_length=253)
    pod = models.CharField(max_length=253)
    destination = models.CharField(max_length=16, choices=EgressClass.choices,
                                   default=EgressClass.UNCLASSIFIED)
    at = models.DateTimeField()
    transmit_total = models.BigIntegerField()
    transmit_delta = models.BigIntegerField()

    class Meta:
        ordering = ["namespace", "pod", "destination", "at"]
        constraints = [models.UniqueConstraint(fields=["namespace", "pod", "destination", "at"],
                                               name="billing_egress_sample_key")]
        indexes = [models.Index(fields=["tenant", "at"])]

    def __str__(self) -> str:
        return (f"{self.namespace}/{self.pod} +{self.transmit_delta} B {self.destination} "
                f"at {self.at}")


# --- invoices -----------------------------------------------------------------------------


class InvoiceQuerySet(models.QuerySet):
    def update(self, **kwargs: Any) -> int:
        if self.filter(status=InvoiceStatus.ISSUED).exists():
            raise IssuedInvoiceError("issued invoices cannot be changed")
        return super().update(**kwargs)

    def delete(self) -> tuple[int, dict[str, int]]:
        if self.filter(status=InvoiceStatus.ISSUED).exists():
            raise IssuedInvoiceError("issued invoices cannot be deleted")
        return super().delete()


class Invoice(models.Model):
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.PROTECT,
                               related_name="invoices")
    period = models.DateField(_("month"))  # the first day of the month billed
    kind = models.CharField(max_length=12, choices=InvoiceKind.choices,
                            default=InvoiceKind.INVOICE)
    status = models.CharField(max_length=8, choices=InvoiceStatus.choices,
                              default=InvoiceStatus.DRAFT)
    number = models.CharField(_("number"), max_length=40, unique=True, null=True, blank=True)
    tenant_name = models.CharField(max_length=200)
    cost_center = models.CharField(_("cost center"), max_length=64)
    currency = models.CharField(max_length=3)
    total = models.DecimalField(max_digits=14, decimal_places=2, default=Decimal(0))
    credits = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT,
                                related_name="credit_notes")
    reason = models.TextField(blank=True)
    computed_at = models.DateTimeField(null=True, blank=True)
    issued_at = models.DateTimeField(null=True, blank=True)
    issued_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                  on_delete=models.SET_NULL, related_name="+")

    objects = InvoiceQuerySet.as_manager()

    class Meta:
        ordering = ["-period", "tenant_name", "id"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "period"],
                                    condition=models.Q(kind=InvoiceKind.INVOICE),
                                    name="billing_one_invoice_per_month"),
        ]
        indexes = [models.Index(fields=["period", "kind"])]

    def __str__(self) -> str:
        return self.number or f"draft {self.tenant_name} {self.period:%Y-%m}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # The one integrity guard kept on the model: whatever path (service, admin, shell)
        # tries to rewrite an issued invoice fails. Issuing itself saves a row that is
        # still a draft in the database, so it passes.
        if self.pk and Invoice.objects.filter(pk=self.pk, status=InvoiceStatus.ISSUED).exists():
            raise IssuedInvoiceError(f"invoice {self.number} is issued and cannot be changed")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        if self.pk and Invoice.objects.filter(pk=self.pk, status=InvoiceStatus.ISSUED).exists():
            raise IssuedInvoiceError(f"invoice {self.number} is issued and cannot be deleted")
        return super().delete(*args, **kwargs)

    @property
    def is_issued(self) -> bool:
        return self.status == InvoiceStatus.ISSUED


class InvoiceLineQuerySet(models.QuerySet):
    def _guard(self) -> None:
        if self.filter(invoice__status=InvoiceStatus.ISSUED).exists():
            raise IssuedInvoiceError("lines of an issued invoice cannot be changed")

    def update(self, **kwargs: Any) -> int:
        self._guard()
        return super().update(**kwargs)

    def delete(self) -> tuple[int, dict[str, int]]:
        self._guard()
        return super().delete()


class InvoiceLine(models.Model):
    invoice = models.ForeignKey(Invoice, on_delete=models.CASCADE, related_name="lines")
    position = models.PositiveIntegerField(default=0)
    kind = models.CharField(max_length=12, choices=LineKind.choices)
    # ``text`` is the description as a stored text (core.texts): fixed when the line is
    # written, rendered in the reader's language on the page, CSV and PDF; a plain string
    # for free text (adjustments) and lines written before it existed. ``description``
    # keeps its English rendering (search, the admin, logs).
    description = models.CharField(max_length=300)
    text = models.JSONField(default=str, blank=True)
    resource = models.CharField(max_length=300, blank=True)  # gpu model, mig:..., class
    starts = models.DateField(null=True, blank=True)  # the days the line covers [starts,
    ends = models.DateField(null=True, blank=True)    # ends), for the drill-down
    quantity = models.DecimalField(max_digits=20, decimal_places=4, default=Decimal(0))
    unit = models.CharField(max_length=20, blank=True)  # English key, see billing.texts
    unit_price = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal(0))
    amount = models.DecimalField(max_digits=14, decimal_places=2)
    rate_card = models.ForeignKey(RateCard, null=True, blank=True, on_delete=models.PROTECT,
                                  related_name="+")

    objects = InvoiceLineQuerySet.as_manager()

    class Meta:
        ordering = ["invoice", "position", "id"]

    def __str__(self) -> str:
        return f"{self.description}: {self.amount}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self._guard()
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        self._guard()
        return super().delete(*args, **kwargs)

    def _guard(self) -> None:
        if Invoice.objects.filter(pk=self.invoice_id, status=InvoiceStatus.ISSUED).exists():
            raise IssuedInvoiceError("lines of an issued invoice cannot be changed")

    @property
    def label(self) -> str:
        """The description in the active language."""
        return render(self.text or self.description)

    @property
    def unit_label(self) -> str:
        """The unit in the active language."""
        return unit(self.unit)

    @property
    def usage_month(self) -> Any:
        """The closed month a late line's usage is from (its days are before the
        invoice's month), else None."""
        if self.starts is not None and self.starts < self.invoice.period:
            return self.starts.replace(day=1)
        return None


class Adjustment(models.Model):
    """A manual charge (positive) or discount (negative) finance adds to a month's draft."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.PROTECT,
                               related_name="billing_adjustments")
    period = models.DateField()
    description = models.CharField(_("description"), max_length=300)
    amount = models.DecimalField(_("amount"), max_digits=14, decimal_places=2)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["period", "id"]

    def __str__(self) -> str:
        return f"{self.description}: {self.amount}"


class MonthClose(models.Model):
    """Finance closed this month: its invoices are issued and its ledger is frozen."""

    period = models.DateField(unique=True)
    closed_at = models.DateTimeField()
    closed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                  on_delete=models.SET_NULL, related_name="+")
    invoices = models.PositiveIntegerField(default=0)
    total = models.DecimalField(max_digits=16, decimal_places=2, default=Decimal(0))
    seconds = models.FloatField(default=0)

    class Meta:
        ordering = ["-period"]

    def __str__(self) -> str:
        return f"{self.period:%Y-%m} closed"


class NumberSequence(models.Model):
    """The last number handed out per prefix and year (locked while numbering)."""

    prefix = models.CharField(max_length=8)
    year = models.PositiveIntegerField()
    last = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["prefix", "year"],
                                               name="billing_sequence_key")]

    def __str__(self) -> str:
        return f"{self.prefix}-{self.year}: {self.last}"


class Budget(models.Model):
    tenant = models.OneToOneField("tenants.Tenant", on_delete=models.CASCADE,
                                  related_name="budget")
    monthly_amount = models.DecimalField(_("monthly budget"), max_digits=14, decimal_places=2)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.tenant_id}: {self.monthly_amount}"


class BudgetAlert(models.Model):
    """One alert per tenant, month and threshold (so it is sent once)."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    period = models.DateField()
    threshold = models.PositiveSmallIntegerField()
    spent = models.DecimalField(max_digits=14, decimal_places=2)
    sent_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "period", "threshold"],
                                               name="billing_budget_alert_once")]

    def __str__(self) -> str:
        return f"{self.tenant_id} {self.period:%Y-%m} {self.threshold}%"
