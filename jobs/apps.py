from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = _("Jobs")

    def ready(self) -> None:
        from jobs import texts  # noqa: F401  (registers the jobs app's stored-text codes)
        from jobs import volumes  # noqa: F401  (keeps active jobs' checkpoint volumes)
