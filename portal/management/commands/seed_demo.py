"""Create the demo cast and tenants of the embedded default; safe to run again.

Accounts that already exist are left alone (their passwords are not reset), so the
credentials are printed once: the first time an account is created.
"""

from __future__ import annotations

import secrets
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.core.management.base import BaseCommand
from django.db import transaction

from core.choices import PoolKind
from core.models import Policy
from tenants.choices import MembershipRole, PlatformRoleName, QuotaMode
from tenants.models import Membership, PlatformRole, Pool, QuotaGrant, Tenant
from tenants.tasks import reconcile_cluster, reconcile_nodes, resync_pools

User = get_user_model()

# username, e-mail, full name, platform roles
DEMO_USERS: list[tuple[str, str, tuple[str, str], list[str]]] = [
    ("platform", "platform@example.org", ("Pat", "Platform"), [PlatformRoleName.PLATFORM_ADMIN]),
    ("finance", "finance@example.org", ("Fay", "Finance"), [PlatformRoleName.FINANCE]),
    ("alice", "alice@example.org", ("Alice", "Admin"), []),
    ("bob", "bob@example.org", ("Bob", "Researcher"), []),
    ("carol", "carol@example.org", ("Carol", "Researcher"), []),
    ("dave", "dave@example.org", ("Dave", "Admin"), []),
]
# The demo's load generator (``demo_load``) submits as this account, a member of every demo
# tenant, so a researcher's own jobs ("My waiting jobs", notifications) are theirs alone.
# It cannot sign in (no usable password); its full name says what it is.
LOADGEN = "loadgen"
LOADGEN_NAME = ("Demo", "load generator")
# Demo quota per tenant and pool, granted once (the default kubesim profile's models).
H800, A100 = "gpu:NVIDIA-H800", "gpu:NVIDIA-A100-SXM4-80GB"
DEMO_QUOTA = {
    "vision": {"prod": {H800: 8, "cpu": 128, "memory": 1024},
               "dev": {A100: 8, "mig:1g.10gb": 7, "cpu": 96, "memory": 512}},
    "nlp": {"prod": {A100: 16, H800: 8, "cpu": 256, "memory": 2048},
            "dev": {A100: 8, "cpu": 96, "memory": 512}},
    "speech": {"prod": {A100: 8, "cpu": 64, "memory": 512},
               "dev": {"mig:1g.10gb": 7, "mig:3g.40gb": 2, "cpu": 32, "memory": 256}},
}
# slug, name, cost center, contact, {user: role}, quota mode, elastic factor: one tenant
# in every quota mode
# The last column is the tenant's borrowing cap (x quota): None in the demo, so development
# and batch jobs borrow any idle capacity and are reclaimed when its owner needs it.
DEMO_TENANTS: list[tuple[str, str, str, str, dict[str, str], str, str | None]] = [
    ("vision", "Computer Vision", "CC-4100", "alice@example.org",
     {"alice": MembershipRole.ADMIN, "bob": MembershipRole.MEMBER}, QuotaMode.STATIC, None),
    ("nlp", "Language Models", "CC-4200", "dave@example.org",
     {"dave": MembershipRole.ADMIN, "carol": MembershipRole.MEMBER},
     QuotaMode.OVERCOMMITTED, None),
    ("speech", "Speech", "CC-4300", "dave@example.org", {"dave": MembershipRole.ADMIN},
     QuotaMode.DYNAMIC, None),
]
# The demo tenants' billing contact and address: the bill-to of their invoices
DEMO_BILL_TO = {
    "vision": ("Alice Chen", "Building 4, 100 Research Way\nSpringfield 01101"),
    "nlp": ("Dave Okafor", "Building 7, 100 Research Way\nSpringfield 01101"),
    "speech": ("Dave Okafor", "Building 7, 100 Research Way\nSpringfield 01101"),
}
# The demo policy: GPU grants may add up to 1.5 x the cards (the overcommitted tenant's
# guaranteed share is below its quota), set once when the policy is still the default.
DEMO_OVERCOMMIT = {"gpu": 1.5}


def _hashes(passwords: dict[str, str]) -> dict[str, str]:
    """Hash the new demo passwords side by side: each hash is about 0.5 s of PBKDF2, which
    releases the GIL, so this is most of ``make run``'s first-start seeding otherwise."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(passwords, pool.map(make_password, passwords.values()), strict=True))


def loadgen_user() -> Any:
    """The load generator's account (created without a usable password when missing)."""
    first, last = LOADGEN_NAME
    return User.objects.get_or_create(
        username=LOADGEN, defaults={"first_name": first, "last_name": last,
                                    "email": "loadgen@example.org",
                                    "password": make_password(None)})[0]


class Command(BaseCommand):
    help = "Create demo users for every role and demo tenants (idempotent)."
    requires_system_checks: list[str] = []  # `make run` has just migrated

    def handle(self, *args: Any, **options: Any) -> None:
        created: list[tuple[str, str, str]] = []
        existing = set(User.objects.filter(username__in=[u[0] for u in DEMO_USERS])
                       .values_list("username", flat=True))
        passwords = {u[0]: secrets.token_urlsafe(9) for u in DEMO_USERS if u[0] not in existing}
        hashes = _hashes(passwords)
        with transaction.atomic():
            for username, email, (first, last), roles in DEMO_USERS:
                user = User.objects.filter(username=username).first()
                if user is None:
                    user = User(username=username, email=User.objects.normalize_email(email),
                                first_name=first, last_name=last,
                                password=hashes.get(username) or make_password(None))
                    user.save()
                    if username in passwords:
                        created.append((username, passwords[username],
                                        ", ".join(roles)))
                for role in roles:
                    PlatformRole.objects.get_or_create(user=user, role=role)
            policy = Policy.current()
            if not policy.overcommit_factors:
                policy.overcommit_factors = dict(DEMO_OVERCOMMIT)
                policy.save(update_fields=["overcommit_factors", "updated_at"])
            for slug, name, cost_center, contact, members, mode, factor in DEMO_TENANTS:
                tenant, _ = Tenant.objects.get_or_create(
                    slug=slug, defaults={"name": name, "cost_center": cost_center,
                                         "contact_email": contact, "quota_mode": mode,
                                         "borrowing_cap": factor and Decimal(factor),
                                         "contact_name": DEMO_BILL_TO[slug][0],
                                         "billing_address": DEMO_BILL_TO[slug][1]})
                for kind in PoolKind.values:
                    pool = Pool.objects.get_or_create(tenant=tenant, kind=kind)[0]
                    if not QuotaGrant.objects.filter(pool=pool).exists():
                        QuotaGrant.objects.bulk_create(
                            QuotaGrant(pool=pool, resource=key, amount=amount,
                                       reason="demo quota")
                            for key, amount in DEMO_QUOTA.get(slug, {}).get(kind, {}).items())
                for username, role in members.items():
                    Membership.objects.get_or_create(
                        user=User.objects.get(username=username), tenant=tenant,
                        defaults={"role": role})
                Membership.objects.get_or_create(user=loadgen_user(), tenant=tenant,
                                                 defaults={"role": MembershipRole.MEMBER})
        # Bring the cluster in line with the demo rows (the worker picks these up).
        for task in (reconcile_cluster, resync_pools, reconcile_nodes):
            try:
                task.delay()
            except Exception as exc:  # no broker reachable: the beat schedule catches up
                self.stderr.write(f"could not queue {task.name}: {exc}")
        if created:
            self.stdout.write(self.style.SUCCESS(
                "Demo accounts (shown once; change them on a shared machine):"))
            for username, password, what in created:
                if not what:  # a tenant user: say of which tenants, in which role
                    what = ", ".join(
                        f"{m.role} of {m.tenant.slug}" for m in Membership.objects.filter(
                            user__username=username).select_related("tenant")
                        .order_by("tenant__slug"))
                self.stdout.write(f"  {username:<10} {password:<14} {what}")
        else:
            self.stdout.write("Demo accounts exist already (their passwords were shown when "
                              "they were created; reset one with "
                              "`python manage.py changepassword NAME`).")
