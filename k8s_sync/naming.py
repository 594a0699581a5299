"""Names and labels of everything Trainyard writes into Kubernetes.

Contracts (tested in ``k8s_sync/tests/test_naming.py``):

* **Valid.** Every name returned here is a valid DNS-1123 label (<= 63 chars of
  ``[a-z0-9-]``, starting and ending alphanumeric); job names are also DNS-1035
  labels (they start with a letter), as the PyTorchJob webhook requires. Every label
  value is a valid Kubernetes label value.
* **Stable.** A name depends only on its inputs: no randomness, no clock, no
  settings, so every resync computes the same name.
* **Collision-free.** An input that is already a valid name is used verbatim.
  Anything that must be changed (too long, invalid characters) is sanitised,
  truncated and suffixed with ``-`` plus the first 8 hex digits of the SHA-256 of
  the *original* input, so two different inputs keep different names.
* **Readable.** ``ty-<tenant>-<pool>`` for namespaces; a tenant slug of up to 40
  characters of ``[a-z0-9-]`` never needs a hash.

This module is pure: it imports nothing from the domain apps or the ``kubernetes``
package; only ``core.choices.Tier`` (a Django ``TextChoices``) from the ground floor.
"""

from __future__ import annotations

import hashlib
import re

from core.choices import PoolKind, Tier  # defined once (core/choices.py)

__all__ = [
    "DNS1123_LABEL_MAX",
    "LABEL_JOB",
    "LABEL_MANAGED_BY",
    "LABEL_POOL",
    "LABEL_SUSPENDED",
    "LABEL_TENANT",
    "LABEL_TIER",
    "LIMIT_RANGE_NAME",
    "MANAGED_BY",
    "NAMESPACE_PREFIX",
    "NETWORK_POLICY_NAME",
    "POOLS",
    "PRODUCTION_QUOTA_NAME",
    "RESOURCE_QUOTA_NAME",
    "ROLE_BINDING_NAME",
    "ROLE_NAME",
    "SERVICE_ACCOUNT_NAME",
    "Tier",
    "dns_label",
    "is_dns1035_label",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_label_value",
    "job_labels",
    "job_name",
    "label_selector",
    "label_value",
    "managed_labels",
    "namespace_name",
    "pool_labels",
    "priority_class_name",
    "validate_pool",
]

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
LABEL_VALUE_MAX = 63
HASH_LENGTH = 8

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

# --- labels ------------------------------------------------------------------------------

LABEL_TENANT = "trainyard.io/tenant"
LABEL_POOL = "trainyard.io/pool"
LABEL_JOB = "trainyard.io/job"
LABEL_TIER = "trainyard.io/tier"
LABEL_SUSPENDED = "trainyard.io/suspended"
# The well-known recommended label (kubernetes.io/docs/concepts/overview/working-with-objects/
# common-labels); tools such as kubectl/Helm/Argo understand it, so no private variant.
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "trainyard"

# --- fixed object names inside a pool namespace --------------------------------------------

NAMESPACE_PREFIX = "ty-"
POOLS: tuple[str, ...] = tuple(PoolKind.values)

#: ServiceAccount the job pods run as. It is bound to nothing and does not automount a token.
SERVICE_ACCOUNT_NAME = "trainyard-workload"
#: Role granted to the tenant's group (read-only, see manifests.build_role).
ROLE_NAME = "trainyard-researcher"
#: RoleBinding name == Role name on purpose: ``roleRef`` is immutable, so a binding to a
#: different role must be a different object (the old one is then removed with
#: ``ensure_absent``). Never rebind an existing name to another role.
ROLE_BINDING_NAME = ROLE_NAME
NETWORK_POLICY_NAME = "trainyard-isolation"
LIMIT_RANGE_NAME = "trainyard-defaults"
RESOURCE_QUOTA_NAME = "trainyard-quota"
PRODUCTION_QUOTA_NAME = "trainyard-production-quota"
"""A prod pool's second ResourceQuota, scoped to the production PriorityClass: production
never borrows, so its pods are held to the grant while the pool's batch pods may borrow."""

PRIORITY_CLASS_PREFIX = "trainyard-"
JOB_NAME_PREFIX = "tj-"
#: PyTorchJob pods are ``<job>-worker-<index>`` and each gets a headless Service of the same
#: name, which must be a <= 63 char DNS-1035 label; 40 leaves room for "-worker-" + 6 digits.
JOB_NAME_MAX = 40


# --- validators ----------------------------------------------------------------------------


def is_dns1123_label(value: str) -> bool:
    """True if ``value`` is an RFC 1123 label as Kubernetes validates it (names of most kinds)."""
    return len(value) <= DNS1123_LABEL_MAX and bool(_DNS1123_LABEL.match(value))


def is_dns1035_label(value: str) -> bool:
    """True if ``value`` is an RFC 1035 label (Services, PyTorchJobs): 1123 starting with a-z."""
    return len(value) <= DNS1123_LABEL_MAX and bool(_DNS1035_LABEL.match(value))


def is_dns1123_subdomain(value: str) -> bool:
    """True if ``value`` is an RFC 1123 subdomain (dot-separated labels, <= 253 chars)."""
    if not value or len(value) > DNS1123_SUBDOMAIN_MAX:
        return False
    return all(_DNS1123_LABEL.match(part) for part in value.split("."))


def is_label_value(value: str) -> bool:
    """True if ``value`` is a valid label value (may be empty, <= 63 chars)."""
    return len(value) <= LABEL_VALUE_MAX and bool(_LABEL_VALUE.match(value))


# --- builders ------------------------------------------------------------------------------


def _digest(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:HASH_LENGTH]


def _sanitize(raw: str) -> str:
    """Lower-case, map every run of characters outside [a-z0-9] to one '-', trim '-'."""
    return re.sub(r"[^a-z0-9]+", "-", raw.lower()).strip("-")


def dns_label(*parts: str, max_length: int = DNS1123_LABEL_MAX) -> str:
    """Join ``parts`` with '-' into a DNS-1123 label of at most ``max_length`` characters.

    If the joined string already is a valid label that fits, it is returned unchanged.
    Otherwise it is sanitised, cut to leave room for ``-<hash8>`` and suffixed with the
    hash of the joined *original*, so the result stays unique per input.
    """
    if max_length < HASH_LENGTH + 2 or max_length > DNS1123_LABEL_MAX:
        raise ValueError(f"max_length must be in {HASH_LENGTH + 2}..{DNS1123_LABEL_MAX}")
    raw = "-".join(parts)
    if len(raw) <= max_length and _DNS1123_LABEL.match(raw):
        return raw
    stem = _sanitize(raw)[: max_length - HASH_LENGTH - 1].rstrip("-")
    digest = _digest(raw)
    return f"{stem}-{digest}" if stem else digest


def label_value(raw: str) -> str:
    """A valid label value for ``raw``: verbatim if already valid, else sanitised + hash."""
    if is_label_value(raw):
        return raw
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", raw)
    stem = stem[: LABEL_VALUE_MAX - HASH_LENGTH - 1].strip("-_.")
    digest = _digest(raw)
    return f"{stem}-{digest}" if stem else digest


def validate_pool(pool: str) -> str:
    """Return ``pool`` if it is one of :data:`POOLS`, else raise ``ValueError``."""
    if pool not in POOLS:
        raise ValueError(f"unknown pool {pool!r}; expected one of {POOLS}")
    return pool


def namespace_name(tenant_slug: str, pool: str) -> str:
    """``ty-<tenant>-<pool>``, the namespace of one tenant pool.

    Collision-free: the pool is always the last component and comes from the fixed set
    :data:`POOLS`, so ``(tenant, pool)`` can be read back unambiguously from any name
    that was not hashed. A slug that would make the name invalid or longer than 63
    characters keeps the ``-<pool>`` suffix readable and hashes the tenant part.
    """
    validate_pool(pool)
    if not tenant_slug:
        raise ValueError("tenant_slug must not be empty")
    suffix = f"-{pool}"
    head = dns_label(
        f"{NAMESPACE_PREFIX}{tenant_slug}", max_length=DNS1123_LABEL_MAX - len(suffix)
    )
    return f"{head}{suffix}"


def priority_class_name(tier: Tier | str) -> str:
    """``trainyard-<tier>``, the cluster-wide PriorityClass of a tier."""
    tier = Tier(tier)
    return f"{PRIORITY_CLASS_PREFIX}{tier.value}"


def job_name(job_id: int | str, hint: str = "") -> str:
    """The PyTorchJob name of Trainyard job ``job_id``: ``tj-<id>[-<hint>]``, <= 40 chars.

    A DNS-1035 label (starts with a letter). ``job_id`` (the primary key) makes it unique;
    ``hint`` (e.g. the user's job title) is only decoration and is sanitised and cut to fit.
    """
    ident = _sanitize(str(job_id))
    if not ident or ident != str(job_id):
        raise ValueError(f"job_id must be made of [a-z0-9-]: {job_id!r}")
    base = f"{JOB_NAME_PREFIX}{ident}"
    if len(base) > JOB_NAME_MAX:
        return dns_label(base, max_length=JOB_NAME_MAX)
    pretty = _sanitize(hint)[: JOB_NAME_MAX - len(base) - 1].strip("-")
    return f"{base}-{pretty}" if pretty else base


# --- labels --------------------------------------------------------------------------------


def managed_labels() -> dict[str, str]:
    """The label every Trainyard-written object carries (a fresh dict each call)."""
    return {LABEL_MANAGED_BY: MANAGED_BY}


def pool_labels(tenant_slug: str, pool: str) -> dict[str, str]:
    """Labels of every object belonging to one tenant pool (a fresh dict each call)."""
    validate_pool(pool)
    return {
        **managed_labels(),
        LABEL_TENANT: label_value(tenant_slug),
        LABEL_POOL: pool,
    }


def job_labels(tenant_slug: str, pool: str, job_id: int | str) -> dict[str, str]:
    """Labels of a job's objects (PyTorchJob and its pod templates)."""
    return {**pool_labels(tenant_slug, pool), LABEL_JOB: label_value(str(job_id))}


def label_selector(labels: dict[str, str]) -> str:
    """Equality-based selector string for ``labels``, e.g. for ``list_objects``."""
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))
