from django.urls import include, path
from rest_framework.routers import SimpleRouter

from tenants.api import quota_views, views

router = SimpleRouter()
router.register("tenants", views.TenantViewSet, basename="tenant")
router.register("quota-requests", quota_views.PlatformQuotaRequestViewSet,
                basename="quota-request")
router.register("notifications", quota_views.NotificationViewSet, basename="notification")

tenant_router = SimpleRouter()
tenant_router.register("members", views.MembershipViewSet, basename="tenant-member")
tenant_router.register("pools", views.PoolViewSet, basename="tenant-pool")
tenant_router.register("quota-requests", quota_views.QuotaRequestViewSet,
                       basename="tenant-quota-request")
tenant_router.register("loans", quota_views.LoanViewSet, basename="tenant-loan")
tenant_router.register("dedicated-nodes", views.DedicatedNodeViewSet,
                       basename="tenant-dedicated-node")

urlpatterns = [
    *router.urls,
    path("policy/", quota_views.PolicyView.as_view(), name="policy"),
    path("catalog/", quota_views.CatalogView.as_view(), name="catalog"),
    path("tenants/<slug:tenant_slug>/quota/", quota_views.QuotaOverviewView.as_view(),
         name="tenant-quota"),
    path("tenants/<slug:tenant_slug>/", include(tenant_router.urls)),
]
