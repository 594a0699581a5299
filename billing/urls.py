from django.urls import path

from billing import views

app_name = "billing"

urlpatterns = [
    path("t/<slug:slug>/invoices/", views.tenant_invoices, name="tenant_invoices"),
    path("t/<slug:slug>/invoices/budget/", views.budget, name="budget"),
    path("t/<slug:slug>/invoices/<int:pk>/", views.invoice_detail, name="invoice"),
    path("t/<slug:slug>/invoices/<int:pk>/credit/", views.credit_note, name="credit_note"),
    path("t/<slug:slug>/invoices/<int:pk>.<str:fmt>", views.invoice_download, name="download"),
    path("billing/", views.finance_month, name="month"),
    path("billing/close/", views.month_close, name="close"),
    path("billing/adjustments/", views.adjustment, name="adjustment"),
    path("billing/months/<str:month>.<str:fmt>", views.month_download, name="month_download"),
    path("billing/rates/", views.rate_card, name="rates"),
]
