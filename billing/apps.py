from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class BillingConfig(AppConfig):
    name = "billing"
    verbose_name = _("Billing")

    def ready(self) -> None:
        # texts registers the codes; receivers answers the utilisation figures the
        # tenants pages need (tenants.usage.pools_utilisation)
        from billing import receivers, texts  # noqa: F401
