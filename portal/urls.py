"""URL root: pages, the REST API under /api/v1/, its schema and docs."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.i18n import JavaScriptCatalog
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from portal import cluster_views, dashboard_views, metrics_views, views
from tenants.views import set_language

api_v1 = [
    path("me/", views.me, name="api-me"),
    path("", include("tenants.api.urls")),
    path("", include("jobs.api.urls")),
    path("", include("billing.api.urls")),
    path("cluster/", include("k8s_sync.api.urls")),
    path("cluster/health/", cluster_views.health_api, name="api-cluster-health"),
]

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # password reset by e-mail and password change (Django's views, Trainyard's templates)
    path("password/reset/", auth_views.PasswordResetView.as_view(), name="password_reset"),
    path("password/reset/sent/", auth_views.PasswordResetDoneView.as_view(),
         name="password_reset_done"),
    path("password/reset/<uidb64>/<token>/", auth_views.PasswordResetConfirmView.as_view(),
         name="password_reset_confirm"),
    path("password/reset/done/", auth_views.PasswordResetCompleteView.as_view(),
         name="password_reset_complete"),
    path("password/change/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path("password/change/done/", auth_views.PasswordChangeDoneView.as_view(),
         name="password_change_done"),
    path("account/", views.account, name="account"),
    path("account/token/", views.account_token, name="account_token"),
    path("healthz", views.healthz, name="healthz"),
    # before Django's own: the switcher also remembers a signed-in user's e-mail language
    path("i18n/setlang/", set_language, name="set_language"),
    path("i18n/", include("django.conf.urls.i18n")),
    path("jsi18n/", JavaScriptCatalog.as_view(), name="javascript-catalog"),
    path("t/<slug:slug>/dashboard/", dashboard_views.tenant_dashboard, name="tenant_dashboard"),
    path("t/<slug:slug>/dashboard/data.json", dashboard_views.tenant_dashboard_data,
         name="tenant_dashboard_data"),
    path("t/<slug:slug>/dashboard/trends.json", dashboard_views.tenant_dashboard_trends,
         name="tenant_dashboard_trends"),
    path("cluster/", dashboard_views.cluster_page, name="cluster"),
    path("cluster/data.json", dashboard_views.cluster_data, name="cluster_data"),
    path("cluster/jobs/<int:pk>/<str:action>/", dashboard_views.abnormal_job_action,
         name="abnormal_job_action"),
    path("metrics", metrics_views.metrics, name="metrics"),
    path("", include("tenants.urls")),
    path("t/<slug:slug>/jobs/preview/", views.job_preview_with_cost, name="job_preview"),
    path("", include("jobs.urls")),
    path("", include("billing.urls")),
    path("platform/capacity/", cluster_views.capacity, name="platform_capacity"),
    path("platform/cluster/", cluster_views.cluster, name="platform_cluster"),
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # GET only: its HTML renderer has no template for an OPTIONS answer (a 500)
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema",
                                                          http_method_names=["get", "head"]),
         name="api-docs"),
    path("admin/", admin.site.urls),
]

admin.site.site_header = "Trainyard"
