"""A user's preferences: the language their e-mails are written in."""

from __future__ import annotations

from django.conf import settings

from core.exceptions import ApplicationError
from core.models import UserPreference
from tenants.access import AnyUser


def supported_language(code: str | None) -> str | None:
    """``code`` as one of ``settings.LANGUAGES`` (``zh-Hans`` -> ``zh-hans``), else None."""
    wanted = (code or "").strip().lower().replace("_", "-")
    known = {c.lower(): c for c, _name in settings.LANGUAGES}
    if wanted in known:
        return known[wanted]
    base = wanted.split("-")[0]
    # a generic or regional code of a language we speak in one variant (zh-cn -> zh-hans)
    matches = [c for c in known.values() if c.lower().split("-")[0] == base]
    return matches[0] if len(matches) == 1 else None


def preference_set_language(*, user: AnyUser, language: str) -> UserPreference:
    """Remember the user's language (for e-mails); idempotent."""
    code = supported_language(language)
    if code is None:
        raise ApplicationError(f"unsupported language {language!r}", field="language")
    pref, _created = UserPreference.objects.update_or_create(user=user,
                                                              defaults={"language": code})
    return pref


def preference_default_language(*, user: AnyUser, language: str | None) -> None:
    """Record ``language`` (the one the browser asked for) unless the user chose already."""
    code = supported_language(language)
    if code is not None and user is not None and user.pk is not None:
        UserPreference.objects.get_or_create(user=user, defaults={"language": code})
