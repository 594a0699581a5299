"""HTML forms of the tenants app. Forms validate shape; services enforce the rules."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from tenants.choices import MembershipRole, PlatformRoleName
from tenants.models import Tenant


class TenantForm(forms.ModelForm):
    class Meta:
        model = Tenant
        fields = ["slug", "name", "cost_center", "contact_name", "contact_email"]

    def __init__(self, *args, editing: bool = False, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        if editing:
            del self.fields["slug"]

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


class QuotaForm(forms.Form):
    """Amounts for several resources at once; blank rows are ignored."""

    ROWS = 8
    reason = forms.CharField(label=_("Reason"), max_length=2000,
                             widget=forms.Textarea(attrs={"rows": 2}))

    def __init__(self, *args, initial_grants: dict | None = None, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        rows = list((initial_grants or {}).items())
        for i in range(max(self.ROWS, len(rows) + 3)):
            key, amount = rows[i] if i < len(rows) else ("", None)
            self.fields[f"resource_{i}"] = forms.CharField(
                required=False, initial=key, label=_("Resource"),
                widget=forms.TextInput(attrs={"list": "resource-keys", "size": 34}))
            self.fields[f"amount_{i}"] = forms.DecimalField(
                required=False, initial=amount.normalize() if amount is not None else None,
                label=_("Amount"), min_value=0, max_digits=14, decimal_places=3)

    def rows(self) -> list[tuple]:
        return [(self[f"resource_{i}"], self[f"amount_{i}"])
                for i in range(len([f for f in self.fields if f.startswith("resource_")]))]

    def amounts(self) -> dict[str, object]:
        result = {}
        for name, value in self.cleaned_data.items():
            if name.startswith("resource_") and value:
                amount = self.cleaned_data.get("amount_" + name.removeprefix("resource_"))
                if amount is None:
                    raise forms.ValidationError(_("Give an amount for %(r)s.") % {"r": value})
                result[value.strip()] = amount
        return result
