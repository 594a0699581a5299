"""Reads of the tenants app. Every function is scoped to what the user may see."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import replace
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Count, Prefetch, Q, QuerySet, Sum
from django.http import Http404
from django.utils import timezone

from core.choices import PoolKind
from core.models import Policy, UserPreference
from k8s_sync import manifests, naming
from k8s_sync.placement import set_topology_source
from k8s_sync.placement import topology_levels as levels_in_force
from k8s_sync.selectors import pool_namespaces_observed
from k8s_sync.specs import NetworkSpec, PoolSpec
from tenants.access import AnyUser, TenantAccess, access_for, sees_all_tenants
from tenants.capacity import capacity_by_resource, cluster_observed, offered_resources
from tenants.catalog import Resource
from tenants.choices import LoanStatus, MembershipRole, QuotaMode, RequestStatus, TenantStatus
from tenants.demand import JOB_KINDS, elastic_ceiling, pool_ceiling, quota_limits
from tenants.models import (
    AuditEvent,
    Membership,
    NodeDedication,
    Notification,
    Pool,
    QuotaGrant,
    QuotaLoan,
    QuotaRequest,
    Tenant,
    UsageDaily,
)
from tenants.network import egress_cidrs_for
from tenants.quota import (
    OverCap,
    guaranteed_amount,
    guaranteed_share,
    over_cap,
    overcommit_factor,
    quota_spec_for,
)
from tenants.storage import iops_volume_classes
from tenants.usage import in_use_by_pool, utilisation_by_pool
from tenants.utilisation import Utilisation, is_gpu_kind

User = get_user_model()


def tenants_visible_to(user: AnyUser) -> QuerySet[Tenant]:
    """Tenants ``user`` may see: their own, or all for platform admins and finance."""
    if not user.is_authenticated:
        return Tenant.objects.none()
    qs = Tenant.objects.all()
    if not sees_all_tenants(user):
        qs = qs.filter(memberships__user=user)
    return qs.order_by("slug")


def tenants_listed_to(user: AnyUser) -> QuerySet[Tenant]:
    """The tenants ``user`` is offered (landing page, switcher, /api/v1/me): those visible
    to them but deleted ones, whose invoices stay with billing."""
    return tenants_visible_to(user).exclude(status=TenantStatus.DELETED)


def tenant_access_or_404(user: AnyUser, slug: str) -> TenantAccess:
    """The tenant named ``slug`` with the user's access; 404 when it is not theirs to see."""
    tenant = Tenant.objects.filter(slug=slug).first()
    access = access_for(user, tenant) if tenant is not None else None
    if access is None:
        raise Http404("No such tenant")
    return access


def my_tenants(user: AnyUser) -> list[tuple[Tenant, str | None]]:
    """The user's tenants with their membership role (None for staff-only visibility);
    deleted tenants are gone from here (their invoices stay with billing)."""
    if not user.is_authenticated:
        return []
    roles = dict(Membership.objects.filter(user=user).values_list("tenant_id", "role"))
    tenants = list(tenants_listed_to(user).prefetch_related(
        Prefetch("pools", queryset=Pool.objects.order_by("-kind"))))
    counts = member_counts([t.pk for t in tenants])
    for t in tenants:
        t.member_count = counts.get(t.pk, 0)  # type: ignore[attr-defined]
    return [(t, roles.get(t.pk)) for t in tenants]


def member_counts(tenant_ids: list[int]) -> dict[int, int]:
    """Tenant id -> its members: every Membership row (any role), counted in one query.
    The one count the home card, the tenant overview and the tenants list show. (An
    annotation on a queryset filtered by ``memberships__user`` would count only the
    viewer's own row: the join is shared.)"""
    rows = (Membership.objects.filter(tenant_id__in=tenant_ids).values("tenant_id")
            .annotate(n=Count("id")).values_list("tenant_id", "n"))
    return dict(rows)


def member_count(tenant: Tenant) -> int:
    """:func:`member_counts` of one tenant."""
    return member_counts([tenant.pk]).get(tenant.pk, 0)


def members_of(tenant: Tenant) -> QuerySet[Membership]:
    return Membership.objects.filter(tenant=tenant).select_related("user").order_by(
        "role", "user__username"
    )


def admin_count(tenant: Tenant) -> int:
    return Membership.objects.filter(tenant=tenant, role=MembershipRole.ADMIN).count()


def pools_of(tenant: Tenant) -> QuerySet[Pool]:
    return Pool.objects.filter(tenant=tenant).select_related("tenant").order_by("-kind")


def mark_in_cluster(pools: Iterable[Pool]) -> list[Pool]:
    """Set ``Pool.in_cluster`` (observed: the pool's namespace and quota are in the
    cluster) on every pool of a list in one query, instead of one per pool."""
    pools = list(pools)
    seen = pool_namespaces_observed([p.namespace for p in pools])
    for pool in pools:
        pool.in_cluster = pool.namespace in seen
    return pools


def live_pools() -> QuerySet[Pool]:
    """The pools of tenants not being deleted (or deleted), with their tenant."""
    return Pool.objects.select_related("tenant").exclude(
        tenant__status__in=[TenantStatus.DELETING, TenantStatus.DELETED])


def pools_not_in_cluster() -> list[Pool]:
    """The live pools whose namespace and quota the cluster does not show (observed;
    ``Pool.in_cluster``): admission waits for them."""
    seen = pool_namespaces_observed()
    pools = live_pools().only("id", "kind", "tenant__slug")
    return [p for p in pools if p.namespace not in seen]


def users_search(query: str = "") -> QuerySet:
    """Users for the platform admins' people page, with their platform roles."""
    qs = User.objects.prefetch_related("platform_roles").order_by("username")
    if query:
        qs = qs.filter(
            Q(username__icontains=query) | Q(email__icontains=query)
            | Q(first_name__icontains=query) | Q(last_name__icontains=query)
        )
    return qs


def audit_events(*, tenant: Tenant | None = None, action: str = "") -> QuerySet[AuditEvent]:
    qs = AuditEvent.objects.select_related("actor", "tenant")
    if tenant is not None:
        qs = qs.filter(tenant=tenant)
    if action:
        qs = qs.filter(action=action)
    return qs


def current_grants(pool: Pool) -> dict[str, Decimal]:
    """The pool's current quota: resource key -> amount."""
    return dict(QuotaGrant.objects.filter(pool=pool, superseded_at__isnull=True)
                .values_list("resource", "amount"))


def effective_grants(pool: Pool) -> dict[str, Decimal]:
    """Current grants, minus what the pool lends and plus what it borrows (active loans)."""
    amounts = {pool.pk: current_grants(pool)}
    _apply_loans(amounts, QuotaLoan.objects.filter(status=LoanStatus.ACTIVE).filter(
        Q(lender=pool) | Q(borrower=pool)), only={pool.pk})
    return amounts[pool.pk]


def effective_grants_by_pool() -> dict[int, dict[str, Decimal]]:
    """:func:`effective_grants` of every pool, by pool id, in two queries (the admission
    pass reads them all)."""
    amounts: dict[int, dict[str, Decimal]] = {}
    for pool_id, resource, amount in QuotaGrant.objects.filter(
            superseded_at__isnull=True).values_list("pool_id", "resource", "amount"):
        amounts.setdefault(pool_id, {})[resource] = amount
    _apply_loans(amounts, QuotaLoan.objects.filter(status=LoanStatus.ACTIVE))
    return amounts


def _apply_loans(amounts: dict[int, dict[str, Decimal]], loans: QuerySet[QuotaLoan], *,
                 only: set[int] | None = None) -> None:
    """Take each active loan off its lender's amounts and add it to its borrower's (never
    below zero), for the pools in ``only`` (every pool when None)."""
    for lender_id, borrower_id, resource, amount in loans.values_list(
            "lender_id", "borrower_id", "resource", "amount"):
        for pool_id, sign in ((lender_id, -1), (borrower_id, 1)):
            if only is not None and pool_id not in only:
                continue
            grants = amounts.setdefault(pool_id, {})
            grants[resource] = max(Decimal(0), grants.get(resource, Decimal(0)) + sign * amount)


def grant_history(pool: Pool) -> QuerySet[QuotaGrant]:
    return QuotaGrant.objects.filter(pool=pool).select_related("granted_by").order_by(
        "resource", "-created_at")


def known_storage_classes() -> set[str]:
    """StorageClasses named in settings or in anyone's grants (the cluster's own list is
    added by the sync, which reads it)."""
    granted = QuotaGrant.objects.filter(superseded_at__isnull=True,
                                        resource__startswith="storage:")
    return set(settings.TRAINYARD_STORAGE_CLASSES) | {
        key.partition(":")[2] for key in granted.values_list("resource", flat=True)}


def pool_spec(pool: Pool, *, storage_classes: set[str] | None = None):  # -> PoolSpec
    """The plain spec of the pool's namespace objects."""
    tenant = pool.tenant
    classes = known_storage_classes() if storage_classes is None else storage_classes
    grants = effective_grants(pool)
    return PoolSpec(
        tenant_slug=tenant.slug,
        pool=pool.kind,  # type: ignore[arg-type]
        tenant_group=settings.TRAINYARD_TENANT_GROUP_FORMAT.format(tenant=tenant.slug),
        quota=_quota_spec(tenant, grants, classes),
        production_quota=_production_quota(grants) if pool.kind == PoolKind.PROD else None,
        suspended=tenant.status != TenantStatus.ACTIVE,
        network=NetworkSpec(egress_cidrs=egress_cidrs_for(tenant)),  # policy's + tenant's
    )


def _quota_spec(tenant: Tenant, grants: dict[str, Decimal], classes: set[str]
                ):  # -> QuotaSpec
    capped = _backstop(tenant, grants)
    return quota_spec_for(grants if capped is None else capped, storage_classes=classes,
                          mig_profiles=settings.TRAINYARD_MIG_PROFILES,
                          compute_unlimited=capped is None)


def _production_quota(grants: dict[str, Decimal]):  # -> QuotaSpec
    """What a prod pool's production pods may hold: the grant of every job dimension
    (production never borrows), for a ResourceQuota scoped to the production
    PriorityClass (pod resources only: storage is the unscoped quota's)."""
    spec = quota_spec_for({k: v for k, v in grants.items() if k.partition(":")[0] in JOB_KINDS
                           and k != "gpu-memory"},
                          mig_profiles=settings.TRAINYARD_MIG_PROFILES)
    return replace(spec, storage_gib=None, pvc_count=None, storage_classes=())


def _backstop(tenant: Tenant, amounts: dict[str, Decimal]) -> dict[str, Decimal] | None:
    """The amounts the ResourceQuota must allow: what admission may admit in the pool
    (its development or batch work may borrow, so each job dimension's ceiling,
    ``tenants.demand.pool_ceiling``, under the tenant's borrowing cap). None when the pool's
    borrowing is not capped: then the compute and GPU keys have no hard limit (any idle
    capacity, which the nodes bound) and only storage keeps its grant. Production, which
    never borrows, is held to its grant by admission."""
    factor = tenant.borrowing_factor()
    if factor is None:
        return None
    return {key: elastic_ceiling(key, amount, factor) for key, amount in amounts.items()}


def pool_objects(pool: Pool, *, cluster_storage_classes: dict[str, dict]) -> list[dict]:
    """Every object the pool should have in the cluster, in apply order.

    ``cluster_storage_classes``: the cluster's StorageClasses by name (the caller lists
    them). IOPS grants need the shared VolumeAttributesClasses of their tiers
    (``tenants.storage.iops_volume_classes``), applied before the quotas; the volumes'
    StorageClass stays the granted class, whose GiB the quota keeps. Raises ValueError
    when a granted class does not exist or cannot carry IOPS.
    """
    volume_classes = iops_volume_classes(current_grants(pool), cluster_storage_classes)
    # the pools' own classes (an older Trainyard's per-pool IOPS classes, being pruned) are
    # nobody else's business: the quota names only the cluster's shared classes
    shared = {name for name, obj in cluster_storage_classes.items()
              if naming.LABEL_TENANT not in ((obj.get("metadata") or {}).get("labels") or {})}
    spec = pool_spec(pool, storage_classes=known_storage_classes() | shared)
    objects = manifests.desired_pool_objects(spec)
    first_quota = next(i for i, o in enumerate(objects) if o["kind"] == "ResourceQuota")
    return [*objects[:first_quota], *volume_classes, *objects[first_quota:]]


def pools_to_sync() -> QuerySet[Pool]:
    """Every pool whose tenant still has namespaces (not deleted)."""
    return Pool.objects.select_related("tenant").exclude(tenant__status=TenantStatus.DELETED)


def resource_suggestions() -> list[str]:
    """Resource keys to offer in quota forms: the resources that exist
    (:func:`tenants.capacity.offered_resources`: the plain kinds, the observed GPU models
    and MIG profiles with capacity, the observed StorageClasses). Before any node has been
    observed, the configured MIG profiles and StorageClasses stand in for the cluster."""
    keys = {r.key for r in offered_resources()}
    if not cluster_observed():
        keys |= {f"mig:{p}" for p in settings.TRAINYARD_MIG_PROFILES}
        keys |= {f"storage:{c}" for c in settings.TRAINYARD_STORAGE_CLASSES}
    return sorted(k for k in keys if _parses(k))


def observed_resources() -> list:
    """Catalog resources the observed cluster offers (``tenants.capacity``)."""
    return offered_resources()


def granted_totals() -> dict[str, Decimal]:
    """Resource key -> the sum of the current grants of tenants not deleted."""
    return dict(QuotaGrant.objects.filter(superseded_at__isnull=True)
                .exclude(pool__tenant__status=TenantStatus.DELETED).values_list("resource")
                .annotate(total=Sum("amount")).values_list("resource", "total"))


def default_quota_rows() -> list[dict[str, Any]]:
    """What a new tenant's pools are granted (``Policy.default_quota``, given by
    ``tenants.services.tenancy``): pool kind, key, resource and amount per row, amounts of
    0 left out. Empty: a new tenant can run nothing until a quota is granted."""
    defaults = Policy.current().default_quota or {}
    rows = []
    for kind in PoolKind.values:
        for key, amount in sorted((defaults.get(kind) or {}).items()):
            value = Decimal(str(amount))
            if value > 0:
                rows.append({"pool": PoolKind(kind), "key": key, "amount": value,
                             "resource": Resource.parse(key) if _parses(key) else None})
    return rows


def grants_by_tenant() -> dict[str, dict[str, Decimal]]:
    """Resource key -> {tenant slug: its current grants of it, both pools}; tenants not
    deleted (the grants the overcommit limit counts, ``tenants.services.quota``)."""
    out: dict[str, dict[str, Decimal]] = {}
    rows = (QuotaGrant.objects.filter(superseded_at__isnull=True)
            .exclude(pool__tenant__status=TenantStatus.DELETED)
            .values("resource", "pool__tenant__slug").annotate(total=Sum("amount")))
    for row in rows:
        out.setdefault(row["resource"], {})[row["pool__tenant__slug"]] = row["total"]
    return out


def overcommit_effect(factors: dict[str, Any]) -> list[OverCap]:
    """Which resources and tenants ``factors`` put over the overcommit limit
    (``tenants.quota.over_cap`` on the observed capacity and the current grants)."""
    return over_cap(factors=factors, capacity=capacity_by_resource(),
                    grants=grants_by_tenant())


def catalog() -> list[dict]:
    """Every resource a quota can name (:func:`tenants.capacity.offered_resources`):
    label, unit, capacity, total granted. A key that exists on no node (a GPU model whose
    nodes are gone, or none at all) is not in it; its remaining grants show on the pools'
    pages, where they can be reduced or removed."""
    capacity = capacity_by_resource()
    granted = granted_totals()
    return [{"key": r.key, "kind": str(r.kind), "label": r.label(), "unit": r.unit,
             "capacity": capacity.get(r.key), "granted": granted.get(r.key)}
            for r in offered_resources(capacity)]


def node_dedications() -> dict[str, str]:
    """Node name -> slug of the tenant it is dedicated to (active or suspended tenants)."""
    gone = [TenantStatus.DELETING, TenantStatus.DELETED]
    return dict(NodeDedication.objects.exclude(tenant__status__in=gone)
                .values_list("node_name", "tenant__slug"))


def dedicated_nodes_of(tenant: Tenant) -> QuerySet[NodeDedication]:
    return NodeDedication.objects.filter(tenant=tenant).select_related("created_by")


def deletion_impact(tenant: Tenant) -> dict:
    """What deleting ``tenant`` destroys, for the confirmation page and the API."""
    pools = list(pools_of(tenant))
    return {
        "namespaces": [p.namespace for p in pools],
        "members": members_of(tenant).count(),
        "quota_grants": QuotaGrant.objects.filter(pool__tenant=tenant,
                                                  superseded_at__isnull=True).count(),
        "dedicated_nodes": list(dedicated_nodes_of(tenant).values_list("node_name", flat=True)),
    }


def pool_usage_now(pool: Pool) -> dict[str, Decimal]:
    """What the pool has in use now (``tenants.usage.in_use_by_pool``)."""
    return in_use_by_pool([pool]).get(pool.pk, {})


def daily_peaks(pool: Pool, resource: str, *, days: int = 30) -> list[Decimal]:
    """The pool's daily allocation peaks of ``resource`` over the last ``days`` days."""
    since = timezone.now().date() - dt.timedelta(days=days)
    return list(UsageDaily.objects.filter(pool=pool, resource=resource, day__gt=since)
                .values_list("peak", flat=True))


def pool_utilisation(pool: Pool, *, days: int = 30) -> dict[str, Utilisation]:
    """GPU kind -> the pool's utilisation figures (``tenants.utilisation``) over the last
    ``days`` days, today included, as billing computes them for every page."""
    today = timezone.localdate()
    start = today - dt.timedelta(days=days - 1)
    return utilisation_by_pool([pool], start, today + dt.timedelta(days=1)).get(pool.pk, {})


# --- quota pages ----------------------------------------------------------------------------


def borrowing_terms(tenant: Tenant) -> dict[str, Any]:
    """What the tenant's pools may borrow and on what terms, for its pages: the borrowing
    cap in force (``factor``, None: any idle capacity) and the graces of reclaimed work."""
    policy = Policy.current()
    return {"factor": tenant.borrowing_factor(policy),
            "dev_grace": int(policy.development_grace_seconds),
            "batch_grace": int(policy.batch_grace_seconds)}


def quota_overview(tenant: Tenant) -> list[dict]:
    """Per pool: each resource's grant, effective amount (loans), in use now
    (``tenants.usage.in_use_by_pool``, the one definition), what development and batch
    work may hold borrowing idle capacity (``ceiling``, ``tenants.demand.pool_ceiling``;
    None: any idle capacity), whether the quota limits it at all (``limited``,
    ``tenants.demand.quota_limits``: False for GPU memory a pool was not granted), and
    for overcommitted-mode tenants the guaranteed part and the reclaim risk."""
    pools = list(pools_of(tenant))
    factor = tenant.borrowing_factor()
    usage = in_use_by_pool(pools)
    guarantees = guaranteed_shares() if tenant.quota_mode == QuotaMode.OVERCOMMITTED else {}
    out = []
    for pool in pools:
        granted, effective = current_grants(pool), effective_grants(pool)
        used = usage.get(pool.pk, {})
        rows = []
        for key in sorted(set(granted) | set(effective) | set(used)):
            share = guarantees.get(key)
            amount = effective.get(key, Decimal(0))
            limited = quota_limits(key, key in granted or key in effective)
            rows.append({
                "resource": Resource.parse(key) if _parses(key) else None, "key": key,
                "granted": granted.get(key, Decimal(0)), "effective": amount,
                "used": used.get(key, Decimal(0)),
                "guaranteed": guaranteed_amount(key, amount, share) if share is not None
                else None,
                "reclaim_risk": (1 - share) if share is not None else None,
                "ceiling": pool_ceiling(key, amount, factor) if limited else None,
                "limited": limited,   # False: no quota set, use is shown, not limited
            })
        out.append({"pool": pool, "rows": rows})
    return out


def _parses(key: str) -> bool:
    try:
        Resource.parse(key)
    except ValueError:
        return False
    return True


def guaranteed_shares(report=None) -> dict[str, Decimal]:  # type: ignore[no-untyped-def]
    """Resource key -> guaranteed share of overcommitted-mode quotas (see quota.py); the
    quota pages and admission (``jobs.selectors.admission_inputs``) read the same.
    ``report``: the capacity report, when the caller has read it already."""
    capacity = capacity_by_resource(report)
    totals: dict[tuple[str, bool], Decimal] = {}
    rows = (QuotaGrant.objects.filter(superseded_at__isnull=True)
            .exclude(pool__tenant__status=TenantStatus.DELETED)
            .values("resource", "pool__tenant__quota_mode").annotate(total=Sum("amount")))
    for row in rows:
        over = row["pool__tenant__quota_mode"] == QuotaMode.OVERCOMMITTED
        totals[(row["resource"], over)] = row["total"]
    return {key: guaranteed_share(capacity=capacity.get(key),
                                  granted_static=totals.get((key, False), Decimal(0)),
                                  granted_overcommitted=totals.get((key, True), Decimal(0)))
            for key, _over in totals}


def quota_requests_of(tenant: Tenant) -> QuerySet:
    return (QuotaRequest.objects.filter(tenant=tenant)
            .select_related("pool", "requested_by", "decided_by").prefetch_related("items"))


def pending_quota_requests(status: str = RequestStatus.PENDING) -> QuerySet:
    qs = QuotaRequest.objects.select_related("tenant", "pool", "requested_by",
                                             "decided_by").prefetch_related("items")
    return qs.filter(status=status) if status else qs


def request_facts(request) -> list[dict]:  # type: ignore[no-untyped-def]
    """What an admin needs to decide each item: quota and use now, 30-day peak, the
    utilisation figures of the last 30 days (quota held, allocated, busy, quota use, idle
    rate), capacity, total granted, and the overcommit ratio before and after."""
    capacity = capacity_by_resource()
    usage = pool_usage_now(request.pool)
    factors = Policy.current().overcommit_factors
    figures = pool_utilisation(request.pool)
    facts = []
    for item in request.items.all():
        key = item.resource
        total = (QuotaGrant.objects.filter(resource=key, superseded_at__isnull=True)
                 .exclude(pool__tenant__status=TenantStatus.DELETED)
                 .aggregate(t=Sum("amount"))["t"]) or Decimal(0)
        grants = current_grants(request.pool)
        current = grants.get(key, Decimal(0))
        cap = capacity.get(key)
        after = total - current + item.requested_amount
        peaks = daily_peaks(request.pool, key)
        facts.append({
            "item": item, "current": current, "used": usage.get(key, Decimal(0)),
            # False: the pool's use of it is not limited now (GPU memory not granted)
            "limited": quota_limits(key, key in grants),
            "peak_30d": max(peaks) if peaks else None,
            # the utilisation figures of this GPU kind over the same 30 days (None: not a
            # GPU kind, or nothing held nor allocated)
            "utilisation": figures.get(key) if is_gpu_kind(key) else None,
            "capacity": cap, "total_granted": total, "total_after": after,
            "ratio_now": (total / cap) if cap else None,
            "ratio_after": (after / cap) if cap else None,
            "factor": overcommit_factor(key, factors),
        })
    return facts


def unread_notifications(user) -> QuerySet:  # type: ignore[no-untyped-def]
    return Notification.objects.filter(user=user, read_at__isnull=True)


def loans_of(tenant: Tenant) -> QuerySet:
    return (QuotaLoan.objects.filter(Q(lender__tenant=tenant) | Q(borrower__tenant=tenant))
            .select_related("lender__tenant", "borrower__tenant").order_by("-created_at"))


# --- preferences ------------------------------------------------------------------------------


def languages_of(users: list[AnyUser]) -> dict[int, str]:
    """Each user's preferred language (their e-mails are written in it); users without a
    preference are left out (the caller falls back to ``settings.LANGUAGE_CODE``)."""
    ids = [u.pk for u in users if u is not None and u.pk is not None]
    return dict(UserPreference.objects.filter(user_id__in=ids).values_list("user_id",
                                                                            "language"))


def language_of(user: AnyUser) -> str:
    return languages_of([user]).get(user.pk, settings.LANGUAGE_CODE)


def topology_levels() -> tuple[str, ...]:
    """The node-label keys of the network topology in force, widest first: the policy's,
    or ``k8s_sync.placement.DEFAULT_TOPOLOGY_LEVELS`` when it names none."""
    return levels_in_force(Policy.current().topology_levels)


def register_topology_source() -> None:
    """Make the policy's levels the ones k8s_sync's readers use (capacity, switches)."""
    set_topology_source(lambda: Policy.current().topology_levels)


def loan_borrowers(lender: Tenant) -> list[tuple[str, str]]:
    """Who ``lender`` may offer quota to: every other active tenant, as (slug, name) by
    name (the loan form's select)."""
    return list(Tenant.objects.filter(status=TenantStatus.ACTIVE).exclude(pk=lender.pk)
                .order_by("name", "slug").values_list("slug", "name"))
