"""Placement the cluster carries out: the engine's nodes and switch reach the pod templates
(required node affinity), kube-scheduler (kubesim) puts the pods exactly there, the switch
label follows the policy's topology levels, and a resumed job gets its new placement.

Against kubesim's ``default`` profile over HTTP: eight A100 nodes of 8 GPUs, a100-0..3 on
switch-a1 / rack-a1 and a100-4..7 on switch-a2 / rack-a2.
"""

import pytest
from kubernetes import client as k8s

from jobs import services
from jobs.models import TrainingJob
from jobs.tests.conftest import cycle as _cycle
from k8s_sync.client import get_client
from k8s_sync.observe import relist_all
from tenants import services as tenant_services
from tenants.access import access_for
from tenants.tasks import reconcile_cluster, reconcile_pool

pytestmark = [pytest.mark.timeout(240), pytest.mark.kubesim(profile="default")]
A100 = "NVIDIA-A100-SXM4-80GB"
SWITCH_A1 = {f"a100-{i}" for i in range(4)}
SWITCH_A2 = {f"a100-{i}" for i in range(4, 8)}


@pytest.fixture
def world(cluster, platform_admin, tenant_a, django_capture_on_commit_callbacks):
    reconcile_cluster.apply().get()
    relist_all(get_client())
    tenant_services.policy_update(actor=platform_admin,
                                  overcommit_factors={"gpu": 2, "cpu": 4, "memory": 4})
    for pool in tenant_a.pools.all():
        tenant_services.quota_set(actor=platform_admin, pool=pool, reason="test", amounts={
            f"gpu:{A100}": 64 if pool.kind == "prod" else 16, "cpu": 512, "memory": 4096})
        reconcile_pool.apply(args=[pool.pk]).get()
    return {"capture": django_capture_on_commit_callbacks}


def _submit(world, user, tenant, name, tier, pool, replicas, run_seconds=3600):
    with world["capture"](execute=True):
        return services.job_submit(access=access_for(user, tenant), actor=user, pool=pool, data={
            "name": name, "image": "registry.example.org/ml/trainer:1", "tier": tier,
            "workers": replicas, "gpus_per_worker": 8, "gpu_model": A100,
            "cpu_per_worker": 8, "memory_gib_per_worker": 32, "max_run_seconds": 86400,
            "annotations": {"kubesim.trainyard.io/run-seconds": str(run_seconds)}})


def _state(job):
    return TrainingJob.objects.get(pk=job.pk).state


def _templates(cluster, job):
    obj = k8s.CustomObjectsApi(cluster.api_client).get_namespaced_custom_object(
        "kubeflow.org", "v1", job.pool.namespace, "pytorchjobs", job.k8s_name)
    return [r["template"]["spec"] for r in obj["spec"]["pytorchReplicaSpecs"].values()]


def _required_terms(template):
    return template["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]


def _pods(cluster, job):
    return [p for p in k8s.CoreV1Api(cluster.api_client).list_namespaced_pod(
        job.pool.namespace, label_selector=f"trainyard.io/job={job.pk}").items
        if p.status.phase not in ("Succeeded", "Failed") and not p.metadata.deletion_timestamp]


def _assert_pinned(cluster, job, label, switch, nodes):
    """Every pod template requires ``label In [switch]`` and one of ``nodes`` by name."""
    for template in _templates(cluster, job):
        terms = _required_terms(template)
        assert {t["matchFields"][0]["values"][0] for t in terms} == set(nodes)
        for term in terms:
            assert {"key": label, "operator": "In", "values": [switch]} in term[
                "matchExpressions"]
            assert term["matchFields"] == [
                {"key": "metadata.name", "operator": "In", "values": [term["matchFields"][0][
                    "values"][0]]}]
        assert template["nodeSelector"] == {"nvidia.com/gpu.product": A100}


def test_a_two_node_job_carries_the_chosen_switch_and_lands_under_it(world, cluster, bob,
                                                                      tenant_a):
    job = _submit(world, bob, tenant_a, "two-node", "development", "dev", replicas=2)
    _cycle(world, cluster)
    job.refresh_from_db()
    assert job.state == "admitted"
    assert job.switch in ("switch-a1", "switch-a2") and len(set(job.placement)) == 2
    _assert_pinned(cluster, job, "trainyard.io/switch", job.switch, job.placement)
    _cycle(world, cluster, 30)
    assert _state(job) == "running"
    pods = _pods(cluster, job)
    assert len(pods) == 2
    assert sorted(p.spec.node_name for p in pods) == sorted(job.placement)
    nodes = {n.metadata.name: n.metadata.labels for n in
             k8s.CoreV1Api(cluster.api_client).list_node().items}
    assert {nodes[p.spec.node_name]["trainyard.io/switch"] for p in pods} == {job.switch}


def test_the_policys_last_topology_level_is_the_label_used(world, cluster, platform_admin,
                                                          bob, tenant_a):
    # A fabric whose "blocks" cut across kubesim's switches: only a100-0 and a100-5 share
    # one. Left to itself, kube-scheduler would pack the pair under one switch-a1 node pair.
    core = k8s.CoreV1Api(cluster.api_client)
    for i in range(8):
        core.patch_node(f"a100-{i}", {"metadata": {"labels": {
            "example.com/block": "blk-x" if i in (0, 5) else f"blk-{i}"}}})
    tenant_services.policy_update(actor=platform_admin,
                                  topology_levels=["topology.kubernetes.io/zone",
                                                   "example.com/block"])
    relist_all(get_client())
    job = _submit(world, bob, tenant_a, "by-block", "development", "dev", replicas=2)
    _cycle(world, cluster)
    job.refresh_from_db()
    assert job.state == "admitted" and job.switch == "blk-x"
    assert sorted(job.placement) == ["a100-0", "a100-5"]
    _assert_pinned(cluster, job, "example.com/block", "blk-x", ["a100-0", "a100-5"])
    for template in _templates(cluster, job):
        assert "trainyard.io/switch" not in str(template["affinity"])
    _cycle(world, cluster, 30)
    assert sorted(p.spec.node_name for p in _pods(cluster, job)) == ["a100-0", "a100-5"]


@pytest.mark.slow
def test_a_resumed_job_gets_its_new_placement(world, cluster, alice, bob, tenant_a):
    # switch-a1 full of a production job; the development pair goes under switch-a2.
    first = _submit(world, alice, tenant_a, "prod-a1", "production", "prod", replicas=4,
                    run_seconds=900)
    _cycle(world, cluster)
    _cycle(world, cluster, 30)
    dev = _submit(world, bob, tenant_a, "dev-pair", "development", "dev", replicas=2)
    _cycle(world, cluster)
    _cycle(world, cluster, 30)
    dev.refresh_from_db()
    assert _state(first) == "running" and dev.state == "running"
    first.refresh_from_db()
    assert dev.switch != TrainingJob.objects.get(pk=first.pk).switch
    old_switch = dev.switch
    # A production job of three nodes fits under no switch without the development pair:
    # the pair is preempted, and when the first job ends it resumes under the other switch.
    second = _submit(world, alice, tenant_a, "prod-three", "production", "prod", replicas=3,
                     run_seconds=3600)
    for _ in range(60):  # 30 s steps: the first job ends after 900 s, the grace is 300 s
        _cycle(world, cluster, 30)
        dev.refresh_from_db()
        if dev.restart_count == 1 and dev.state == "running":
            break
    assert _state(second) == "running" and _state(first) == "succeeded"
    assert dev.state == "running" and dev.restart_count == 1
    resumed = dev.transitions.filter(to_state="admitted").order_by("-pk").first()
    assert resumed is not None
    switch_nodes = SWITCH_A1 if old_switch == "switch-a2" else SWITCH_A2
    pods = _pods(cluster, dev)
    assert len(pods) == 2 and {p.spec.node_name for p in pods} <= switch_nodes
    new_switch = "switch-a1" if old_switch == "switch-a2" else "switch-a2"
    assert TrainingJob.objects.get(pk=dev.pk).switch == new_switch
    _assert_pinned(cluster, dev, "trainyard.io/switch", new_switch,
                   [p.spec.node_name for p in pods])
    for template in _templates(cluster, dev):
        assert old_switch not in str(template["affinity"])
