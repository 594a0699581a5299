"""Names are valid DNS-1123, stable, readable when possible and collision-free."""

from __future__ import annotations

import random
import string

import pytest

from k8s_sync import naming

ALPHABET = string.ascii_lowercase + string.digits + "-"


def _random_slugs(count: int, seed: int = 1123) -> list[str]:
    rng = random.Random(seed)
    slugs = {"a", "z", "0", "a-b", "-", "--", "-a", "a-", "team-a", "x" * 40, "9" * 40,
             "-" * 40, "a" + "-" * 38 + "b"}
    while len(slugs) < count:
        slugs.add("".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 40))))
    return sorted(slugs)


SLUGS = _random_slugs(2000)


def test_namespace_is_ty_tenant_pool_for_a_normal_slug():
    assert naming.namespace_name("team-a", "prod") == "ty-team-a-prod"
    assert naming.namespace_name("team-a", "dev") == "ty-team-a-dev"


def test_a_40_char_slug_fits_without_a_hash():
    slug = "abcdefghij" * 4
    assert naming.namespace_name(slug, "prod") == f"ty-{slug}-prod"
    assert len(naming.namespace_name(slug, "prod")) == 48


@pytest.mark.parametrize("pool", naming.POOLS)
def test_namespaces_of_many_slugs_are_valid_and_unique(pool):
    names = [naming.namespace_name(slug, pool) for slug in SLUGS]
    invalid = [n for n in names if not naming.is_dns1123_label(n)]
    assert invalid == []
    assert len(set(names)) == len(SLUGS)
    assert all(n.endswith(f"-{pool}") and n.startswith("ty-") for n in names)


def test_namespaces_are_unique_across_pools():
    names = {naming.namespace_name(s, p) for s in SLUGS for p in naming.POOLS}
    assert len(names) == len(SLUGS) * len(naming.POOLS)


def test_tenant_named_like_a_pool_does_not_collide():
    # tenant "a-dev" in prod vs tenant "a" in dev: the pool is always the last part.
    assert naming.namespace_name("a-dev", "prod") != naming.namespace_name("a", "dev")
    assert naming.namespace_name("a-prod", "dev") == "ty-a-prod-dev"


def test_invalid_slugs_are_hashed_not_rejected_and_stay_distinct():
    odd = ["Team_A", "team a", "TEAM-A", "team-a-", "équipe", "a" * 80, "a" * 81]
    names = [naming.namespace_name(s, "prod") for s in odd]
    assert all(naming.is_dns1123_label(n) for n in names), names
    assert len(set(names)) == len(odd)
    long_name = naming.namespace_name("a" * 80, "prod")
    assert len(long_name) <= 63
    assert long_name == "ty-" + "a" * 46 + "-806164bb-prod"


def test_names_are_stable_across_calls():
    assert naming.namespace_name("a" * 80, "dev") == naming.namespace_name("a" * 80, "dev")
    # pinned: a change of hash function would rename every long namespace in production
    assert naming.dns_label("x" * 70) == "x" * 54 + "-" + naming._digest("x" * 70)
    assert naming._digest("x" * 70) == "c71bd109"


def test_unknown_pool_and_empty_slug_are_rejected():
    with pytest.raises(ValueError, match="unknown pool"):
        naming.namespace_name("team-a", "staging")
    with pytest.raises(ValueError, match="empty"):
        naming.namespace_name("", "prod")


def test_dns_label_keeps_valid_input_verbatim_and_hashes_the_rest():
    assert naming.dns_label("ok-name") == "ok-name"
    assert naming.dns_label("a", "b") == "a-b"
    hashed = naming.dns_label("Not_Valid")
    assert hashed.startswith("not-valid-") and naming.is_dns1123_label(hashed)
    assert naming.dns_label("___") == naming._digest("___")
    with pytest.raises(ValueError):
        naming.dns_label("x", max_length=64)


@pytest.mark.parametrize("max_length", [10, 20, 40, 63])
def test_dns_label_respects_max_length(max_length):
    for slug in SLUGS[:300]:
        name = naming.dns_label("prefix", slug, "x" * 30, max_length=max_length)
        assert len(name) <= max_length and naming.is_dns1123_label(name), name


def test_validators_agree_with_kubernetes_rules():
    assert naming.is_dns1123_label("a") and naming.is_dns1123_label("0a")
    assert not naming.is_dns1123_label("-a") and not naming.is_dns1123_label("a-")
    assert not naming.is_dns1123_label("A") and not naming.is_dns1123_label("a" * 64)
    assert not naming.is_dns1123_label("")
    assert naming.is_dns1035_label("a0") and not naming.is_dns1035_label("0a")
    assert naming.is_dns1123_subdomain("a.b-c.d") and not naming.is_dns1123_subdomain("a..b")
    assert naming.is_label_value("") and naming.is_label_value("A_b.c-1")
    assert not naming.is_label_value("_a") and not naming.is_label_value("a" * 64)


def test_label_values_are_valid_for_any_slug():
    values = [naming.label_value(s) for s in [*SLUGS, "Ünïcode", "a b", "x" * 100]]
    assert all(naming.is_label_value(v) for v in values)
    assert len(set(values)) == len(values)
    assert naming.label_value("team-a") == "team-a"


def test_pool_and_job_labels():
    assert naming.pool_labels("team-a", "dev") == {
        "app.kubernetes.io/managed-by": "trainyard",
        "trainyard.io/tenant": "team-a",
        "trainyard.io/pool": "dev",
    }
    assert naming.job_labels("team-a", "prod", 42) == {
        "app.kubernetes.io/managed-by": "trainyard",
        "trainyard.io/tenant": "team-a",
        "trainyard.io/pool": "prod",
        "trainyard.io/job": "42",
    }
    labels = naming.pool_labels("team-a", "dev")
    labels["x"] = "y"
    assert "x" not in naming.pool_labels("team-a", "dev")  # a fresh dict every call
    assert naming.label_selector({"b": "2", "a": "1"}) == "a=1,b=2"


def test_job_names_are_dns1035_and_fit_pod_and_service_names():
    assert naming.job_name(42) == "tj-42"
    assert naming.job_name(42, "My BERT fine-tune!") == "tj-42-my-bert-fine-tune"
    long = naming.job_name(7, "x" * 200)
    assert len(long) == naming.JOB_NAME_MAX and long.startswith("tj-7-x")
    for job_id in [1, 10**12, "abc-def", "9" * 50]:
        name = naming.job_name(job_id, "---")
        assert naming.is_dns1035_label(name), name
        # the operator names pods/services <job>-worker-<index>
        assert naming.is_dns1035_label(f"{name}-worker-999999")
    assert naming.job_name(1, "a") != naming.job_name(11)
    with pytest.raises(ValueError):
        naming.job_name("Bad_ID")


def test_priority_class_names():
    assert [naming.priority_class_name(t) for t in naming.Tier] == [
        "trainyard-production", "trainyard-development", "trainyard-batch"]
    assert naming.priority_class_name("batch") == "trainyard-batch"
    with pytest.raises(ValueError):
        naming.priority_class_name("urgent")


def test_fixed_object_names_are_valid():
    for name in (naming.SERVICE_ACCOUNT_NAME, naming.ROLE_NAME, naming.ROLE_BINDING_NAME,
                 naming.NETWORK_POLICY_NAME, naming.LIMIT_RANGE_NAME,
                 naming.RESOURCE_QUOTA_NAME):
        assert naming.is_dns1123_label(name)
