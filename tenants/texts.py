"""Stored texts of the tenants app (see :mod:`portal.texts`): notifications and audit
summaries are kept as a code and arguments and rendered in the reader's language.

Imported when the app loads (``TenantsConfig.ready``). A code, once used in a row, keeps
its meaning and its placeholders; change the wording freely, add a new code for a new
shape. The msgids are the ones the services used before, so their translations carry over.
"""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

from portal.texts import register

# --- notifications ------------------------------------------------------------------------

QUOTA_REQUEST_SUBMITTED = register(
    "tenants.quota_request.submitted", _("%(t)s asks for more quota in %(p)s."))
QUOTA_REQUEST_APPROVED = register(
    "tenants.quota_request.approved",
    _("Your quota request #%(n)s for %(p)s was approved: %(s)s."))
QUOTA_REQUEST_REJECTED = register(
    "tenants.quota_request.rejected",
    _("Your quota request #%(n)s for %(p)s was rejected: %(s)s"))
LOAN_OFFERED = register(
    "tenants.loan.offered", _("%(t)s offers to lend you %(a)s %(r)s until %(d)s."))
VOLUMES_RECLAIMED = register(
    "tenants.volumes.reclaimed",
    _("%(n)s dev volume(s) unused for %(d)s days were deleted: %(v)s"))

# --- quota requests: text the system writes into a request ----------------------------------

QUOTA_PROPOSED_FROM_USAGE = register(
    "tenants.quota_request.proposed_from_usage", _("Proposed from the last 30 days of usage."))
QUOTA_REPLACED_BY_NEWER = register(
    "tenants.quota_request.replaced", _("Replaced by a newer proposal."))
