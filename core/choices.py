"""Enumerations more than one app needs, defined once at the ground floor.

``Tier`` is stored in rows (``jobs.TrainingJob.tier``), named in Kubernetes
(``k8s_sync.naming.priority_class_name``, the tier label), ruled by the policy
(``tenants.tiers``) and ordered by admission (``jobs.admission.TIER_RANK``), so it lives
here, below all of them. ``PoolKind`` likewise: a tenant's two pools (``tenants.Pool.kind``)
are named in Kubernetes (``k8s_sync.naming``: ``ty-<tenant>-<pool>``) and chosen per job.
"""

from django.db import models
from django.utils.translation import gettext_lazy as _


class Tier(models.TextChoices):
    """The scheduling tiers, highest precedence first (admission ranks them in this
    order). Values are stable identifiers (stored in rows, used in Kubernetes names)."""

    PRODUCTION = "production", _("Production")
    DEVELOPMENT = "development", _("Development")
    BATCH = "batch", _("Batch")


#: A new policy's preemption grace per tier, in seconds (``core.models.Policy`` fields;
#: the admission engine's defaults): production is never preempted, development gets the
#: five minutes it is promised, batch half a minute.
DEFAULT_GRACE_SECONDS: dict[str, int] = {Tier.PRODUCTION: 0, Tier.DEVELOPMENT: 300, Tier.BATCH: 30}


class PoolKind(models.TextChoices):
    """A tenant's two pools, each its own namespace and quota."""

    PROD = "prod", _("Production")
    DEV = "dev", _("Development")
