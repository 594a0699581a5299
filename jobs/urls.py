from django.urls import path

from jobs import views

app_name = "jobs"

urlpatterns = [
    path("t/<slug:slug>/jobs/", views.job_list, name="list"),
    path("t/<slug:slug>/jobs/new/", views.job_new, name="new"),
    path("t/<slug:slug>/jobs/preview/", views.job_preview, name="preview"),
    path("t/<slug:slug>/jobs/<int:pk>/", views.job_detail, name="detail"),
    path("t/<slug:slug>/jobs/<int:pk>/logs/", views.job_logs, name="logs"),
    path("t/<slug:slug>/jobs/<int:pk>/<str:action>/", views.job_action, name="action"),
    path("platform/queue/", views.platform_queue, name="platform_queue"),
    path("platform/defrag/", views.defrag, name="defrag"),
    path("platform/defrag/<int:pk>/cancel/", views.defrag_cancel, name="defrag_cancel"),
]
