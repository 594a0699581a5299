"""The Celery application.

Tasks are autodiscovered from every installed app's ``tasks.py``; each task declares
an explicit ``name=`` and ``queue=`` (see ``portal.tasks`` for the convention). The
one periodic schedule lives in ``portal/schedules.py``.
"""

from __future__ import annotations

import os

from celery import Celery

from portal.schedules import BEAT_SCHEDULE

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("trainyard")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_finalize.connect
def _install_beat_schedule(sender: Celery, **_: object) -> None:
    sender.conf.beat_schedule = BEAT_SCHEDULE
