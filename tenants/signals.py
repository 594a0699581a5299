"""Receivers of the tenants app: a user's first login records their browser's language
as the language of their e-mails (until they pick one in the language menu)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.signals import user_logged_in
from django.dispatch import Signal, receiver
from django.utils.translation import get_language_from_request

from tenants.services.preferences import preference_default_language

# Sent by the dev-volume reclaim (``tasks.reclaim_dev_volumes``) with ``pool=<Pool>``; a
# receiver returns the names of PVCs in that pool's namespace that must not be reclaimed
# although no pod mounts them now (the jobs app: the checkpoint volumes of its queued,
# admitted, running and preempting jobs). A signal, because tenants ranks below jobs.
volumes_held = Signal()

# Sent by ``tenants.kueue.kueue_spec`` (Kueue mode); a receiver returns the holds
# (``k8s_sync.kueue_hold.HoldSpec``) of nodes kept for one job (the jobs app: the open
# maintenance windows with a target job). A signal, because tenants ranks below jobs.
kueue_holds = Signal()


@receiver(user_logged_in, dispatch_uid="tenants.language_at_login")
def language_at_login(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    if request is None:
        return
    preference_default_language(user=user, language=get_language_from_request(request))
