"""Template filters for observed cluster quantities."""

from __future__ import annotations

from django import template
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext_lazy

register = template.Library()


@register.filter
def mib(value: int | None) -> str:
    """MiB as GiB for people: 81920 -> "80 GiB", 46068 -> "45 GiB"; None -> "—"."""
    if value is None or value == "":
        return "—"
    gib = int(value) / 1024
    amount = f"{gib:.0f}" if gib >= 10 or gib == int(gib) else f"{gib:.1f}"
    return _("%(amount)s GiB") % {"amount": amount}


_SHARING = {"time-slicing": gettext_lazy("time-slicing"), "mps": "MPS", "none": "—"}


@register.filter
def sharing(value: str | None) -> str:
    """A node's GPU sharing strategy (the GPU operator's word) for people."""
    return str(_SHARING.get(value or "", value or "—"))


_PHASES = {"Pending": pgettext_lazy("pod phase", "Pending"),
           "Running": pgettext_lazy("pod phase", "Running"),
           "Succeeded": pgettext_lazy("pod phase", "Succeeded"),
           "Failed": pgettext_lazy("pod phase", "Failed"),
           "Unknown": pgettext_lazy("pod phase", "Unknown")}


@register.filter
def pod_phase(value: str | None) -> str:
    """A pod's phase (Kubernetes' word) for people; an unknown one as it is."""
    return str(_PHASES.get(value or "", value or "—"))
