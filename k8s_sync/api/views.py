"""Read-only cluster endpoints. Thin: one selector, one serializer.

The capacity inventory is for every authenticated user (it names nodes and models,
nothing of any tenant). The health endpoint is for platform admins and therefore lives
in ``portal/cluster_views.py`` (k8s_sync does not know who is a platform admin).
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from k8s_sync.api.serializers import CapacitySerializer
from k8s_sync.selectors import capacity_report


@extend_schema(responses=CapacitySerializer)
@api_view(["GET"])
def capacity(request: Request) -> Response:
    """GPU capacity per model and per node: whole cards, MIG instances, shared GPUs,
    allocatable versus allocated, GPU memory (from the observed cluster)."""
    return Response(CapacitySerializer(capacity_report()).data)
