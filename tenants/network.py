"""Egress destinations of the pools' NetworkPolicy (pure, plus one read).

The platform policy lists CIDRs every tenant's pods may reach (object storage, dataset
servers, a proxy); each tenant may add its own. A pool's NetworkPolicy allows the union,
beside same-namespace traffic and DNS (see ``k8s_sync.manifests.build_network_policy``).

Entries are checked as the API server parses an ``ipBlock.cidr`` (Go's
``net.ParseCIDR``: an IPv4 or IPv6 address with a ``/prefix``), and, as
``k8s_sync.specs.NetworkSpec`` does, with the host bits zero, so the cluster is never
handed an ambiguous block ("10.0.0.1/8"). They are normalised (``FD00::/8`` ->
``fd00::/8``) and de-duplicated, first occurrence first.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from typing import Any

from django.utils.translation import gettext as _

from core.models import Policy

__all__ = ["egress_cidrs_for", "parse_cidr", "parse_cidrs", "split_cidrs"]

_SEPARATORS = re.compile(r"[\s,]+")


def split_cidrs(text: str) -> list[str]:
    """Entries of a text field: one per line or comma separated; blanks dropped."""
    return [part for part in _SEPARATORS.split(text or "") if part]


def parse_cidr(entry: str) -> str:
    """The normalised CIDR, or ValueError with a message naming ``entry``."""
    text = (entry or "").strip()
    if "/" not in text:
        raise ValueError(_("“%(entry)s” is not a CIDR: it needs a prefix length, e.g. "
                           "10.0.0.0/16.") % {"entry": text})
    try:
        return str(ipaddress.ip_network(text, strict=True))
    except ValueError:
        pass
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError:
        raise ValueError(_("“%(entry)s” is not a valid IPv4 or IPv6 CIDR.")
                         % {"entry": text}) from None
    raise ValueError(_("“%(entry)s” has host bits set: write %(network)s.")
                     % {"entry": text, "network": network})


#: At most this many egress CIDRs in a list (the policy's, a tenant's): each is a rule of
#: every pool's NetworkPolicy.
MAX_CIDRS = 256


def parse_cidrs(value: Any) -> list[str]:
    """A text (lines or commas) or a list of strings -> normalised, de-duplicated CIDRs.
    ValueError (naming the first bad entry) for anything else."""
    if value is None:
        return []
    if isinstance(value, str):
        entries = split_cidrs(value)
    elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        entries = [v.strip() for v in value if v.strip()]
    else:
        raise ValueError(_("Egress CIDRs are a list of strings such as 10.0.0.0/16."))
    if len(entries) > MAX_CIDRS:
        raise ValueError(_("Give at most %(n)s egress CIDRs.") % {"n": MAX_CIDRS})
    return _unique(parse_cidr(entry) for entry in entries)


def _unique(items: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)


def egress_cidrs_for(tenant: Any, *, policy_cidrs: Iterable[str] | None = None) -> tuple[str, ...]:
    """The union of the policy's and ``tenant``'s CIDRs (policy first), de-duplicated.
    Stored entries were validated on the way in; one that no longer parses is skipped
    rather than failing every reconcile of the pool."""
    if policy_cidrs is None:
        policy_cidrs = Policy.current().egress_cidrs or []
    out = []
    for entry in [*policy_cidrs, *(tenant.egress_cidrs or [])]:
        try:
            out.append(parse_cidr(entry))
        except (TypeError, ValueError):
            continue
    return tuple(_unique(out))
