"""Stored texts of the billing app (see :mod:`core.texts`): invoice line descriptions
and budget alerts are kept as a code and arguments and rendered in the reader's language,
so an issued invoice never changes (its numbers and structured descriptions are fixed)
while the page, the CSV and the PDF speak the reader's language.

Imported when the app loads (``BillingConfig.ready``). A code, once in a row, keeps its
meaning and placeholders.
"""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

from core.choices import EgressClass
from core.texts import register

# --- invoice lines ------------------------------------------------------------------------

LINE_GPU = register("billing.line.gpu", _("GPU"))
LINE_MIG = register("billing.line.mig", _("MIG %(profile)s on %(model)s (%(share)s card)"))
LINE_SHARED = register("billing.line.shared",
                       _("%(model)s, time-sliced/MPS share %(share)s of a card"))
LINE_VGPU = register("billing.line.vgpu", _("%(model)s vGPU (HAMi), %(share)s of a card"))
LINE_VGPU_GIB = register("billing.line.vgpu_gib",
                         _("%(model)s vGPU (HAMi) %(gib)s GiB, %(share)s of a card"))
LINE_MIG_UNPRICED = register("billing.line.mig_unpriced", _("MIG %(profile)s"))
LINE_MIG_NO_MEMORY = register(
    "billing.line.mig_no_memory",
    _("MIG %(profile)s: neither the rate card nor the cluster gives the card memory of any "
      "priced GPU model, so the slice cannot be matched to a card"))
LINE_NO_RATE_CARD = register("billing.line.no_rate_card", _("no rate card in effect"))
LINE_CPU = register("billing.line.cpu", _("CPU core-hours"))
LINE_MEMORY = register("billing.line.memory", _("Memory GiB-hours"))
LINE_STORAGE = register("billing.line.storage", _("Storage %(cls)s"))
LINE_EGRESS = register("billing.line.egress", _("Egress"))  # lines of one price for every byte
# one line per destination class (core.choices.EgressClass); within the zone is free
LINE_EGRESS_TO = {
    EgressClass.INTERNET: register("billing.line.egress.internet",
                                   _("Egress to the internet")),
    EgressClass.CROSS_REGION: register("billing.line.egress.cross_region",
                                       _("Egress to other regions")),
    EgressClass.CROSS_ZONE: register("billing.line.egress.cross_zone",
                                     _("Egress to other zones")),
    EgressClass.UNCLASSIFIED: register(
        "billing.line.egress.unclassified",
        _("Egress, every byte sent (the metrics do not tell destinations apart; priced as "
          "the internet)")),
}
LINE_CREDIT = register("billing.line.credit", _("Credit for %(number)s: %(reason)s"))
# wrappers around a line's text (``what``): split months and missing prices
PRICES_FROM = register("billing.line.prices_from", _("%(what)s (prices from %(day)s)"))
NO_PRICE = register("billing.line.no_price", _("%(what)s (no price on the rate card)"))
NO_PRICE_BILLED_0 = register("billing.line.no_price_billed_0",
                             _("%(what)s (no price on the rate card: billed 0)"))
LATE_USAGE = register("billing.line.late", _("%(what)s, usage from %(month)s"))

# --- notifications ------------------------------------------------------------------------

BUDGET_ALERT = register(
    "billing.budget.alert",
    _("%(tenant)s has spent %(pct)s%% of its monthly budget (%(spent)s of %(budget)s "
      "%(cur)s); forecast for the month: %(forecast)s."))

# --- audit log (AuditEvent.text; the English goes to ``summary``) --------------------------

AUDIT_RATE_CARD = register("billing.audit.rate_card", _("rate card from %(day)s"))
AUDIT_MONTH_CLOSE = register("billing.audit.month_close", _("closed %(month)s: %(n)s invoices"))
AUDIT_CREDIT_NOTE = register("billing.audit.credit_note",
                             _("credit note %(number)s of %(amount)s for %(invoice)s"))
AUDIT_ADJUSTMENT = register("billing.audit.adjustment",
                            _("adjustment %(amount)s for %(month)s: %(description)s"))
AUDIT_BUDGET_REMOVED = register("billing.audit.budget_removed", _("budget removed"))
AUDIT_BUDGET_SET = register("billing.audit.budget_set", _("monthly budget %(amount)s"))

# --- units --------------------------------------------------------------------------------

# An invoice line stores its unit in English (the key); it is shown in the reader's
# language. Rows written before this in another language show their unit as it is.
UNITS = {
    "GPU-hours": _("GPU-hours"),
    "instance-hours": _("instance-hours"),
    "share-hours": _("share-hours"),
    "vGPU-hours": _("vGPU-hours"),
    "core-hours": _("core-hours"),
    "GiB-hours": _("GiB-hours"),
    "GiB-months": _("GiB-months"),
    "GiB": _("GiB"),
}


def unit(key: str) -> str:
    """The unit ``key`` in the active language."""
    label = UNITS.get(key)
    return str(label) if label is not None else key
