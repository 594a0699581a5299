"""Template filters for observed cluster quantities."""

from __future__ import annotations

from django import template
from django.utils.translation import gettext as _

register = template.Library()


@register.filter
def mib(value: int | None) -> str:
    """MiB as GiB for people: 81920 -> "80 GiB", 46068 -> "45 GiB"; None -> "—"."""
    if value is None or value == "":
        return "—"
    gib = int(value) / 1024
    amount = f"{gib:.0f}" if gib >= 10 or gib == int(gib) else f"{gib:.1f}"
    return _("%(amount)s GiB") % {"amount": amount}
