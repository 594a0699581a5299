"""REST endpoints of the tenants app. Thin: scope, validate, call one service, render."""

from __future__ import annotations

from django.db.models import Prefetch
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import validated
from tenants import services
from tenants.access import require_platform_admin
from tenants.api import serializers as s
from tenants.api.base import TenantScopedViewSet
from tenants.models import Membership, NodeDedication, Pool, QuotaGrant, Tenant
from tenants.selectors import mark_in_cluster, tenant_access_or_404, tenants_visible_to


class TenantViewSet(viewsets.ViewSet):
    """Tenants the caller may see; platform admins create, edit, suspend, reactivate."""

    lookup_field = "slug"
    lookup_value_regex = "[a-z0-9-]+"

    def _render(self, request: Request, tenants: list[Tenant] | Tenant, **kw: bool) -> Response:
        roles = dict(request.user.memberships.values_list("tenant_id", "role"))
        data = s.TenantSerializer(tenants, context={"my_roles": roles}, **kw).data
        return Response(data)

    @extend_schema(responses=s.TenantSerializer(many=True))
    def list(self, request: Request) -> Response:
        tenants = list(tenants_visible_to(request.user).prefetch_related("pools"))
        mark_in_cluster(p for t in tenants for p in t.pools.all())  # one query, not one a pool
        return self._render(request, tenants, many=True)

    @extend_schema(responses=s.TenantSerializer)
    def retrieve(self, request: Request, slug: str) -> Response:
        return self._render(request, tenant_access_or_404(request.user, slug).tenant)

    @extend_schema(request=s.TenantCreateInput, responses={201: s.TenantSerializer})
    def create(self, request: Request) -> Response:
        require_platform_admin(request.user)  # permission before validation
        data = validated(s.TenantCreateInput, request)
        tenant = services.tenant_create(actor=request.user, **data)
        response = self._render(request, tenant)
        response.status_code = status.HTTP_201_CREATED
        return response

    @extend_schema(request=s.TenantUpdateInput, responses=s.TenantSerializer)
    def partial_update(self, request: Request, slug: str) -> Response:
        access = tenant_access_or_404(request.user, slug)
        access.require_platform_admin()
        data = validated(s.TenantUpdateInput, request)
        return self._render(request, services.tenant_update(access=access, actor=request.user,
                                                            **data))

    @extend_schema(request=s.DeleteInput, responses={202: s.TenantSerializer})
    @action(detail=True, methods=["post"], url_path="delete", url_name="delete")
    def delete_tenant(self, request: Request, slug: str) -> Response:
        """Delete the tenant's namespaces and everything in them; ``confirm`` repeats the
        slug. The tenant's history and invoices stay (status ``deleted``). (Not named
        ``delete``: a viewset method of that name answers the HTTP DELETE of every URL.)"""
        access = tenant_access_or_404(request.user, slug)
        access.require_platform_admin()
        data = validated(s.DeleteInput, request)
        tenant = services.tenant_delete(access=access, actor=request.user, confirm=data["confirm"])
        response = self._render(request, tenant)
        response.status_code = status.HTTP_202_ACCEPTED
        return response

    @extend_schema(request=s.SuspendInput, responses=s.TenantSerializer)
    @action(detail=True, methods=["post"])
    def suspend(self, request: Request, slug: str) -> Response:
        access = tenant_access_or_404(request.user, slug)
        access.require_platform_admin()
        data = validated(s.SuspendInput, request)
        return self._render(request, services.tenant_suspend(access=access, actor=request.user,
                                                             reason=data["reason"]))

    @extend_schema(request=None, responses=s.TenantSerializer)
    @action(detail=True, methods=["post"])
    def reactivate(self, request: Request, slug: str) -> Response:
        access = tenant_access_or_404(request.user, slug)
        return self._render(request, services.tenant_reactivate(access=access,
                                                                actor=request.user))


class MembershipViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet):
    """Members of a tenant; tenant admins add, change roles and remove."""

    queryset = Membership.objects.all()
    serializer_class = s.MembershipSerializer

    def scope_queryset(self, queryset):  # type: ignore[no-untyped-def]
        return queryset.select_related("user").order_by("role", "user__username")

    @extend_schema(request=s.MembershipAddInput, responses={201: s.MembershipSerializer})
    def create(self, request: Request, tenant_slug: str) -> Response:
        self.access.require_admin()
        data = validated(s.MembershipAddInput, request)
        membership = services.membership_add(access=self.access, actor=request.user, **data)
        return Response(s.MembershipSerializer(membership).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.MembershipRoleInput, responses=s.MembershipSerializer)
    def partial_update(self, request: Request, tenant_slug: str, pk: str) -> Response:
        self.access.require_admin()
        membership = self.get_object()
        data = validated(s.MembershipRoleInput, request)
        membership = services.membership_set_role(access=self.access, actor=request.user,
                                                  membership=membership, role=data["role"])
        return Response(s.MembershipSerializer(membership).data)

    def destroy(self, request: Request, tenant_slug: str, pk: str) -> Response:
        services.membership_remove(access=self.access, actor=request.user,
                                   membership=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class PoolViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet):
    """A tenant's two pools (prod and dev): namespace, sync state and current quota."""

    queryset = Pool.objects.select_related("tenant")
    serializer_class = s.PoolSerializer
    lookup_field = "kind"
    pagination_class = None

    def scope_queryset(self, queryset):  # type: ignore[no-untyped-def]
        return queryset.prefetch_related(Prefetch(
            "grants", queryset=QuotaGrant.objects.filter(superseded_at__isnull=True),
            to_attr="current_grants"))

    @extend_schema(request=s.QuotaSetInput, responses=s.PoolSerializer)
    @action(detail=True, methods=["put"])
    def quota(self, request: Request, tenant_slug: str, kind: str) -> Response:
        """Set the pool's quota (platform admins); applied to the cluster by the sync."""
        self.access.require_platform_admin()
        data = validated(s.QuotaSetInput, request)
        services.quota_set(actor=request.user, pool=self.get_object(), **data)
        return Response(s.PoolSerializer(self.get_object()).data)

    @extend_schema(request=None, responses={202: s.PoolSerializer})
    @action(detail=True, methods=["post"])
    def sync(self, request: Request, tenant_slug: str, kind: str) -> Response:
        """Reconcile the pool now (tenant and platform admins), e.g. after an error."""
        self.access.require_admin()
        services.pool_sync_request(pool=self.get_object())
        return Response(s.PoolSerializer(self.get_object()).data, status=status.HTTP_202_ACCEPTED)


class DedicatedNodeViewSet(mixins.ListModelMixin, TenantScopedViewSet):
    """Nodes dedicated to the tenant; platform admins dedicate and release them."""

    queryset = NodeDedication.objects.all()
    serializer_class = s.NodeDedicationSerializer
    lookup_field = "node_name"
    lookup_value_regex = "[a-z0-9.-]+"
    pagination_class = None

    @extend_schema(request=s.NodeDedicationInput, responses={201: s.NodeDedicationSerializer})
    def create(self, request: Request, tenant_slug: str) -> Response:
        self.access.require_platform_admin()
        data = validated(s.NodeDedicationInput, request)
        dedication = services.node_dedicate(access=self.access, actor=request.user, **data)
        return Response(s.NodeDedicationSerializer(dedication).data,
                        status=status.HTTP_201_CREATED)

    def destroy(self, request: Request, tenant_slug: str, node_name: str) -> Response:
        services.node_release(access=self.access, actor=request.user,
                              node_name=self.get_object().node_name)
        return Response(status=status.HTTP_204_NO_CONTENT)


