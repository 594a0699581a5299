"""The tenant dashboard, the cluster page, and their compact JSON endpoints.

Thin: check access, call the widgets of :mod:`portal.dashboards`, render or serialise.
Tenant pages use ``tenant_access_or_404`` (outsiders 404, anonymous to the login page);
the cluster page is for every signed-in user, its per-tenant and abnormal-job parts for
platform admins only. The pages render every number server-side (readable without
JavaScript); static/js/dashboard.js draws the Plotly figures and polls the JSON
endpoints with an adaptive interval.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.serializers.json import DjangoJSONEncoder
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from core.exceptions import ApplicationError
from core.texts import message
from core.when import eta_text
from jobs.models import TrainingJob
from jobs.services import job_cancel, job_hold
from portal import charts, cluster_figures, dashboards
from portal.reversing import slug_url
from tenants.access import access_for, is_platform_admin
from tenants.selectors import tenant_access_or_404

TREND_DAYS = (7, 30)


def _json(request: HttpRequest, payload: dict[str, Any]) -> HttpResponse:
    """JSON with an ETag of its content (the poller slows down while nothing changes)."""
    body = json.dumps(payload, cls=DjangoJSONEncoder, separators=(",", ":"))
    etag = '"' + hashlib.blake2b(body.encode(), digest_size=12).hexdigest() + '"'
    if request.headers.get("If-None-Match") == etag:
        response = HttpResponse(status=304)
    else:
        response = HttpResponse(body, content_type="application/json")
    response["ETag"] = etag
    response["Cache-Control"] = "private, no-cache"
    return response


# --- tenant dashboard ------------------------------------------------------------------------


def _live(tenant: Any, user: Any) -> dict[str, Any]:
    """The parts that change minute to minute (also the JSON endpoint's payload)."""
    busy = cluster_figures.busyness()
    return {
        "gauges": [g.as_json() for g in dashboards.tenant_gauges(tenant)],
        "waiting": [{**w, "eta_p50": w["eta_p50"], "eta_p90": w["eta_p90"],
                     "eta_p50_text": eta_text(w["eta_p50"]),
                     "eta_p90_text": eta_text(w["eta_p90"])}
                    for w in dashboards.waiting_jobs(tenant, user)],
        "busyness": [b.as_json() for b in busy],
    }


@login_required
@require_GET
def tenant_dashboard(request: HttpRequest, slug: str) -> HttpResponse:
    access = tenant_access_or_404(request.user, slug)
    tenant = access.tenant
    now = timezone.now()
    gauges = dashboards.tenant_gauges(tenant)
    waits = [m for _model, m in dashboards.wait_times(tenant=tenant, now=now)]
    jobs, has_cost = dashboards.job_consumption(tenant)
    busy = cluster_figures.busyness()
    trends = {days: dashboards.tenant_trends(tenant, days=days) for days in TREND_DAYS}
    return render(request, "portal/dashboard.html", {
        "access": access, "tenant": tenant, "gauges": gauges, "jobs": jobs,
        "has_cost": has_cost, "waiting": dashboards.waiting_jobs(tenant, request.user),
        "busyness": busy, "trends": trends, "trend_days": TREND_DAYS,
        "wait_count": len(waits), "utilisation": dashboards.tenant_utilisation(tenant),
        "wait_median": dashboards.humanize_minutes(sorted(waits)[len(waits) // 2])
        if waits else None,
        "figures": {
            "gauges": [g.figure() for g in gauges],
            "waits": charts.histogram(_("Recent wait times"), waits, unit=_("minutes")),
            "trends": {str(d): [t["figure"] for t in rows] for d, rows in trends.items()},
        },
    })


@login_required
@require_GET
def tenant_dashboard_data(request: HttpRequest, slug: str) -> HttpResponse:
    """Gauges, my waiting jobs and the busyness banner, for the live page."""
    access = tenant_access_or_404(request.user, slug)
    return _json(request, _live(access.tenant, request.user))


@login_required
@require_GET
def tenant_dashboard_trends(request: HttpRequest, slug: str) -> HttpResponse:
    """Trend figures for ``?days=7`` (hourly rows) or ``?days=30`` (daily rows)."""
    access = tenant_access_or_404(request.user, slug)
    try:
        days = int(request.GET.get("days", "7"))
    except ValueError:
        days = 7
    days = days if days in TREND_DAYS else 7
    return _json(request, {"days": days,
                           "trends": dashboards.tenant_trends(access.tenant, days=days)})


# --- cluster page -----------------------------------------------------------------------------


@login_required
@require_GET
def cluster_page(request: HttpRequest) -> HttpResponse:
    """Every allocation and capacity figure from one report (``cluster_figures``), shown
    with its one "as of" time."""
    report = cluster_figures.cluster_capacity()
    admin = is_platform_admin(request.user)
    busy = cluster_figures.busyness(report=report)
    heatmaps = dashboards.allocation_by_hour(report=report)
    tenants: dict[str, Any] = {}
    if admin:
        dashboard_url = slug_url("tenant_dashboard")  # one reverse for every row
        tenants = cluster_figures.tenant_allocation(report=report)
        tenants["rows"] = [{**t, "url": dashboard_url(t["tenant"])} for t in tenants["rows"]]
    return render(request, "portal/cluster_overview.html", {
        "report": report, "busyness": busy, "heatmaps": heatmaps, "platform_admin": admin,
        "watermark": cluster_figures.watermark_use(report=report),
        "tenants": tenants,
        "abnormal": dashboards.abnormal_jobs() if admin else [],
        "figures": {"heatmaps": [h["figure"] for h in heatmaps]},
    })


@login_required
@require_GET
def cluster_data(request: HttpRequest) -> HttpResponse:
    """Busyness per GPU model (and per-tenant allocation for platform admins), from one
    report."""
    report = cluster_figures.cluster_capacity()
    payload: dict[str, Any] = {
        "busyness": [b.as_json() for b in cluster_figures.busyness(report=report)],
        "observed_at": report.observed_at.isoformat() if report.observed_at else None}
    if is_platform_admin(request.user):
        allocation = cluster_figures.tenant_allocation(report=report)
        payload["tenants"] = allocation["rows"]
        payload["tenant_totals"] = {"other": allocation["other"], "total": allocation["total"]}
    return _json(request, payload)


@login_required
@require_POST
def abnormal_job_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    """One-click cancel or hold of an abnormal job (platform admins; 404 for others)."""
    if not is_platform_admin(request.user) or action not in ("cancel", "hold"):
        raise Http404
    job = get_object_or_404(TrainingJob.objects.select_related("tenant", "pool"), pk=pk)
    reason: Any = (request.POST.get("reason") or "").strip()
    if not reason:   # the system's reason, stored as a text each reader sees in their language
        reason = next((a["hold_reason"] for a in dashboards.abnormal_jobs()
                       if a["job"].pk == job.pk), None) or message("jobs.hold.abnormal")
    try:
        if action == "cancel":
            access = access_for(request.user, job.tenant)
            if access is None:
                raise Http404
            job_cancel(access=access, actor=request.user, job=job)
            messages.success(request, _("Job %(n)s was cancelled.") % {"n": job.name})
        else:
            job_hold(actor=request.user, job=job, held=True, reason=reason)
            messages.success(request, _("Job %(n)s is on hold.") % {"n": job.name})
    except ApplicationError as exc:
        messages.error(request, str(exc))
    return redirect("cluster")
