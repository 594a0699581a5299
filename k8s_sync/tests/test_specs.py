"""Specs validate early, freeze their inputs and render canonical quantities."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import pytest

from k8s_sync import naming
from k8s_sync.specs import (
    LimitSpec,
    NetworkSpec,
    PoolSpec,
    QuotaSpec,
    StorageClassQuota,
    TierSpec,
    cpu_quantity,
    default_tiers,
    gib_quantity,
    mig_resource,
)


@pytest.mark.parametrize(("cores", "expected"), [
    (0, "0"), (16, "16"), ("16", "16"), (0.5, "500m"), (Decimal("1.25"), "1250m"),
    ("0.001", "1m"), (128.0, "128"),
])
def test_cpu_quantity_is_canonical(cores, expected):
    assert cpu_quantity(cores) == expected


@pytest.mark.parametrize(("gib", "expected"), [
    (0, "0"), (1, "1Gi"), (64, "64Gi"), (1024, "1Ti"), (2048, "2Ti"), (1536, "1536Gi"),
    (0.5, "512Mi"), ("1.5", "1536Mi"),
])
def test_gib_quantity_is_canonical(gib, expected):
    assert gib_quantity(gib) == expected


@pytest.mark.parametrize("bad", [-1, "abc", float("nan"), float("inf"), True, "0.0001"])
def test_bad_cpu_quantities_are_rejected(bad):
    with pytest.raises(ValueError):
        cpu_quantity(bad)


def test_mig_resource_names():
    assert mig_resource("1g.10gb") == "nvidia.com/mig-1g.10gb"
    assert mig_resource("mig-3g.40gb") == "nvidia.com/mig-3g.40gb"
    with pytest.raises(ValueError):
        mig_resource("1g")


def test_quota_to_hard_covers_the_catalog():
    quota = QuotaSpec(
        cpu_cores=64, memory_gib=512, gpus=8, shared_gpus=16,
        mig={"3g.40gb": 2, "1g.10gb": 7}, storage_gib=4096, pvc_count=20,
        storage_classes=(StorageClassQuota("fast-nvme", 500, 5), StorageClassQuota("standard")),
        pods=64, extra={"count/pytorchjobs.kubeflow.org": "50"},
    )
    assert quota.to_hard() == {
        "count/pytorchjobs.kubeflow.org": "50",
        "fast-nvme.storageclass.storage.k8s.io/persistentvolumeclaims": "5",
        "fast-nvme.storageclass.storage.k8s.io/requests.storage": "500Gi",
        "persistentvolumeclaims": "20",
        "pods": "64",
        "requests.cpu": "64",
        "requests.memory": "512Gi",
        "requests.nvidia.com/gpu": "8",
        "requests.nvidia.com/gpu.shared": "16",
        "requests.nvidia.com/mig-1g.10gb": "7",
        "requests.nvidia.com/mig-3g.40gb": "2",
        "requests.storage": "4Ti",
    }
    assert list(quota.to_hard()) == sorted(quota.to_hard())


def test_suspended_quota_zeroes_pods_and_every_gpu_key_only():
    quota = QuotaSpec(cpu_cores=8, gpus=4, shared_gpus=2, mig={"1g.10gb": 3}, storage_gib=100)
    assert quota.to_hard(suspended=True) == {
        "pods": "0",
        "requests.cpu": "8",
        "requests.nvidia.com/gpu": "0",
        "requests.nvidia.com/gpu.shared": "0",
        "requests.nvidia.com/mig-1g.10gb": "0",
        "requests.storage": "100Gi",
    }
    # even an unlimited quota stops new pods and GPUs when suspended
    assert QuotaSpec().to_hard(suspended=True) == {"pods": "0", "requests.nvidia.com/gpu": "0"}
    assert QuotaSpec().to_hard() == {}


def test_quota_rejects_traps_and_bad_values():
    with pytest.raises(ValueError, match="silently ignored"):
        QuotaSpec(extra={"limits.nvidia.com/gpu": "4"})
    with pytest.raises(ValueError, match="collides"):
        QuotaSpec(gpus=1, extra={"requests.nvidia.com/gpu": "4"})
    with pytest.raises(ValueError):
        QuotaSpec(gpus=-1)
    with pytest.raises(ValueError):
        QuotaSpec(gpus=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="duplicate"):
        QuotaSpec(storage_classes=(StorageClassQuota("a"), StorageClassQuota("a")))
    with pytest.raises(ValueError):
        StorageClassQuota("Not_A_Class")


def test_specs_copy_and_freeze_their_mappings():
    mig = {"1g.10gb": 1}
    quota = QuotaSpec(mig=mig)
    mig["1g.10gb"] = 99
    assert quota.to_hard() == {"requests.nvidia.com/mig-1g.10gb": "1"}
    with pytest.raises(TypeError):
        quota.mig["2g.20gb"] = 1  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        quota.gpus = 3  # type: ignore[misc]
    labels = {"k8s-app": "kube-dns"}
    net = NetworkSpec(dns_pod_labels=labels)
    labels["evil"] = "x"
    assert dict(net.dns_pod_labels) == {"k8s-app": "kube-dns"}


@pytest.mark.parametrize("cidr", ["10.0.0.0/33", "10.0.0.1/8", "nope", "10.0.0.0"])
def test_network_spec_rejects_bad_cidrs(cidr):
    assert NetworkSpec(egress_cidrs=["10.0.0.0/8", "fd00::/8"]).egress_cidrs == (
        "10.0.0.0/8", "fd00::/8")
    with pytest.raises(ValueError, match="invalid egress CIDR"):
        NetworkSpec(egress_cidrs=(cidr,))


def test_limit_spec_rejects_inverted_bounds():
    with pytest.raises(ValueError, match="must not exceed"):
        LimitSpec(default_request_cpu=4, default_cpu=2)
    with pytest.raises(ValueError, match="must not exceed"):
        LimitSpec(default_request_memory_gib=8, max_memory_gib=4)
    LimitSpec(default_request_cpu=1, default_cpu=2, max_cpu=4)  # fine


def test_pool_spec_derives_namespace_and_labels():
    spec = PoolSpec("team-a", "dev", "oidc:team-a")
    assert spec.namespace == "ty-team-a-dev"
    assert spec.labels == naming.pool_labels("team-a", "dev")
    with pytest.raises(ValueError):
        PoolSpec("team-a", "staging", "g")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        PoolSpec("team-a", "prod", " ")


def test_default_tiers_are_ordered_and_only_production_preempts():
    tiers = default_tiers()
    assert [t.name for t in tiers] == list(naming.Tier)
    assert [t.value for t in tiers] == sorted((t.value for t in tiers), reverse=True)
    assert [t.preemption_policy for t in tiers] == ["PreemptLowerPriority", "Never", "Never"]
    assert [t.priority_class_name for t in tiers] == [
        "trainyard-production", "trainyard-development", "trainyard-batch"]


def test_tier_spec_validates():
    assert TierSpec("batch", 5, "Never", "d").name is naming.Tier.BATCH
    with pytest.raises(ValueError):
        TierSpec(naming.Tier.BATCH, 1_000_000_001, "Never", "reserved for system classes")
    with pytest.raises(ValueError):
        TierSpec(naming.Tier.BATCH, 1, "Sometimes", "d")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        TierSpec("vip", 1, "Never", "d")  # type: ignore[arg-type]
