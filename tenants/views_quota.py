"""Quota pages: the tenant's quota and requests, loans, the admins' request queue, the
policy page and notifications. Thin: resolve access, validate a form, call a service."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms as django_forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import get_language, gettext_lazy, pgettext
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST, require_safe

from core import numbers
from core.exceptions import ApplicationError
from core.models import Policy
from core.texts import render as render_text
from core.when import when_text
from tenants import forms, selectors, services
from tenants.access import platform_admin_or_404
from tenants.catalog import Resource
from tenants.choices import MembershipRole, QuotaMode, RequestStatus
from tenants.loans import lendable, loans_shown, offer_expires
from tenants.models import Notification, Pool, QuotaRequest, Tenant
from tenants.quota import OverCap
from tenants.templatetags.quota_amounts import amount as amount_text


def _end_of(day: dt.date | None) -> dt.datetime | None:
    if day is None:
        return None
    return timezone.make_aware(dt.datetime.combine(day, dt.time(23, 59, 59)))


def _form_error(form: django_forms.Form, exc: ApplicationError) -> None:
    field = exc.field if exc.field in form.fields else None
    if field is None and isinstance(form, forms.AmountRowsForm):  # the row of the resource
        field = form.field_of(exc.extra.get("resource"))
    form.add_error(field, exc.message)


@login_required
def quota_page(request: HttpRequest, slug: str) -> HttpResponse:
    """The tenant's quota per pool (granted, effective, in use, guaranteed), its requests
    and loans; tenant admins (and members, if allowed) ask for more here."""
    access = selectors.tenant_access_or_404(request.user, slug)
    tenant = access.tenant
    keys = selectors.resource_suggestions()
    overview = selectors.quota_overview(tenant)
    current = {block["pool"].kind: {row["key"]: row["granted"] for row in block["rows"]}
               for block in overview}
    form = forms.QuotaRequestForm(request.POST or None, resource_keys=keys, current=current)
    if request.method == "POST" and form.is_valid():
        try:
            created = services.quota_request_submit(
                access=access, actor=request.user,
                pool=get_object_or_404(Pool, tenant=tenant, kind=form.cleaned_data["pool"]),
                amounts=form.amounts(), justification=form.cleaned_data["justification"],
                valid_until=_end_of(form.cleaned_data["valid_until"]),
                language=get_language() or "en")
        except ApplicationError as exc:
            _form_error(form, exc)
        else:
            messages.success(request, _("Request #%(n)s was sent to the platform admins.")
                             % {"n": created.pk})
            return redirect("tenants:quota", slug=slug)
    may_request = access.role == MembershipRole.ADMIN or (access.is_member
                                             and tenant.members_may_request_quota)
    return render(request, "tenants/quota.html", {
        "access": access, "tenant": tenant, "form": form, "may_request": may_request,
        "overview": overview,
        "borrowing": selectors.borrowing_terms(tenant),
        "requests": selectors.quota_requests_of(tenant)[:50],
        "loans": loans_shown(list(selectors.loans_of(tenant)[:50]), timezone.now()),
        "loan_form": _loan_form(tenant, keys),
        "lendable": (lendable(list(tenant.pools.all()))
                     if access.role == MembershipRole.ADMIN else []),
        "quota_modes": QuotaMode.choices,
    }, status=400 if request.method == "POST" else 200)


@login_required
@require_POST
def quota_request_cancel(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    access = selectors.tenant_access_or_404(request.user, slug)
    quota_request = get_object_or_404(QuotaRequest, pk=pk, tenant=access.tenant)
    try:
        services.quota_request_cancel(access=access, actor=request.user, request=quota_request)
        messages.success(request, _("Request #%(n)s was withdrawn.") % {"n": pk})
    except ApplicationError as exc:
        messages.error(request, exc.message)
    return redirect("tenants:quota", slug=slug)


def _loan_form(tenant: Tenant, keys: list[str], data: Any = None) -> forms.LoanForm:
    return forms.LoanForm(data, borrowers=selectors.loan_borrowers(tenant),
                          resource_keys=keys)


@login_required
@require_POST
def loan_offer(request: HttpRequest, slug: str) -> HttpResponse:
    access = selectors.tenant_access_or_404(request.user, slug)
    form = _loan_form(access.tenant, selectors.resource_suggestions(), request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(str(m) for errs in form.errors.values() for m in errs))
        return redirect("tenants:quota", slug=slug)
    data = form.cleaned_data
    try:
        loan = services.loan_propose(
            access=access, actor=request.user,
            lender_pool=get_object_or_404(Pool, tenant=access.tenant, kind=data["pool"]),
            borrower=data["borrower"], borrower_pool=data["borrower_pool"],
            resource=data["resource"], amount=data["amount"],
            ends_at=_end_of(data["ends_at"]), note=data["note"])  # type: ignore[arg-type]
        messages.success(request, _("The offer was sent; the borrower's admins must accept it "
                                    "by %(when)s. %(terms)s")
                         % {"when": when_text(offer_expires(loan)),
                            "terms": render_text(getattr(loan, "terms", ""))})
    except ApplicationError as exc:
        messages.error(request, exc.message)
    return redirect("tenants:quota", slug=slug)


@login_required
@require_POST
def loan_action(request: HttpRequest, slug: str, pk: int, action: str) -> HttpResponse:
    access = selectors.tenant_access_or_404(request.user, slug)
    loan = get_object_or_404(selectors.loans_of(access.tenant), pk=pk)
    try:
        if action in ("accept", "decline"):
            services.loan_decide(access=access, actor=request.user, loan=loan,
                                 accept=action == "accept")
        elif action == "end":
            services.loan_end(access=access, actor=request.user, loan=loan)
        else:
            raise Http404
        messages.success(request, _("Done."))
    except ApplicationError as exc:
        messages.error(request, exc.message)
    return redirect("tenants:quota", slug=slug)


@login_required
@require_POST
def tenant_settings(request: HttpRequest, slug: str) -> HttpResponse:
    platform_admin_or_404(request.user)
    access = selectors.tenant_access_or_404(request.user, slug)
    form = forms.TenantSettingsForm(request.POST)
    if form.is_valid():
        try:
            services.tenant_update(access=access, actor=request.user, **form.cleaned_data)
            messages.success(request, _("Quota settings were saved."))
        except ApplicationError as exc:
            messages.error(request, exc.message)
    else:
        messages.error(request, _("Check the quota settings: %(errors)s") % {"errors": " ".join(
            f"{form.fields[name].label}: {' '.join(str(e) for e in errs)}"
            if name in form.fields else " ".join(str(e) for e in errs)
            for name, errs in form.errors.items())})
    return redirect("tenants:quota", slug=slug)


@require_safe
@login_required
def request_queue(request: HttpRequest) -> HttpResponse:
    platform_admin_or_404(request.user)
    status = request.GET.get("status", RequestStatus.PENDING)
    page = Paginator(selectors.pending_quota_requests(status), 50).get_page(
        request.GET.get("page"))
    return render(request, "tenants/request_queue.html", {"page": page, "status": status})


@login_required
def request_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One request with the facts to decide it; approve (amended) or reject."""
    platform_admin_or_404(request.user)
    quota_request = get_object_or_404(QuotaRequest.objects.select_related(
        "tenant", "pool", "requested_by"), pk=pk)
    form = forms.DecisionForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        note = form.cleaned_data["note"]
        try:
            if request.POST.get("decision") == "reject":
                services.quota_request_reject(actor=request.user, request=quota_request,
                                              reason=note)
                messages.success(request, _("Request #%(n)s was rejected.") % {"n": pk})
            else:
                amended = {item.resource: request.POST.get(f"amount_{item.pk}", "").strip()
                           for item in quota_request.items.all()}
                amended = {k: v for k, v in amended.items() if v}
                services.quota_request_approve(actor=request.user, request=quota_request,
                                               amended=amended, note=note)
                messages.success(request, _("Request #%(n)s was approved; the cluster is "
                                            "being updated.") % {"n": pk})
            return redirect("tenants:request_queue")
        except ApplicationError as exc:
            form.add_error(None, exc.message)
    return render(request, "tenants/request_detail.html", {
        "req": quota_request, "form": form, "facts": selectors.request_facts(quota_request),
        "posted": request.POST,
    }, status=400 if request.method == "POST" else 200)


@login_required
def policy_page(request: HttpRequest) -> HttpResponse:
    platform_admin_or_404(request.user)
    policy = Policy.current()
    initial = {
        "eviction_watermark": policy.eviction_watermark * 100,
        "borrowing_cap": policy.borrowing_cap,
        "development_grace_seconds": policy.development_grace_seconds,
        "batch_grace_seconds": policy.batch_grace_seconds,
        "default_quota": "\n".join(f"{pool} {k} = {v}" for pool, amounts in
                                   sorted(policy.default_quota.items())
                                   for k, v in sorted(amounts.items())),
        "dev_pvc_reclaim_days": policy.dev_pvc_reclaim_days,
        "dynamic_headroom": policy.dynamic_headroom * 100,
        "dynamic_idle_threshold": policy.dynamic_idle_threshold * 100,
        "egress_cidrs": "\n".join(policy.egress_cidrs or []),
        "topology_levels": "\n".join(policy.topology_levels or []),
    }
    form = forms.PolicyForm(request.POST or None, initial=initial,
                            factors=dict(policy.overcommit_factors or {}))
    preview = None
    if request.method == "POST" and form.is_valid():
        data = dict(form.cleaned_data)
        data["eviction_watermark"] = data["eviction_watermark"] / 100
        data["dynamic_headroom"] = data["dynamic_headroom"] / 100
        data["dynamic_idle_threshold"] = data["dynamic_idle_threshold"] / 100
        data["overcommit_factors"] = {k: float(v) for k, v in
                                      data["overcommit_factors"].items()}
        try:
            if "preview" in request.POST:  # what these factors would do; nothing saved
                services.overcommit_factors_check(data["overcommit_factors"])
                preview = over_cap_sentences(
                    selectors.overcommit_effect(data["overcommit_factors"]))
            else:
                saved = services.policy_update(actor=request.user, **data)
                messages.success(request, _("The policy was saved."))
                effect = over_cap_sentences(selectors.overcommit_effect(
                    dict(saved.overcommit_factors or {})))
                if effect:
                    messages.warning(request, " ".join(
                        [str(OVER_CAP_INTRO), *effect, str(OVER_CAP_RULE)]))
                return redirect("tenants:policy")
        except ApplicationError as exc:
            _form_error(form, exc)
    status = 400 if request.method == "POST" and preview is None else 200
    return render(request, "tenants/policy.html", {
        "form": form, "policy": policy, "preview": preview,
        "over_cap_now": over_cap_sentences(selectors.overcommit_effect(
            dict(policy.overcommit_factors or {}))),
        "over_cap_rule": OVER_CAP_RULE, "default_quota": selectors.default_quota_rows()},
        status=status)


OVER_CAP_INTRO = gettext_lazy("With the factors saved:")
OVER_CAP_RULE = gettext_lazy("Existing grants stay; while a resource's grants are over "
                             "its cap, no grant of it can be raised.")


def over_cap_sentences(items: list[OverCap]) -> list[str]:
    """One sentence per resource over the overcommit cap (``tenants.quota.over_cap``),
    e.g. "GPUs · NVIDIA-A100, factor 1.5: acme (16), globex (12) would be over the cap
    (granted 28 of 24 cards, 1.5 x the capacity of 16)." """
    out = []
    for item in items:
        try:
            resource = Resource.parse(item.key)
            label, unit = resource.label(), resource.unit_for(item.limit)
        except ValueError:
            label, unit = item.key, ""
        out.append(_("%(resource)s, factor %(factor)s: %(tenants)s would be over the cap "
                     "(granted %(granted)s of %(limit)s %(unit)s, %(factor)s × the "
                     "capacity of %(capacity)s).") % {
            "resource": label, "factor": numbers.quantity(item.factor), "unit": unit,
            "tenants": pgettext("list separator", ", ").join(
                f"{slug} ({amount_text(amount, item.key)})" for slug, amount in item.tenants),
            "granted": amount_text(item.granted, item.key),
            "limit": amount_text(item.limit, item.key),
            "capacity": amount_text(item.capacity, item.key)})
    return out


@login_required
def notifications(request: HttpRequest) -> HttpResponse:
    user: Any = request.user  # authenticated (login_required)
    if request.method == "POST":
        Notification.objects.filter(user=user, read_at__isnull=True).update(
            read_at=timezone.now())
        return redirect("tenants:notifications")
    page = Paginator(Notification.objects.filter(user=user), 50).get_page(
        request.GET.get("page"))
    return render(request, "tenants/notifications.html", {"page": page})




@require_safe
@login_required
def catalog_page(request: HttpRequest) -> HttpResponse:
    """Every resource a quota can name, in the units people count in, with the cluster's
    capacity and how much of it is granted."""
    rows = selectors.catalog()
    for row in rows:
        cap, granted = row["capacity"], row["granted"]
        row["ratio"] = (granted / cap) if cap and granted is not None else None
    return render(request, "tenants/catalog.html", {"rows": rows})
