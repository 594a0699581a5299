"""Pages of the tenants app. Thin: resolve access, validate a form, call one service.

An ApplicationError from a service becomes an error on the form (nothing was written);
success redirects with a message (post/redirect/get, so a reload never repeats a write).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST, require_safe
from django.views.i18n import set_language as django_set_language

from core.exceptions import ApplicationError
from tenants import forms, selectors, services
from tenants.access import platform_admin_or_404, require_platform_admin
from tenants.catalog import Resource
from tenants.models import Membership, Pool
from tenants.services.preferences import preference_set_language, supported_language

User = get_user_model()


def _form_error(form: Any, exc: ApplicationError) -> None:
    field = exc.field if exc.field in getattr(form, "fields", {}) else None
    if field is None and isinstance(form, forms.AmountRowsForm):  # the row of the resource
        field = form.field_of(exc.extra.get("resource"))
    form.add_error(field, exc.message)


@require_safe
@login_required
def tenant_detail(request: HttpRequest, slug: str) -> HttpResponse:
    access = selectors.tenant_access_or_404(request.user, slug)
    request.session["tenant_slug"] = slug
    return render(request, "tenants/detail.html", {
        "access": access, "tenant": access.tenant,
        "pools": selectors.mark_in_cluster(selectors.pools_of(access.tenant)),
        "member_count": selectors.member_count(access.tenant),
        "suspend_form": forms.SuspendForm(),
        "dedicated_nodes": selectors.dedicated_nodes_of(access.tenant),
    })


@login_required
def pool_detail(request: HttpRequest, slug: str, kind: str) -> HttpResponse:
    """A pool: its namespace, sync state, quota and grant history; admins set quota."""
    access = selectors.tenant_access_or_404(request.user, slug)
    pool = get_object_or_404(Pool, tenant=access.tenant, kind=kind)
    grants = selectors.current_grants(pool)
    keys = selectors.resource_suggestions()
    form = forms.QuotaForm(request.POST or None, initial_grants=grants, resource_keys=keys)
    if request.method == "POST":
        if not access.can_manage_tenant:
            raise Http404
        if form.is_valid():
            try:
                services.quota_set(actor=request.user, pool=pool, amounts=form.amounts(),
                                   reason=form.cleaned_data["reason"])
            except ApplicationError as exc:
                form.add_error(None, exc.message)
            else:
                messages.success(request, _("The quota was saved; the cluster is being "
                                            "updated."))
                return redirect("tenants:pool", slug=slug, kind=kind)
    return render(request, "tenants/pool.html", {
        "access": access, "tenant": access.tenant, "pool": pool, "form": form,
        "grants": [(Resource.parse(k), v) for k, v in sorted(grants.items())],
        "history": selectors.grant_history(pool)[:200],
    }, status=400 if request.method == "POST" else 200)


@login_required
@require_POST
def pool_sync(request: HttpRequest, slug: str, kind: str) -> HttpResponse:
    access = selectors.tenant_access_or_404(request.user, slug)
    pool = get_object_or_404(Pool, tenant=access.tenant, kind=kind)
    try:
        access.require_admin()
        services.pool_sync_request(pool=pool)
        messages.success(request, _("A sync of %(ns)s was requested.") % {"ns": pool.namespace})
    except ApplicationError as exc:
        messages.error(request, exc.message)
    return redirect("tenants:pool", slug=slug, kind=kind)


@login_required
@require_POST
def dedicated_nodes(request: HttpRequest, slug: str) -> HttpResponse:
    access = selectors.tenant_access_or_404(request.user, slug)
    node_name = request.POST.get("node_name", "")
    try:
        if request.POST.get("action") == "release":
            services.node_release(access=access, actor=request.user, node_name=node_name)
            messages.success(request, _("Node %(n)s returns to the shared pool.")
                             % {"n": node_name})
        else:
            services.node_dedicate(access=access, actor=request.user, node_name=node_name,
                                   reason=request.POST.get("reason", ""))
            messages.success(request, _("Node %(n)s is now dedicated to this tenant.")
                             % {"n": node_name})
    except ApplicationError as exc:
        messages.error(request, exc.message)
    return redirect("tenants:detail", slug=slug)


@login_required
def members(request: HttpRequest, slug: str) -> HttpResponse:
    access = selectors.tenant_access_or_404(request.user, slug)
    form = forms.MemberAddForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            services.membership_add(access=access, actor=request.user, **form.cleaned_data)
        except ApplicationError as exc:
            _form_error(form, exc)
        else:
            messages.success(request, _("%(u)s was added.") % {"u": form.cleaned_data["user"]})
            return redirect("tenants:members", slug=slug)
    status = 400 if request.method == "POST" else 200
    return render(request, "tenants/members.html", {
        "access": access, "tenant": access.tenant, "form": form,
        "memberships": selectors.members_of(access.tenant),
    }, status=status)


@login_required
@require_POST
def member_change(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    access = selectors.tenant_access_or_404(request.user, slug)
    membership = get_object_or_404(Membership, pk=pk, tenant=access.tenant)
    try:
        if request.POST.get("action") == "remove":
            services.membership_remove(access=access, actor=request.user, membership=membership)
            messages.success(request, _("%(u)s was removed.") % {"u": membership.user})
        else:
            form = forms.MemberRoleForm(request.POST)
            if not form.is_valid():
                raise ApplicationError(_("Choose a valid role."))
            services.membership_set_role(access=access, actor=request.user,
                                         membership=membership, role=form.cleaned_data["role"])
            messages.success(request, _("The role of %(u)s was changed.") % {"u": membership.user})
    except ApplicationError as exc:
        messages.error(request, exc.message)
    return redirect("tenants:members", slug=slug)


@login_required
def platform_tenants(request: HttpRequest) -> HttpResponse:
    platform_admin_or_404(request.user)
    form = forms.TenantForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            tenant = services.tenant_create(actor=request.user, **form.cleaned_data)
        except ApplicationError as exc:
            _form_error(form, exc)
        else:
            messages.success(request, _("Tenant %(t)s was created with its prod and dev pools.")
                             % {"t": tenant.slug})
            return redirect("tenants:detail", slug=tenant.slug)
    return render(request, "tenants/platform_tenants.html", {
        "form": form, "tenants": selectors.my_tenants(request.user),
        "default_quota": selectors.default_quota_rows(),
    }, status=400 if request.method == "POST" else 200)


@login_required
def tenant_edit(request: HttpRequest, slug: str) -> HttpResponse:
    platform_admin_or_404(request.user)
    access = selectors.tenant_access_or_404(request.user, slug)
    form = forms.TenantForm(request.POST or None, instance=access.tenant, editing=True)
    if request.method == "POST" and form.is_valid():
        try:
            services.tenant_update(access=access, actor=request.user, **form.cleaned_data)
        except ApplicationError as exc:
            _form_error(form, exc)
        else:
            messages.success(request, _("Tenant %(t)s was saved.") % {"t": slug})
            return redirect("tenants:detail", slug=slug)
    return render(request, "tenants/edit.html", {"form": form, "tenant": access.tenant},
                  status=400 if request.method == "POST" else 200)


@login_required
@require_POST
def tenant_status(request: HttpRequest, slug: str) -> HttpResponse:
    access = selectors.tenant_access_or_404(request.user, slug)
    try:
        if request.POST.get("action") == "reactivate":
            services.tenant_reactivate(access=access, actor=request.user)
            messages.success(request, _("Tenant %(t)s is active again.") % {"t": slug})
        else:
            form = forms.SuspendForm(request.POST)
            reason = form.cleaned_data["reason"] if form.is_valid() else ""
            services.tenant_suspend(access=access, actor=request.user, reason=reason)
            messages.success(request, _("Tenant %(t)s is suspended.") % {"t": slug})
    except ApplicationError as exc:
        messages.error(request, exc.message)
    return redirect("tenants:detail", slug=slug)


@login_required
def tenant_delete(request: HttpRequest, slug: str) -> HttpResponse:
    """Deleting a tenant: say exactly what will be lost, then require the slug typed."""
    platform_admin_or_404(request.user)
    access = selectors.tenant_access_or_404(request.user, slug)
    error = ""
    if request.method == "POST":
        try:
            services.tenant_delete(access=access, actor=request.user,
                                   confirm=request.POST.get("confirm", ""))
        except ApplicationError as exc:
            error = exc.message
        else:
            messages.success(request, _("Tenant %(t)s is being deleted: its namespaces are "
                                        "being removed.") % {"t": slug})
            return redirect("tenants:detail", slug=slug)
    return render(request, "tenants/delete.html", {
        "tenant": access.tenant, "error": error, "loss": selectors.deletion_impact(access.tenant),
    }, status=400 if error else 200)


@login_required
def people(request: HttpRequest) -> HttpResponse:
    platform_admin_or_404(request.user)
    form = forms.UserCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            user = services.user_create(actor=request.user, **form.cleaned_data)
        except ApplicationError as exc:
            _form_error(form, exc)
        else:
            messages.success(request, _("Account %(u)s was created.") % {"u": user.get_username()})
            return redirect("tenants:people")
    query = request.GET.get("q", "").strip()
    page = Paginator(selectors.users_search(query), 50).get_page(request.GET.get("page"))
    for person in page:
        person.role_names = {r.role for r in person.platform_roles.all()}
    return render(request, "tenants/people.html", {"form": form, "page": page, "q": query},
                  status=400 if request.method == "POST" else 200)


@login_required
@require_POST
def people_role(request: HttpRequest, user_id: int) -> HttpResponse:
    platform_admin_or_404(request.user)
    require_platform_admin(request.user)
    target = get_object_or_404(User, pk=user_id)
    form = forms.PlatformRoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, _("Choose a valid role."))
    else:
        try:
            services.platform_role_set(actor=request.user, user=target, **form.cleaned_data)
            messages.success(request, _("Roles of %(u)s were changed.") % {"u": target})
        except ApplicationError as exc:
            messages.error(request, exc.message)
    return redirect("tenants:people")


@require_safe
@login_required
def audit_log(request: HttpRequest) -> HttpResponse:
    platform_admin_or_404(request.user)
    action = request.GET.get("action", "")
    tenant = None
    if request.GET.get("tenant"):
        tenant = selectors.tenant_access_or_404(request.user, request.GET["tenant"]).tenant
    page = Paginator(selectors.audit_events(tenant=tenant, action=action), 100).get_page(
        request.GET.get("page"))
    return render(request, "tenants/audit.html", {"page": page, "action": action,
                                                  "tenant_filter": request.GET.get("tenant", "")})


def set_language(request: HttpRequest) -> HttpResponse:
    """Django's language switcher (``/i18n/setlang/``), and for a signed-in user the
    language is also remembered as the one their e-mails are written in."""
    response = django_set_language(request)
    language = request.POST.get("language") if request.method == "POST" else None
    if request.user.is_authenticated and supported_language(language):
        preference_set_language(user=request.user, language=language or "")
    return response
