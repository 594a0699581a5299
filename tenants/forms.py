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
