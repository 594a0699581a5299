"""Forms of the billing pages."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django import forms
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from billing.choices import MigPricing
from billing.models import RateCard
from core.forms import DecimalField

GPU_FIELDS = ["gpu_model", "memory_gib", "purchase_price", "depreciation_months",
              "power_watts", "pue", "electricity_kwh", "operations_month"]


def _decimal(raw: str, what: str) -> Decimal:
    try:
        return Decimal(raw.strip())
    except InvalidOperation:
        raise forms.ValidationError(_("%(what)s is not a number: %(raw)s")
                                    % {"what": what, "raw": raw}) from None


class RateCardForm(forms.Form):
    effective_from = forms.DateField(label=gettext_lazy("Effective from"),
                                     widget=forms.DateInput(attrs={"type": "date"}))
    gpus = forms.CharField(
        label=gettext_lazy("GPU prices"), widget=forms.Textarea(attrs={"rows": 5}),
        help_text=gettext_lazy("One GPU model a line: model, card memory GiB, purchase price, "
                               "depreciation months, power W, PUE, electricity per kWh, "
                               "operations per card-month."))
    storage = forms.CharField(
        label=gettext_lazy("Storage prices"), required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=gettext_lazy("One StorageClass a line: class, price per GiB-month."))
    egress_gib = DecimalField(label=gettext_lazy("Egress per GiB"), min_value=0, initial=0,
                                    decimal_places=6)
    cpu_core_hour = DecimalField(label=gettext_lazy("CPU core-hour (optional)"),
                                       required=False, min_value=0, decimal_places=6)
    memory_gib_hour = DecimalField(label=gettext_lazy("Memory GiB-hour (optional)"),
                                         required=False, min_value=0, decimal_places=6)
    mig_pricing = forms.ChoiceField(label=gettext_lazy("MIG slices priced"),
                                    choices=MigPricing.choices)
    note = forms.CharField(label=gettext_lazy("Note"), required=False)

    def clean_gpus(self) -> list[dict[str, Any]]:
        out = []
        for raw in self.cleaned_data["gpus"].splitlines():
            if not raw.strip():
                continue
            parts = [p.strip() for p in raw.split(",")]
            if len(parts) != len(GPU_FIELDS):
                raise forms.ValidationError(_("Each GPU line needs %(n)s values: %(line)s")
                                            % {"n": len(GPU_FIELDS), "line": raw})
            row: dict[str, Any] = {"gpu_model": parts[0]}
            row["memory_gib"] = int(parts[1]) if parts[1].isdigit() else None
            row["depreciation_months"] = int(_decimal(parts[3], _("Depreciation")))
            for name, value in zip(GPU_FIELDS, parts, strict=True):
                if name not in row:
                    row[name] = _decimal(value, name)
            out.append(row)
        if not out:
            raise forms.ValidationError(_("Price at least one GPU model."))
        return out

    def clean_storage(self) -> list[dict[str, Any]]:
        out = []
        for raw in self.cleaned_data["storage"].splitlines():
            if not raw.strip():
                continue
            name, _sep, price = raw.partition(",")
            out.append({"storage_class": name.strip(),
                        "gib_month": _decimal(price, name.strip())})
        return out

    @staticmethod
    def initial_from(card: RateCard | None) -> dict[str, Any]:
        if card is None:
            return {"mig_pricing": MigPricing.MEMORY, "egress_gib": 0}
        return {
            "gpus": "\n".join(", ".join(str(getattr(g, f) if getattr(g, f) is not None else "")
                                        for f in GPU_FIELDS) for g in card.gpu_prices.all()),
            "storage": "\n".join(f"{s.storage_class}, {s.gib_month.normalize()}"
                                 for s in card.storage_prices.all()),
            "egress_gib": card.egress_gib.normalize(), "cpu_core_hour": card.cpu_core_hour,
            "memory_gib_hour": card.memory_gib_hour, "mig_pricing": card.mig_pricing,
        }


class CreditNoteForm(forms.Form):
    amount = DecimalField(label=gettext_lazy("Amount to credit"), min_value=Decimal("0.01"),
                                decimal_places=2)
    reason = forms.CharField(label=gettext_lazy("Reason"), max_length=250)


class AdjustmentForm(forms.Form):
    tenant = forms.SlugField(label=gettext_lazy("Tenant"))
    description = forms.CharField(label=gettext_lazy("Description"), max_length=300)
    amount = DecimalField(label=gettext_lazy("Amount (negative for a discount)"),
                                decimal_places=2)


class BudgetForm(forms.Form):
    amount = DecimalField(label=gettext_lazy("Monthly budget"), min_value=0, decimal_places=2,
                          max_digits=14, required=False)
