"""A maintenance window's hold in Kueue's terms (pure): a flavor of the held nodes with the
window's tolerations, one cohort-less ClusterQueue open to the target's namespace only, its
LocalQueue; all with Trainyard's Kueue labels, after everything else in apply order."""

from decimal import Decimal

from k8s_sync import kueue
from k8s_sync.kueue_hold import HoldSpec, desired_objects, held_capacity, hold_objects

HOLD = HoldSpec(window_id=7, namespace="ty-acme-dev",
                amounts={"gpu:H100": Decimal(16), "cpu": Decimal(256),
                         "memory": Decimal(2048), "gpu-memory": Decimal(1280)})


def test_the_hold_is_a_flavor_a_queue_and_a_local_queue_of_the_held_nodes():
    flavor, queue, local = hold_objects(HOLD)
    assert [o["kind"] for o in (flavor, queue, local)] == [
        "ResourceFlavor", "ClusterQueue", "LocalQueue"]
    assert {o["metadata"]["name"] for o in (flavor, queue, local)} == {"trainyard-window-7"}
    assert all(o["metadata"]["labels"] == kueue.owner_labels() for o in (flavor, queue, local))
    assert flavor["spec"]["nodeLabels"] == {"trainyard.io/maintenance-hold": "7"}
    assert {"key": "trainyard.io/maintenance", "operator": "Equal", "value": "7",
            "effect": "NoSchedule"} in flavor["spec"]["tolerations"]
    assert "topologyName" not in flavor["spec"]
    assert "cohortName" not in queue["spec"]  # lends nothing, borrows nothing
    assert queue["spec"]["namespaceSelector"] == {"matchLabels": {
        "kubernetes.io/metadata.name": "ty-acme-dev"}}
    [group] = queue["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "nvidia.com/gpu", "memory"]
    assert group["flavors"] == [{"name": "trainyard-window-7", "resources": [
        {"name": "cpu", "nominalQuota": "256"}, {"name": "nvidia.com/gpu", "nominalQuota": "16"},
        {"name": "memory", "nominalQuota": "2Ti"}]}]
    assert local["metadata"]["namespace"] == "ty-acme-dev"
    assert local["spec"] == {"clusterQueue": "trainyard-window-7"}
    topo = hold_objects(HoldSpec(window_id=7, namespace="n", topology=True))[0]
    assert topo["spec"]["topologyName"] == kueue.TOPOLOGY


def test_the_holds_come_after_the_queues_and_leave_the_cohort():
    spec = kueue.KueueSpec(holds=(HOLD,))
    objects = desired_objects(spec)
    assert objects[:-3] == kueue.desired_kueue_objects(spec)
    assert objects[-3:] == hold_objects(HOLD)
    assert held_capacity((HOLD, HOLD))["gpu:H100"] == Decimal(32)
