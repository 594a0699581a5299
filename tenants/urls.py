from django.urls import path

from tenants import views

app_name = "tenants"

urlpatterns = [
    path("t/<slug:slug>/", views.tenant_detail, name="detail"),
    path("t/<slug:slug>/pools/<str:kind>/", views.pool_detail, name="pool"),
    path("t/<slug:slug>/pools/<str:kind>/sync/", views.pool_sync, name="pool_sync"),
    path("t/<slug:slug>/members/", views.members, name="members"),
    path("t/<slug:slug>/dedicated-nodes/", views.dedicated_nodes, name="dedicated_nodes"),
    path("t/<slug:slug>/members/<int:pk>/", views.member_change, name="member_change"),
    path("t/<slug:slug>/edit/", views.tenant_edit, name="edit"),
    path("t/<slug:slug>/status/", views.tenant_status, name="status"),
    path("t/<slug:slug>/delete/", views.tenant_delete, name="delete"),
    path("platform/tenants/", views.platform_tenants, name="platform_tenants"),
    path("platform/people/", views.people, name="people"),
    path("platform/people/<int:user_id>/roles/", views.people_role, name="people_role"),
    path("platform/audit/", views.audit_log, name="audit"),
]
