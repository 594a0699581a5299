"""REST endpoints of the billing app.

Tenant-scoped: ``tenants/{slug}/invoices/`` (list, retrieve, ``csv``, ``pdf``, ``lines/{id}/jobs``)
and ``tenants/{slug}/budget/``. Finance and platform admins: ``billing/invoices/?month=``,
``billing/months/{YYYY-MM}/`` and ``.../close/``, ``billing/invoices/{id}/credit-notes/``,
``billing/rate-cards/``. Invoices have no update or delete: an issued invoice is corrected
only by a credit note.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import QuerySet
from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action, api_view
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from billing import exports, selectors, selectors_details, services
from billing.api import serializers as s
from billing.models import Invoice, InvoiceLine, RateCard
from core.api import validated
from core.texts import render
from tenants.access import require_platform_admin, sees_all_tenants
from tenants.api.base import TenantScopedViewSet
from tenants.utilisation import Utilisation


def _file(content: bytes | str, name: str, content_type: str) -> HttpResponse:
    response = HttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


class InvoiceViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet):
    """A tenant's invoices, credit notes and this month's draft (``?month=YYYY-MM``)."""

    queryset = Invoice.objects.all()
    serializer_class = s.InvoiceSerializer

    def scope_queryset(self, queryset: QuerySet) -> QuerySet:
        queryset = queryset.select_related("tenant", "credits").prefetch_related("lines")
        if self.request.query_params.get("month"):
            queryset = queryset.filter(
                period=selectors.parse_period(self.request.query_params["month"]))
        return queryset

    @extend_schema(responses={200: bytes})
    @action(detail=True, methods=["get"])
    def csv(self, request: Request, tenant_slug: str, pk: str) -> HttpResponse:
        invoice = self.get_object()
        return _file(exports.invoices_csv([invoice]), exports.filename(invoice, "csv"),
                     "text/csv; charset=utf-8")

    @extend_schema(responses={200: bytes})
    @action(detail=True, methods=["get"])
    def pdf(self, request: Request, tenant_slug: str, pk: str) -> HttpResponse:
        invoice = self.get_object()
        return _file(exports.invoice_pdf(invoice), exports.filename(invoice, "pdf"),
                     "application/pdf")

    @extend_schema(responses={200: dict})
    @action(detail=True, methods=["get"], url_path=r"lines/(?P<line_id>\d+)/details")
    def line_details(self, request: Request, tenant_slug: str, pk: str,
                     line_id: str) -> Response:
        """The jobs (or volumes, pods) behind one line; an egress line's pods also give
        their GiB sent to every destination class (``gib_by_destination``)."""
        invoice = self.get_object()
        line = InvoiceLine.objects.filter(invoice=invoice, pk=line_id).select_related(
            "invoice").first()
        if line is None:
            raise NotFound
        return Response([{"label": d.label, "job_id": d.job_id, "quantity": format(d.quantity, "f"),
                          "amount": format(d.amount, "f"),
                          **({"gib_by_destination": {str(c): format(g, "f")
                                                     for c, g in d.destinations}}
                             if d.destinations else {})}
                         for d in selectors_details.line_details(line)])

    @extend_schema(responses={200: dict})
    @action(detail=False, methods=["get"])
    def idle(self, request: Request, tenant_slug: str) -> Response:
        """The GPU utilisation figures (``tenants.utilisation``, read by
        ``billing.selectors.utilisation_figures``), this month and this quarter so far, all
        GPU kinds together: ``quota_held_gpu_hours``, ``allocated_gpu_hours`` (=
        ``within_quota_gpu_hours`` + ``borrowed_gpu_hours``), ``busy_gpu_hours`` (of
        ``measured_gpu_hours``), ``quota_use`` (within quota / quota held) and
        ``idle_rate`` (1 - busy / measured). ``by_kind`` has the same per GPU kind
        (``gpu:<model>``, ``mig:<profile>``, ``gpu-shared``) for the quarter,
        ``by_kind_month`` for the month."""
        tenant = self.access.tenant
        today = timezone.localdate()
        tomorrow = today + dt.timedelta(days=1)

        def out(figure: Utilisation | None) -> dict | None:
            return None if figure is None else figure.as_api()
        answer: dict[str, Any] = {k: out(v)
                                  for k, v in selectors.tenant_utilisation(tenant).items()}
        answer["by_kind"] = {f.kind: out(f) for f in selectors.tenant_utilisation_by_kind(
            tenant, selectors.quarter_start(today), tomorrow)}
        answer["by_kind_month"] = {f.kind: out(f) for f in selectors.tenant_utilisation_by_kind(
            tenant, today.replace(day=1), tomorrow)}
        return Response(answer)

    @extend_schema(request=s.BudgetSerializer, responses={200: s.BudgetSerializer})
    @action(detail=False, methods=["get", "put"], serializer_class=s.BudgetSerializer)
    def budget(self, request: Request, tenant_slug: str) -> Response:
        """The monthly budget, this month's spending and the month-end forecast."""
        if request.method == "PUT":
            self.access.require_admin()  # permission before validation
            data = validated(s.BudgetSerializer, request)
            services.budget_set(access=self.access, actor=request.user,
                                amount=data["monthly_amount"])
        st = selectors.budget_status(self.access.tenant)
        return Response(s.BudgetSerializer({
            "monthly_amount": st.budget, "spent": st.spent, "forecast": st.forecast,
            "percent": st.percent, "currency": selectors.currency()}).data)


def _staff(request: Request) -> None:
    if not sees_all_tenants(request.user):
        raise NotFound


class FinanceInvoiceViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin,
                            viewsets.GenericViewSet):
    """Every tenant's invoices (finance, platform admins); ``?month=YYYY-MM``."""

    serializer_class = s.InvoiceSerializer

    def get_queryset(self) -> QuerySet:
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return Invoice.objects.none()
        _staff(self.request)
        queryset = Invoice.objects.select_related("tenant", "credits").prefetch_related("lines")
        if self.request.query_params.get("month"):
            queryset = queryset.filter(
                period=selectors.parse_period(self.request.query_params["month"]))
        return queryset

    @extend_schema(request=s.CreditNoteInput, responses={201: s.InvoiceSerializer})
    @action(detail=True, methods=["post"], url_path="credit-notes")
    def credit_notes(self, request: Request, pk: str) -> Response:
        """Correct an issued invoice with a credit note (finance)."""
        invoice = self.get_object()  # 404 for anyone but finance and platform admins
        services.require_finance(request.user)  # permission before validation
        data = validated(s.CreditNoteInput, request)
        note = services.credit_note_issue(actor=request.user, invoice=invoice, **data)
        return Response(s.InvoiceSerializer(note).data, status=status.HTTP_201_CREATED)


class RateCardViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin,
                      viewsets.GenericViewSet):
    """Rate cards with each GPU-hour price and its breakdown; platform admins add cards."""

    serializer_class = s.RateCardSerializer

    def get_queryset(self) -> QuerySet:
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return RateCard.objects.none()
        _staff(self.request)
        return selectors.rate_cards()

    @extend_schema(request=s.RateCardInput, responses={201: s.RateCardSerializer})
    def create(self, request: Request) -> Response:
        _staff(request)
        require_platform_admin(request.user)  # permission before validation
        data = validated(s.RateCardInput, request)
        card = services.rate_card_create(actor=request.user, **data)
        return Response(s.RateCardSerializer(card).data, status=status.HTTP_201_CREATED)


def _rounded(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)


@extend_schema(responses={200: dict})
@api_view(["GET"])
def month_detail(request: Request, month: str) -> Response:
    """A month's invoices with totals and whether it is closed (finance, platform admins)."""
    _staff(request)
    period = selectors.parse_period(month)
    summary = selectors.month_summary(period)
    return Response({
        "month": f"{period:%Y-%m}", "closed": summary["closed"] is not None,
        # devices used in the month the rate card does not price (closing needs
        # confirm_unpriced while there are any)
        "unpriced": ([{"device": row.device.key, "description": render(row.priced.text)}
                      for row in selectors.unpriced_devices(period)]
                     if summary["closed"] is None else []),
        "currency": selectors.currency(), "total": format(summary["total"], "f"),
        "invoices": s.InvoiceSerializer(summary["invoices"], many=True).data,
        "idle_rates": {str(k): v.as_api()["idle_rate"] for k, v in summary["idle"].items()},
        "idle_rates_quarter": {str(k): v.as_api()["idle_rate"]
                               for k, v in summary["idle_quarter"].items()},
        # unit-hours idle while a job that fits them waited (jobs.admission.waste), by cause
        "idle_while_waiting": {
            "gpu_hours": round(summary["idle_waiting"]["hours"], 3),
            "share_of_capacity": _rounded(summary["idle_waiting"]["share"]),
            "causes": {c["cause"]: {"gpu_hours": round(c["hours"], 3),
                                    "share_of_capacity": _rounded(c["share"])}
                       for c in summary["idle_waiting"]["causes"]}},
        "tenants": [{"tenant": row["tenant"].slug,
                     "invoices": [i.pk for i in row["invoices"]],
                     "billed_gpu_hours": format(row["billed_hours"], "f"),
                     "idle_rate": None if row["idle"] is None else row["idle"].as_api()[
                         "idle_rate"],
                     # the utilisation figures, all GPU kinds (tenants.utilisation)
                     "utilisation": None if row["idle"] is None else row["idle"].as_api(),
                     "utilisation_quarter": None if row["idle_quarter"] is None
                     else row["idle_quarter"].as_api()} for row in summary["rows"]],
        # usage of closed months this month bills (before it is closed): the late lines
        "late_lines": [{"tenant": late["tenant"], "kind": late["line"].kind,
                        "description": render(late["line"].text),
                        "usage_month": f"{late['line'].starts:%Y-%m}",
                        "starts": late["line"].starts.isoformat(),
                        "ends": late["line"].ends.isoformat(),
                        "quantity": format(late["line"].quantity, "f"),
                        "unit": late["line"].unit,
                        "amount": format(late["line"].amount, "f")}
                       for late in summary["late_lines"]],
    })


@extend_schema(request=inline_serializer("MonthCloseInput", {
    "confirm_unpriced": serializers.BooleanField(
        required=False, default=False,
        help_text="close although devices used in the month have no price on the rate "
                  "card (their lines bill 0); without it such a month is refused (400, "
                  "field confirm_unpriced, extra.unpriced names the devices)")}),
    responses={201: dict})
@api_view(["POST"])
def month_close(request: Request, month: str) -> Response:
    """Close a month that has ended: issue every tenant's invoice (finance)."""
    _staff(request)
    body = request.data if isinstance(request.data, dict) else {}
    raw = body.get("confirm_unpriced", request.query_params.get("confirm_unpriced"))
    confirm = raw is True or str(raw).lower() in ("true", "1", "on")
    closing = services.month_close(actor=request.user, period=selectors.parse_period(month),
                                   confirm_unpriced=confirm)
    return Response({"month": f"{closing.period:%Y-%m}", "invoices": closing.invoices,
                     "total": format(closing.total, "f"), "seconds": closing.seconds},
                    status=status.HTTP_201_CREATED)
