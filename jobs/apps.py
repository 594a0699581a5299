from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = _("Jobs")

    def ready(self) -> None:
        # texts registers the jobs app's stored-text codes; volumes keeps active jobs'
        # checkpoint volumes from the dev-volume reclaim (tenants.signals.volumes_held);
        # receivers kicks an admission cycle when the watcher records a change of jobs'
        # PyTorchJobs or pods (k8s_sync.signals.observed_changed); usage answers the
        # quota pages' "in use" (tenants.usage.pools_in_use); tasks registers the jobs
        # app's Celery tasks in every process, so jobs.enqueue finds them by name (with
        # their queues) wherever it runs; window_kueue declares maintenance windows' holds
        # to the Kueue converge (tenants.signals.kueue_holds).
        from jobs import receivers, tasks, texts, usage, volumes, window_kueue  # noqa: F401
