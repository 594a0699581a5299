from django.urls import path

from k8s_sync.api import views

urlpatterns = [
    path("capacity/", views.capacity, name="api-cluster-capacity"),
]
