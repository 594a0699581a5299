from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class K8sSyncConfig(AppConfig):
    name = "k8s_sync"
    verbose_name = _("Cluster sync")
