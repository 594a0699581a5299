from django.urls import include, path
from rest_framework.routers import SimpleRouter

from jobs.api import views

router = SimpleRouter()
router.register("jobs", views.PlatformJobViewSet, basename="platform-job")
tenant_router = SimpleRouter()
tenant_router.register("jobs", views.JobViewSet, basename="tenant-job")

urlpatterns = [
    *router.urls,
    path("tenants/<slug:tenant_slug>/", include(tenant_router.urls)),
]
