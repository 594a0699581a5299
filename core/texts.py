"""Text that is stored and shown later: kept as a code and arguments, rendered in the
reader's language when shown.

A reason, a notification or an invoice line is written once (by a worker, in whatever
language that process runs) and read many times, by people who chose English or
Chinese. So the row stores ``{"code": ..., "args": {...}}`` and the page, the e-mail or
the API renders it with the catalogue of the moment::

    # tenants/texts.py (any module imported when its app loads)
    from django.utils.translation import gettext_lazy as _
    from core.texts import register
    register("quota.approved", _("Your quota request for %(tenant)s was approved."))

    # a service
    Notification(message_text=message("quota.approved", tenant=tenant.name))

    # a template: {{ row.message_text|render_text }}; Python: render(value)

Arguments are JSON values. An argument that is itself a stored text (a dict with a
``code``) is rendered first, in the same language, so "production"/"development" or a
resource name translate inside a sentence. A list of texts renders as its parts joined by
``"; "`` (``"；"`` in Chinese). A plain string is shown as it is: free text a person
typed, a message from Kubernetes, or a row written before its code existed.

Codes are registered with lazy templates so ``makemessages`` finds every one; rendering an
unknown code falls back to the code and its arguments instead of failing a page. A
template may be plural (``ngettext_lazy(singular, plural, "n")``: the form follows the
argument ``n``) or any object whose ``%`` formats the arguments (e.g. an ordinal or a
date in the reader's language); :func:`template` returns what a code was registered with.

Pure producers (the admission engine, which must not import Django) build the same
dicts with :func:`message`-shaped literals; nothing here needs Django until rendering.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils import translation
from django.utils.translation import get_language

StoredText = dict[str, Any] | list[Any] | str

_TEMPLATES: dict[str, Any] = {}


def register(code: str, template: Any) -> str:
    """Register the (lazy) template of ``code``; returns the code."""
    _TEMPLATES[code] = template
    return code


def registered(code: str) -> bool:
    return code in _TEMPLATES


def template(code: str) -> Any:
    """The template ``code`` was registered with (None when unknown)."""
    return _TEMPLATES.get(code)


def codes() -> list[str]:
    return sorted(_TEMPLATES)


def message(code: str, **args: Any) -> dict[str, Any]:
    """A stored text: ``{"code": code, "args": args}``. The code must be registered."""
    if code not in _TEMPLATES:
        raise KeyError(f"unknown text code {code!r}; register it first")
    return {"code": code, "args": args}


def _separator() -> str:
    return "；" if (get_language() or "").startswith("zh") else "; "


def _arg(value: Any) -> Any:
    if isinstance(value, dict) and "code" in value:
        return render(value)
    if isinstance(value, list):
        return render(value)
    return value


def render(value: StoredText | None, language: str | None = None) -> str:
    """The text in ``language`` (default: the active one)."""
    if language is not None:
        with translation.override(language):
            return render(value)
    if value is None or value == "":
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return _separator().join(p for p in (render(v) for v in value) if p)
    if not isinstance(value, Mapping) or "code" not in value:
        return str(value)
    code = value["code"]
    args = {k: _arg(v) for k, v in (value.get("args") or {}).items()}
    template = _TEMPLATES.get(code)
    if template is None:
        detail = ", ".join(f"{k}={v}" for k, v in sorted(args.items()))
        return f"{code} ({detail})" if detail else str(code)
    try:
        # ``template % args`` (not ``str(template) % args``): a plural template
        # (``ngettext_lazy(singular, plural, "n")``) picks its form from ``args["n"]``, and
        # any object with ``__mod__`` may format its arguments itself.
        return str(template % args) if args else str(template)
    except (KeyError, TypeError, ValueError):
        # A template and its arguments that disagree (a translation with a typo, a row
        # written by an older release) must not break the page that shows it.
        return f"{template} {args}"


def text_code(value: StoredText | None) -> str | None:
    """The code of a stored text (of its first coded part, for a list); None for a plain
    string or nothing: for APIs and filters that want the reason machine-readable."""
    if isinstance(value, Mapping):
        code = value.get("code")
        return str(code) if code is not None else None
    if isinstance(value, list):
        for part in value:
            code = text_code(part)
            if code is not None:
                return code
    return None


def english(value: StoredText | None) -> str:
    """The English rendering: for logs, search and the API's legacy text fields."""
    return render(value, language="en")
