"""Writes of the tenants app: ``<entity>_<verb>``, keyword-only.

Each service checks permission (through ``tenants.access``), validates, writes inside
one transaction and records an AuditEvent. Bad input raises ApplicationError before
anything is written. Repeating a call with the same arguments is harmless
(idempotent) wherever a retry can repeat it.
"""

from tenants.services.cluster import (
    node_dedicate,
    node_release,
    pool_sync_failed,
    pool_sync_request,
    pool_sync_started,
    pool_sync_succeeded,
    pools_verified_in_sync,
    volumes_reclaimed,
    volumes_seen_in_use,
)
from tenants.services.loans import (
    loan_decide,
    loan_end,
    loan_propose,
    loans_expire,
    overcommit_factors_check,
    policy_update,
)
from tenants.services.quota import (
    quota_expire_temporary,
    quota_request_approve,
    quota_request_cancel,
    quota_request_propose,
    quota_request_reject,
    quota_request_submit,
    quota_set,
    usage_record,
)
from tenants.services.tenancy import (
    membership_add,
    membership_remove,
    membership_set_role,
    platform_role_set,
    tenant_create,
    tenant_delete,
    tenant_mark_deleted,
    tenant_reactivate,
    tenant_suspend,
    tenant_update,
    user_create,
)

__all__ = [
    "loan_decide",
    "loan_end",
    "loan_propose",
    "loans_expire",
    "membership_add",
    "membership_remove",
    "membership_set_role",
    "node_dedicate",
    "node_release",
    "overcommit_factors_check",
    "platform_role_set",
    "policy_update",
    "pool_sync_failed",
    "pool_sync_request",
    "pool_sync_started",
    "pool_sync_succeeded",
    "pools_verified_in_sync",
    "quota_expire_temporary",
    "quota_request_approve",
    "quota_request_cancel",
    "quota_request_propose",
    "quota_request_reject",
    "quota_request_submit",
    "quota_set",
    "tenant_create",
    "tenant_delete",
    "tenant_mark_deleted",
    "tenant_reactivate",
    "tenant_suspend",
    "tenant_update",
    "usage_record",
    "user_create",
    "volumes_reclaimed",
    "volumes_seen_in_use",
]
