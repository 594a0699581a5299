"""Bounded input everywhere (issue 16): every number the API takes has a range in the
OpenAPI schema and is refused outside it, with the field named and nothing written; every
method a route does not have is a 405. One test per value that was accepted before."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from core.exceptions import ApplicationError
from core.models import Policy
from jobs.models import TrainingJob
from jobs.tests.conftest import H800, inventory, quota, submission  # noqa: F401  (fixtures)
from jobs.validation import Inventory, SubmissionError, scheduler_owned, validate_submission
from tenants import services as tenant_services
from tenants.models import QuotaGrant, QuotaLoan, QuotaRequest, Tenant

HUGE = 2**62


@pytest.fixture
def schema(api, platform_admin) -> dict:
    response = api(platform_admin).get("/api/schema/?format=json")
    assert response.status_code == 200
    return json.loads(response.content)


def _unbounded(schema: dict, node: Any, path: str, out: list[str]) -> None:
    """Every number without a range, string without a length, list without a size."""
    components = schema["components"]["schemas"]
    while isinstance(node, dict) and ("$ref" in node or "allOf" in node):
        ref = node["$ref"] if "$ref" in node else node["allOf"][0]["$ref"]
        node = components[ref.rsplit("/", 1)[1]]
    if "oneOf" in node:
        for i, option in enumerate(node["oneOf"]):
            _unbounded(schema, option, f"{path}|{i}", out)
        return
    kind = node.get("type")
    if kind == "object" or "properties" in node:
        for name, child in node.get("properties", {}).items():
            if not child.get("readOnly"):
                _unbounded(schema, child, f"{path}.{name}", out)
        if isinstance(node.get("additionalProperties"), dict):
            _unbounded(schema, node["additionalProperties"], f"{path}.*", out)
    elif kind == "array":
        if "maxItems" not in node:
            out.append(f"{path}: a list without maxItems")
        _unbounded(schema, node.get("items", {}), f"{path}[]", out)
    elif kind in ("integer", "number") or node.get("format") == "decimal":
        if not node.get("minimum", -HUGE) > -HUGE or not node.get("maximum", HUGE) < HUGE:
            out.append(f"{path}: a number without a range {node}")
    elif kind == "string" and "enum" not in node \
            and node.get("format") not in ("date", "date-time"):
        if "maxLength" not in node:
            out.append(f"{path}: a string without maxLength")
    elif kind is None:
        out.append(f"{path}: no type")


def test_the_schema_states_a_range_for_every_number_a_request_takes(schema):
    problems: list[str] = []
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "query":
                    _unbounded(schema, parameter["schema"],
                               f"{method} {path} ?{parameter['name']}", problems)
            for media, content in operation.get("requestBody", {}).get("content", {}).items():
                if media == "application/json":
                    _unbounded(schema, content["schema"], f"{method} {path}", problems)
    assert not problems, "\n".join(problems)
    job = schema["components"]["schemas"]["JobInputRequest"]["properties"]
    assert (job["workers"]["minimum"], job["workers"]["maximum"]) == (1, 64)
    assert job["max_run_seconds"]["maximum"] == 30 * 24 * 3600
    policy = schema["components"]["schemas"]["PatchedPolicyRequest"]["properties"]
    assert (policy["dynamic_headroom"]["minimum"], policy["dynamic_headroom"]["maximum"]) == (0, 2)


def test_every_method_a_route_does_not_have_is_a_405(api, cast, platform_admin, schema):
    client = api(platform_admin)
    wrong = []
    for path, operations in schema["paths"].items():
        url = path.replace("{tenant_slug}", "acme").replace("{slug}", "acme") \
            .replace("{kind}", "prod").replace("{month}", "2026-01") \
            .replace("{node_name}", "node-1").replace("{line_id}", "1").replace("{id}", "1")
        for method in {"get", "post", "put", "patch", "delete"} - set(operations):
            status = getattr(client, method)(url, {}, format="json").status_code
            # a detail URL of an object that does not exist may answer 404 first
            if status != 405 and not (status == 404 and "{" in path):
                wrong.append(f"{method.upper()} {path}: {status}")
    assert not wrong, "\n".join(wrong)


# --- the policy -------------------------------------------------------------------------


@pytest.mark.parametrize("field,value", [
    ("dynamic_headroom", 50), ("dynamic_idle_threshold", -3), ("dynamic_idle_threshold", 2),
    ("development_grace_seconds", 10**9), ("batch_grace_seconds", -1),
    ("dev_pvc_reclaim_days", 0), ("eviction_watermark", "0.1"),
])
def test_a_policy_value_out_of_range_is_refused_by_the_api(api, platform_admin, field, value):
    def stored() -> Decimal | None:
        value = getattr(Policy.current(), field)
        return None if value is None else Decimal(str(value))

    before = stored()
    response = api(platform_admin).patch("/api/v1/policy/", {field: value}, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()
    assert stored() == before


@pytest.mark.parametrize("field,value", [
    ("dynamic_headroom", 50), ("dynamic_idle_threshold", Decimal(-3)),
    ("development_grace_seconds", 86401), ("dev_pvc_reclaim_days", 0),
    ("dynamic_headroom", "NaN"), ("dynamic_headroom", True),
])
def test_a_policy_value_out_of_range_is_refused_by_the_service(platform_admin, field, value):
    with pytest.raises(ApplicationError) as caught:
        tenant_services.policy_update(actor=platform_admin, **{field: value})
    assert caught.value.field == field


def test_a_policy_value_in_range_is_taken(api, platform_admin):
    response = api(platform_admin).patch(
        "/api/v1/policy/", {"dynamic_headroom": "1.5", "dynamic_idle_threshold": "0"},
        format="json")
    assert response.status_code == 200, response.content
    assert Policy.current().dynamic_headroom == Decimal("1.5")


def test_the_policy_form_states_its_ranges(login, platform_admin):
    page = login(platform_admin).get("/platform/policy/").content.decode()
    assert 'name="dynamic_headroom"' in page and 'max="200"' in page
    assert 'name="dev_pvc_reclaim_days"' in page and 'max="3650"' in page


# --- job submissions ----------------------------------------------------------------------

INVENTORY = Inventory(gpus_per_node={H800: 8}, max_cpu=Decimal(192),
                      max_memory_gib=Decimal(2048), storage_classes={"fast-ssd": True})


@pytest.mark.parametrize("key", [
    "kueue.x-k8s.io/queue-name", "trainyard.io/tenant", "trainyard.io/pool",
    "kueue.x-k8s.io/priority-class", "sub.trainyard.io/x", "TRAINYARD.IO/tenant",
])
@pytest.mark.parametrize("where", ["annotations", "labels"])
def test_a_scheduler_owned_key_is_refused_in_a_submission(key, where):
    with pytest.raises(SubmissionError) as caught:
        validate_submission({**submission(), where: {key: "x"}}, pool="dev",
                            inventory=INVENTORY)
    assert key in caught.value.errors[where]


@pytest.mark.parametrize("key", ["kubesim.trainyard.io/runtime-seconds", "example.org/team",
                                 "notrainyard.io/x", "plain"])
def test_other_annotation_keys_are_not_the_schedulers(key):
    assert not scheduler_owned(key)


def test_the_api_refuses_a_scheduler_annotation_and_creates_no_job(api, bob, quota):  # noqa: F811
    body = {**submission(name="sneaky"), "pool": "dev",
            "annotations": {"kueue.x-k8s.io/queue-name": "vip"}}
    response = api(bob).post("/api/v1/tenants/acme/jobs/", body, format="json")
    assert response.status_code == 400, response.content
    assert "annotations" in response.json()["extra"]["errors"]
    assert not TrainingJob.objects.exists()
    preview = api(bob).post("/api/v1/tenants/acme/jobs/preview/", body, format="json")
    assert preview.status_code == 400 and "annotations" in preview.json()["extra"]["errors"]


@pytest.mark.parametrize("path", ["/proc/self", "/var/run/secrets", "/dev", "/sys",
                                  "/var/run/secrets/kubernetes.io/serviceaccount", "/sys/fs",
                                  "/dev/shm", "/proc", "//proc/self", "/./dev/x"])
def test_a_system_checkpoint_path_is_refused(path):
    with pytest.raises(SubmissionError) as caught:
        validate_submission({**submission(), "checkpoint_path": path}, pool="dev",
                            inventory=INVENTORY)
    assert "checkpoint_path" in caught.value.errors


@pytest.mark.parametrize("field,value", [
    ("command", ["x"] * 257), ("args", ["x" * 10_001]),
    ("env", {f"V{i}": "1" for i in range(257)}),
])
def test_lists_of_a_submission_are_bounded(field, value):
    with pytest.raises(SubmissionError) as caught:
        validate_submission({**submission(), field: value}, pool="dev", inventory=INVENTORY)
    assert field in caught.value.errors


@pytest.mark.parametrize("field,value", [
    ("workers", 65), ("workers", 0), ("gpus_per_worker", 65), ("max_run_seconds", 59),
    ("max_run_seconds", 30 * 24 * 3600 + 1), ("checkpoint_size_gib", 10241),
    ("cpu_per_worker", "100000"), ("expected_seconds", 0),
])
def test_the_api_refuses_a_job_number_out_of_range(api, bob, quota, field, value):  # noqa: F811
    body = {**submission(name="bounded"), "pool": "dev", field: value}
    response = api(bob).post("/api/v1/tenants/acme/jobs/", body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()
    assert not TrainingJob.objects.exists()


# --- quota amounts ------------------------------------------------------------------------


def _names(body: dict, field: str) -> bool:
    """Whether an API error names ``field`` (a serializer's errors, or a service's)."""
    return field in body or body.get("field") == field


def test_an_amount_in_exponent_notation_is_stored_and_shown_plainly(
        api, platform_admin, alice, tenant_a, inventory):  # noqa: F811
    client = api(platform_admin)
    response = client.put("/api/v1/tenants/acme/pools/prod/quota/",
                          {"amounts": {"cpu": "1E+2"}, "reason": "exponent"}, format="json")
    assert response.status_code == 200, response.content
    assert "E" not in json.dumps(response.json())
    assert QuotaGrant.objects.get(pool__tenant=tenant_a, pool__kind="prod",
                                  resource="cpu", superseded_at=None).amount == 100
    pools = client.get("/api/v1/tenants/acme/pools/").json()
    assert "1E+2" not in json.dumps(pools) and '"100"' in json.dumps(pools)
    asked = api(alice).post("/api/v1/tenants/acme/quota-requests/", {
        "pool": "prod", "amounts": {"cpu": "2E+2"}, "justification": "exponent"},
        format="json")
    assert asked.status_code == 201, asked.content
    assert "E+" not in json.dumps(asked.json())
    page = api(alice).get(f"/api/v1/tenants/acme/quota-requests/{asked.json()['id']}/")
    assert "E+" not in page.content.decode()


@pytest.mark.parametrize("url,body", [
    ("/api/v1/tenants/acme/pools/prod/quota/", {"amounts": {"cpu": "1E+12"}, "reason": "x"}),
    ("/api/v1/tenants/acme/pools/prod/quota/", {"amounts": {"cpu": "-1"}, "reason": "x"}),
])
def test_a_quota_amount_out_of_range_is_refused(api, platform_admin, tenant_a, url, body):
    response = api(platform_admin).put(url, body, format="json")
    assert response.status_code == 400, response.content
    assert _names(response.json(), "amounts")
    assert not QuotaGrant.objects.exists()


@pytest.mark.parametrize("amount", ["1E+12", "-1", "1000000001"])
def test_a_requested_or_lent_amount_out_of_range_is_refused(api, alice, tenant_a, tenant_b,
                                                            amount):
    client = api(alice)
    asked = client.post("/api/v1/tenants/acme/quota-requests/", {
        "pool": "prod", "amounts": {"cpu": amount}, "justification": "big"}, format="json")
    assert asked.status_code == 400 and _names(asked.json(), "amounts")
    lent = client.post("/api/v1/tenants/acme/loans/", {
        "pool": "prod", "borrower": "globex", "borrower_pool": "prod", "resource": "cpu",
        "amount": amount, "ends_at": "2999-01-01T00:00:00Z"}, format="json")
    assert lent.status_code == 400 and _names(lent.json(), "amount")
    assert not QuotaRequest.objects.exists() and not QuotaLoan.objects.exists()


def test_the_service_refuses_an_amount_past_the_largest(platform_admin, tenant_a):
    with pytest.raises(ApplicationError) as caught:
        tenant_services.quota_set(actor=platform_admin, pool=tenant_a.pools.get(kind="prod"),
                                  reason="x", amounts={"cpu": 10**10})
    assert caught.value.field == "amounts"
    assert not QuotaGrant.objects.exists()


def test_more_egress_cidrs_than_a_network_policy_should_hold_are_refused(api, platform_admin,
                                                                          tenant_a):
    cidrs = [f"10.{i // 256}.{i % 256}.0/24" for i in range(257)]
    response = api(platform_admin).patch("/api/v1/tenants/acme/", {"egress_cidrs": cidrs},
                                format="json")
    assert response.status_code == 400, response.content
    assert Tenant.objects.get(slug="acme").egress_cidrs == []
    with pytest.raises(ApplicationError):
        tenant_services.policy_update(actor=platform_admin, egress_cidrs=cidrs)


@pytest.mark.parametrize("resource,amount,field", [
    ("cpu", "-1", "amount"), ("cpu", "ten", "amount"), ("gpus", "1", "resource"),
])
def test_a_bad_loan_names_the_loans_own_field(alice, tenant_a, tenant_b, resource, amount,
                                              field):
    """It named "amounts" (the quota map's field), which the loan form and API do not have."""
    import datetime as dt

    from django.utils import timezone

    from tenants.access import access_for

    with pytest.raises(ApplicationError) as caught:
        tenant_services.loan_propose(
            access=access_for(alice, tenant_a), actor=alice,
            lender_pool=tenant_a.pools.get(kind="prod"), borrower="globex",
            borrower_pool="prod", resource=resource, amount=amount,
            ends_at=timezone.now() + dt.timedelta(days=1))
    assert caught.value.field == field
    assert not QuotaLoan.objects.exists()


# --- methods a page does not take -------------------------------------------------------------


def _page_routes() -> list[str]:
    from tests.test_crawl import _PARAM, _patterns

    return ["/" + _PARAM.sub("1", r.replace("^", "").replace("$", "").replace("\\.", "."))
            for r, _p in _patterns() if not r.startswith(("api/", "admin/"))]


def test_a_page_answers_put_patch_and_delete_with_405(login, platform_admin):
    client = login(platform_admin)
    routes = _page_routes()
    assert len(routes) > 40
    wrong = [f"{method.upper()} {url}: {status}" for url in routes
             for method in ("put", "patch", "delete")
             if (status := getattr(client, method)(url).status_code) != 405]
    assert not wrong, "\n".join(wrong)
    answer = client.delete("/t/acme/jobs/")
    assert answer["Allow"] == "GET, HEAD, POST"


@pytest.mark.parametrize("url", [
    "/", "/account/", "/billing/", "/billing/months/2026-01.csv", "/catalog/", "/healthz",
    "/platform/audit/", "/platform/capacity/", "/platform/cluster/", "/platform/queue/",
    "/platform/quota-requests/", "/t/acme/", "/t/acme/invoices/", "/t/acme/invoices/1.csv",
    "/t/acme/invoices/1/", "/t/acme/jobs/", "/t/acme/jobs/1/",
])
def test_a_page_that_takes_no_form_answers_post_with_405(login, platform_admin, tenant_a, url):
    """They rendered themselves for a POST, as if it were a GET."""
    client = login(platform_admin)
    assert client.post(url, {}).status_code == 405
    assert client.get(url).status_code != 405
