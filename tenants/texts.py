"""Stored texts of the tenants app (see :mod:`core.texts`): notifications and audit
summaries are kept as a code and arguments and rendered in the reader's language.

Imported when the app loads (``TenantsConfig.ready``). A code, once used in a row, keeps
its meaning and its placeholders; change the wording freely, add a new code for a new
shape. The msgids are the ones the services used before, so their translations carry over.
"""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

from core.texts import register

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
# loans (issue 30): what a loan leaves its lender, why an offer cannot be accepted, expiry
LOAN_TERMS = register(
    "tenants.loan.terms",
    _("%(p)s uses %(u)s of its %(h)s %(r)s within its quota; lending %(a)s leaves %(k)s."))
LOAN_TERMS_BEYOND = register(
    "tenants.loan.terms_beyond",
    _("%(p)s uses %(u)s of its %(h)s %(r)s within its quota; lending %(a)s leaves %(k)s. "
      "Its batch and borrowed work (%(b)s more) runs on idle capacity, gives way when the "
      "quota is needed, and does not count."))
LOAN_SHORT = register(
    "tenants.loan.short",
    _("%(p)s uses %(u)s of its %(h)s %(r)s within its quota and would keep only %(k)s after "
      "lending %(a)s: at most %(m)s can be lent now."))
LOAN_SHORT_BEYOND = register(
    "tenants.loan.short_beyond",
    _("%(p)s uses %(u)s of its %(h)s %(r)s within its quota and would keep only %(k)s after "
      "lending %(a)s: at most %(m)s can be lent now. Its batch and borrowed work (%(b)s "
      "more) runs on idle capacity and does not count."))
LOAN_NOT_ACCEPTED = register(
    "tenants.loan.not_accepted",
    _("%(t)s could not accept your offer of %(a)s %(r)s: %(why)s"))
LOAN_OFFER_EXPIRED = register(
    "tenants.loan.offer_expired",
    _("The offer of %(a)s %(r)s from %(lender)s to %(borrower)s expired: it was not "
      "accepted within %(h)s hours."))
RESOURCES = {
    "cpu": register("tenants.resource.cpu", _("CPU cores")),
    "memory": register("tenants.resource.memory", _("GiB of memory")),
    "gpu": register("tenants.resource.gpu", _("%(q)s GPUs")),
    "mig": register("tenants.resource.mig", _("%(q)s MIG instances")),
    "gpu-memory": register("tenants.resource.gpu_memory", _("GiB of GPU memory")),
    "gpu-shared": register("tenants.resource.gpu_shared", _("shared GPUs")),
    "storage": register("tenants.resource.storage", _("GiB of %(q)s storage")),
    "iops": register("tenants.resource.iops", _("IOPS of %(q)s")),
    "pvcs": register("tenants.resource.pvcs", _("volume claims")),
}
VOLUMES_RECLAIMED = register(
    "tenants.volumes.reclaimed",
    _("%(n)s dev volume(s) unused for %(d)s days were deleted: %(v)s"))

# --- quota requests: text the system writes into a request ----------------------------------

QUOTA_PROPOSED_FROM_USAGE = register(
    "tenants.quota_request.proposed_from_usage", _("Proposed from the last 30 days of usage."))
QUOTA_REPLACED_BY_NEWER = register(
    "tenants.quota_request.replaced", _("Replaced by a newer proposal."))

# --- quota grants: reasons the system gives (QuotaGrant.reason_text) ----------------------

GRANT_FROM_REQUEST = register("tenants.grant.from_request", _("request #%(n)s: %(why)s"))
GRANT_TEMPORARY_ENDED = register("tenants.grant.temporary_ended", _("temporary quota ended"))
GRANT_DEFAULT_QUOTA = register("tenants.grant.default_quota",
                               _("default quota for new tenants"))

# --- audit log (AuditEvent.text; the English goes to ``summary``) --------------------------

AUDIT_NODE_DEDICATE = register("tenants.audit.node_dedicate",
                               _("dedicated node %(node)s to %(tenant)s"))
AUDIT_NODE_RELEASE = register("tenants.audit.node_release", _("released node %(node)s"))
AUDIT_VOLUME_RECLAIM = register(
    "tenants.audit.volume_reclaim",
    _("deleted %(n)s dev volume(s) unused for %(days)s days: %(volumes)s"))
AUDIT_LOAN_PROPOSE = register(
    "tenants.audit.loan_propose",
    _("offered %(amount)s %(resource)s to %(borrower)s until %(day)s"))
AUDIT_LOAN_ACCEPT = register(
    "tenants.audit.loan_accept",
    _("accepted the loan of %(amount)s %(resource)s from %(lender)s to %(borrower)s"))
AUDIT_LOAN_DECLINE = register(
    "tenants.audit.loan_decline",
    _("declined the loan of %(amount)s %(resource)s from %(lender)s to %(borrower)s"))
AUDIT_LOAN_END = register(
    "tenants.audit.loan_end",
    _("ended the loan of %(amount)s %(resource)s from %(lender)s to %(borrower)s"))
AUDIT_LOAN_EXPIRE = register(
    "tenants.audit.loan_expire",
    _("the offer of %(amount)s %(resource)s from %(lender)s to %(borrower)s expired"))
AUDIT_POLICY_UPDATE = register("tenants.audit.policy_update", _("changed policy: %(fields)s"))
AUDIT_QUOTA_SET = register("tenants.audit.quota_set", _("set quota of %(pool)s: %(amounts)s"))
AUDIT_REQUEST_SUBMIT = register("tenants.audit.request_submit",
                                _("requested quota for %(pool)s: %(amounts)s"))
AUDIT_REQUEST_PROPOSE = register("tenants.audit.request_propose",
                                 _("proposed quota for %(pool)s from usage"))
AUDIT_REQUEST_APPROVE = register("tenants.audit.request_approve",
                                 _("approved request #%(n)s: %(amounts)s"))
AUDIT_REQUEST_APPROVE_AMENDED = register(
    "tenants.audit.request_approve_amended",
    _("approved request #%(n)s with amendments: %(amounts)s"))
AUDIT_REQUEST_REJECT = register("tenants.audit.request_reject",
                                _("rejected request #%(n)s: %(reason)s"))
AUDIT_REQUEST_CANCEL = register("tenants.audit.request_cancel", _("withdrew request #%(n)s"))
AUDIT_TENANT_CREATE = register("tenants.audit.tenant_create", _("created tenant %(tenant)s"))
AUDIT_TENANT_UPDATE = register("tenants.audit.tenant_update",
                               _("changed %(fields)s of %(tenant)s"))
AUDIT_TENANT_SUSPEND = register("tenants.audit.tenant_suspend",
                                _("suspended %(tenant)s: %(reason)s"))
AUDIT_TENANT_REACTIVATE = register("tenants.audit.tenant_reactivate",
                                   _("reactivated %(tenant)s"))
AUDIT_TENANT_DELETE = register("tenants.audit.tenant_delete",
                               _("started deleting %(tenant)s and its namespaces"))
AUDIT_TENANT_DELETED = register("tenants.audit.tenant_deleted",
                                _("namespaces removed; tenant deleted"))
AUDIT_MEMBER_ADD = register("tenants.audit.member_add", _("added %(user)s as %(role)s"))
AUDIT_MEMBER_ROLE = register("tenants.audit.member_role", _("made %(user)s %(role)s"))
AUDIT_MEMBER_REMOVE = register("tenants.audit.member_remove", _("removed %(user)s"))
AUDIT_USER_CREATE = register("tenants.audit.user_create", _("created user %(user)s"))
AUDIT_ROLE_GRANT = register("tenants.audit.role_grant", _("granted %(role)s to %(user)s"))
AUDIT_ROLE_REVOKE = register("tenants.audit.role_revoke", _("revoked %(role)s from %(user)s"))
