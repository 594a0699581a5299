"""Forms of the billing pages."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms
from django.utils.translation import gettext_lazy

from billing.choices import BUDGET_MAX, CREDIT_RANGE, GPU_PRICE_BOUNDS, UNIT_PRICE_MAX, MigPricing
from billing.models import RateCard
from core.forms import DecimalField


def _number(widget_attrs: dict[str, str] | None = None) -> forms.NumberInput:
    return forms.NumberInput(attrs={"step": "any", "inputmode": "decimal",
                                    **(widget_attrs or {})})


_PRICE_RANGE = {"min": "0", "max": str(UNIT_PRICE_MAX)}  # the browser's; the service checks


class RateCardForm(forms.Form):
    """The card-wide prices; the GPU and storage rows are :class:`GpuPriceFormSet` and
    :class:`StoragePriceFormSet` (one form per GPU model, one per StorageClass)."""

    effective_from = forms.DateField(label=gettext_lazy("Effective from"),
                                     widget=forms.DateInput(attrs={"type": "date"}))
    # egress per GiB by destination; checked by billing.services.rate_card_errors (shown
    # at the field); traffic within the zone is free
    egress_gib = DecimalField(label=gettext_lazy("Egress to the internet per GiB"), initial=0,
                              decimal_places=6, max_digits=12, widget=_number(_PRICE_RANGE))
    egress_region_gib = DecimalField(label=gettext_lazy("Egress to other regions per GiB"),
                                     initial=0, decimal_places=6, max_digits=12,
                                     widget=_number(_PRICE_RANGE))
    egress_zone_gib = DecimalField(
        label=gettext_lazy("Egress to other zones per GiB"), initial=0, decimal_places=6,
        max_digits=12, widget=_number(_PRICE_RANGE),
        help_text=gettext_lazy("Traffic within the zone, such as a job's own pod-to-pod "
                               "traffic, is free."))
    cpu_core_hour = DecimalField(label=gettext_lazy("CPU core-hour (optional)"),
                                 required=False, min_value=0, max_value=UNIT_PRICE_MAX,
                                 decimal_places=6, max_digits=12)
    memory_gib_hour = DecimalField(label=gettext_lazy("Memory GiB-hour (optional)"),
                                   required=False, min_value=0, max_value=UNIT_PRICE_MAX,
                                   decimal_places=6, max_digits=12)
    mig_pricing = forms.ChoiceField(label=gettext_lazy("MIG slices priced"),
                                    choices=MigPricing.choices)
    note = forms.CharField(label=gettext_lazy("Note"), required=False)

    @staticmethod
    def initial_from(card: RateCard | None) -> dict[str, Any]:
        if card is None:
            return {"mig_pricing": MigPricing.MEMORY, "egress_gib": 0,
                    "egress_region_gib": 0, "egress_zone_gib": 0}
        return {"egress_gib": card.egress_gib, "egress_region_gib": card.egress_region_gib,
                "egress_zone_gib": card.egress_zone_gib, "cpu_core_hour": card.cpu_core_hour,
                "memory_gib_hour": card.memory_gib_hour, "mig_pricing": card.mig_pricing,
                "note": ""}


def _range(name: str) -> dict[str, str]:
    """The browser's min/max of a GPU price field (``GPU_PRICE_BOUNDS``; the service checks
    the values and says what is wrong at the field)."""
    low, high = GPU_PRICE_BOUNDS[name]
    return {"min": str(low), "max": str(high)}


class GpuPriceForm(forms.Form):
    """One GPU model's price components. A row without a purchase price is left off the
    card; every other problem is the service's (``billing.services.rate_card_errors``),
    shown at its field."""

    gpu_model = forms.ChoiceField(label=gettext_lazy("GPU model"), required=False)
    memory_gib = forms.IntegerField(
        label=gettext_lazy("Card memory (GiB)"), required=False,
        widget=_number({"step": "1", **_range("memory_gib")}),
        help_text=gettext_lazy("For MIG pricing; empty: as the cluster reports it."))
    purchase_price = DecimalField(label=gettext_lazy("Purchase price"), required=False,
                                  decimal_places=2, max_digits=14,
                                  widget=_number(_range("purchase_price")))
    depreciation_months = forms.IntegerField(
        label=gettext_lazy("Depreciation (months)"), required=False,
        widget=_number({"step": "1", **_range("depreciation_months")}))
    power_watts = DecimalField(label=gettext_lazy("Power (W)"), required=False,
                               decimal_places=1, max_digits=8,
                               widget=_number(_range("power_watts")))
    pue = DecimalField(label=gettext_lazy("PUE"), required=False, decimal_places=2,
                       max_digits=4, widget=_number(_range("pue")))
    electricity_kwh = DecimalField(label=gettext_lazy("Electricity per kWh"), required=False,
                                   decimal_places=4, max_digits=10,
                                   widget=_number(_range("electricity_kwh")))
    operations_month = DecimalField(label=gettext_lazy("Operations per card-month"),
                                    required=False, decimal_places=2, max_digits=12,
                                    widget=_number(_range("operations_month")))

    REQUIRED = ("gpu_model", "purchase_price", "depreciation_months", "power_watts", "pue",
                "electricity_kwh")

    def __init__(self, *args: Any, models: list[str] = (), **kwargs: Any) -> None:  # type: ignore[assignment]
        super().__init__(*args, **kwargs)
        field = self.fields["gpu_model"]
        field.choices = [("", "—"), *((m, m) for m in models)]  # type: ignore[attr-defined]

    def is_blank(self) -> bool:
        data = getattr(self, "cleaned_data", {})
        return not any(data.get(name) not in (None, "") for name in self.fields
                       if name != "gpu_model")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.is_blank():
            return cleaned
        for name in self.REQUIRED:
            if cleaned.get(name) in (None, "") and name not in self.errors:
                self.add_error(name, forms.Field.default_error_messages["required"])
        return cleaned

    def row(self) -> dict[str, Any]:
        data = dict(self.cleaned_data)
        if data.get("operations_month") is None:
            data["operations_month"] = Decimal(0)
        return data


class StoragePriceForm(forms.Form):
    storage_class = forms.ChoiceField(label=gettext_lazy("StorageClass"), required=False)
    gib_month = DecimalField(label=gettext_lazy("Price per GiB-month"), required=False,
                             decimal_places=6, max_digits=12,
                             widget=_number(_PRICE_RANGE))

    def __init__(self, *args: Any, classes: list[str] = (), **kwargs: Any) -> None:  # type: ignore[assignment]
        super().__init__(*args, **kwargs)
        field = self.fields["storage_class"]
        field.choices = [("", "—"), *((c, c) for c in classes)]  # type: ignore[attr-defined]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("storage_class") and cleaned.get("gib_month") is None \
                and "gib_month" not in self.errors:
            self.add_error("gib_month", forms.Field.default_error_messages["required"])
        return cleaned


class DevicePriceForm(forms.Form):
    """An override of one device's price per device-hour (its key as the device rows
    list it, e.g. ``NVIDIA-L4|shared:1/4``); a row without a device is left off."""

    device = forms.CharField(label=gettext_lazy("Device"), required=False, max_length=300,
                             widget=forms.TextInput(attrs={"list": "device-keys"}))
    price_per_hour = DecimalField(label=gettext_lazy("Price per device-hour"), required=False,
                                  decimal_places=4, max_digits=12,
                                  widget=_number(_PRICE_RANGE))

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("device") and cleaned.get("price_per_hour") is None \
                and "price_per_hour" not in self.errors:
            self.add_error("price_per_hour", forms.Field.default_error_messages["required"])
        return cleaned


class PriceRows(forms.BaseFormSet):
    """A formset of price rows: rows left blank are not on the card."""

    def filled(self) -> list[forms.Form]:
        return [f for f in self.forms if f.cleaned_data and not self._blank(f)]

    @staticmethod
    def _blank(form: forms.Form) -> bool:
        if isinstance(form, GpuPriceForm):
            return form.is_blank()
        if isinstance(form, DevicePriceForm):
            return not form.cleaned_data.get("device")
        return not form.cleaned_data.get("storage_class")

    def rows(self) -> list[dict[str, Any]]:
        return [f.row() if isinstance(f, GpuPriceForm) else dict(f.cleaned_data)
                for f in self.filled()]

    def add_errors(self, errors: dict[str, str]) -> bool:
        """Put the service's errors (``<prefix>-<i>-<field>``, ``i`` counted over the
        filled rows) at their fields; True when every one found its field."""
        filled = self.filled()
        placed = True
        for key, text in errors.items():
            prefix, _sep, rest = key.partition("-")
            index, _sep, name = rest.partition("-")
            if prefix != self.prefix or not index.isdigit() or int(index) >= len(filled) \
                    or name not in filled[int(index)].fields:
                placed = placed and prefix != self.prefix
                continue
            filled[int(index)].add_error(name, text)
        return placed


GpuPriceFormSet: type[PriceRows] = forms.formset_factory(  # type: ignore[assignment]
    GpuPriceForm, formset=PriceRows, extra=2)
StoragePriceFormSet: type[PriceRows] = forms.formset_factory(  # type: ignore[assignment]
    StoragePriceForm, formset=PriceRows, extra=2)


DevicePriceFormSet: type[PriceRows] = forms.formset_factory(  # type: ignore[assignment]
    DevicePriceForm, formset=PriceRows, extra=2)


def device_rows_initial(card: RateCard | None) -> list[dict[str, Any]]:
    """The current card's overrides (a new card keeps them unless removed)."""
    return [{"device": d.device, "price_per_hour": d.price_per_hour}
            for d in (card.device_prices.all() if card else [])]


def gpu_rows_initial(card: RateCard | None, models: list[str]) -> list[dict[str, Any]]:
    """The current card's rows, then one empty row per GPU model the cluster reports that
    the card does not price yet."""
    rows = [{name: getattr(g, name) for name in GpuPriceForm.base_fields}
            for g in (card.gpu_prices.all() if card else [])]
    priced = {r["gpu_model"] for r in rows}
    return rows + [{"gpu_model": m} for m in models if m not in priced]


def storage_rows_initial(card: RateCard | None) -> list[dict[str, Any]]:
    return [{"storage_class": s.storage_class, "gib_month": s.gib_month}
            for s in (card.storage_prices.all() if card else [])]


class CreditNoteForm(forms.Form):
    amount = DecimalField(label=gettext_lazy("Amount to credit"), min_value=CREDIT_RANGE[0],
                          max_value=CREDIT_RANGE[1], decimal_places=2)
    reason = forms.CharField(label=gettext_lazy("Reason"), max_length=250)


class AdjustmentForm(forms.Form):
    tenant = forms.SlugField(label=gettext_lazy("Tenant"))
    description = forms.CharField(label=gettext_lazy("Description"), max_length=300)
    amount = DecimalField(label=gettext_lazy("Amount (negative for a discount)"),
                          decimal_places=2, min_value=-BUDGET_MAX, max_value=BUDGET_MAX)


class BudgetForm(forms.Form):
    amount = DecimalField(label=gettext_lazy("Monthly budget"), min_value=0, decimal_places=2,
                          max_digits=14, max_value=BUDGET_MAX, required=False)
