"""REST endpoints of the quota workflow: requests, decisions, loans, policy, notifications."""

from __future__ import annotations

from decimal import Decimal

from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.generics import get_object_or_404
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import validated
from core.models import Policy
from core.numbers import api_decimal
from tenants import selectors, services
from tenants.access import is_platform_admin, require_platform_admin
from tenants.api import serializers as s
from tenants.api.base import TenantScopedViewSet
from tenants.catalog import fmt_amount
from tenants.choices import RequestStatus
from tenants.models import Notification, Pool, QuotaLoan, QuotaRequest
from tenants.utilisation import Utilisation


class QuotaRequestViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin,
                          TenantScopedViewSet):
    """A tenant's quota requests; admins (and members, if allowed) ask; withdraw."""

    queryset = QuotaRequest.objects.all()
    serializer_class = s.QuotaRequestSerializer

    def scope_queryset(self, queryset: QuerySet) -> QuerySet:
        return queryset.select_related("tenant", "pool", "requested_by",
                                       "decided_by").prefetch_related("items")

    @extend_schema(request=s.QuotaRequestInput, responses={201: s.QuotaRequestSerializer})
    def create(self, request: Request, tenant_slug: str) -> Response:
        self.access.require_request_quota()  # permission before validation
        data = validated(s.QuotaRequestInput, request)
        pool = Pool.objects.get(tenant=self.access.tenant, kind=data.pop("pool"))
        created = services.quota_request_submit(
            access=self.access, actor=request.user, pool=pool,
            language=getattr(request, "LANGUAGE_CODE", "en"), **data)
        return Response(s.QuotaRequestSerializer(created).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=s.QuotaRequestSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, tenant_slug: str, pk: str) -> Response:
        done = services.quota_request_cancel(access=self.access, actor=request.user,
                                             request=self.get_object())
        return Response(s.QuotaRequestSerializer(done).data)


class PlatformQuotaRequestViewSet(viewsets.GenericViewSet, mixins.ListModelMixin,
                                  mixins.RetrieveModelMixin):
    """Every tenant's quota requests, for platform admins to decide (404 for others)."""

    serializer_class = s.QuotaRequestSerializer
    queryset = QuotaRequest.objects.all()  # for the schema; get_queryset decides the rows

    def get_queryset(self) -> QuerySet:
        if not is_platform_admin(self.request.user):
            raise NotFound
        return selectors.pending_quota_requests(self.request.query_params.get(
            "status", RequestStatus.PENDING))

    @extend_schema(parameters=[OpenApiParameter(
        "status", str, enum=[*RequestStatus.values, ""],
        description="pending (default), approved, rejected, cancelled, or empty: all")])
    def list(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().list(request, *args, **kwargs)

    def retrieve(self, request: Request, *args: object, **kwargs: object) -> Response:
        if not is_platform_admin(request.user):
            raise NotFound
        obj = get_object_or_404(selectors.pending_quota_requests(""), pk=kwargs["pk"])
        body = s.QuotaRequestSerializer(obj).data
        body["facts"] = [{k: _fact(v) for k, v in f.items() if k != "item"}
                         | {"resource": f["item"].resource}
                         for f in selectors.request_facts(obj)]
        return Response(body)

    @extend_schema(request=s.ApproveInput, responses=s.QuotaRequestSerializer)
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str) -> Response:
        one = self._one(pk)  # 404 for anyone but a platform admin, before validation
        data = validated(s.ApproveInput, request)
        done = services.quota_request_approve(actor=request.user, request=one,
                                              amended=data["amended"] or None, note=data["note"])
        return Response(s.QuotaRequestSerializer(done).data)

    @extend_schema(request=s.RejectInput, responses=s.QuotaRequestSerializer)
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str) -> Response:
        one = self._one(pk)  # 404 for anyone but a platform admin, before validation
        data = validated(s.RejectInput, request)
        done = services.quota_request_reject(actor=request.user, request=one,
                                             reason=data["reason"])
        return Response(s.QuotaRequestSerializer(done).data)

    def _one(self, pk: str) -> QuotaRequest:
        """The request, for a platform admin; 404 for everyone else (the list and the
        detail are 404 to them too, as the schema says), and for an id that is none."""
        if not is_platform_admin(self.request.user):
            raise NotFound
        return get_object_or_404(QuotaRequest, pk=pk)


class LoanViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet):
    """Loans the tenant gives or receives; its admins offer, accept, decline and end them."""

    queryset = QuotaLoan.objects.all()
    serializer_class = s.LoanSerializer
    tenant_field = ("lender__tenant", "borrower__tenant")

    def scope_queryset(self, queryset: QuerySet) -> QuerySet:
        return queryset.select_related("lender__tenant", "borrower__tenant")

    @extend_schema(request=s.LoanInput, responses={201: s.LoanSerializer})
    def create(self, request: Request, tenant_slug: str) -> Response:
        self.access.require_admin()
        data = validated(s.LoanInput, request)
        lender_pool = Pool.objects.get(tenant=self.access.tenant, kind=data.pop("pool"))
        loan = services.loan_propose(access=self.access, actor=request.user,
                                     lender_pool=lender_pool, **data)
        return Response(s.LoanSerializer(loan).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=s.LoanSerializer)
    @action(detail=True, methods=["post"])
    def accept(self, request: Request, tenant_slug: str, pk: str) -> Response:
        return Response(s.LoanSerializer(services.loan_decide(
            access=self.access, actor=request.user, loan=self.get_object(), accept=True)).data)

    @extend_schema(request=None, responses=s.LoanSerializer)
    @action(detail=True, methods=["post"])
    def decline(self, request: Request, tenant_slug: str, pk: str) -> Response:
        return Response(s.LoanSerializer(services.loan_decide(
            access=self.access, actor=request.user, loan=self.get_object(), accept=False)).data)

    @extend_schema(request=None, responses=s.LoanSerializer)
    @action(detail=True, methods=["post"])
    def end(self, request: Request, tenant_slug: str, pk: str) -> Response:
        return Response(s.LoanSerializer(services.loan_end(
            access=self.access, actor=request.user, loan=self.get_object())).data)


class PolicyView(APIView):
    """Platform policy: everyone reads it; platform admins change it."""

    @extend_schema(responses=s.PolicySerializer)
    def get(self, request: Request) -> Response:
        return Response(s.PolicySerializer(Policy.current()).data)

    @extend_schema(request=s.PolicySerializer, responses=s.PolicySerializer)
    def patch(self, request: Request) -> Response:
        require_platform_admin(request.user)  # permission before validation
        serializer = s.PolicySerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        policy = services.policy_update(actor=request.user, **serializer.validated_data)
        return Response(s.PolicySerializer(policy).data)


class NotificationViewSet(viewsets.GenericViewSet, mixins.ListModelMixin):
    """My notifications, newest first; ``read-all`` marks them read."""

    serializer_class = s.NotificationSerializer

    def get_queryset(self) -> QuerySet:
        return Notification.objects.filter(user=self.request.user).select_related("tenant")

    @extend_schema(request=None, responses={204: None})
    @action(detail=False, methods=["post"], url_path="read-all")
    def read_all(self, request: Request) -> Response:
        self.get_queryset().filter(read_at__isnull=True).update(read_at=timezone.now())
        return Response(status=status.HTTP_204_NO_CONTENT)


class QuotaOverviewView(APIView):
    """The tenant's quota per pool: granted, with loans, in use, what development and
    batch jobs may hold borrowing idle capacity (``ceiling``; null: any idle capacity, or
    not limited), guaranteed part, and ``limited`` (false: no quota is set for it, its
    use is shown, not limited, as the dashboard says)."""

    @extend_schema(responses=inline_serializer("QuotaOverview", {
        "quota_mode": serializers.CharField(),
        "borrowing_cap": serializers.CharField(allow_null=True, help_text=(
            "The tenant's own cap on borrowing, x its quota; null: none of its own.")),
        "borrowing_factor": serializers.CharField(allow_null=True, help_text=(
            "The cap in force (the tenant's, else the platform's); null: development and "
            "batch jobs may borrow any idle capacity.")),
        "pools": serializers.ListField(child=serializers.DictField())}))
    def get(self, request: Request, tenant_slug: str) -> Response:
        access = selectors.tenant_access_or_404(request.user, tenant_slug)
        cap, factor = access.tenant.borrowing_cap, selectors.borrowing_terms(
            access.tenant)["factor"]
        return Response({
            "quota_mode": access.tenant.quota_mode,
            "borrowing_cap": None if cap is None else api_decimal(cap),
            "borrowing_factor": None if factor is None else api_decimal(factor),
            "pools": [{"pool": block["pool"].kind, "namespace": block["pool"].namespace,
                       "resources": [{k: v if k in ("key", "limited") else fmt_amount(v)
                                      for k, v in row.items() if k != "resource"}
                                     for row in block["rows"]]}
                      for block in selectors.quota_overview(access.tenant)],
        })


class CatalogView(APIView):
    """Every resource a quota can name: key, label, unit, capacity, total granted."""

    @extend_schema(responses=inline_serializer("CatalogEntry", {
        "key": serializers.CharField(), "kind": serializers.CharField(),
        "label": serializers.CharField(), "unit": serializers.CharField(),
        "capacity": serializers.CharField(allow_null=True),
        "granted": serializers.CharField(allow_null=True)}, many=True))
    def get(self, request: Request) -> Response:
        return Response([{k: fmt_amount(v) if k in ("capacity", "granted") else v
                          for k, v in row.items()} for row in selectors.catalog()])


def _fact(value: object) -> object:
    """A request fact as JSON: amounts as decimal strings, the utilisation figures as
    every API names them (``tenants.utilisation.Utilisation.as_api``)."""
    if isinstance(value, Decimal):
        return fmt_amount(value)
    if isinstance(value, Utilisation):
        return value.as_api()
    return value
