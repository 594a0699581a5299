from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class TenantsConfig(AppConfig):
    name = "tenants"
    verbose_name = _("Tenants")

    def ready(self) -> None:
        from tenants import signals, texts  # noqa: F401  (registers codes and receivers)
        from tenants.selectors import register_topology_source

        register_topology_source()
