from django.urls import path

from tenants import views, views_quota

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
    path("t/<slug:slug>/quota/", views_quota.quota_page, name="quota"),
    path("t/<slug:slug>/quota/requests/<int:pk>/cancel/", views_quota.quota_request_cancel,
         name="quota_request_cancel"),
    path("t/<slug:slug>/quota/settings/", views_quota.tenant_settings, name="quota_settings"),
    path("t/<slug:slug>/loans/", views_quota.loan_offer, name="loan_offer"),
    path("t/<slug:slug>/loans/<int:pk>/<str:action>/", views_quota.loan_action,
         name="loan_action"),
    path("platform/quota-requests/", views_quota.request_queue, name="request_queue"),
    path("platform/quota-requests/<int:pk>/", views_quota.request_detail, name="request_detail"),
    path("platform/policy/", views_quota.policy_page, name="policy"),
    path("notifications/", views_quota.notifications, name="notifications"),
    path("catalog/", views_quota.catalog_page, name="catalog"),
    path("platform/tenants/", views.platform_tenants, name="platform_tenants"),
    path("platform/people/", views.people, name="people"),
    path("platform/people/<int:user_id>/roles/", views.people_role, name="people_role"),
    path("platform/audit/", views.audit_log, name="audit"),
]
