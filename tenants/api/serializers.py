"""API serializers of the tenants app: Input* validate requests, the rest render."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.choices import PoolKind
from core.models import POLICY_BOUNDS, Policy
from core.numbers import api_decimal
from core.schema import documented
from core.texts import render
from k8s_sync.placement import MAX_TOPOLOGY_LEVELS
from tenants.catalog import MAX_AMOUNT
from tenants.choices import LoanStatus, MembershipRole, QuotaMode
from tenants.loans import LenderTerms, lender_terms, offer_expires
from tenants.models import (
    Membership,
    NodeDedication,
    Notification,
    Pool,
    QuotaLoan,
    QuotaRequest,
    QuotaRequestItem,
    Tenant,
)
from tenants.network import MAX_CIDRS


class RenderedText(serializers.CharField):
    """A stored text (:mod:`core.texts`) rendered in the request's language (its
    ``Accept-Language``, else the language cookie, else English). Read-only."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs["read_only"] = True
        kwargs.setdefault("help_text", "rendered in the request's language")
        super().__init__(**kwargs)

    def to_representation(self, value: Any) -> str:
        return render(value)


class PoolSyncSerializer(serializers.Serializer):
    state = serializers.CharField(source="sync_state")
    error = serializers.CharField(source="sync_error")
    error_is_transient = serializers.BooleanField(source="sync_error_transient")
    last_synced_at = serializers.DateTimeField(allow_null=True)
    last_attempt_at = serializers.DateTimeField(allow_null=True)


class PoolSerializer(serializers.ModelSerializer):
    namespace = serializers.CharField(read_only=True)
    sync = PoolSyncSerializer(source="*", read_only=True)
    quota = serializers.SerializerMethodField()

    class Meta:
        model = Pool
        fields = ["kind", "namespace", "sync", "quota", "created_at"]

    def get_quota(self, pool: Pool) -> dict[str, str]:
        """Current grants: resource key -> amount (a decimal string)."""
        grants = getattr(pool, "current_grants", None)
        if grants is None:
            grants = [g for g in pool.grants.all() if g.superseded_at is None]
        return {g.resource: api_decimal(g.amount) or "0" for g in grants}


def _amount() -> serializers.DecimalField:
    """An amount of a resource: 0 to ``tenants.catalog.MAX_AMOUNT``, 3 decimals. The range
    is the service's to check (``Resource.check_amount``: its message names the resource)."""
    return documented(serializers.DecimalField(max_digits=13, decimal_places=3),
                      Decimal(0), MAX_AMOUNT)


class QuotaSetInput(serializers.Serializer):
    amounts = serializers.DictField(child=_amount(),
                                    help_text="resource key -> amount, e.g. {\"cpu\": 64}")
    reason = serializers.CharField(max_length=2000)


class TenantSerializer(serializers.ModelSerializer):
    pools = PoolSerializer(many=True, read_only=True)
    my_role = serializers.SerializerMethodField()

    class Meta:
        model = Tenant
        fields = ["slug", "name", "cost_center", "contact_name", "contact_email",
                  "billing_address", "status",
                  "suspended_reason", "suspended_at", "created_at", "updated_at", "pools",
                  "my_role", "egress_cidrs", "quota_mode", "borrowing_cap",
                  "members_may_request_quota"]
        read_only_fields = ["egress_cidrs", "quota_mode", "borrowing_cap",
                            "members_may_request_quota"]

    def get_my_role(self, tenant: Tenant) -> str | None:
        roles = self.context.get("my_roles", {})
        return roles.get(tenant.pk)


class TenantCreateInput(serializers.Serializer):
    slug = serializers.CharField(max_length=40)
    name = serializers.CharField(max_length=200)
    cost_center = serializers.CharField(max_length=64)
    contact_email = serializers.EmailField(max_length=254)
    contact_name = serializers.CharField(max_length=200, required=False, default="",
                                         allow_blank=True)
    billing_address = serializers.CharField(max_length=1000, required=False, default="",
                                            allow_blank=True)


class TenantUpdateInput(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False)
    cost_center = serializers.CharField(max_length=64, required=False)
    contact_email = serializers.EmailField(max_length=254, required=False)
    contact_name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    billing_address = serializers.CharField(max_length=1000, required=False, allow_blank=True)
    egress_cidrs = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, allow_empty=True,
        max_length=MAX_CIDRS,
        help_text="The tenant's own egress destinations (CIDRs), beside the policy's")
    quota_mode = serializers.ChoiceField(choices=QuotaMode.choices, required=False)
    borrowing_cap = serializers.DecimalField(
        max_digits=5, decimal_places=2, required=False, allow_null=True,
        min_value=POLICY_BOUNDS["borrowing_cap"][0], max_value=POLICY_BOUNDS["borrowing_cap"][1],
        help_text="What the tenant's development and batch jobs may hold, x its quota; null: "
                  "the platform's cap, or none (any idle capacity)")
    members_may_request_quota = serializers.BooleanField(required=False)


class DeleteInput(serializers.Serializer):
    confirm = serializers.CharField(max_length=40, help_text="The tenant's slug, repeated")


class SuspendInput(serializers.Serializer):
    reason = serializers.CharField(max_length=2000)


class MembershipSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username", read_only=True)
    email = serializers.EmailField(source="user.email", read_only=True)
    full_name = serializers.CharField(source="user.get_full_name", read_only=True)

    class Meta:
        model = Membership
        fields = ["id", "username", "email", "full_name", "role", "created_at"]


class MembershipAddInput(serializers.Serializer):
    user = serializers.CharField(max_length=254, help_text="User name or e-mail")
    role = serializers.ChoiceField(choices=MembershipRole.choices, default=MembershipRole.MEMBER)


class MembershipRoleInput(serializers.Serializer):
    role = serializers.ChoiceField(choices=MembershipRole.choices)


class NodeDedicationSerializer(serializers.ModelSerializer):
    class Meta:
        model = NodeDedication
        fields = ["node_name", "reason", "created_at"]


class NodeDedicationInput(serializers.Serializer):
    node_name = serializers.CharField(max_length=253)
    reason = serializers.CharField(max_length=2000, required=False, default="", allow_blank=True)


class QuotaRequestItemSerializer(serializers.ModelSerializer):
    class Meta:
        model = QuotaRequestItem
        fields = ["resource", "current_amount", "requested_amount", "approved_amount"]


class QuotaRequestSerializer(serializers.ModelSerializer):
    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    pool = serializers.CharField(source="pool.kind", read_only=True)
    requested_by = serializers.CharField(source="requested_by.username", read_only=True,
                                         default=None)
    decided_by = serializers.CharField(source="decided_by.username", read_only=True,
                                       default=None)
    items = QuotaRequestItemSerializer(many=True, read_only=True)
    justification = RenderedText(source="why")
    decision_note = RenderedText(source="decision")

    class Meta:
        model = QuotaRequest
        fields = ["id", "tenant", "pool", "source", "status", "justification", "formula",
                  "valid_until", "requested_by", "created_at", "decided_by", "decided_at",
                  "decision_note", "items"]


class QuotaRequestInput(serializers.Serializer):
    pool = serializers.ChoiceField(choices=PoolKind.choices)
    amounts = serializers.DictField(child=_amount(),
                                    help_text="resource key -> new amount, e.g. "
                                              "{\"gpu:NVIDIA-H800\": \"8\"}")
    justification = serializers.CharField(max_length=4000)
    valid_until = serializers.DateTimeField(required=False, allow_null=True, default=None)


class ApproveInput(serializers.Serializer):
    amended = serializers.DictField(child=_amount(), required=False,
                                    default=dict)
    note = serializers.CharField(max_length=2000, required=False, default="", allow_blank=True)


class RejectInput(serializers.Serializer):
    reason = serializers.CharField(max_length=2000)


class LoanSerializer(serializers.ModelSerializer):
    lender = serializers.SerializerMethodField()
    borrower = serializers.SerializerMethodField()
    offer_expires_at = serializers.SerializerMethodField(
        help_text="A proposed loan: when the offer lapses unless accepted.")
    terms = serializers.SerializerMethodField(
        help_text="A proposed loan: what it leaves the lender now, checked as acceptance "
                  "checks it (batch and borrowed work does not count).")
    acceptable = serializers.SerializerMethodField(
        help_text="A proposed loan: whether it could be accepted now.")
    problem = serializers.SerializerMethodField(
        help_text="Why the last try to accept it was refused, if it was.")

    class Meta:
        model = QuotaLoan
        fields = ["id", "lender", "borrower", "resource", "amount", "ends_at", "note", "status",
                  "created_at", "started_at", "ended_at", "offer_expires_at", "terms",
                  "acceptable", "problem"]

    def _terms(self, loan: QuotaLoan) -> LenderTerms | None:
        if loan.status != LoanStatus.PROPOSED:
            return None
        if not hasattr(loan, "_api_terms"):
            loan._api_terms = lender_terms(  # type: ignore[attr-defined]
                loan.lender, loan.resource, loan.amount, loan=loan)
        return loan._api_terms  # type: ignore[attr-defined]

    def get_offer_expires_at(self, loan: QuotaLoan) -> str | None:
        return (offer_expires(loan).isoformat() if loan.status == LoanStatus.PROPOSED
                else None)

    def get_terms(self, loan: QuotaLoan) -> str | None:
        terms = self._terms(loan)
        return render(terms.text()) if terms else None

    def get_acceptable(self, loan: QuotaLoan) -> bool | None:
        terms = self._terms(loan)
        return terms.ok if terms else None

    def get_problem(self, loan: QuotaLoan) -> str | None:
        return render(loan.problem) if loan.problem else None

    def get_lender(self, loan: QuotaLoan) -> str:
        return f"{loan.lender.tenant.slug}/{loan.lender.kind}"

    def get_borrower(self, loan: QuotaLoan) -> str:
        return f"{loan.borrower.tenant.slug}/{loan.borrower.kind}"


class LoanInput(serializers.Serializer):
    pool = serializers.ChoiceField(choices=PoolKind.choices)
    borrower = serializers.CharField(max_length=40)
    borrower_pool = serializers.ChoiceField(choices=PoolKind.choices)
    resource = serializers.CharField(max_length=300)
    amount = _amount()
    ends_at = serializers.DateTimeField()
    note = serializers.CharField(max_length=2000, required=False, default="", allow_blank=True)


_FACTOR_LOW, _FACTOR_HIGH = (int(v) for v in POLICY_BOUNDS["overcommit_factor"])
_AMOUNT_SCHEMA = {"oneOf": [
    {"type": "number", "minimum": 0, "maximum": int(MAX_AMOUNT)},
    {"type": "string", "maxLength": 30, "pattern": r"^\d{1,10}(\.\d{1,3})?$"}]}


@extend_schema_field({
    "type": "object", "description": "resource kind or key -> factor",
    "additionalProperties": {"oneOf": [
        {"type": "number", "minimum": _FACTOR_LOW, "maximum": _FACTOR_HIGH},
        {"type": "string", "maxLength": 30}]}})
class _FactorsField(serializers.JSONField):
    pass


@extend_schema_field({
    "type": "object", "description": "pool (prod, dev) -> {resource key: amount}",
    "additionalProperties": {"type": "object", "additionalProperties": _AMOUNT_SCHEMA}})
class _DefaultQuotaField(serializers.JSONField):
    pass


@extend_schema_field({"type": "array", "maxItems": MAX_CIDRS,
                      "items": {"type": "string", "maxLength": 64}})
class _CidrsField(serializers.JSONField):
    pass


@extend_schema_field({"type": "array", "maxItems": MAX_TOPOLOGY_LEVELS,
                      "items": {"type": "string", "maxLength": 317}})
class _TopologyField(serializers.JSONField):
    pass


class PolicySerializer(serializers.ModelSerializer):
    overcommit_factors = _FactorsField(required=False)
    default_quota = _DefaultQuotaField(required=False)
    egress_cidrs = _CidrsField(required=False)
    topology_levels = _TopologyField(required=False, help_text=(
        "node-label keys of the network topology, widest first; a multi-node job runs "
        "under one value of the last; [] means trainyard.io/rack, trainyard.io/switch"))

    class Meta:
        model = Policy
        fields = ["overcommit_factors", "eviction_watermark", "production_grace_seconds",
                  "development_grace_seconds", "batch_grace_seconds", "default_quota",
                  "dev_pvc_reclaim_days", "dynamic_headroom", "dynamic_idle_threshold",
                  "egress_cidrs", "topology_levels", "borrowing_cap", "updated_at"]
        read_only_fields = ["production_grace_seconds", "updated_at"]
        extra_kwargs = {
            **{key: {"min_value": POLICY_BOUNDS[key][0], "max_value": POLICY_BOUNDS[key][1]}
               for key in ("eviction_watermark", "development_grace_seconds",
                           "batch_grace_seconds", "dev_pvc_reclaim_days", "dynamic_headroom",
                           "dynamic_idle_threshold")},
        "borrowing_cap": {"min_value": POLICY_BOUNDS["borrowing_cap"][0],
                          "max_value": POLICY_BOUNDS["borrowing_cap"][1], "allow_null": True,
                          "help_text": "What development and batch jobs of a tenant without a "
                                       "cap of its own may hold, x its quota; null: no cap "
                                       "(any idle capacity)."},
        }


class NotificationSerializer(serializers.ModelSerializer):
    tenant = serializers.CharField(source="tenant.slug", read_only=True, default=None)
    message = RenderedText(source="shown")
    text = serializers.JSONField(read_only=True, help_text=(
        "the stored text: {code, args}, or a plain string for free text and old rows"))

    class Meta:
        model = Notification
        fields = ["id", "tenant", "message", "text", "link", "created_at", "read_at"]
