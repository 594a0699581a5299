"""Golden tests: whole manifests compared with literals, then schema-validated.

Any change to what Trainyard writes into a cluster shows up here as a readable diff.
"""

from __future__ import annotations

import copy
import dataclasses

import kubernetes_validate
import pytest

from k8s_sync import manifests, naming
from k8s_sync.specs import (
    LimitSpec,
    NetworkSpec,
    PoolSpec,
    QuotaSpec,
    StorageClassQuota,
    TierSpec,
)

K8S_VERSIONS = ["1.29", "1.33", "1.37"]

LABELS = {
    "app.kubernetes.io/managed-by": "trainyard",
    "trainyard.io/pool": "prod",
    "trainyard.io/tenant": "team-a",
}
NS = "ty-team-a-prod"


def full_spec(**overrides) -> PoolSpec:
    spec = PoolSpec(
        tenant_slug="team-a",
        pool="prod",
        tenant_group="oidc:team-a",
        quota=QuotaSpec(
            cpu_cores=64, memory_gib=512, gpus=8, mig={"1g.10gb": 7},
            storage_gib=2048, pvc_count=20,
            storage_classes=(StorageClassQuota("fast-nvme", 500, 5),),
        ),
        limits=LimitSpec(default_request_cpu=1, default_request_memory_gib=4,
                         default_memory_gib=8, max_cpu=96, max_memory_gib=1024,
                         max_gpus=8, max_pvc_storage_gib=1024),
        network=NetworkSpec(egress_cidrs=("10.20.0.0/16",)),
    )
    return dataclasses.replace(spec, **overrides)


GOLDEN_POOL = [
    {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": NS,
            "labels": {
                "app.kubernetes.io/managed-by": "trainyard",
                "pod-security.kubernetes.io/enforce": "baseline",
                "trainyard.io/pool": "prod",
                "trainyard.io/suspended": "false",
                "trainyard.io/tenant": "team-a",
            },
        },
    },
    {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "trainyard-workload", "namespace": NS, "labels": LABELS},
        "automountServiceAccountToken": False,
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "trainyard-researcher", "namespace": NS, "labels": LABELS},
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["events", "limitranges", "persistentvolumeclaims", "pods",
                              "pods/log", "resourcequotas", "services"],
                "verbs": ["get", "list", "watch"],
            },
            {"apiGroups": ["events.k8s.io"], "resources": ["events"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs", "pytorchjobs/status"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["trainer.kubeflow.org"],
             "resources": ["trainjobs", "trainjobs/status"], "verbs": ["get", "list", "watch"]},
        ],
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "trainyard-researcher", "namespace": NS, "labels": LABELS},
        "subjects": [
            {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "oidc:team-a"},
        ],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "trainyard-researcher"},
    },
    {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "trainyard-isolation", "namespace": NS, "labels": LABELS},
        "spec": {
            "podSelector": {},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"podSelector": {}}]}],
            "egress": [
                {"to": [{"podSelector": {}}]},
                {
                    "to": [{
                        "namespaceSelector": {
                            "matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                    }],
                    "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
                },
                {"to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}]},
            ],
        },
    },
    {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "trainyard-defaults", "namespace": NS, "labels": LABELS},
        "spec": {
            "limits": [
                {
                    "type": "Container",
                    "default": {"memory": "8Gi", "nvidia.com/gpu": "0"},
                    "defaultRequest": {"cpu": "1", "memory": "4Gi", "nvidia.com/gpu": "0"},
                    "max": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8"},
                },
                {"type": "PersistentVolumeClaim", "max": {"storage": "1Ti"}},
            ],
        },
    },
    {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "trainyard-quota", "namespace": NS, "labels": LABELS},
        "spec": {
            "hard": {
                "fast-nvme.storageclass.storage.k8s.io/persistentvolumeclaims": "5",
                "fast-nvme.storageclass.storage.k8s.io/requests.storage": "500Gi",
                "persistentvolumeclaims": "20",
                "requests.cpu": "64",
                "requests.memory": "512Gi",
                "requests.nvidia.com/gpu": "8",
                "requests.nvidia.com/mig-1g.10gb": "7",
                "requests.storage": "2Ti",
            },
        },
    },
]

GOLDEN_PRIORITY_CLASSES = [
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "trainyard-production", "labels": {
            "app.kubernetes.io/managed-by": "trainyard", "trainyard.io/tier": "production"}},
        "value": 100000,
        "preemptionPolicy": "PreemptLowerPriority",
        "globalDefault": False,
        "description": "Trainyard production training; never preempted by Trainyard.",
    },
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "trainyard-development", "labels": {
            "app.kubernetes.io/managed-by": "trainyard", "trainyard.io/tier": "development"}},
        "value": 10000,
        "preemptionPolicy": "Never",
        "globalDefault": False,
        "description": "Trainyard development training; preemptible after a grace period.",
    },
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "trainyard-batch", "labels": {
            "app.kubernetes.io/managed-by": "trainyard", "trainyard.io/tier": "batch"}},
        "value": 1000,
        "preemptionPolicy": "Never",
        "globalDefault": False,
        "description": "Trainyard batch training on idle capacity; first to be preempted.",
    },
]


def test_full_pool_matches_golden_in_apply_order():
    assert manifests.desired_pool_objects(full_spec()) == GOLDEN_POOL


def test_each_builder_returns_its_golden_object():
    spec = full_spec()
    builders = [manifests.build_namespace, manifests.build_service_account,
                manifests.build_role, manifests.build_role_binding,
                manifests.build_network_policy, manifests.build_limit_range,
                manifests.build_resource_quota]
    assert [build(spec) for build in builders] == GOLDEN_POOL


def test_minimal_dev_pool_golden():
    spec = PoolSpec("ml", "dev", "ml-researchers",
                    network=NetworkSpec(dns_namespace="dns", dns_pod_labels={}))
    labels = {"app.kubernetes.io/managed-by": "trainyard", "trainyard.io/pool": "dev",
              "trainyard.io/tenant": "ml"}
    objs = {o["kind"]: o for o in manifests.desired_pool_objects(spec)}
    assert objs["LimitRange"] == {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "trainyard-defaults", "namespace": "ty-ml-dev", "labels": labels},
        "spec": {"limits": [{
            "type": "Container",
            "default": {"nvidia.com/gpu": "0"},
            "defaultRequest": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "0"},
        }]},
    }
    assert objs["ResourceQuota"] == {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "trainyard-quota", "namespace": "ty-ml-dev", "labels": labels},
        "spec": {"hard": {}},
    }
    assert objs["NetworkPolicy"]["spec"]["egress"] == [
        {"to": [{"podSelector": {}}]},
        {"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "dns"}}}],
         "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
    ]


def test_suspended_pool_keeps_every_object_and_zeroes_pods_and_gpus():
    normal = manifests.desired_pool_objects(full_spec())
    suspended = manifests.desired_pool_objects(full_spec(suspended=True))
    assert [(o["kind"], o["metadata"]["name"]) for o in suspended] == [
        (o["kind"], o["metadata"]["name"]) for o in normal]
    assert suspended[0]["metadata"]["labels"]["trainyard.io/suspended"] == "true"
    assert suspended[-1]["spec"]["hard"] == {
        "fast-nvme.storageclass.storage.k8s.io/persistentvolumeclaims": "5",
        "fast-nvme.storageclass.storage.k8s.io/requests.storage": "500Gi",
        "persistentvolumeclaims": "20",
        "pods": "0",
        "requests.cpu": "64",
        "requests.memory": "512Gi",
        "requests.nvidia.com/gpu": "0",
        "requests.nvidia.com/mig-1g.10gb": "0",
        "requests.storage": "2Ti",
    }
    # everything but the namespace label and the quota is identical
    assert suspended[1:-1] == normal[1:-1]


def test_pod_security_level_is_configurable_or_omitted():
    assert manifests.build_namespace(full_spec(pod_security="privileged"))["metadata"][
        "labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    labels = manifests.build_namespace(full_spec(pod_security=None))["metadata"]["labels"]
    assert "pod-security.kubernetes.io/enforce" not in labels
    with pytest.raises(ValueError):
        full_spec(pod_security="lax")


def test_priority_classes_golden():
    assert manifests.desired_cluster_objects() == GOLDEN_PRIORITY_CLASSES


def test_duplicate_tiers_are_rejected():
    tier = TierSpec(naming.Tier.BATCH, 1, "Never", "x")
    with pytest.raises(ValueError, match="duplicate"):
        manifests.desired_cluster_objects([tier, tier])


def test_builders_return_fresh_objects_that_share_nothing():
    spec = full_spec()
    first = manifests.desired_pool_objects(spec)
    pristine = copy.deepcopy(first)
    for obj in first:  # vandalise every nested dict and list of the first result
        obj["metadata"]["labels"]["x"] = "y"
        obj.setdefault("spec", {})["poison"] = True
    first[2]["rules"][0]["verbs"].append("delete")
    assert manifests.desired_pool_objects(spec) == pristine
    tiers = manifests.desired_cluster_objects()
    tiers[0]["metadata"]["labels"]["x"] = "y"
    assert manifests.desired_cluster_objects() == GOLDEN_PRIORITY_CLASSES


def test_every_object_is_labelled_managed_and_namespaced_objects_live_in_the_pool():
    for slug in ["a", "x" * 40, "Weird_Slug"]:
        spec = full_spec(tenant_slug=slug)
        for obj in manifests.desired_pool_objects(spec):
            meta = obj["metadata"]
            assert meta["labels"]["app.kubernetes.io/managed-by"] == "trainyard"
            assert meta["labels"]["trainyard.io/tenant"] == naming.label_value(slug)
            if obj["kind"] != "Namespace":
                assert meta["namespace"] == spec.namespace
            assert naming.is_dns1123_label(meta["name"])


def test_limit_range_never_leaves_a_gpu_max_without_a_zero_default():
    for limits in [LimitSpec(max_gpus=8), LimitSpec(), LimitSpec(max_gpus=0, max_cpu=4)]:
        item = manifests.build_limit_range(full_spec(limits=limits))["spec"]["limits"][0]
        assert item["default"]["nvidia.com/gpu"] == "0"
        assert item["defaultRequest"]["nvidia.com/gpu"] == "0"


def test_no_quota_uses_the_unenforced_limits_prefix_for_gpus():
    hard = manifests.build_resource_quota(full_spec())["spec"]["hard"]
    assert not any(key.startswith("limits.nvidia.com") for key in hard)
    assert "scopeSelector" not in manifests.build_resource_quota(full_spec())["spec"]


def _all_builtin_objects() -> list[dict]:
    specs = [
        full_spec(),
        full_spec(suspended=True),
        PoolSpec("m", "dev", "g"),
        PoolSpec("z" * 40, "dev", "system:serviceaccounts:ci",
                 quota=QuotaSpec(shared_gpus=4, extra={"count/pytorchjobs.kubeflow.org": "50"}),
                 network=NetworkSpec(dns_pod_labels={}, egress_cidrs=("0.0.0.0/0",))),
    ]
    objs = [obj for spec in specs for obj in manifests.desired_pool_objects(spec)]
    return objs + manifests.desired_cluster_objects()


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_every_builtin_object_validates_strictly(version):
    objs = _all_builtin_objects()
    for obj in objs:
        used = kubernetes_validate.validate(obj, version, strict=True)
        assert used == version
    assert {o["kind"] for o in objs} == {
        "Namespace", "ServiceAccount", "Role", "RoleBinding", "NetworkPolicy",
        "LimitRange", "ResourceQuota", "PriorityClass"}


def test_strict_validation_would_catch_a_typo():
    # guards the validation test itself: a misspelt field must fail.
    obj = manifests.build_limit_range(full_spec())
    obj["spec"]["limits"][0]["defualt"] = obj["spec"]["limits"][0].pop("default")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(obj, "1.33", strict=True)
