"""Kueue mode's pure half: the Kueue objects built from a plain spec, a job as Kueue
takes it, and a Workload read back (k8s_sync/kueue.py)."""

from decimal import Decimal

import pytest

from core.choices import Tier
from k8s_sync import kueue, manifests
from k8s_sync.kueue import KueueSpec, QueueSpec
from k8s_sync.reconcile import Owner, plan
from k8s_sync.specs import JobSpec

H800 = "NVIDIA-H800"
A100 = "NVIDIA-A100-SXM4-80GB"


def _spec(**overrides):
    grants = {f"gpu:{H800}": Decimal(8), "cpu": Decimal("128.5"), "memory": Decimal(1024),
              "mig:1g.10gb": Decimal(4), "storage:standard": Decimal(100)}
    queues = (
        QueueSpec("acme", "prod", "prod", nominal=grants, borrowing={}),
        QueueSpec("acme", "dev", "dev", nominal={f"gpu:{H800}": Decimal(4)},
                  borrowing={f"gpu:{H800}": Decimal(4)}),
        QueueSpec("acme", "dev", "batch", nominal={}, borrowing={f"gpu:{H800}": Decimal(16)}),
        QueueSpec("beta", "dev", "dev", nominal={f"gpu:{A100}": Decimal(8),
                                                 "gpu-shared": Decimal(6)}),
    )
    fields = {"queues": queues, "topology_levels": ("trainyard.io/rack", "trainyard.io/switch")}
    fields.update(overrides)
    return KueueSpec(**fields)


def _objects(spec=None):
    return kueue.desired_kueue_objects(spec or _spec())


def _one(objects, kind, name):
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name, [o["metadata"]["name"] for o in objects])
    return found[0]


def _quota(cq, flavor, resource):
    for group in cq["spec"]["resourceGroups"]:
        for f in group["flavors"]:
            if f["name"] == flavor:
                for r in f["resources"]:
                    if r["name"] == resource:
                        return r
    raise AssertionError(f"{flavor}/{resource} not in {cq['metadata']['name']}")


def test_every_object_is_labelled_as_trainyards_and_listed_in_apply_order():
    objects = _objects()
    kinds = [o["kind"] for o in objects]
    order = [kind for _api, kind in kueue.KINDS]
    assert kinds == sorted(kinds, key=order.index)
    for obj in objects:
        assert obj["apiVersion"] == "kueue.x-k8s.io/v1beta2"
        assert obj["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "trainyard",
                                             "trainyard.io/component": "kueue"}
        assert Owner(labels=kueue.owner_labels(), kinds=kueue.KINDS,
                     any_namespace=True).owns(obj)


def test_a_flavor_per_gpu_model_mig_profile_shared_gpus_and_cpu():
    objects = _objects()
    h800 = _one(objects, "ResourceFlavor", kueue.gpu_flavor_name(H800))
    assert h800["spec"] == {"nodeLabels": {"nvidia.com/gpu.product": H800},
                            "topologyName": "trainyard"}
    assert _one(objects, "ResourceFlavor", kueue.gpu_flavor_name(A100))["spec"][
        "nodeLabels"] == {"nvidia.com/gpu.product": A100}
    assert _one(objects, "ResourceFlavor", "mig-1g-10gb")["spec"] == {}
    _one(objects, "ResourceFlavor", kueue.SHARED_FLAVOR)
    _one(objects, "ResourceFlavor", kueue.DEFAULT_FLAVOR)
    assert kueue.gpu_flavor_name(H800) == "gpu-nvidia-h800"


def test_production_never_borrows_and_never_preempts_inside_its_queue():
    prod = _one(_objects(), "ClusterQueue", "ty-acme-prod")
    assert prod["spec"]["cohortName"] == "trainyard"
    assert prod["spec"]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "ty-acme-prod"}}
    assert _quota(prod, "gpu-nvidia-h800", "nvidia.com/gpu") == {
        "name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "0"}
    assert _quota(prod, "trainyard-default", "cpu")["nominalQuota"] == "128500m"
    assert _quota(prod, "trainyard-default", "memory")["nominalQuota"] == "1Ti"
    assert _quota(prod, "mig-1g-10gb", "nvidia.com/mig-1g.10gb")["nominalQuota"] == "4"
    for group in prod["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            assert all(r["borrowingLimit"] == "0" for r in flavor["resources"])
    assert prod["spec"]["preemption"] == {"reclaimWithinCohort": "Any",
                                          "withinClusterQueue": "Never"}


def test_development_borrows_up_to_its_ceiling_and_may_preempt_only_batch():
    objects = _objects()
    dev = _one(objects, "ClusterQueue", "ty-acme-dev")
    assert _quota(dev, "gpu-nvidia-h800", "nvidia.com/gpu") == {
        "name": "nvidia.com/gpu", "nominalQuota": "4", "borrowingLimit": "4"}
    # a model the pool has no grant of: no quota and no borrowing
    assert _quota(dev, kueue.gpu_flavor_name(A100), "nvidia.com/gpu") == {
        "name": "nvidia.com/gpu", "nominalQuota": "0", "borrowingLimit": "0"}
    batch_value = next(t.value for t in _spec().tiers if t.name == Tier.BATCH)
    assert dev["spec"]["preemption"] == {
        "reclaimWithinCohort": "Any", "withinClusterQueue": "Never",
        "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": batch_value}}


def test_batch_has_no_nominal_quota_and_only_borrows():
    batch = _one(_objects(), "ClusterQueue", "ty-acme-dev-batch")
    for group in batch["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            assert all(r["nominalQuota"] == "0" for r in flavor["resources"])
    assert _quota(batch, "gpu-nvidia-h800", "nvidia.com/gpu")["borrowingLimit"] == "16"
    assert batch["spec"]["preemption"] == {"reclaimWithinCohort": "Never",
                                           "withinClusterQueue": "Never"}


def test_without_a_borrowing_cap_development_and_batch_have_no_borrowing_limit():
    """No cap (``QueueSpec.borrowing`` None): Kueue's default, no ``borrowingLimit``, as
    the engine's "any idle capacity"; production still never borrows."""
    spec = _spec(queues=(
        QueueSpec("acme", "prod", "prod", nominal={f"gpu:{H800}": Decimal(4)}, borrowing=None),
        QueueSpec("acme", "dev", "dev", nominal={f"gpu:{H800}": Decimal(4)}, borrowing=None),
        QueueSpec("acme", "dev", "batch", nominal={}, borrowing=None)))
    objects = _objects(spec)
    for name in ("ty-acme-dev", "ty-acme-dev-batch"):
        cq = _one(objects, "ClusterQueue", name)
        assert not [r for g in cq["spec"]["resourceGroups"] for f in g["flavors"]
                    for r in f["resources"] if "borrowingLimit" in r], name
    prod = _one(objects, "ClusterQueue", "ty-acme-prod")
    assert {r["borrowingLimit"] for g in prod["spec"]["resourceGroups"]
            for f in g["flavors"] for r in f["resources"]} == {"0"}


CAPACITY = {f"gpu:{H800}": Decimal(16), f"gpu:{A100}": Decimal(16), "cpu": Decimal("832.5"),
            "memory": Decimal("4096.7"), "mig:1g.10gb": Decimal(12),
            "mig:3g.40gb": Decimal(4), "gpu-shared": Decimal(16),
            "gpu-memory": Decimal(2560), "storage:standard": Decimal(1000)}


def test_the_cohort_holds_the_capacity_no_queue_was_granted():
    """Kueue lends only the nominal quota a cohort adds up to, the engine any idle card:
    the capacity nobody was granted is the cohort's own nominal quota."""
    spec = _spec(capacity=CAPACITY)
    assert kueue.cohort_quota(spec) == {
        f"gpu:{A100}": 8, f"gpu:{H800}": 4,        # 16 - (8 prod + 4 dev); 16 - 8
        "cpu": Decimal("704"), "memory": Decimal(3072) + Decimal(716) / 1024,  # a MiB down
        "gpu-shared": 10, "mig:1g.10gb": 8, "mig:3g.40gb": 4}   # nobody has 3g.40gb
    cohort = _one(_objects(spec), "Cohort", "trainyard")
    assert _quota(cohort, kueue.gpu_flavor_name(H800), "nvidia.com/gpu") == {
        "name": "nvidia.com/gpu", "nominalQuota": "4"}
    memory = _quota(cohort, "trainyard-default", "memory")["nominalQuota"]
    assert memory == "3146444Mi"   # 3072 x 1024 + 716
    assert _quota(cohort, "trainyard-default", "cpu")["nominalQuota"] == "704"
    assert _quota(cohort, "mig-3g-40gb", "nvidia.com/mig-3g.40gb")["nominalQuota"] == "4"
    assert "borrowingLimit" not in _quota(cohort, "trainyard-default", "cpu")
    # grants adding up to more than the cluster (overcommitted tenants): nothing of its own
    small = _spec(capacity={f"gpu:{H800}": Decimal(8)})
    assert kueue.cohort_quota(small)[f"gpu:{H800}"] == 0
    # the nodes not observed yet: no quota of its own
    assert _one(_objects(_spec()), "Cohort", "trainyard")["spec"] == {}


def test_every_queue_covers_every_flavor_of_the_cluster():
    """A pool may borrow a model it was not granted (no cap): its queue names the flavor
    with nominal 0, as every queue names every counted resource the nodes have."""
    objects = _objects(_spec(capacity=CAPACITY))
    dev = _one(objects, "ClusterQueue", "ty-acme-dev")
    assert _quota(dev, "mig-3g-40gb", "nvidia.com/mig-3g.40gb") == {
        "name": "nvidia.com/mig-3g.40gb", "nominalQuota": "0", "borrowingLimit": "0"}
    assert _one(objects, "ResourceFlavor", "mig-3g-40gb")
    groups = {tuple(tuple(g["coveredResources"]) for g in o["spec"]["resourceGroups"])
              for o in objects if o["kind"] in ("ClusterQueue", "Cohort")}
    assert len(groups) == 1


def test_every_queue_covers_the_same_resources_each_in_one_group():
    queues = [o for o in _objects() if o["kind"] == "ClusterQueue"]
    groups = {tuple(tuple(g["coveredResources"]) for g in q["spec"]["resourceGroups"])
              for q in queues}
    assert len(groups) == 1
    covered = [r for g in next(iter(groups)) for r in g]
    assert len(covered) == len(set(covered))
    assert set(covered) == {"cpu", "memory", "nvidia.com/gpu", "nvidia.com/mig-1g.10gb",
                            "nvidia.com/gpu.shared"}
    for q in queues:  # every flavor lists every covered resource of its group, in order
        for g in q["spec"]["resourceGroups"]:
            for f in g["flavors"]:
                assert [r["name"] for r in f["resources"]] == g["coveredResources"]


def test_local_queues_priority_classes_cohort_and_topology():
    objects = _objects()
    lq = _one(objects, "LocalQueue", "trainyard-batch")
    assert lq["metadata"]["namespace"] == "ty-acme-dev"
    assert lq["spec"] == {"clusterQueue": "ty-acme-dev-batch"}
    names = {(o["metadata"].get("namespace"), o["metadata"]["name"])
             for o in objects if o["kind"] == "LocalQueue"}
    assert names == {("ty-acme-prod", "trainyard"), ("ty-acme-dev", "trainyard"),
                     ("ty-acme-dev", "trainyard-batch"), ("ty-beta-dev", "trainyard")}
    values = {o["metadata"]["name"]: o["value"] for o in objects
              if o["kind"] == "WorkloadPriorityClass"}
    assert values["trainyard-production"] > values["trainyard-development"] > values[
        "trainyard-batch"]
    _one(objects, "Cohort", "trainyard")
    topology = _one(objects, "Topology", "trainyard")
    assert topology["spec"]["levels"] == [{"nodeLabel": "trainyard.io/rack"},
                                          {"nodeLabel": "trainyard.io/switch"},
                                          {"nodeLabel": "kubernetes.io/hostname"}]


def test_no_topology_levels_no_topology_and_no_topology_name():
    objects = _objects(_spec(topology_levels=()))
    assert not [o for o in objects if o["kind"] == "Topology"]
    assert all("topologyName" not in o["spec"] for o in objects
               if o["kind"] == "ResourceFlavor")


def test_the_same_spec_builds_the_same_objects_and_plans_no_write_against_them():
    first, again = _objects(), _objects()
    assert first == again
    # the cluster holding them (with fields Kueue's defaulting adds) needs no write
    observed = []
    for obj in first:
        stored = {**obj, "metadata": {**obj["metadata"], "uid": "u", "resourceVersion": "7"}}
        if obj["kind"] == "ClusterQueue":
            stored["spec"] = {**obj["spec"], "queueingStrategy": "BestEffortFIFO",
                              "stopPolicy": "None", "flavorFungibility": {
                                  "whenCanBorrow": "MayStopSearch"}}
        observed.append(stored)
    todo = plan(first, observed, Owner(labels=kueue.owner_labels(), kinds=kueue.KINDS,
                                       any_namespace=True))
    assert todo.empty
    # a grant raised changes exactly its queue
    raised = _spec(queues=(QueueSpec("acme", "prod", "prod",
                                     nominal={f"gpu:{H800}": Decimal(9)}),))
    todo = plan(kueue.desired_kueue_objects(raised), observed,
                Owner(labels=kueue.owner_labels(), kinds=kueue.KINDS, any_namespace=True))
    assert [o["metadata"]["name"] for o in todo.apply] == ["ty-acme-prod"]
    assert {ref.name for ref in todo.delete} >= {"ty-acme-dev", "ty-acme-dev-batch",
                                                 "ty-beta-dev"}


def test_negative_amounts_are_refused():
    with pytest.raises(ValueError, match="negative"):
        _objects(_spec(queues=(QueueSpec("acme", "dev", "dev",
                                         nominal={"cpu": Decimal(-1)}),)))


def _job(**overrides):
    fields = {"job_id": 7, "tenant_slug": "acme", "pool": "dev", "tier": Tier.DEVELOPMENT,
              "image": "registry.example.org/ml/train:1", "command": ("python", "t.py"),
              "max_run_seconds": 3600, "grace_seconds": 300,
              "checkpoint_interval_seconds": 300, "worker_replicas": 1,
              "gpus_per_replica": 8, "gpu_product": H800}
    fields.update(overrides)
    return manifests.build_pytorchjob(JobSpec(**fields))


def test_a_job_for_kueue_is_labelled_and_created_suspended():
    built = _job(suspend=False)
    job = kueue.kueue_job(built, tier="development", required_topology="trainyard.io/switch")
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "trainyard"
    assert job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == (
        "trainyard-development")
    assert job["spec"]["runPolicy"]["suspend"] is True
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        assert replica["template"]["metadata"]["annotations"][
            "kueue.x-k8s.io/podset-required-topology"] == "trainyard.io/switch"
    assert built["spec"]["runPolicy"]["suspend"] is False  # the input is not changed
    batch = kueue.kueue_job(_job(worker_replicas=0), tier="batch",
                            required_topology="trainyard.io/switch")
    assert batch["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "trainyard-batch"
    assert "kueue.x-k8s.io/podset-required-topology" not in (
        batch["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["metadata"].get(
            "annotations") or {})


def _workload(name="pytorchjob-j7-abcde", conditions=(), active=None, owner="j7", **status):
    obj = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
           "metadata": {"name": name, "namespace": "ty-acme-dev",
                        "creationTimestamp": "2026-01-01T00:00:00Z",
                        "ownerReferences": [{"apiVersion": "kubeflow.org/v1",
                                             "kind": "PyTorchJob", "name": owner,
                                             "uid": "u", "controller": True}]},
           "spec": {"queueName": "trainyard"},
           "status": {"conditions": [
               {"type": t, "status": s, "reason": r, "message": m,
                "lastTransitionTime": "2026-01-01T00:01:00Z"} for t, s, r, m in conditions],
               **status}}
    if active is not None:
        obj["spec"]["active"] = active
    return obj


def test_a_workload_read_back():
    pending = kueue.workload_view(_workload(conditions=[
        ("QuotaReserved", "False", "WaitingForQuota", "insufficient quota for nvidia.com/gpu")]))
    assert pending.owner_kind == "PyTorchJob" and pending.owner_name == "j7"
    assert pending.active and not pending.admitted
    assert pending.pending.reason == "WaitingForQuota"
    admitted = kueue.workload_view(_workload(conditions=[
        ("QuotaReserved", "True", "QuotaReserved", ""), ("Admitted", "True", "Admitted", "")],
        admission={"clusterQueue": "ty-acme-dev", "podSetAssignments": [
            {"name": "master", "flavors": {"nvidia.com/gpu": "gpu-nvidia-h800",
                                           "cpu": "trainyard-default"}}]}))
    assert admitted.admitted and admitted.pending is None
    assert admitted.cluster_queue == "ty-acme-dev"
    assert admitted.flavors == ("gpu-nvidia-h800", "trainyard-default")
    assert admitted.conditions["Admitted"].at.isoformat() == "2026-01-01T00:01:00+00:00"
    evicted = kueue.workload_view(_workload(active=False, conditions=[
        ("Admitted", "False", "NoReservation", ""),
        ("Evicted", "True", "Preempted", "Preempted to accommodate a workload"),
        ("Preempted", "True", "InCohortReclamation", "reclaimed")]))
    assert not evicted.active and evicted.evicted.reason == "Preempted"
    by_job = kueue.workloads_by_job([_workload(), _workload(owner="other", name="w2")])
    assert set(by_job) == {("ty-acme-dev", "j7"), ("ty-acme-dev", "other")}
    assert kueue.workload_active_patch(False) == {"spec": {"active": False}}


def test_every_object_validates_against_kueues_v1beta2_crd_schemas():
    from k8s_sync.crd_validation import schema_errors

    objects = _objects()
    assert {o["kind"] for o in objects} == {kind for _api, kind in kueue.KINDS}
    for obj in objects:
        assert schema_errors(obj) == [], (obj["kind"], obj["metadata"]["name"])
    job = kueue.kueue_job(_job(), tier="development", required_topology="trainyard.io/switch")
    assert schema_errors(job) == []


def test_a_trainjob_for_kueue_is_suspended_by_its_own_field():
    trainjob = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                "metadata": {"name": "tj-7", "namespace": "ty-acme-dev", "labels": {}},
                "spec": {"runtimeRef": {"name": "torch-distributed"}, "suspend": False}}
    job = kueue.kueue_job(trainjob, tier="production")
    assert job["spec"]["suspend"] is True and "runPolicy" not in job["spec"]
    assert job["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "trainyard",
                                         "kueue.x-k8s.io/priority-class": "trainyard-production"}
    wl = _workload(owner="tj-7")
    wl["metadata"]["ownerReferences"][0]["kind"] = "TrainJob"
    assert ("ty-acme-dev", "tj-7") in kueue.workloads_by_job([wl])
