"""HTML forms of the tenants app. Forms validate shape; services enforce the rules."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from django import forms
from django.utils.safestring import mark_safe
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from core.choices import PoolKind
from core.forms import DecimalField
from core.models import POLICY_BOUNDS
from core.numbers import api_decimal
from k8s_sync.placement import validate_topology_levels
from tenants.catalog import MAX_AMOUNT, Resource, ResourceKind
from tenants.choices import MembershipRole, PlatformRoleName, QuotaMode
from tenants.models import Tenant
from tenants.network import parse_cidrs
from tenants.templatetags.quota_amounts import amount as amount_text

#: an amount's input: the service checks it (``Resource.check_amount``), the browser knows
#: the range
AMOUNT_ATTRS = {"size": 8, "inputmode": "decimal", "step": "any", "min": 0,
                "max": int(MAX_AMOUNT)}


class TenantForm(forms.ModelForm):
    class Meta:
        model = Tenant
        fields = ["slug", "name", "cost_center", "contact_name", "contact_email",
                  "billing_address"]
        widgets = {"billing_address": forms.Textarea(attrs={"rows": 3})}

    egress_cidrs = forms.CharField(
        label=_("Egress CIDRs of this tenant"), required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_("Destinations this tenant's jobs may reach beside the policy's: one CIDR "
                    "per line or comma separated, e.g. 192.0.2.0/24."))

    def __init__(self, *args, editing: bool = False, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        if editing:
            del self.fields["slug"]
            self.initial["egress_cidrs"] = "\n".join(self.instance.egress_cidrs or [])
        else:  # a new tenant starts with the policy's destinations only
            del self.fields["egress_cidrs"]

    def clean_egress_cidrs(self) -> list[str]:
        return _cidrs(self.cleaned_data["egress_cidrs"])

    def validate_unique(self) -> None:
        """Uniqueness is the service's job (one message for page and API)."""


class SuspendForm(forms.Form):
    reason = forms.CharField(label=_("Reason shown to the tenant's members"), max_length=2000,
                             widget=forms.Textarea(attrs={"rows": 2}))


class MemberAddForm(forms.Form):
    user = forms.CharField(label=_("User name or e-mail"), max_length=254)
    role = forms.ChoiceField(label=_("Role"), choices=MembershipRole.choices,
                             initial=MembershipRole.MEMBER)


class MemberRoleForm(forms.Form):
    role = forms.ChoiceField(label=_("Role"), choices=MembershipRole.choices)


class UserCreateForm(forms.Form):
    username = forms.CharField(label=_("User name"), max_length=150)
    email = forms.EmailField(label=_("E-mail"))
    first_name = forms.CharField(label=_("First name"), max_length=150, required=False)
    last_name = forms.CharField(label=_("Last name"), max_length=150, required=False)
    password = forms.CharField(label=_("Initial password"), widget=forms.PasswordInput,
                               min_length=8)


class PlatformRoleForm(forms.Form):
    role = forms.ChoiceField(choices=PlatformRoleName.choices)
    granted = forms.TypedChoiceField(choices=[("1", "grant"), ("0", "revoke")],
                                     coerce=lambda v: v == "1")


def resource_choices(keys: Iterable[str]) -> list[tuple[str, str]]:
    """A select's options for resource keys (the catalog's: ``tenants.catalog.Resource``),
    labelled for people with their unit, e.g. ``GPUs · NVIDIA-H800 (cards)`` (the value
    stays the key); keys that do not parse are left out."""
    options: dict[str, str] = {}
    for key in keys:
        try:
            resource = Resource.parse(key)
        except ValueError:
            continue
        options[resource.key] = f"{resource.label()} ({resource.unit})"
    return [("", "—"), *sorted(options.items())]


class AmountRowsForm(forms.Form):
    """Rows of (resource key, amount); blank rows are ignored."""

    ROWS = 6

    def __init__(self, *args, initial_grants: dict | None = None,  # type: ignore[no-untyped-def]
                 resource_keys: Iterable[str] = (), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        rows = list((initial_grants or {}).items())
        self.row_count = max(self.ROWS, len(rows) + 3)
        choices = resource_choices([*resource_keys, *(k for k, _v in rows)])
        for i in range(self.row_count):
            key, amount = rows[i] if i < len(rows) else ("", None)
            self.fields[f"resource_{i}"] = forms.ChoiceField(
                required=False, initial=key, label=_("Resource"), choices=choices)
            self.fields[f"amount_{i}"] = forms.CharField(
                required=False, initial=api_decimal(amount) if amount is not None else None,
                label=pgettext_lazy("quota", "Amount"), max_length=30,
                widget=forms.NumberInput(attrs=AMOUNT_ATTRS))

    def rows(self) -> list[tuple]:
        return [(self[f"resource_{i}"], self[f"amount_{i}"]) for i in range(self.row_count)]

    def clean(self) -> dict:
        cleaned = super().clean() or {}
        amounts = {}
        for i in range(self.row_count):
            key = (cleaned.get(f"resource_{i}") or "").strip()
            amount = (cleaned.get(f"amount_{i}") or "").strip()
            if key and not amount:
                raise forms.ValidationError(_("Give an amount for %(r)s.") % {"r": key})
            if key:
                amounts[key] = amount
        self.parsed_amounts = amounts
        return cleaned

    def amounts(self) -> dict[str, str]:
        """Filled rows as {resource: amount text}; the service validates both."""
        return self.parsed_amounts

    def field_of(self, resource: str | None) -> str | None:
        """The row field where ``resource`` was typed (a service names the resource it
        refuses in ``ApplicationError.extra["resource"]``); None when no row has it."""
        for i in range(self.row_count):
            if resource and (self.data.get(f"resource_{i}") or "").strip() == resource:
                return f"resource_{i}"
        return None


class QuotaForm(AmountRowsForm):
    ROWS = 8
    reason = forms.CharField(label=_("Reason"), max_length=2000,
                             widget=forms.Textarea(attrs={"rows": 2}))


class QuotaRequestForm(AmountRowsForm):
    """Ask for new amounts; each row shows the resource's unit and the pool's current
    amount beside the new one (``current``: pool kind -> {key: granted amount}, the
    quota page's own figures). Its ids start with ``request_``: the loan form on the
    same page has a ``pool`` field too."""

    ROWS = 4
    pool = forms.ChoiceField(label=_("Pool"), choices=PoolKind.choices)
    justification = forms.CharField(label=_("Why does the team need it?"), max_length=4000,
                                    widget=forms.Textarea(attrs={"rows": 3}))
    valid_until = forms.DateField(label=_("Until (optional, for a temporary change)"),
                                  required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def __init__(self, *args: Any, current: dict[str, dict[str, Decimal]] | None = None,
                 **kwargs: Any) -> None:
        kwargs.setdefault("auto_id", "request_%s")
        super().__init__(*args, **kwargs)
        self.current = current or {}

    def chosen_pool(self) -> str:
        value = self["pool"].value()
        return value if value in PoolKind.values else str(PoolKind.choices[0][0])

    def request_rows(self) -> list[dict[str, Any]]:
        """Each row: its resource and amount fields, the chosen resource's unit and the
        chosen pool's current amount of it (0 when not granted; None with no resource)."""
        current = self.current.get(self.chosen_pool(), {})
        out = []
        for resource, amount in self.rows():
            key = str(resource.value() or "")
            unit = current_amount = None
            try:
                parsed = Resource.parse(key) if key else None
            except ValueError:
                parsed = None
            if parsed is not None:
                unit, current_amount = parsed.unit, current.get(key, Decimal(0))
            out.append({"resource": resource, "amount": amount, "key": key, "unit": unit,
                        "current": current_amount})
        return out

    def live_data(self) -> dict[str, Any]:
        """What the page's script needs to show a row's unit and current amount as soon
        as a resource or the pool is chosen: units by key, amounts (written as the page
        writes them) by pool and key."""
        keys = [key for key, _label in self.fields["resource_0"].choices if key]  # type: ignore[attr-defined]
        return {
            "units": {key: Resource.parse(key).unit for key in keys},
            "current": {pool: {key: amount_text(self.current.get(pool, {}).get(key, 0), key)
                               for key in keys} for pool in PoolKind.values},
        }


class DecisionForm(forms.Form):
    note = forms.CharField(label=_("Note or reason for the requester"), max_length=2000,
                           required=False, widget=forms.Textarea(attrs={"rows": 2}))


class LoanForm(forms.Form):
    """Lend quota: the borrower from the tenants by name, the resource from the catalog."""

    pool = forms.ChoiceField(label=_("From pool"), choices=PoolKind.choices)
    borrower = forms.ChoiceField(label=_("To tenant"))
    borrower_pool = forms.ChoiceField(label=_("Their pool"), choices=PoolKind.choices)
    resource = forms.ChoiceField(label=_("Resource"))
    amount = forms.CharField(label=pgettext_lazy("quota", "Amount"), max_length=20,
                             widget=forms.NumberInput(attrs=AMOUNT_ATTRS))
    ends_at = forms.DateField(label=_("Until"), widget=forms.DateInput(attrs={"type": "date"}))
    note = forms.CharField(label=_("Note"), max_length=2000, required=False)

    def __init__(self, *args: Any, borrowers: Iterable[tuple[str, str]] = (),
                 resource_keys: Iterable[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["borrower"].choices = [("", "—"), *borrowers]  # type: ignore[attr-defined]
        self.fields["resource"].choices = resource_choices(resource_keys)  # type: ignore[attr-defined]


FACTOR_PREFIX = "overcommit_factors."


def factor_field(key: str) -> str:
    """The policy form's field of one resource's overcommit factor; the service names the
    same field in its errors (``tenants.services.policy_update``)."""
    return FACTOR_PREFIX + key


def _whole(key: str, end: int) -> int:
    """The lower (``end`` 0) or upper (1) bound of a whole-number policy field."""
    return int(POLICY_BOUNDS[key][end])


def _percent(key: str, end: int) -> Decimal:
    """The lower or upper bound of a policy fraction, in the percent the form shows."""
    return POLICY_BOUNDS[key][end] * 100


class PolicyForm(forms.Form):
    """The platform policy. Overcommit factors are one number per resource kind (and per
    key where one is set), built in ``__init__``; empty means 1 (no overcommit)."""

    eviction_watermark = DecimalField(
        label=_("Eviction watermark (%)"), decimal_places=1,
        min_value=_percent("eviction_watermark", 0), max_value=_percent("eviction_watermark", 1))
    borrowing_cap = DecimalField(
        label=_("Borrowing cap (x quota)"), required=False, decimal_places=2, max_digits=5,
        min_value=POLICY_BOUNDS["borrowing_cap"][0], max_value=POLICY_BOUNDS["borrowing_cap"][1],
        help_text=_("What development and batch jobs of a tenant without a cap of its own may "
                    "hold, as a multiple of its quota. Blank: no cap, they borrow any idle "
                    "capacity and give it back, after their grace, when its owner needs it."))
    development_grace_seconds = forms.IntegerField(
        label=_("Development grace (seconds)"),
        min_value=_whole("development_grace_seconds", 0),
        max_value=_whole("development_grace_seconds", 1))
    batch_grace_seconds = forms.IntegerField(
        label=_("Batch grace (seconds)"), min_value=_whole("batch_grace_seconds", 0),
        max_value=_whole("batch_grace_seconds", 1))
    default_quota = forms.CharField(
        label=_("Default quota for new tenants"), required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text=_("One per line: pool, resource and amount, e.g. dev cpu = 8."))
    dev_pvc_reclaim_days = forms.IntegerField(
        label=_("Reclaim dev-pool volumes unused for (days)"), required=False,
        min_value=_whole("dev_pvc_reclaim_days", 0), max_value=_whole("dev_pvc_reclaim_days", 1))
    dynamic_headroom = DecimalField(
        label=_("Dynamic mode headroom (%)"), decimal_places=0,
        min_value=_percent("dynamic_headroom", 0), max_value=_percent("dynamic_headroom", 1))
    dynamic_idle_threshold = DecimalField(
        label=_("Dynamic mode idle threshold (%)"), decimal_places=0,
        min_value=_percent("dynamic_idle_threshold", 0),
        max_value=_percent("dynamic_idle_threshold", 1))

    egress_cidrs = forms.CharField(
        label=_("Egress CIDRs"), required=False, widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_("Destinations every tenant's jobs may reach beyond their namespace "
                    "(object storage, dataset servers, a proxy): one CIDR per line or comma "
                    "separated, e.g. 10.20.0.0/16. Tenants may add their own."))

    def clean_egress_cidrs(self) -> list[str]:
        return _cidrs(self.cleaned_data["egress_cidrs"])

    topology_levels = forms.CharField(
        label=_("Topology levels"), required=False, widget=forms.Textarea(attrs={"rows": 3}),
        # Django renders help texts unescaped: the label keys are literal code.
        help_text=format_lazy(
            _("Node-label keys of the network, widest first, one per line; a multi-node job "
              "runs under one value of the last one (its switch). Empty means {default}; for "
              "example {example}."),
            default=mark_safe("<code>trainyard.io/rack</code>, <code>trainyard.io/switch</code>"),
            example=mark_safe("<code>cloud.google.com/gce-topology-block</code>, "
                              "<code>cloud.google.com/gce-topology-subblock</code>")))

    def clean_topology_levels(self) -> list[str]:
        text = (self.cleaned_data["topology_levels"] or "").replace(",", "\n")
        levels = [line.strip() for line in text.splitlines() if line.strip()]
        if not levels:
            return []
        try:
            return list(validate_topology_levels(levels))
        except ValueError as exc:
            raise forms.ValidationError(TOPOLOGY_ERROR % {
                "error": str(exc).removeprefix("topology_levels: ")}) from None

    def __init__(self, *args: Any, factors: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        factors = factors or {}
        keys = [str(k) for k in ResourceKind.values] + sorted(
            k for k in factors if k not in ResourceKind.values)
        for key in keys:
            try:
                label = Resource.parse(key).label() if ":" in key else \
                    str(ResourceKind(key).label)
            except ValueError:
                label = key
            self.fields[factor_field(key)] = DecimalField(
                label=format_lazy(_("Overcommit factor: {}"), label), required=False,
                decimal_places=2, max_digits=5, initial=factors.get(key),
                # the range is the service's to check (its message names the resource)
                widget=forms.NumberInput(attrs={
                    "step": "0.05", "inputmode": "decimal", "placeholder": "1",
                    "min": POLICY_BOUNDS["overcommit_factor"][0],
                    "max": POLICY_BOUNDS["overcommit_factor"][1]}))
        self.factor_keys = keys

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        factors = {}
        for key in self.factor_keys:
            value = cleaned.pop(factor_field(key), None)
            if value is not None:
                factors[key] = value
        cleaned["overcommit_factors"] = factors
        return cleaned

    def clean_default_quota(self) -> dict[str, dict[str, str]]:
        result: dict[str, dict[str, str]] = {}
        for line in (self.cleaned_data["default_quota"] or "").splitlines():
            if not line.strip():
                continue
            head, sep, amount = line.partition("=")
            parts = head.split()
            if not sep or len(parts) != 2:
                raise forms.ValidationError(_("Write each line as: pool resource = amount"))
            result.setdefault(parts[0], {})[parts[1]] = amount.strip()
        return result


def _cidrs(text: str) -> list[str]:
    try:
        return parse_cidrs(text or "")
    except ValueError as exc:
        raise forms.ValidationError(str(exc)) from None


TOPOLOGY_ERROR = _("Topology levels are node-label keys, widest first: %(error)s")


class TenantSettingsForm(forms.Form):
    quota_mode = forms.ChoiceField(label=_("Quota mode"), choices=[])
    borrowing_cap = DecimalField(
        label=_("Borrowing cap (x quota)"), min_value=1, max_value=100, decimal_places=2,
        required=False,
        help_text=_("Blank: the platform's cap, or none (development and batch jobs may "
                    "borrow any idle capacity)."))
    members_may_request_quota = forms.BooleanField(label=_("Members may request quota"),
                                                   required=False)

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.fields["quota_mode"].choices = QuotaMode.choices  # type: ignore[attr-defined]
