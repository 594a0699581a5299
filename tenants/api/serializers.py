"""API serializers of the tenants app: Input* validate requests, the rest render."""

from __future__ import annotations

from rest_framework import serializers

from tenants.choices import MembershipRole
from tenants.models import Membership, NodeDedication, Pool, Tenant


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
        return {g.resource: str(g.amount.normalize()) for g in grants}


class QuotaSetInput(serializers.Serializer):
    amounts = serializers.DictField(child=serializers.DecimalField(max_digits=14,
                                                                   decimal_places=3),
                                    help_text="resource key -> amount, e.g. {\"cpu\": 64}")
    reason = serializers.CharField(max_length=2000)


class TenantSerializer(serializers.ModelSerializer):
    pools = PoolSerializer(many=True, read_only=True)
    my_role = serializers.SerializerMethodField()

    class Meta:
        model = Tenant
        fields = ["slug", "name", "cost_center", "contact_name", "contact_email", "status",
                  "suspended_reason", "suspended_at", "created_at", "updated_at", "pools",
                  "my_role"]

    def get_my_role(self, tenant: Tenant) -> str | None:
        roles = self.context.get("my_roles", {})
        return roles.get(tenant.pk)


class TenantCreateInput(serializers.Serializer):
    slug = serializers.CharField(max_length=40)
    name = serializers.CharField(max_length=200)
    cost_center = serializers.CharField(max_length=64)
    contact_email = serializers.EmailField()
    contact_name = serializers.CharField(max_length=200, required=False, default="",
                                         allow_blank=True)


class TenantUpdateInput(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False)
    cost_center = serializers.CharField(max_length=64, required=False)
    contact_email = serializers.EmailField(required=False)
    contact_name = serializers.CharField(max_length=200, required=False, allow_blank=True)


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
