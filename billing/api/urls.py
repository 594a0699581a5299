from django.urls import include, path
from rest_framework.routers import SimpleRouter

from billing.api import views

router = SimpleRouter()
router.register("billing/invoices", views.FinanceInvoiceViewSet, basename="billing-invoice")
router.register("billing/rate-cards", views.RateCardViewSet, basename="billing-rate-card")
tenant_router = SimpleRouter()
tenant_router.register("invoices", views.InvoiceViewSet, basename="tenant-invoice")

urlpatterns = [
    *router.urls,
    path("billing/months/<str:month>/", views.month_detail, name="billing-month"),
    path("billing/months/<str:month>/close/", views.month_close, name="billing-month-close"),
    path("tenants/<slug:tenant_slug>/", include(tenant_router.urls)),
]
