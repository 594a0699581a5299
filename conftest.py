"""The fixed cast every test can use.

* ``tenant_a`` ("acme") with ``alice`` (tenant admin) and ``bob`` (member);
* ``tenant_b`` ("globex") with ``charlie`` (member) — the outsider for tenant A;
* ``platform_admin`` (``pat``) and ``finance_user`` (``fran``).

Every page and endpoint is checked for the outsider (charlie gets 404 on tenant A's
objects) and for anonymous access (redirect to login, or 401).
"""

from __future__ import annotations

import datetime as dt
import os

import pytest
import time_machine
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from core.choices import PoolKind
from tenants.choices import MembershipRole, PlatformRoleName
from tenants.models import Membership, PlatformRole, Pool, Tenant

pytest_plugins = ["kubesim.testing"]


def pytest_configure(config: pytest.Config) -> None:
    """``TRAINYARD_TEST_CLOCK_DAYS=400 make test`` runs the whole suite with the wall clock
    moved that many days ahead (time goes on ticking from there), to prove that no test
    depends on today's date. Monotonic clocks are left alone, so timeouts behave."""
    days = os.environ.get("TRAINYARD_TEST_CLOCK_DAYS", "").strip()
    if days:
        ahead = dt.datetime.now(dt.UTC) + dt.timedelta(days=float(days))
        config._trainyard_clock = time_machine.travel(ahead, tick=True)  # type: ignore[attr-defined]
        config._trainyard_clock.start()  # type: ignore[attr-defined]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` or ``e2e`` run first (a stable sort: the rest keep their order).
    Under pytest-xdist (``make test``) the long ones then start at once on some worker
    instead of being handed out last and leaving the other workers idle at the end."""
    items.sort(key=lambda item: 0 if item.get_closest_marker("slow")
               or item.get_closest_marker("e2e") else 1)


def pytest_unconfigure(config: pytest.Config) -> None:
    clock = getattr(config, "_trainyard_clock", None)
    if clock is not None:
        clock.stop()

PASSWORD = "correct-horse-battery-staple"


def _user(username: str):
    return get_user_model().objects.create_user(username, f"{username}@example.org", PASSWORD)


def _tenant(slug: str, name: str) -> Tenant:
    tenant = Tenant.objects.create(slug=slug, name=name, cost_center=f"CC-{slug}",
                                   contact_email=f"lead@{slug}.example.org")
    for kind in PoolKind.values:
        Pool.objects.create(tenant=tenant, kind=kind)
    return tenant


@pytest.fixture
def alice(db):
    return _user("alice")


@pytest.fixture
def bob(db):
    return _user("bob")


@pytest.fixture
def charlie(db):
    return _user("charlie")


@pytest.fixture
def tenant_a(alice, bob) -> Tenant:
    tenant = _tenant("acme", "Acme Vision")
    Membership.objects.create(user=alice, tenant=tenant, role=MembershipRole.ADMIN)
    Membership.objects.create(user=bob, tenant=tenant, role=MembershipRole.MEMBER)
    return tenant


@pytest.fixture
def tenant_b(charlie) -> Tenant:
    tenant = _tenant("globex", "Globex NLP")
    Membership.objects.create(user=charlie, tenant=tenant, role=MembershipRole.MEMBER)
    return tenant


@pytest.fixture
def platform_admin(db):
    user = _user("pat")
    PlatformRole.objects.create(user=user, role=PlatformRoleName.PLATFORM_ADMIN)
    return user


@pytest.fixture
def finance_user(db):
    user = _user("fran")
    PlatformRole.objects.create(user=user, role=PlatformRoleName.FINANCE)
    return user


@pytest.fixture
def cast(tenant_a, tenant_b, platform_admin, finance_user):
    """Everyone at once, for tests that walk every role."""
    return {"tenant_a": tenant_a, "tenant_b": tenant_b}


@pytest.fixture
def login(client):
    """``login(user)`` logs the Django test client in as ``user`` and returns it."""
    def _login(user):
        client.force_login(user)
        return client
    return _login


@pytest.fixture
def api():
    """``api(user)`` returns a DRF APIClient authenticated as ``user`` (None: anonymous)."""
    def _api(user=None):
        client = APIClient()
        if user is not None:
            client.force_authenticate(user)
        return client
    return _api


@pytest.fixture
def cluster(kubesim, settings):
    """kubesim wired in as Trainyard's cluster (``settings.TRAINYARD_CLUSTER``)."""
    from k8s_sync.client import reset_clients

    settings.TRAINYARD_CLUSTER = {"mode": "url", "url": kubesim.url, "request_timeout": 10}
    reset_clients()
    yield kubesim
    reset_clients()


@pytest.fixture(autouse=True)
def _celery_results_may_be_awaited():
    """An in-process Celery worker (the Redis broker test) marks the process as "inside a
    worker", after which waiting on a result raises; every test starts unmarked."""
    from celery._state import _set_task_join_will_block

    _set_task_join_will_block(False)
    yield


@pytest.fixture(autouse=True)
def _each_test_starts_in_english():
    """A Chinese request or ``translation.activate`` in one test must not leave Chinese
    active for the next test in the same thread."""
    from django.utils import translation

    yield
    translation.deactivate()


def latest_invoice_triggers():
    """The migration module that last defined the immutability triggers' SQLite columns
    (``SQLITE_INVOICE_COLUMNS``, ``create``, ``drop``): found by content, not by number,
    so re-numbered migrations keep working."""
    import importlib
    import pkgutil

    import billing.migrations

    found = None
    for info in sorted(pkgutil.iter_modules(billing.migrations.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"billing.migrations.{info.name}")
        if hasattr(module, "SQLITE_INVOICE_COLUMNS"):
            found = module
    return found


@pytest.fixture(autouse=True)
def _issued_invoices_flushable(request):
    """The database refuses to delete an issued invoice (triggers of
    ``billing/migrations/0004_issued_invoices_immutable``). A transactional test (a live
    server's) ends with a flush: Postgres' TRUNCATE fires no row triggers, SQLite's
    DELETE does, so on SQLite the invoices are deleted first with the triggers dropped and
    created again. Set up after ``transactional_db``, so torn down before its flush."""
    if not {"transactional_db", "live_server"} & set(request.fixturenames):
        yield
        return
    from django.db import connection

    request.getfixturevalue("transactional_db")
    yield
    if connection.vendor != "sqlite":
        return
    triggers = latest_invoice_triggers()
    triggers.drop(connection)
    try:
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM billing_invoiceline")
            cursor.execute("DELETE FROM billing_invoice WHERE credits_id IS NOT NULL")
            cursor.execute("DELETE FROM billing_invoice")
    finally:
        triggers.create(connection)


@pytest.fixture(autouse=True)
def _each_test_starts_with_an_empty_cache():
    """Cached reads (pod utilisation per namespace, busyness, the watchdog's memory) must
    not leak from one test into the next one in the same worker: the cache is emptied
    before each test (a locmem dict, or this worker's own Redis database). The admission
    loop's incremental engine (``jobs.admission.incremental.loop_engine``) forgets the
    last test's passes too, and submissions their snapshot (``jobs.submitcache``: a
    rolled-back test can leave the same ids and frozen times with other contents)."""
    from django.core.cache import cache

    from jobs import submitcache
    from jobs.admission.incremental import loop_engine

    cache.clear()
    loop_engine().reset()
    submitcache.clear()
    yield
