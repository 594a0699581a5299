"""A schema-driven fuzz of the API: schemathesis reads ``/api/schema/`` and generates
requests from it (values inside the documented bounds and, in its negative mode, outside
them), sent in-process to the WSGI app with each role's DRF token.

It complements ``test_crawl.py`` (every URL with hand-picked nasty values): here the
values come from the schema, so a field whose bounds the schema does not state meets
values as large as a JSON number can be. Each request fails the test on

* a 5xx (or an exception out of the app);
* a partial write: a refused request (4xx) after which a main table has more or fewer
  rows than before (counted inside the request's savepoint, which is rolled back, so every
  request sees the same world).

Path parameters are real objects of the crawl's world (bogus ones are the crawl's job).
Bounded: ``EXAMPLES`` positive and ``EXAMPLES`` negative cases per operation, drawn once,
derandomized, and sent as each role.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

import pytest
from django.apps import apps
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, connection, transaction
from hypothesis import HealthCheck, Phase, given, settings
from rest_framework.authtoken.models import Token

from tests.test_crawl import _like_postgres, _values, world  # noqa: F401  (the world fixture)

schemathesis = pytest.importorskip("schemathesis")
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.core import NotSet  # noqa: E402
from schemathesis.core.parameters import ParameterLocation  # noqa: E402

#: cases drawn per operation and generation mode (positive, negative)
EXAMPLES = int(os.environ.get("TRAINYARD_FUZZ_EXAMPLES", "3"))
ROLES = ("alice", "bob", "pat", "fran")
#: the apps whose rows a refused request must leave alone
APPS = ("core", "tenants", "jobs", "billing")


class _Rollback(Exception):
    pass


def _count_sql() -> str:
    tables = sorted({m._meta.db_table for app in APPS
                     for m in apps.get_app_config(app).get_models()
                     if m._meta.managed and not m._meta.proxy})
    return " UNION ALL ".join(f"SELECT '{t}', COUNT(*) FROM {connection.ops.quote_name(t)}"
                              for t in tables)


def _counts(sql: str) -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return dict(cursor.fetchall())


def _draw(operation: Any, mode: GenerationMode, n: int) -> list[Any]:
    """``n`` cases of ``operation`` (fewer if the schema allows fewer), deterministic."""
    cases: list[Any] = []

    @settings(max_examples=n, derandomize=True, deadline=None, database=None,
              phases=[Phase.explicit, Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(operation.as_strategy(generation_mode=mode))
    def collect(case: Any) -> None:
        cases.append(case)

    collect()
    return cases[:n]


#: the keywords of a range: a JSON body that breaks one of them must be refused. (A value of
#: another type is not checked: DRF takes 5 for a text and "5" for a number on purpose.)
BOUNDS = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength",
          "maxLength", "minItems", "maxItems", "enum", "required"}


def _out_of_range(case: Any) -> bool:
    """Whether the case's JSON body breaks a bound of the schema, so the API must refuse
    it. Not: a negative path (replaced by real values here), a form-encoded body (it has
    no nested values: schemathesis's nested ones arrive as nothing), a text padded with
    whitespace past ``maxLength`` (every text field trims it first)."""
    meta = case.meta
    body = meta.components.get(ParameterLocation.BODY)
    if isinstance(case.body, NotSet) or body is None or case.media_type != "application/json" \
            or body.mode != GenerationMode.NEGATIVE:
        return False
    found = False
    for mutation in getattr(meta.phase.data, "mutations", ()):
        if mutation.parameter_location != ParameterLocation.BODY \
                or not BOUNDS & set(mutation.keywords):
            continue
        value: Any = case.body
        for step in mutation.path:
            try:
                value = value[step]
            except (KeyError, IndexError, TypeError):
                value = None
                break
        if isinstance(value, str) and value != value.strip():
            continue
        found = True
    return found


def _path_values(path: str, w: dict) -> dict[str, str]:
    out = {}
    for name in re.findall(r"\{(\w+)\}", path):
        out[name] = _values(path, "pk" if name == "id" else name, w)[0]
    return out


@pytest.fixture
def wsgi_requests():
    """The WSGI handler closes the connection after each request outside the test client;
    the test's transaction must survive, as the test client arranges."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.mark.slow
def test_schema_fuzz_as_every_role_no_5xx_no_partial_write(world, wsgi_requests):  # noqa: F811
    from portal.wsgi import application

    started = time.monotonic()
    tokens = {role: Token.objects.create(user=world["users"][role]).key for role in ROLES}
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application,
                                            headers={"Authorization": f"Token {tokens['pat']}"})
    sql = _count_sql()
    failures: list[str] = []
    sent = operations = drawn = distinct = skipped = 0
    generating = 0.0
    statuses: dict[int, int] = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1
        fixed = _path_values(operation.path, world)
        # path parameters are fixed: an operation without a body or a query has one case,
        # one with a query only (a list's limit and offset) one of each mode
        n = EXAMPLES if operation.body else 1
        t0 = time.monotonic()
        cases = [(c, "positive") for c in _draw(operation, GenerationMode.POSITIVE, n)]
        if operation.body or operation.query:
            cases += [(c, "negative") for c in _draw(operation, GenerationMode.NEGATIVE, n)]
        generating += time.monotonic() - t0
        drawn += len(cases)
        seen: set[str] = set()
        # a role turned away twice in the same words (403, 404) is turned away before its
        # input is read: the rest of the operation's cases are not sent as that role
        refusals: dict[str, list[tuple[int, bytes]]] = {role: [] for role in ROLES}
        for case, mode in cases:
            if fixed:
                case.path_parameters = {**(case.path_parameters or {}), **fixed}
            key = repr((case.path_parameters, case.query, case.body))
            if key in seen:
                continue
            seen.add(key)
            distinct += 1
            for role in ROLES:
                turned = refusals[role]
                if len(turned) >= 2 and turned[0] == turned[1]:
                    skipped += 1
                    continue
                sent += 1
                what = (f"{operation.method.upper()} {operation.path} as {role} ({mode}): "
                        f"path={case.path_parameters} query={case.query} "
                        f"{case.media_type} body={str(case.body)[:300]}")
                try:
                    with transaction.atomic(), connection.execute_wrapper(_like_postgres):
                        before = _counts(sql)
                        response = case.call(headers={"Authorization": f"Token {tokens[role]}"})
                        after = _counts(sql)
                        raise _Rollback
                except _Rollback:
                    pass
                except Exception as exc:
                    failures.append(f"{what}: {type(exc).__name__}: {str(exc)[:300]}")
                    continue
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                if response.status_code in (403, 404) and len(turned) < 2:
                    turned.append((response.status_code, response.content))
                if response.status_code >= 500:
                    failures.append(f"{what}: HTTP {response.status_code}")
                elif _out_of_range(case) and response.status_code < 300:
                    failures.append(f"{what}: a body outside the schema accepted with "
                                    f"{response.status_code} ({case.meta.phase.data.description})")
                elif 400 <= response.status_code < 500 and before != after:
                    changed = {t: (before[t], after[t]) for t in before if before[t] != after[t]}
                    failures.append(f"{what}: refused with {response.status_code} but wrote "
                                    f"{changed}")
    spent = time.monotonic() - started
    print(f"schema fuzz: {operations} operations x {len(ROLES)} roles, {drawn} cases, "
          f"{distinct} distinct, {sent} requests in {spent:.1f} s ({generating:.1f} s "
          f"generating); statuses {dict(sorted(statuses.items()))}; {skipped} skipped "
          "(the role was turned away)")
    assert operations > 50
    assert sent >= operations * len(ROLES)
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures)
