from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Trainyard core"

    def ready(self) -> None:
        # registers the schema's extensions (drf-spectacular finds them by subclassing)
        from core import schema  # noqa: F401
