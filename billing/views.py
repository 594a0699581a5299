"""Billing pages: a tenant's invoices (drafts, drill-down, downloads, budget, idle rate),
finance's month (every tenant, totals, close, downloads, adjustments), the rate card.
Thin views: services write, selectors read."""

from __future__ import annotations

import datetime as dt

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST, require_safe

from billing import exports, forms, ledger, selectors, selectors_details, services
from billing.choices import BUDGET_MAX, InvoiceKind
from billing.models import Invoice
from core.exceptions import ApplicationError
from tenants.access import TenantAccess, is_finance, is_platform_admin, sees_all_tenants
from tenants.models import Tenant
from tenants.selectors import tenant_access_or_404

DRAFT_MAX_AGE = dt.timedelta(minutes=10)


def _staff_or_404(request: HttpRequest) -> None:
    if not sees_all_tenants(request.user):
        raise Http404


def _download(content: bytes | str, name: str, content_type: str) -> HttpResponse:
    response = HttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@require_safe
@login_required
def tenant_invoices(request: HttpRequest, slug: str) -> HttpResponse:
    return _invoices_page(request, tenant_access_or_404(request.user, slug))


def _invoices_page(request: HttpRequest, access: TenantAccess,
                   budget_form: forms.BudgetForm | None = None) -> HttpResponse:
    """A tenant's invoices page; with a refused ``budget_form``, its errors at the field
    and the typed value kept (status 400)."""
    tenant = access.tenant
    period = selectors.current_period()
    draft = Invoice.objects.filter(tenant=tenant, period=period,
                                   kind=InvoiceKind.INVOICE).first()
    stale = draft is None or draft.computed_at is None or \
        timezone.now() - draft.computed_at > DRAFT_MAX_AGE
    if (stale or request.GET.get("refresh")) and not selectors.month_is_closed(period) and \
            (draft is None or not draft.is_issued):
        draft = services.invoice_draft_refresh(tenant=tenant, period=period)
    return render(request, "billing/tenant_invoices.html", {
        "access": access, "tenant": tenant, "tab": "invoices", "draft": draft,
        "invoices": selectors.invoices_for_tenant(tenant).exclude(pk=draft.pk if draft else 0),
        "budget": selectors.budget_status(tenant), "idle": selectors.tenant_utilisation(tenant),
        "budget_form": budget_form or forms.BudgetForm(), "budget_max": BUDGET_MAX,
        "currency": selectors.currency(),
    }, status=400 if budget_form is not None else 200)


@require_safe
@login_required
def invoice_detail(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    access = tenant_access_or_404(request.user, slug)
    invoice = selectors.invoice_for_tenant_or_404(access.tenant, pk)
    lines = list(invoice.lines.all())
    selected = next((line for line in lines if str(line.pk) == request.GET.get("line")), None)
    return render(request, "billing/invoice.html", {
        "access": access, "tenant": access.tenant, "tab": "invoices", "invoice": invoice,
        "lines": lines, "selected": selected,
        "details": selectors_details.line_details(selected) if selected else None,
        "credit_notes": invoice.credit_notes.all(),
        "credited": selectors.credited_total(invoice),
        "finance": is_finance(request.user), "credit_form": forms.CreditNoteForm(),
        "utilisation": (selectors.tenant_utilisation_by_kind(
            access.tenant, invoice.period, ledger.next_month(invoice.period))
            if invoice.kind == InvoiceKind.INVOICE else None),
    })


@require_safe
@login_required
def invoice_download(request: HttpRequest, slug: str, pk: int, fmt: str) -> HttpResponse:
    access = tenant_access_or_404(request.user, slug)
    invoice = selectors.invoice_for_tenant_or_404(access.tenant, pk)
    if fmt not in ("pdf", "csv"):
        raise Http404
    if fmt == "pdf":
        return _download(exports.invoice_pdf(invoice), exports.filename(invoice, "pdf"),
                         "application/pdf")
    return _download(exports.invoices_csv([invoice]), exports.filename(invoice, "csv"),
                     "text/csv; charset=utf-8")


@login_required
@require_POST
def credit_note(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    access = tenant_access_or_404(request.user, slug)
    invoice = selectors.invoice_for_tenant_or_404(access.tenant, pk)
    form = forms.CreditNoteForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(str(e) for errs in form.errors.values() for e in errs))
    else:
        try:
            note = services.credit_note_issue(actor=request.user, invoice=invoice,
                                              **form.cleaned_data)
        except ApplicationError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, _("Credit note %(n)s issued.") % {"n": note.number})
            return redirect("billing:invoice", slug=slug, pk=note.pk)
    return redirect("billing:invoice", slug=slug, pk=pk)


@login_required
@require_POST
def budget(request: HttpRequest, slug: str) -> HttpResponse:
    access = tenant_access_or_404(request.user, slug)
    form = forms.BudgetForm(request.POST)
    if form.is_valid():
        try:
            services.budget_set(access=access, actor=request.user,
                                amount=form.cleaned_data["amount"])
        except ApplicationError as exc:
            form.add_error("amount", exc.message)
        else:
            messages.success(request, _("Budget saved."))
            return redirect("billing:tenant_invoices", slug=slug)
    return _invoices_page(request, access, budget_form=form)


@require_safe
@login_required
def finance_month(request: HttpRequest) -> HttpResponse:
    _staff_or_404(request)
    try:
        period = selectors.parse_period(request.GET.get("month"))
    except ApplicationError as exc:  # shown above this month's page, not read as another
        messages.error(request, exc.message)
        period = selectors.current_period()
    summary = selectors.month_summary(period)
    return render(request, "billing/finance_month.html", {
        **summary, "period": period, "currency": selectors.currency(),
        "previous": (period - dt.timedelta(days=1)).replace(day=1),
        "following": (period + dt.timedelta(days=32)).replace(day=1),
        "can_close": is_finance(request.user) and summary["closed"] is None
        and period < selectors.current_period(),
        "finance": is_finance(request.user), "adjustment_form": forms.AdjustmentForm(),
        # devices used this month that the rate card does not price (billed 0)
        "unpriced": selectors.unpriced_devices(period) if summary["closed"] is None else [],
    })


@login_required
@require_POST
def month_close(request: HttpRequest) -> HttpResponse:
    _staff_or_404(request)
    try:
        period = selectors.parse_period(request.POST.get("month"))
        closing = services.month_close(
            actor=request.user, period=period,
            confirm_unpriced=request.POST.get("confirm_unpriced") in ("on", "true", "1"))
    except ApplicationError as exc:
        messages.error(request, exc.message)
        if exc.field == "month":
            return redirect(_month_url())
    else:
        messages.success(request, _("%(month)s is closed: %(n)s invoices issued.")
                         % {"month": f"{period:%Y-%m}", "n": closing.invoices})
    return redirect(f"{_month_url()}?month={period:%Y-%m}")


def _month_url() -> str:
    return reverse("billing:month")


@login_required
@require_POST
def adjustment(request: HttpRequest) -> HttpResponse:
    _staff_or_404(request)
    try:
        period = selectors.parse_period(request.POST.get("month"))
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect(_month_url())
    form = forms.AdjustmentForm(request.POST)
    if form.is_valid():
        tenant = get_object_or_404(Tenant, slug=form.cleaned_data["tenant"])
        try:
            services.adjustment_add(actor=request.user, tenant=tenant, period=period,
                                    description=form.cleaned_data["description"],
                                    amount=form.cleaned_data["amount"])
            if period == selectors.current_period():
                services.invoice_draft_refresh(tenant=tenant, period=period)
        except ApplicationError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, _("Adjustment added."))
    else:
        messages.error(request, _("Enter a tenant, a description and an amount."))
    return redirect(f"{_month_url()}?month={period:%Y-%m}")


@require_safe
@login_required
def month_download(request: HttpRequest, month: str, fmt: str) -> HttpResponse:
    _staff_or_404(request)
    if fmt not in ("zip", "csv"):
        raise Http404
    try:
        period = selectors.parse_period(month)
    except ApplicationError:
        raise Http404("No such month") from None
    invoices = list(selectors.invoices_for_month(period).prefetch_related("lines"))
    if fmt == "zip":
        return _download(exports.month_zip(invoices, f"{period:%Y-%m}"),
                         f"invoices-{period:%Y-%m}.zip", "application/zip")
    return _download(exports.invoices_csv(invoices), f"invoices-{period:%Y-%m}.csv",
                     "text/csv; charset=utf-8")


@login_required
def rate_card(request: HttpRequest) -> HttpResponse:
    """The rate cards, and for platform admins a new card: the card-wide prices, one row
    per GPU model (the models the cluster reports and those already priced) and one per
    StorageClass. The service validates the rows; its errors are shown at their fields."""
    _staff_or_404(request)
    admin = is_platform_admin(request.user)
    current = selectors.current_rate_card()
    observed_memory = selectors.observed_card_memory()
    models = sorted(set(selectors.observed_gpu_models())
                    | {g.gpu_model for g in (current.gpu_prices.all() if current else [])})
    classes = sorted(set(selectors.observed_storage_classes())
                     | {s.storage_class for s in (current.storage_prices.all()
                                                  if current else [])})
    data = request.POST if request.method == "POST" else None
    form = forms.RateCardForm(data, initial=forms.RateCardForm.initial_from(current))
    gpu_rows = forms.GpuPriceFormSet(data, prefix="gpus", form_kwargs={"models": models},
                                     initial=forms.gpu_rows_initial(current, models))
    storage_rows = forms.StoragePriceFormSet(data, prefix="storage",
                                             form_kwargs={"classes": classes},
                                             initial=forms.storage_rows_initial(current))
    device_rows = forms.DevicePriceFormSet(data, prefix="devices",
                                           initial=forms.device_rows_initial(current))
    error = ""
    if request.method == "POST":
        if not admin:
            raise Http404
        valid = [form.is_valid(), gpu_rows.is_valid(), storage_rows.is_valid(),
                 device_rows.is_valid()]
        if all(valid):
            try:
                card = services.rate_card_create(actor=request.user, **form.cleaned_data,
                                                 gpus=gpu_rows.rows(),
                                                 storage=storage_rows.rows(),
                                                 devices=device_rows.rows())
            except ApplicationError as exc:
                errors = exc.extra.get("errors") or {exc.field or "": exc.message}
                placed = (gpu_rows.add_errors(errors) & storage_rows.add_errors(errors)
                          & device_rows.add_errors(errors))
                for key, text in errors.items():
                    if key in form.fields:
                        form.add_error(key, text)
                    elif not placed or not key.startswith(("gpus-", "storage-", "devices-")):
                        error = text
            else:
                messages.success(request, _("Rate card from %(day)s saved.")
                                 % {"day": card.effective_from})
                return redirect("billing:rates")
    # every device advertised or used this month, priced by the card in effect
    devices = selectors.rate_card_devices(current)
    cards = list(selectors.rate_cards())
    for card_ in cards:
        for price in card_.gpu_prices.all():
            price.reported_memory_gib = observed_memory.get(price.gpu_model)  # type: ignore[attr-defined]
    return render(request, "billing/rate_card.html", {
        "cards": cards, "current": current, "form": form, "admin": admin,
        "gpu_rows": gpu_rows, "storage_rows": storage_rows, "device_rows": device_rows,
        "error": error, "devices": devices,
        "unpriced_in_use": [row for row in devices if row.unpriced_in_use],
        "currency": selectors.currency(), "observed_memory": observed_memory,
        "mig_warnings": selectors.rate_card_warnings(current, observed_memory),
    }, status=400 if request.method == "POST" else 200)
