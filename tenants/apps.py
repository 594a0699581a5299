from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class TenantsConfig(AppConfig):
    name = "tenants"
    verbose_name = _("Tenants")

    def ready(self) -> None:
        # texts and signals register codes and receivers; tasks registers the Celery tasks
        # in every process, so the services find them by name (tenants.services._common).
        from tenants import signals, tasks, texts  # noqa: F401
        from tenants.selectors import register_topology_source

        register_topology_source()
