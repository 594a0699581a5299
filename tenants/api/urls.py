from django.urls import include, path
from rest_framework.routers import SimpleRouter

from tenants.api import views

router = SimpleRouter()
router.register("tenants", views.TenantViewSet, basename="tenant")

tenant_router = SimpleRouter()
tenant_router.register("members", views.MembershipViewSet, basename="tenant-member")
tenant_router.register("pools", views.PoolViewSet, basename="tenant-pool")
tenant_router.register("dedicated-nodes", views.DedicatedNodeViewSet,
                       basename="tenant-dedicated-node")

urlpatterns = [
    *router.urls,
    path("tenants/<slug:tenant_slug>/", include(tenant_router.urls)),
]
