"""Portal-level pages: the landing page, the account page, health, and /api/v1/me."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST, require_safe
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.authtoken.models import Token
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from jobs.views import preview_data
from portal.tasks import HEARTBEAT_KEY
from tenants.access import is_finance, is_platform_admin, platform_roles
from tenants.selectors import my_tenants


@require_safe
@login_required
def home(request: HttpRequest) -> HttpResponse:
    """Landing page: my tenants with my role in each, their pools and status. Finance
    staff who belong to no tenant land on the month's billing instead, their daily work;
    whoever sees exactly one tenant lands on that tenant's page (a list of one card is a
    click for nothing). ``?all=1`` shows the list anyway (the tenant switcher links it)."""
    user = request.user
    tenants = my_tenants(user)
    member_somewhere = any(role is not None for _tenant, role in tenants)
    if is_finance(user) and not is_platform_admin(user) and not member_somewhere:
        return redirect("billing:month")
    if len(tenants) == 1 and not request.GET.get("all"):
        return redirect("tenants:detail", slug=tenants[0][0].slug)
    return render(request, "portal/home.html", {"tenants": tenants})


NEW_TOKEN_SESSION_KEY = "trainyard_new_api_token"


@require_safe
@login_required
def account(request: HttpRequest) -> HttpResponse:
    """The user's account. The API token is shown in full once, on the page that follows
    its creation; later visits show only its first characters."""
    token = Token.objects.filter(user=request.user).first()
    new_key = request.session.pop(NEW_TOKEN_SESSION_KEY, None)
    return render(request, "portal/account.html", {
        "token": token, "roles": sorted(platform_roles(request.user)),
        "new_key": new_key if token is not None and new_key == token.key else None,
    })


@login_required
@require_POST
def account_token(request: HttpRequest) -> HttpResponse:
    """Create or rotate the user's API token (the old one stops working at once)."""
    Token.objects.filter(user=request.user).delete()
    token = Token.objects.create(user=request.user)
    request.session[NEW_TOKEN_SESSION_KEY] = token.key
    messages.success(request, _("A new API token was created; the previous one no longer works."))
    return redirect("account")


@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness and readiness for load balancers: the database answers; worker heartbeat."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok", "worker_heartbeat": cache.get(HEARTBEAT_KEY)})


@extend_schema(responses=inline_serializer("Me", {
    "username": serializers.CharField(), "email": serializers.EmailField(),
    "platform_roles": serializers.ListField(child=serializers.CharField()),
    "tenants": serializers.ListField(child=serializers.DictField()),
}))
@api_view(["GET"])
def me(request: Request) -> Response:
    """Who am I: platform roles and tenants with my role in each."""
    return Response({
        "username": request.user.get_username(),
        "email": request.user.email,
        "platform_roles": sorted(platform_roles(request.user)),
        "tenants": [{"slug": t.slug, "name": t.name, "status": t.status, "role": role}
                    for t, role in my_tenants(request.user)],
    })


@login_required
@require_POST
def job_preview_with_cost(request: HttpRequest, slug: str) -> JsonResponse:
    """The job form's live preview (jobs): its verdict carries the cost, GPU, CPU, memory
    and storage for the maximum and the expected run time (``cost``; billing answers
    ``jobs.signals.job_cost_estimate``); ``max_cost`` is that total for the maximum."""
    data, clean = preview_data(request, slug)
    cost = data["preview"].get("cost") if clean is not None else None
    if cost is not None:  # the verdict's cost (jobs.verdict, answered by billing)
        data["preview"]["max_cost"] = cost["max"]["total"] if not cost["unpriced"] else None
        data["preview"]["currency"] = cost["currency"]
    return JsonResponse(data)
