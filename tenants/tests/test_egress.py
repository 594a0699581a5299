"""Egress CIDRs (policy-wide and per tenant) in each pool's NetworkPolicy, against kubesim
over HTTP: a change reconciles the pools at once; a bad entry is refused and changes
nothing; other tenants' namespaces stay closed."""

import pytest
from kubernetes import client as k8s

from core.models import Policy
from tenants import services
from tenants.models import Tenant
from tenants.network import egress_cidrs_for, parse_cidrs

SAME_NAMESPACE = {"to": [{"podSelector": {}}]}
DNS = {"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name":
                                                     "kube-system"}},
               "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
       "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}
INGRESS = [{"from": [{"podSelector": {}}]}]


@pytest.fixture
def teams(platform_admin, alice, charlie, django_capture_on_commit_callbacks, cluster):
    """Tenants "a" and "b", their pools synced through the on-commit tasks."""
    made = []
    for slug, admin in (("a", alice), ("b", charlie)):
        with django_capture_on_commit_callbacks(execute=True):
            made.append(services.tenant_create(
                actor=platform_admin, slug=slug, name=f"Team {slug}", cost_center=f"CC-{slug}",
                contact_email=f"{slug}@example.org", admins=[admin]))
    return made


def _policy(cluster, ns):
    obj = k8s.NetworkingV1Api(cluster.api_client).read_namespaced_network_policy(
        "trainyard-isolation", ns)
    return cluster.api_client.sanitize_for_serialization(obj)["spec"]


def _cidrs(cluster, ns):
    """The ipBlock CIDRs of the pool's egress rules; the other rules are checked as they
    always were (same namespace, DNS) and ingress stays same-namespace only."""
    spec = _policy(cluster, ns)
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    assert spec["ingress"] == INGRESS
    assert spec["egress"][:2] == [SAME_NAMESPACE, DNS]
    blocks = [peer["ipBlock"]["cidr"] for rule in spec["egress"][2:] for peer in rule["to"]]
    for rule in spec["egress"][2:]:
        assert set(rule) == {"to"}  # all ports
        assert all(set(peer) == {"ipBlock"} for peer in rule["to"])  # no namespaceSelector
    return blocks


def test_cidrs_are_parsed_as_the_api_server_would_and_normalised():
    assert parse_cidrs("10.20.0.0/16, FD00::/8\n10.20.0.0/16\n\n192.0.2.7/32") == [
        "10.20.0.0/16", "fd00::/8", "192.0.2.7/32"]
    assert parse_cidrs(["2001:db8::/32", " 10.0.0.0/8 "]) == ["2001:db8::/32", "10.0.0.0/8"]
    for bad, words in (("10.0.0.0", "needs a prefix length"), ("10.0.0.1/8", "write 10.0.0.0/8"),
                       ("10.0.0.0/33", "not a valid"), ("nope/3", "not a valid"),
                       ("010.0.0.0/8", "not a valid")):
        with pytest.raises(ValueError, match=words) as err:
            parse_cidrs(["10.1.0.0/16", bad])
        assert f"“{bad}”" in str(err.value)
    with pytest.raises(ValueError):
        parse_cidrs({"cidr": "10.0.0.0/8"})


def test_policy_and_tenant_cidrs_reach_every_pools_network_policy(
        teams, platform_admin, api, cluster, django_capture_on_commit_callbacks):
    for ns in ("ty-a-prod", "ty-a-dev", "ty-b-prod", "ty-b-dev"):
        assert _cidrs(cluster, ns) == []

    with django_capture_on_commit_callbacks(execute=True):
        services.policy_update(actor=platform_admin,
                               egress_cidrs="10.20.0.0/16, FD00::/8\n10.20.0.0/16")
    assert Policy.current().egress_cidrs == ["10.20.0.0/16", "fd00::/8"]
    for ns in ("ty-a-prod", "ty-a-dev", "ty-b-prod", "ty-b-dev"):
        assert _cidrs(cluster, ns) == ["10.20.0.0/16", "fd00::/8"]

    # the tenant's own list, through the API (platform admins), joins the policy's
    with django_capture_on_commit_callbacks(execute=True):
        response = api(platform_admin).patch(
            "/api/v1/tenants/a/", {"egress_cidrs": ["192.0.2.0/24", "10.20.0.0/16"]},
            format="json")
    assert response.status_code == 200, response.content
    assert response.json()["egress_cidrs"] == ["192.0.2.0/24", "10.20.0.0/16"]
    for ns in ("ty-a-prod", "ty-a-dev"):
        assert _cidrs(cluster, ns) == ["10.20.0.0/16", "fd00::/8", "192.0.2.0/24"]
    for ns in ("ty-b-prod", "ty-b-dev"):  # another tenant's list is not theirs
        assert _cidrs(cluster, ns) == ["10.20.0.0/16", "fd00::/8"]

    # removing a CIDR removes it from the cluster
    with django_capture_on_commit_callbacks(execute=True):
        services.policy_update(actor=platform_admin, egress_cidrs=["fd00::/8"])
    # (the tenant's own 10.20.0.0/16 stays for its pools)
    assert _cidrs(cluster, "ty-a-prod") == ["fd00::/8", "192.0.2.0/24", "10.20.0.0/16"]
    assert _cidrs(cluster, "ty-b-dev") == ["fd00::/8"]
    with django_capture_on_commit_callbacks(execute=True):
        services.policy_update(actor=platform_admin, egress_cidrs=[])
    assert _cidrs(cluster, "ty-b-prod") == []
    assert _cidrs(cluster, "ty-a-dev") == ["192.0.2.0/24", "10.20.0.0/16"]


def test_a_bad_cidr_is_refused_by_name_and_nothing_changes(
        teams, platform_admin, alice, api, login, cluster, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        services.policy_update(actor=platform_admin, egress_cidrs=["10.20.0.0/16"])
    before = Policy.current().updated_at

    page = login(platform_admin).get("/platform/policy/")
    assert "10.20.0.0/16" in page.content.decode()  # the field shows the current list
    form = {"eviction_watermark": "85",
            "development_grace_seconds": "300", "batch_grace_seconds": "60",
            "default_quota": "", "dynamic_headroom": "20", "dynamic_idle_threshold": "50",
            "egress_cidrs": "10.30.0.0/16\n10.0.0.1/8"}
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        page = login(platform_admin).post("/platform/policy/", form)
    assert page.status_code == 400 and not callbacks
    assert "“10.0.0.1/8” has host bits set: write 10.0.0.0/8." in page.content.decode()
    assert Policy.current().egress_cidrs == ["10.20.0.0/16"]
    assert Policy.current().updated_at == before

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = api(platform_admin).patch("/api/v1/policy/",
                                             {"egress_cidrs": ["10.30.0.0"]}, format="json")
    assert response.status_code == 400 and not callbacks
    assert "“10.30.0.0” is not a CIDR" in response.content.decode()
    assert "egress_cidrs" in response.content.decode()

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = api(platform_admin).patch("/api/v1/tenants/a/",
                                             {"egress_cidrs": ["192.0.2.0/33"]}, format="json")
    assert response.status_code == 400 and not callbacks
    assert "“192.0.2.0/33” is not a valid IPv4 or IPv6 CIDR." in response.content.decode()
    assert Tenant.objects.get(slug="a").egress_cidrs == []
    # a tenant admin cannot change the list (platform admins set it)
    response = api(alice).patch("/api/v1/tenants/a/", {"egress_cidrs": ["192.0.2.0/24"]},
                                format="json")
    assert response.status_code in (403, 404)
    assert Tenant.objects.get(slug="a").egress_cidrs == []
    for ns in ("ty-a-prod", "ty-b-dev"):
        assert _cidrs(cluster, ns) == ["10.20.0.0/16"]


def test_the_tenant_edit_page_sets_the_tenants_own_list(
        teams, platform_admin, login, cluster, django_capture_on_commit_callbacks):
    client = login(platform_admin)
    page = client.get("/t/a/edit/")
    assert page.status_code == 200 and 'name="egress_cidrs"' in page.content.decode()
    form = {"name": "Team a", "cost_center": "CC-a", "contact_name": "",
            "contact_email": "a@example.org", "egress_cidrs": "198.51.100.0/24,,nope"}
    page = client.post("/t/a/edit/", form)
    assert page.status_code == 400
    assert "“nope” is not a CIDR" in page.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        page = client.post("/t/a/edit/", {**form,
                                                          "egress_cidrs": "198.51.100.0/24"})
    assert page.status_code == 302
    tenant = Tenant.objects.get(slug="a")
    assert tenant.egress_cidrs == ["198.51.100.0/24"]
    assert egress_cidrs_for(tenant, policy_cidrs=["198.51.100.0/24", "10.0.0.0/8"]) == (
        "198.51.100.0/24", "10.0.0.0/8")
    assert _cidrs(cluster, "ty-a-prod") == ["198.51.100.0/24"]
    assert _cidrs(cluster, "ty-b-prod") == []
    assert 'name="egress_cidrs"' not in client.get("/platform/tenants/").content.decode()
