"""A crawl of every page and API endpoint, as every role, with nasty values: never a 500.

The URL list is the resolver's (a new page or endpoint is crawled without touching this
file); path parameters are filled with the ids of real objects and with bogus ones. Every
HTML page's forms are submitted with their own values and then with nasty values, field by
field; every API operation of the OpenAPI schema gets its valid-looking body and fuzzed
ones; every endpoint gets every HTTP method. Each write runs in a savepoint that is rolled
back, so every request sees the same world. All failures are collected and reported in one
assertion message (method, URL, role, what was sent, the exception and where it was raised).

To stay fast (about 20 s on SQLite) the fuzz is sampled, deterministically: every role gets
every real URL and every form with its own values; the first role to see a form gets each
field with a nasty value (rotated so fields meet different values) and every field at once;
bogus URLs, fuzzed query strings and every HTTP method go to ``DEEP_ROLES``. Two roles browse
in Chinese. The cluster is down (a refused port), which pages must survive too.
"""

from __future__ import annotations

import datetime as dt
import html as html_lib
import itertools
import json
import re
import time
import traceback
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

import pytest
from django.db import DataError, connection, transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from rest_framework.test import APIClient

from billing import services as billing_services
from billing.tests.conftest import A100_PRICE, make_job, run
from core.tests.html import form_values
from jobs import services as job_services
from jobs.tests.conftest import H800, submission
from tenants import services as tenant_services
from tenants.access import access_for

# --- the nasty values -----------------------------------------------------------------------

NASTY = [
    "", " ", "x" * 10_000, "-1", "0", "1e12", "9999999999999999999", "NaN", "Infinity",
    "-Infinity", "1E+400", "1E+2", "\u202eevil\u0000nul", "<script>alert(1)</script>",
    "' OR 1=1; --", "9999-12", "2026-1", "0000-00", "10000-01", "0001-01-01", "2026-02-30",
    "9999-12-31T23:59:59", "-0.000000000001", "[]", "٣٤", "a=b\nc", "{{7*7}}", "%00",
]
#: nasty values as JSON (types a serializer does not expect included)
NASTY_JSON: list[Any] = [
    None, "", "x" * 10_000, -1, 0, 10**12, 9999999999999999999, 1e308, "NaN", "Infinity",
    "1E+400", -1e-12, True, [], {}, [1, "a"], {"a": {"b": []}}, "\u202e\u0000<script>",
    "9999-12", "2026-1", "0000-00", "9999-12-31T23:59:59Z", "0001-01-01", 2**64, 1.5,
]
#: query parameters some view reads (grep request.GET / query_params), and DRF's own
QUERY_PARAMS = ["page", "limit", "offset", "month", "tenant", "status", "state", "tier",
                "pool", "q", "days", "template", "clone", "gpu_model", "nodes_wanted", "line",
                "refresh", "action", "ordering", "format", "search", "pod", "previous",
                "download", "after", "tail", "sort"]
NASTY_QUERY = ["9999999999999999999", "-1", "0", "NaN", "1E+400", "9999-12", "2026-1",
               "0000-00", "", "x" * 3000, "\u202e\x00", "<script>", "' OR 1=1"]
METHODS = ["get", "post", "put", "patch", "delete", "options", "head"]

SKIP_PREFIXES = ("admin/",)     # Django's admin is tested in the admin tests
#: the roles that also get bogus URLs, fuzzed query strings and every method (the others
#: get every real URL and every form): the one who sees everything, and a tenant admin
DEEP_ROLES = ("pat", "alice")


# --- the world ------------------------------------------------------------------------------


def _month_start(day: dt.date) -> dt.date:
    return day.replace(day=1)


@pytest.fixture
def world(cast, alice, bob, charlie, platform_admin, finance_user, settings):
    """Every kind of object a detail URL names, made through the services."""
    from k8s_sync.models import ObservedNode
    from tenants.models import Membership

    settings.TIME_ZONE = "UTC"
    # a cluster that refuses connections at once: pages must cope with it being down
    settings.TRAINYARD_CLUSTER = {"mode": "url", "url": "http://127.0.0.1:9",
                                  "request_timeout": 0.2}
    from k8s_sync.client import reset_clients
    reset_clients()
    a, b = cast["tenant_a"], cast["tenant_b"]
    now = timezone.now()
    for i, (product, count) in enumerate([(H800, 8), (H800, 8), (A100_PRICE["gpu_model"], 8)]):
        ObservedNode.objects.create(
            name=f"node-{i}", uid=f"u{i}", resource_version="1", observed_at=now,
            gpu_product=product, gpu_model=product, gpu_count=count, gpu_memory_mib=81920,
            ready=True, switch="switch-a",
            allocatable={"cpu": "192", "memory": "2Ti", "nvidia.com/gpu": str(count),
                         "pods": "110"})
    for tenant in (a, b):
        for kind in ("prod", "dev"):
            tenant_services.quota_set(
                actor=platform_admin, pool=tenant.pools.get(kind=kind), reason="crawl",
                amounts={f"gpu:{H800}": 4, "cpu": 64, "memory": 512})
    price = dict(A100_PRICE)
    card = billing_services.rate_card_create(
        actor=platform_admin, effective_from=dt.date(2020, 1, 1),
        gpus=[price, {**price, "gpu_model": H800}],
        storage=[{"storage_class": "fast-ssd", "gib_month": Decimal("0.10")}],
        egress_gib=Decimal("0.08"))
    # an ended month with usage, closed: issued invoices (and a credit note)
    last_month = _month_start(_month_start(now.date()) - dt.timedelta(days=1))
    start = dt.datetime.combine(last_month, dt.time(10), tzinfo=dt.UTC)
    make_job(a, run(start, start + dt.timedelta(hours=3)), workers=2, gpus=4, name="old-a")
    make_job(b, run(start, start + dt.timedelta(hours=2)), name="old-b")
    billing_services.month_close(actor=finance_user, period=last_month)
    from billing.models import Invoice
    issued = Invoice.objects.get(tenant=a, period=last_month)
    billing_services.credit_note_issue(actor=finance_user, invoice=issued, amount=Decimal("1"),
                                       reason="crawl")
    billing_services.invoice_draft_refresh(tenant=a)
    billing_services.budget_set(access=access_for(alice, a), actor=alice, amount=Decimal(500))
    # live jobs, a quota request each, a loan, a dedicated node, a defrag window
    jobs = [job_services.job_submit(access=access_for(bob, a), actor=bob, pool="dev",
                                    data=submission(name="crawl-a")),
            job_services.job_submit(access=access_for(charlie, b), actor=charlie, pool="prod",
                                    data=submission(name="crawl-b", tier="batch"))]
    Membership.objects.filter(user=charlie, tenant=b).update(role="admin")
    requests = [tenant_services.quota_request_submit(
        access=access_for(user, tenant), actor=user, pool=tenant.pools.get(kind="prod"),
        amounts={"cpu": 300}, justification="crawl") for user, tenant in ((alice, a), (charlie, b))]
    loan = tenant_services.loan_propose(
        access=access_for(alice, a), actor=alice, lender_pool=a.pools.get(kind="prod"),
        borrower="globex", borrower_pool="prod", resource=f"gpu:{H800}", amount=2,
        ends_at=now + dt.timedelta(days=3))
    Membership.objects.filter(user=charlie, tenant=b).update(role="member")
    tenant_services.node_dedicate(access=access_for(platform_admin, a), actor=platform_admin,
                                  node_name="node-1", reason="crawl")
    window = job_services.window_schedule(
        actor=platform_admin, gpu_model=H800, nodes_wanted=1,
        starts_at=now + dt.timedelta(days=1), ends_at=now + dt.timedelta(days=1, hours=2))
    invoices = list(Invoice.objects.filter(tenant=a).values_list("pk", flat=True))
    from billing.models import InvoiceLine
    lines = list(InvoiceLine.objects.filter(invoice=issued).values_list("pk", flat=True))
    users = {"alice": alice, "bob": bob, "charlie": charlie, "pat": platform_admin,
             "fran": finance_user}
    return {
        "a": a, "b": b, "users": users, "jobs": [j.pk for j in jobs],
        "requests": [r.pk for r in requests], "loan": loan.pk, "window": window.pk,
        "invoices": invoices, "month": f"{last_month:%Y-%m}", "card": card.pk,
        "lines": lines, "pod": f"{jobs[0].k8s_name}-master-0",
        "members": list(Membership.objects.values_list("pk", flat=True)),
        "user_ids": [u.pk for u in users.values()],
    }


# --- the URLs -------------------------------------------------------------------------------


def _patterns(resolver: URLResolver | None = None, prefix: str = ""):
    for pattern in (resolver or get_resolver()).url_patterns:
        if isinstance(pattern, URLResolver):
            yield from _patterns(pattern, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern), pattern


_PARAM = re.compile(r"<(?:(\w+):)?(\w+)>|\(\?P<(\w+)>[^)]*\)")


def _values(route: str, name: str, w: dict) -> list[str]:
    """Real values for a path parameter (tenant A's first: the outsider's 404 is checked on
    them), then bogus ones."""
    bogus_int = ["999999", "9223372036854775808"]
    if name in ("slug", "tenant_slug"):
        return ["acme", "globex", "no-such-tenant"]
    if name == "kind":
        return ["prod", "dev", "nope"]
    if name == "fmt":
        return ["csv", "pdf", "zip", "exe"]
    if name == "month":
        return [w["month"], "9999-12", "2026-1", "0000-00", "nope"]
    if name == "action":
        return ["cancel", "hold", "release", "priority", "accept", "decline", "end", "nope"]
    if name == "uidb64":
        return ["MQ", "bogus", "%00"]
    if name == "token":
        return ["set-password", "bad-token"]
    if name == "node_name":
        return ["node-1", "no-such-node"]
    if name == "line_id":
        return [str(w["lines"][0]), "999999"]
    if name == "user_id":
        return [str(w["user_ids"][0]), *bogus_int]
    if name == "pk":
        for key, ids in (("jobs/", w["jobs"]), ("invoices", w["invoices"]),
                         ("requests/", w["requests"]), ("loans", [w["loan"]]),
                         ("members", w["members"]), ("defrag", [w["window"]]),
                         ("rate-cards", [w["card"]])):
            if key in route:
                return [str(i) for i in ids] + bogus_int + (["abc"] if "^" in route else [])
    raise AssertionError(f"no values for <{name}> in {route}; add them to _values")


def _fill(route: str, w: dict) -> list[tuple[str, bool]]:
    """(url, real) for a route: every real combination, and each bogus value once."""
    route = route.replace("^", "").replace("$", "").replace("\\.", ".")
    names = [m.group(2) or m.group(3) for m in _PARAM.finditer(route)]
    if not names:
        return [("/" + route, True)]
    choices = [_values(route, n, w) for n in names]
    base = [c[0] for c in choices]
    combos = [(base, True)]
    for i, values in enumerate(choices):
        combos += [([*base[:i], v, *base[i + 1:]], False) for v in values[1:]]
    urls = []
    for combo, real in combos:
        values = iter(combo)
        urls.append(("/" + _PARAM.sub(lambda _m, v=values: next(v), route), real))
    return urls


# --- the requests ---------------------------------------------------------------------------


class _Rollback(Exception):
    pass


def _like_postgres(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
    """Postgres refuses a NUL character in text and JSON; SQLite stores it. Refuse it here
    too, so that the crawl on SQLite finds what would be a 500 on Postgres."""
    for row in (params if many else [params]) or []:
        values = row.values() if isinstance(row, dict) else (row or ())
        for value in values:
            if isinstance(value, str) and ("\x00" in value or "\\u0000" in value):
                raise DataError("text cannot contain NUL (0x00) bytes (as on Postgres)")
    return execute(sql, params, many, context)


@dataclass
class Crawl:
    failures: list[str] = field(default_factory=list)
    count: int = 0
    clients: dict[str, Any] = field(default_factory=dict)
    spent: dict[str, float] = field(default_factory=dict)

    def request(self, client: Any, role: str, method: str, url: str, *, data: Any = None,
                body: bytes | None = None, content_type: str | None = None,
                note: str = "") -> Any:
        """One request in a savepoint rolled back afterwards; a 500 or an exception is a
        failure."""
        self.count += 1
        kwargs: dict[str, Any] = {}
        if body is not None:
            kwargs = {"data": body, "content_type": content_type or "application/json"}
        elif data is not None:
            kwargs = {"data": data}
            if content_type:
                kwargs["content_type"] = content_type
        response = None
        started = time.process_time()
        try:
            with transaction.atomic(), connection.execute_wrapper(_like_postgres):
                response = getattr(client, method)(url, **kwargs)
                raise _Rollback
        except _Rollback:
            pass
        except Exception as exc:
            frames = traceback.extract_tb(exc.__traceback__)
            ours = [f for f in frames if "site-packages" not in f.filename
                    and not f.filename.endswith("test_crawl.py")]
            where = (ours or frames)[-1]  # the last line of Trainyard's own code
            self.failures.append(f"{method.upper()} {url[:150]} as {role} [{note[:120]}]: "
                                 f"{type(exc).__name__}: {str(exc)[:200]} "
                                 f"({where.filename.rsplit('/', 2)[-2:]}:{where.lineno})")
            return None
        finally:
            key = re.sub(r"\d+", "N", url.split("?")[0])
            self.spent[key] = self.spent.get(key, 0) + time.process_time() - started
        if response.status_code >= 500:
            self.failures.append(f"{method.upper()} {url[:150]} as {role} [{note[:120]}]: "
                                 f"HTTP {response.status_code}")
        if method in ("post", "delete") and url.startswith(("/logout/", "/login/")):
            self.relogin(role)
        return response

    def relogin(self, role: str) -> None:
        user = self.clients[role][2]
        if user is not None:
            self.clients[role][0].force_login(user)


_FORM = re.compile(r"<form\b([^>]*)>.*?</form>", re.S | re.I)
_ATTR = re.compile(r'([\w-]+)="([^"]*)"')


def _forms(page: str, url: str) -> list[tuple[str, str, dict[str, str], str]]:
    """(action, method, values, preview url) of each form of a page."""
    found = []
    for match in _FORM.finditer(page):
        attrs = {k: html_lib.unescape(v) for k, v in _ATTR.findall(match.group(1))}
        action = attrs.get("action") or url.split("?")[0]
        if action.startswith(("http", "#", "javascript")):
            continue
        found.append((action, attrs.get("method", "get").lower(),
                      form_values(match.group(0)), attrs.get("data-preview-url", "")))
    return found


#: at most this many submissions fuzz a form's fields one group at a time (a big form's
#: fields are grouped, each with its own nasty value), besides the all-at-once ones
FIELD_GROUPS = 8


def _fuzzed(values: dict[str, str], rotation: int) -> list[tuple[dict[str, str], str]]:
    """Each field in turn with a nasty value (rotated so fields meet different values; a big
    form's fields a few at a time), then every field at once with the same nasty value."""
    out = []
    names = sorted(values)
    size = -(-len(names) // FIELD_GROUPS) or 1
    for g in range(0, len(names), size):
        data = dict(values)
        for i, name in enumerate(names[g:g + size], start=g):
            data[name] = NASTY[(rotation + 3 * i) % len(NASTY)]
        out.append((data, ", ".join(f"{n}={data[n][:20]!r}" for n in names[g:g + size])))
    for k in range(2):
        nasty = NASTY[(rotation + 7 * k) % len(NASTY)]
        out.append((dict.fromkeys(values, nasty), f"all={nasty[:20]!r}"))
    return out


def _pod_queries(url: str, w: dict, n: int) -> list[dict[str, str]]:
    """A job's log as asked for by its page and API: a pod of the job, with nasty options
    (the cluster is down, so this reaches the answer for an unreachable cluster)."""
    if not url.rstrip("/").endswith("/logs"):
        return []
    nasty = NASTY_QUERY[n % len(NASTY_QUERY)]
    return [{"pod": w["pod"]}, {"pod": w["pod"], "download": "1", "previous": "1"},
            {"pod": w["pod"], "tail": nasty, "after": nasty, "previous": nasty}]


# --- the crawl ------------------------------------------------------------------------------


#: the roles whose browser asks for Chinese (every translated message is formatted too)
CHINESE = ("bob", "charlie")


def _clients(world) -> dict[str, tuple[Client, APIClient, Any]]:
    clients: dict[str, tuple[Client, APIClient, Any]] = {"anonymous": (Client(), APIClient(),
                                                                      None)}
    for name, user in world["users"].items():
        headers = {"accept-language": "zh-hans"} if name in CHINESE else {}
        page, api = Client(headers=headers), APIClient(headers=headers)
        page.force_login(user)
        api.force_authenticate(user)
        clients[name] = (page, api, user)
    return clients


@pytest.mark.slow
def test_crawl_every_page_as_every_role_never_500(world):
    crawl = Crawl()
    crawl.clients = _clients(world)
    routes = [(r, p) for r, p in _patterns() if not r.startswith(SKIP_PREFIXES)
              and not r.startswith("api/")]
    seen_forms: set[tuple] = set()
    seen_any: set[tuple] = set()
    rotation = itertools.count()
    outsider_leaks = []
    for route, _pattern in routes:
        for url, real in _fill(route, world):
            for role, (client, _api, _user) in crawl.clients.items():
                if not real and role not in DEEP_ROLES:
                    continue
                response = crawl.request(client, role, "get", url, note="page")
                if response is None:
                    continue
                if role == "charlie" and real and "/t/acme/" in url \
                        and response.status_code not in (404, 405):
                    outsider_leaks.append(f"{url}: {response.status_code}")
                if role == "anonymous" and url.startswith(("/t/", "/platform/", "/billing/")) \
                        and not (response.status_code in (404, 405) or (
                            response.status_code == 302 and "/login/" in response["Location"])):
                    outsider_leaks.append(f"{url} as anonymous: {response.status_code}")
                if not real:
                    continue
                if role in DEEP_ROLES:
                    # fuzzed query parameters, one value per parameter (rotated)
                    n = next(rotation)
                    query = {p: NASTY_QUERY[(n + i) % len(NASTY_QUERY)]
                             for i, p in enumerate(QUERY_PARAMS)}
                    crawl.request(client, role, "get", f"{url}?{urlencode(query)}",
                                  note="query")
                    for extra in _pod_queries(url, world, n):
                        crawl.request(client, role, "get", f"{url}?{urlencode(extra)}",
                                      note="pod log")
                    crawl.request(client, role, "post", url, data={}, note="empty post")
                if role == "pat":  # (HEAD is a GET, PATCH a PUT to a page)
                    for method in ("put", "delete", "options"):
                        crawl.request(client, role, method, url, note="method")
                if response.status_code != 200 or "html" not in response.get("Content-Type", ""):
                    continue
                for action, method, values, preview in _forms(response.content.decode(), url):
                    key = (action, method, tuple(sorted(values)))
                    if (role, key) in seen_forms:
                        continue
                    first = key not in seen_any
                    seen_forms.add((role, key))
                    seen_any.add(key)
                    targets = [action] + ([preview] if preview else [])
                    # the fuzz for the first role that sees a form; its own values for all
                    cases = [(values, "own values")]
                    if first:
                        cases += _fuzzed(values, next(rotation))
                    for target in targets:
                        for data, note in cases:
                            if method == "get":
                                crawl.request(client, role, "get",
                                              f"{target}?{urlencode(data)}", note=note)
                            else:
                                crawl.request(client, role, "post", target, data=data,
                                              note=f"{action} {note}")
    print(f"crawl: {crawl.count} requests, {len(seen_any)} forms, "
          f"{sum(crawl.spent.values()):.1f} s CPU")
    for key, spent in sorted(crawl.spent.items(), key=lambda kv: -kv[1])[:14]:
        print(f"{spent:6.2f} {key}")
    assert not crawl.failures, f"{len(crawl.failures)} failures:\n" + "\n".join(
        sorted(set(crawl.failures)))
    assert not outsider_leaks, "the outsider or anonymous reached tenant A's pages:\n" + "\n".join(
        outsider_leaks)


# --- the API --------------------------------------------------------------------------------

DEEP = 50_000


def _resolve(schema: dict, node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    if isinstance(node, dict) and "allOf" in node:
        return _resolve(schema, node["allOf"][0])
    return node


def _example(schema: dict, node: Any, depth: int = 0) -> Any:
    """A plausible value for a schema node (the server decides whether it is valid)."""
    node = _resolve(schema, node) or {}
    if "enum" in node:
        return node["enum"][0]
    kind, fmt = node.get("type"), node.get("format")
    if kind == "object" or "properties" in node:
        props = node.get("properties", {})
        out = {k: _example(schema, v, depth + 1) for k, v in props.items()
               if not v.get("readOnly")}
        if "additionalProperties" in node and not props:
            out = {"cpu": _example(schema, node["additionalProperties"], depth + 1)}
        return out
    if kind == "array":
        return [_example(schema, node.get("items", {}), depth + 1)]
    if kind == "integer":
        return max(1, node.get("minimum", 1))
    if kind == "number":
        return 1.5
    if kind == "boolean":
        return True
    if fmt == "date-time":
        return (timezone.now() + dt.timedelta(days=2)).isoformat()
    if fmt == "date":
        return f"{timezone.now():%Y-%m}-01"
    if fmt == "decimal":
        return "10"
    if fmt == "email":
        return "someone@example.org"
    return "crawl-x"


#: valid bodies the generic example cannot guess
BODIES: dict[str, dict[str, Any]] = {
    "/jobs/": {**submission(name="crawl-api"), "pool": "dev"},
    "/jobs/preview/": {**submission(name="crawl-api"), "pool": "dev"},
    "/loans/": {"pool": "prod", "borrower": "globex", "borrower_pool": "prod",
                "resource": f"gpu:{H800}", "amount": "1"},
    "/quota/": {"amounts": {"cpu": "32"}, "reason": "crawl"},
    "/invoices/budget/": {"monthly_amount": "100.00"},
    "/members/": {"user": "pat", "role": "member"},
}


def _bodies(schema: dict, path: str, node: Any, rotation: int) -> list[tuple[Any, str]]:
    """The valid-looking body, each property with a nasty value, bodies of the wrong type."""
    base = _example(schema, node)
    for suffix, body in BODIES.items():
        if path.endswith(suffix):
            base = {**base, **body, "ends_at": base.get("ends_at")} if "ends_at" in base \
                else {**base, **body}
    out: list[tuple[Any, str]] = [(base, "example")]
    for i, name in enumerate(sorted(base)):
        nasty = NASTY_JSON[(rotation + 5 * i) % len(NASTY_JSON)]
        out.append(({**base, name: nasty}, f"{name}={str(nasty)[:20]!r}"))
        if isinstance(base[name], dict):
            out.append(({**base, name: {"cpu": nasty, "": nasty}}, f"{name}.cpu=nasty"))
        if isinstance(base[name], list) and base[name]:
            out.append(({**base, name: [nasty, nasty]}, f"{name}[]=nasty"))
    out += [([], "a list"), ("x", "a string"), (None, "null"), (10**30, "a number")]
    return out


def _json(body: Any) -> bytes:
    return json.dumps(body, allow_nan=True).encode()


def _deep(base: dict) -> bytes:
    """``base`` with its first property replaced by lists nested DEEP levels."""
    first = next(iter(base), "x")
    rest = json.dumps({k: v for k, v in base.items() if k != first})[1:-1]
    return (f'{{"{first}": ' + "[" * DEEP + "]" * DEEP + ("," + rest if rest else "")
            + "}").encode()


def _role_for(path: str) -> str:
    if "/billing/" in path and "/tenants/" not in path:
        return "fran"
    if "/tenants/{tenant_slug}/" in path and "/pools/" not in path \
            and "dedicated-nodes" not in path:
        return "alice"
    return "pat"


@pytest.mark.slow
def test_crawl_every_api_endpoint_as_every_role_never_500(world):
    crawl = Crawl()
    crawl.clients = _clients(world)
    failures = crawl.failures
    rotation, operation_count = itertools.count(), itertools.count()
    outsider_leaks = []
    # every endpoint: GET as every role on every variant; every method on the real URL
    for route, _pattern in _patterns():
        if not route.startswith("api/"):
            continue
        for url, real in _fill(route, world):
            for role, (_page, client, _user) in crawl.clients.items():
                if route.startswith("api/schema") and role not in ("anonymous", "pat"):
                    continue  # the same document for everyone, and slow to build
                if not real and role not in (*DEEP_ROLES, "fran", "anonymous"):
                    continue
                response = crawl.request(client, role, "get", url, note="api")
                if response is not None and role == "charlie" and real \
                        and "/tenants/acme/" in url and response.status_code not in (404, 405):
                    outsider_leaks.append(f"GET {url}: {response.status_code}")
                if response is not None and role == "anonymous" and real \
                        and route.startswith("api/v1/") and response.status_code not in (401, 405):
                    outsider_leaks.append(f"GET {url} as anonymous: {response.status_code}")
                if not real and role in ("pat", "fran"):
                    crawl.request(client, role, "post", url, body=b"{}", note="bogus url")
                if not real or route.startswith("api/schema"):
                    continue
                if role in DEEP_ROLES:
                    n = next(rotation)
                    query = {p: NASTY_QUERY[(n + i) % len(NASTY_QUERY)]
                             for i, p in enumerate(QUERY_PARAMS) if p != "format"}
                    crawl.request(client, role, "get", f"{url}?{urlencode(query)}",
                                  note="query")
                    for extra in _pod_queries(url, world, n):
                        crawl.request(client, role, "get", f"{url}?{urlencode(extra)}",
                                      note="pod log")
                    crawl.request(client, role, "get", f"{url}?limit=9999999999999999999&"
                                  "offset=99999999999999999999", note="limit")
                methods = METHODS[1:] if role in ("pat", "alice") else ["post"]
                for method in methods:
                    nasty = NASTY_JSON[next(rotation) % len(NASTY_JSON)]
                    crawl.request(client, role, method, url,
                                  body=_json({"x": nasty}) if method != "head" else None,
                                  note=f"body x={str(nasty)[:20]!r}")
    # every operation of the schema with valid-looking and fuzzed bodies
    response = crawl.clients["pat"][1].get("/api/schema/?format=json")
    assert response.status_code == 200
    schema = json.loads(response.content)
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            node = (operation.get("requestBody", {}).get("content", {})
                    .get("application/json", {}).get("schema"))
            if node is None:
                continue
            role = _role_for(path)
            url = path
            for name in re.findall(r"\{(\w+)\}", path):
                url = url.replace(f"{{{name}}}", _values(
                    path, "pk" if name == "id" else name, world)[0])
            client = crawl.clients[role][1]
            bodies = _bodies(schema, path, node, next(rotation))
            for body, note in bodies:
                crawl.request(client, role, method, url, body=_json(body), note=note)
            base = bodies[0][0]
            raws = [(_deep(base), "deeply nested"), (b'{"a": ', "truncated JSON"),
                    (b"\xff\xfe\x00", "not UTF-8")]
            if next(operation_count) % 4 == 0:  # a sample: it is the same code every time
                raws.append((b'{"name": "' + b"x" * 10_000_000 + b'"}', "10 MB"))
            for raw, note in raws:
                answer = crawl.request(client, role, method, url, body=raw, note=note)
                if answer is not None and (answer.status_code // 100 != 4
                                           or "json" not in answer.get("Content-Type", "")):
                    failures.append(f"{method.upper()} {url} as {role} [{note}]: "
                                    f"{answer.status_code} {answer.get('Content-Type')}, "
                                    "not a JSON 4xx")
    print(f"api crawl: {crawl.count} requests, {sum(crawl.spent.values()):.1f} s CPU")
    for key, spent in sorted(crawl.spent.items(), key=lambda kv: -kv[1])[:14]:
        print(f"{spent:6.2f} {key}")
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(sorted(set(failures)))
    assert not outsider_leaks, ("the outsider or anonymous reached tenant A's objects:\n"
                                + "\n".join(outsider_leaks))
