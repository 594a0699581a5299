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



class EgressClass(models.TextChoices):
    """Where a pod's traffic went, as the network metrics tell it apart (OpenCost's
    network-costs daemonset: ``internet``, ``sameRegion``, ``sameZone``). ``k8s_sync.metrics``
    classifies the counters, ``billing`` stores and prices them: the internet and the
    other zones and regions have a price per GiB on the rate card, traffic within the zone
    (a job's own pod-to-pod traffic, NCCL all-reduce) is free. ``UNCLASSIFIED`` is every
    byte a pod sent, from a source that cannot tell destinations apart (cAdvisor's
    ``container_network_transmit_bytes_total``); it is priced as the internet."""

    INTERNET = "internet", _("to the internet")
    CROSS_REGION = "cross_region", _("to other regions")
    CROSS_ZONE = "cross_zone", _("to other zones")
    IN_CLUSTER = "in_cluster", _("within the zone (in the cluster, free)")
    UNCLASSIFIED = "unclassified", _("all traffic sent (destination unknown)")
