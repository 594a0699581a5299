"""Platform-admin pages about the cluster (capacity, health) and the health API.

They compose k8s_sync (the observed cluster) with tenants' access rules, which is why
they live in portal/: k8s_sync does not know who is a platform admin. Thin: check
access, call one selector, render. Everyone else gets 404 (the pages do not exist for
them), like the other platform pages.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from k8s_sync.api.serializers import HealthSerializer
from k8s_sync.health import cluster_health
from portal import cluster_figures, waste, watchdog
from tenants.access import is_platform_admin, platform_admin_or_404


@require_safe
@login_required
def capacity(request: HttpRequest) -> HttpResponse:
    """GPU capacity per model, then per node (from the observed cluster)."""
    platform_admin_or_404(request.user)
    report = cluster_figures.cluster_capacity()  # the cluster page's report
    return render(request, "portal/capacity.html", {
        "report": report, "resources": cluster_figures.resource_rows(report=report)})


@require_safe
@login_required
def cluster(request: HttpRequest) -> HttpResponse:
    """Is the API reachable, its version, the training operator, what the watcher saw,
    what the progress watchdog retried or flagged, and GPU-hours idle while work that
    fits them waited (the last 24 hours)."""
    platform_admin_or_404(request.user)
    idle = waste.idle_while_waiting_day()
    return render(request, "portal/cluster.html", {
        "health": cluster_health(), "watchdog": watchdog.report(), "idle": idle,
        "figures": {"idle": idle["figure"]}})


@extend_schema(responses=HealthSerializer)
@api_view(["GET"])
def health_api(request: Request) -> Response:
    """Cluster health for platform admins (404 for everyone else); cached ~15 s."""
    if not is_platform_admin(request.user):
        raise NotFound
    return Response(HealthSerializer(cluster_health()).data)
