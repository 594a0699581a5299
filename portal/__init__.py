"""Trainyard: the Django project (settings, URL root, Celery app, API base classes)."""

from portal.celery import app as celery_app

__all__ = ["celery_app"]
