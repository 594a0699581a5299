"""Checks of what people type that every app's services share (no app imported)."""

from __future__ import annotations

from django.utils.translation import gettext as _

from core.exceptions import ApplicationError


def typed_text(value: str, *, field: str, max_length: int = 2000) -> str:
    """What a person typed (a reason, a note), stripped. A NUL character, which no
    Postgres text or JSON column can hold, or text past ``max_length`` characters is an
    ApplicationError on ``field`` (before anything is written), not a database error."""
    value = (value or "").strip()
    if "\x00" in value:
        raise ApplicationError(_("The text contains a NUL character; remove it."), field=field)
    if len(value) > max_length:
        raise ApplicationError(_("At most %(n)s characters, please.") % {"n": max_length},
                               field=field)
    return value
