"""API serializers of the billing app (read-only outputs, plain inputs; no pricing here)."""

from __future__ import annotations

from rest_framework import serializers

from billing.choices import BUDGET_MAX, CREDIT_RANGE, GPU_PRICE_BOUNDS, UNIT_PRICE_MAX, MigPricing
from billing.models import DevicePrice, GpuPrice, Invoice, InvoiceLine, RateCard, StoragePrice
from core.schema import documented

#: a rate card's GPU or storage price rows at most (one per model or class)
MAX_PRICE_ROWS = 200


class InvoiceLineSerializer(serializers.ModelSerializer):
    description = serializers.CharField(source="label", read_only=True,
                                        help_text="rendered in the request's language")
    text = serializers.JSONField(read_only=True, help_text=(
        "the stored description: {code, args}, or a plain string for free text and old "
        "lines"))
    unit_label = serializers.CharField(read_only=True,
                                       help_text="the unit in the request's language")

    class Meta:
        model = InvoiceLine
        fields = ["id", "position", "kind", "description", "text", "resource", "starts",
                  "ends", "quantity", "unit", "unit_label", "unit_price", "amount"]
        read_only_fields = fields


class InvoiceSerializer(serializers.ModelSerializer):
    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    credits = serializers.CharField(source="credits.number", default=None, read_only=True)
    lines = InvoiceLineSerializer(many=True, read_only=True)

    class Meta:
        model = Invoice
        fields = ["id", "number", "tenant", "tenant_name", "cost_center", "period", "kind",
                  "status", "currency", "total", "credits", "reason", "computed_at",
                  "issued_at", "lines"]
        read_only_fields = fields


class GpuPriceSerializer(serializers.ModelSerializer):
    depreciation_hour = serializers.DecimalField(source="breakdown.depreciation", max_digits=14,
                                                 decimal_places=4, read_only=True)
    power_hour = serializers.DecimalField(source="breakdown.power", max_digits=14,
                                          decimal_places=4, read_only=True)
    operations_hour = serializers.DecimalField(source="breakdown.operations", max_digits=14,
                                               decimal_places=4, read_only=True)
    price_per_hour = serializers.DecimalField(max_digits=14, decimal_places=4, read_only=True)

    class Meta:
        model = GpuPrice
        fields = ["gpu_model", "memory_gib", "purchase_price", "depreciation_months",
                  "power_watts", "pue", "electricity_kwh", "operations_month",
                  "depreciation_hour", "power_hour", "operations_hour", "price_per_hour"]

    def get_fields(self) -> dict[str, serializers.Field]:
        """The price fields with their ranges in the schema (``rate_card_errors`` checks
        them and names ``gpus-<i>-<field>``)."""
        fields = super().get_fields()
        for name, (low, high) in GPU_PRICE_BOUNDS.items():
            documented(fields[name], low, high)
        return fields


class StoragePriceSerializer(serializers.ModelSerializer):
    class Meta:
        model = StoragePrice
        fields = ["storage_class", "gib_month"]

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        documented(fields["gib_month"], 0, UNIT_PRICE_MAX)
        return fields


class DevicePriceSerializer(serializers.ModelSerializer):
    """An override: a price per device-hour for one device key (``<model>|``,
    ``<model>|<MIG profile>``, ``<model>|shared:1/4``, ``<model>|hami:1/8``)."""

    device = serializers.CharField(max_length=300, help_text=(
        "<GPU model>| (a whole card), <GPU model>|<MIG profile>, <GPU model>|shared:<share> "
        "or <GPU model>|hami:<share>, a share such as 1/4"))

    class Meta:
        model = DevicePrice
        fields = ["device", "price_per_hour"]

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        documented(fields["price_per_hour"], 0, UNIT_PRICE_MAX)
        return fields


class RateCardSerializer(serializers.ModelSerializer):
    gpu_prices = GpuPriceSerializer(many=True)
    storage_prices = StoragePriceSerializer(many=True, required=False)
    device_prices = DevicePriceSerializer(many=True, required=False)

    class Meta:
        model = RateCard
        fields = ["id", "effective_from", "cpu_core_hour", "memory_gib_hour", "egress_gib",
                  "egress_region_gib", "egress_zone_gib",
                  "mig_pricing", "note", "gpu_prices", "storage_prices", "device_prices"]


class RateCardInput(serializers.Serializer):
    effective_from = serializers.DateField()
    gpus = serializers.ListField(child=GpuPriceSerializer(), max_length=MAX_PRICE_ROWS)
    storage = serializers.ListField(child=StoragePriceSerializer(), required=False,
                                    default=list, max_length=MAX_PRICE_ROWS)
    # overrides of derived device prices; rate_card_errors checks them (devices-<i>-<field>)
    devices = serializers.ListField(child=DevicePriceSerializer(), required=False,
                                    default=list, max_length=MAX_PRICE_ROWS)
    # per GiB by destination (within the zone is free); billing.services.rate_card_errors
    # checks them and names the field, the schema states the range
    egress_gib = documented(serializers.DecimalField(
        max_digits=12, decimal_places=6, default=0, help_text="per GiB sent to the internet"),
        0, UNIT_PRICE_MAX)
    egress_region_gib = documented(serializers.DecimalField(
        max_digits=12, decimal_places=6, default=0, help_text="per GiB sent to other regions"),
        0, UNIT_PRICE_MAX)
    egress_zone_gib = documented(serializers.DecimalField(
        max_digits=12, decimal_places=6, default=0, help_text="per GiB sent to other zones"),
        0, UNIT_PRICE_MAX)
    cpu_core_hour = serializers.DecimalField(max_digits=12, decimal_places=6, min_value=0,
                                             max_value=UNIT_PRICE_MAX, required=False,
                                             allow_null=True, default=None)
    memory_gib_hour = serializers.DecimalField(max_digits=12, decimal_places=6, min_value=0,
                                               max_value=UNIT_PRICE_MAX, required=False,
                                               allow_null=True, default=None)
    mig_pricing = serializers.ChoiceField(choices=MigPricing.choices, default=MigPricing.MEMORY)
    note = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)


class CreditNoteInput(serializers.Serializer):
    amount = documented(serializers.DecimalField(max_digits=14, decimal_places=2),
                        *CREDIT_RANGE)
    reason = serializers.CharField(max_length=250)


class BudgetSerializer(serializers.Serializer):
    monthly_amount = serializers.DecimalField(max_digits=14, decimal_places=2, allow_null=True,
                                              min_value=0, max_value=BUDGET_MAX)
    spent = serializers.DecimalField(max_digits=14, decimal_places=2, read_only=True)
    forecast = serializers.DecimalField(max_digits=14, decimal_places=2, read_only=True)
    percent = serializers.IntegerField(read_only=True, allow_null=True)
    currency = serializers.CharField(read_only=True)
