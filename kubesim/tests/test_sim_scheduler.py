"""Scheduler: predicates, fit, GPU/MIG/shared resources, priority, preemption, messages."""

from __future__ import annotations

import pytest
from kubernetes.client import ApiClient

from kubesim.sim.harness import SimHarness, condition, make_job, make_pod
from kubesim.sim.predicates import match_expression, tolerates

NS = "team-a"
A100 = "NVIDIA-A100-SXM4-80GB"
H800 = "NVIDIA-H800"


@pytest.fixture
def h():
    h = SimHarness("small", seed=3)
    h.namespace(NS)
    return h


def create(h, pod):
    return h.store.create("pods", pod, namespace=NS)


def node_of(h, name):
    return h.pod(NS, name)["spec"].get("nodeName")


def priority_class(h, name, value, policy="PreemptLowerPriority"):
    h.store.create(
        "priorityclasses.scheduling.k8s.io",
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
            "preemptionPolicy": policy,
        },
    )


# ---- pure predicates ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "expr, labels, want",
    [
        ({"key": "a", "operator": "In", "values": ["x", "y"]}, {"a": "y"}, True),
        ({"key": "a", "operator": "In", "values": ["x"]}, {"a": "y"}, False),
        ({"key": "a", "operator": "In", "values": ["x"]}, {}, False),
        ({"key": "a", "operator": "NotIn", "values": ["x"]}, {"a": "y"}, True),
        ({"key": "a", "operator": "NotIn", "values": ["x"]}, {}, True),
        ({"key": "a", "operator": "Exists"}, {"a": ""}, True),
        ({"key": "a", "operator": "DoesNotExist"}, {"a": ""}, False),
        ({"key": "n", "operator": "Gt", "values": ["4"]}, {"n": "8"}, True),
        ({"key": "n", "operator": "Gt", "values": ["8"]}, {"n": "8"}, False),
        ({"key": "n", "operator": "Lt", "values": ["9"]}, {"n": "8"}, True),
        ({"key": "n", "operator": "Lt", "values": ["9"]}, {"n": "x"}, False),
    ],
)
def test_match_expression(expr, labels, want):
    assert match_expression(labels, expr) is want


@pytest.mark.parametrize(
    "tols, taint, want",
    [
        ([], {"key": "k", "value": "v", "effect": "NoSchedule"}, False),
        (
            [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}],
            {"key": "k", "value": "v", "effect": "NoSchedule"},
            True,
        ),
        (
            [{"key": "k", "operator": "Equal", "value": "w"}],
            {"key": "k", "value": "v", "effect": "NoSchedule"},
            False,
        ),
        (
            [{"key": "k", "operator": "Exists"}],
            {"key": "k", "value": "v", "effect": "NoExecute"},
            True,
        ),
        (
            [{"key": "k", "operator": "Exists", "effect": "NoExecute"}],
            {"key": "k", "value": "v", "effect": "NoSchedule"},
            False,
        ),
        ([{"operator": "Exists"}], {"key": "anything", "effect": "NoSchedule"}, True),
    ],
)
def test_tolerates(tols, taint, want):
    assert tolerates(tols, taint) is want


# ---- through the store ----------------------------------------------------------------------
def test_node_selector_on_gpu_product(h):
    create(h, make_pod("p-h800", gpus=4, node_selector={"nvidia.com/gpu.product": H800}))
    create(h, make_pod("p-a100", gpus=8, node_selector={"nvidia.com/gpu.product": A100}))
    create(h, make_pod("p-cpu", resources={"cpu": "2", "memory": "1Gi"}))
    h.advance(1)
    assert node_of(h, "p-h800") == "h800-0"
    assert node_of(h, "p-a100") in ("a100-0", "a100-1")
    assert node_of(h, "p-cpu") == "cpu-0"  # CPU pods keep off GPU nodes
    ev = h.events(NS, "Scheduled")
    assert any(e["message"] == f"Successfully assigned {NS}/p-h800 to h800-0" for e in ev)
    assert h.sim.gpu_assignment(NS, "p-h800") and len(h.sim.gpu_assignment(NS, "p-h800")) == 4


def test_required_node_affinity_and_taints(h):
    h.store.patch(
        "nodes",
        "a100-0",
        {"spec": {"taints": [{"key": "dedicated", "value": "research", "effect": "NoSchedule"}]}},
    )
    aff = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "nvidia.com/gpu.product", "operator": "In", "values": [A100]},
                            {"key": "nvidia.com/gpu.count", "operator": "Gt", "values": ["4"]},
                            {
                                "key": "nvidia.com/mig.strategy",
                                "operator": "NotIn",
                                "values": ["mixed"],
                            },
                            {"key": "no-such-label", "operator": "DoesNotExist"},
                        ]
                    }
                ]
            }
        }
    }
    create(h, make_pod("aff", gpus=1, affinity=aff))
    create(
        h,
        make_pod(
            "tol",
            gpus=1,
            affinity=aff,
            tolerations=[
                {
                    "key": "dedicated",
                    "operator": "Equal",
                    "value": "research",
                    "effect": "NoSchedule",
                }
            ],
        ),
    )
    h.advance(1)
    # "aff" cannot use the tainted a100-0; a100-mig-0 is excluded by NotIn
    assert node_of(h, "aff") == "a100-1"
    assert node_of(h, "tol") in ("a100-0", "a100-1")


def test_unschedulable_condition_message_and_event(h):
    create(h, make_pod("huge", gpus=16))
    create(h, make_pod("h800-big", gpus=9, node_selector={"nvidia.com/gpu.product": H800}))
    h.advance(1)
    pod = h.pod(NS, "huge")
    assert pod["spec"].get("nodeName") is None
    cond = condition(pod, "PodScheduled")
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable"
    assert cond["message"] == (
        "0/6 nodes are available: 6 Insufficient nvidia.com/gpu. preemption: "
        "0/6 nodes are available: 6 No preemption victims found for incoming pod."
    )
    msg2 = condition(h.pod(NS, "h800-big"), "PodScheduled")["message"]
    assert msg2.startswith(
        "0/6 nodes are available: 1 Insufficient nvidia.com/gpu, "
        "5 node(s) didn't match Pod's node affinity/selector."
    )
    assert "5 Preemption is not helpful for scheduling" in msg2
    ev = [e for e in h.events(NS, "FailedScheduling") if e["involvedObject"]["name"] == "huge"]
    assert ev and ev[0]["type"] == "Warning" and ev[0]["message"] == cond["message"]


def test_cordoned_node_is_skipped_and_reported(h):
    h.store.patch("nodes", "h800-0", {"spec": {"unschedulable": True}})
    create(h, make_pod("c", gpus=1, node_selector={"nvidia.com/gpu.product": H800}))
    h.advance(1)
    msg = condition(h.pod(NS, "c"), "PodScheduled")["message"]
    assert "1 node(s) were unschedulable" in msg
    h.store.patch("nodes", "h800-0", {"spec": {"unschedulable": None}})
    h.advance(2)
    assert node_of(h, "c") == "h800-0"


def test_pending_pod_binds_when_capacity_frees(h):
    create(
        h,
        make_pod(
            "first",
            gpus=8,
            node_selector={"nvidia.com/gpu.product": H800},
            annotations={"run-seconds": 30},
        ),
    )
    h.advance(1)
    create(h, make_pod("second", gpus=8, node_selector={"nvidia.com/gpu.product": H800}))
    h.advance(5)
    assert node_of(h, "second") is None
    h.advance(28)  # "first" ends at t=33; "second" is bound on the next tick
    assert h.pod(NS, "first")["status"]["phase"] == "Succeeded"
    assert node_of(h, "second") == "h800-0"
    assert h.pod(NS, "second")["status"]["phase"] == "Pending"  # bound, container not started
    assert condition(h.pod(NS, "second"), "PodScheduled")["status"] == "True"
    h.advance(6)
    assert condition(h.pod(NS, "second"), "PodScheduled")["status"] == "True"


def test_higher_priority_pending_pod_goes_first(h):
    priority_class(h, "low", 100)
    priority_class(h, "high", 1000, policy="Never")
    create(
        h,
        make_pod(
            "low", gpus=8, node_selector={"nvidia.com/gpu.product": H800}, priority_class="low"
        ),
    )
    create(
        h,
        make_pod(
            "high", gpus=8, node_selector={"nvidia.com/gpu.product": H800}, priority_class="high"
        ),
    )
    h.advance(1)
    assert node_of(h, "high") == "h800-0"
    assert node_of(h, "low") is None


def test_preemption_never_policy(h):
    priority_class(h, "low", 100)
    priority_class(h, "polite", 1000, policy="Never")
    create(
        h,
        make_pod(
            "victim", gpus=8, node_selector={"nvidia.com/gpu.product": H800}, priority_class="low"
        ),
    )
    h.advance(1)
    create(
        h,
        make_pod(
            "polite",
            gpus=8,
            node_selector={"nvidia.com/gpu.product": H800},
            priority_class="polite",
        ),
    )
    h.advance(2)
    msg = condition(h.pod(NS, "polite"), "PodScheduled")["message"]
    assert msg.endswith("preemption: not eligible due to preemptionPolicy=Never.")
    assert not h.pod(NS, "victim")["metadata"].get("deletionTimestamp")


def test_preemption_evicts_lower_priority_with_grace(h):
    priority_class(h, "low", 100)
    priority_class(h, "high", 1000)
    create(
        h,
        make_pod(
            "victim",
            gpus=6,
            node_selector={"nvidia.com/gpu.product": H800},
            priority_class="low",
            grace=20,
        ),
    )
    create(
        h,
        make_pod(
            "small-low",
            gpus=2,
            node_selector={"nvidia.com/gpu.product": H800},
            priority_class="low",
            grace=20,
        ),
    )
    h.advance(5)
    assert h.pod(NS, "victim")["status"]["phase"] == "Running"
    create(
        h,
        make_pod(
            "boss", gpus=6, node_selector={"nvidia.com/gpu.product": H800}, priority_class="high"
        ),
    )
    h.advance(1)
    victim = h.pod(NS, "victim")
    assert victim["metadata"]["deletionTimestamp"]
    assert victim["metadata"]["deletionGracePeriodSeconds"] == 20
    dt = condition(victim, "DisruptionTarget")
    assert dt["reason"] == "PreemptionByScheduler"
    # only the minimal victim set: the 2-GPU pod is reprieved
    assert not h.pod(NS, "small-low")["metadata"].get("deletionTimestamp")
    boss = h.pod(NS, "boss")
    assert boss["status"]["nominatedNodeName"] == "h800-0"
    assert boss["spec"].get("nodeName") is None
    pre = h.events(NS, "Preempted")
    assert pre and pre[0]["involvedObject"]["name"] == "victim"
    assert pre[0]["message"] == f"Preempted by pod {boss['metadata']['uid']} on node h800-0"
    h.advance(10)
    assert node_of(h, "boss") is None  # still inside the victim's grace period
    h.advance(15)
    assert [p["metadata"]["name"] for p in h.pods(NS) if p["metadata"]["name"] == "victim"] == []
    assert node_of(h, "boss") == "h800-0"


def test_mig_and_shared_resources(h):
    create(h, make_pod("mig3", resources={"nvidia.com/mig-3g.40gb": "2"}))
    create(h, make_pod("mig1", resources={"nvidia.com/mig-1g.10gb": "5"}))
    create(h, make_pod("shared", resources={"nvidia.com/gpu.shared": "3"}))
    create(h, make_pod("mig-too-many", resources={"nvidia.com/mig-3g.40gb": "5"}))
    h.advance(1)
    assert node_of(h, "mig3") == "a100-mig-0"
    assert node_of(h, "mig1") == "a100-mig-0"
    assert node_of(h, "shared") == "shared-0"
    assert node_of(h, "mig-too-many") is None
    assert (
        "Insufficient nvidia.com/mig-3g.40gb"
        in condition(h.pod(NS, "mig-too-many"), "PodScheduled")["message"]
    )
    mig = h.sim.gpu_assignment(NS, "mig3")
    assert [d["mig_profile"] for d in mig] == ["3g.40gb", "3g.40gb"]
    assert len({d["gpu"] for d in mig}) == 2 and all(d["gpu"] >= 4 for d in mig)
    shared = h.sim.gpu_assignment(NS, "shared")
    assert len(shared) == 3 and len({d["gpu"] for d in shared}) == 3  # spread over GPUs
    # whole GPUs on the MIG node stay available as nvidia.com/gpu
    create(h, make_pod("whole", gpus=4, node_selector={"nvidia.com/mig.strategy": "mixed"}))
    h.advance(1)
    assert node_of(h, "whole") == "a100-mig-0"
    assert sorted(d["gpu"] for d in h.sim.gpu_assignment(NS, "whole")) == [0, 1, 2, 3]


def test_job_pods_prefer_one_switch_and_pack(h):
    for i in range(3):
        create(
            h,
            make_pod(
                f"w{i}",
                gpus=2,
                node_selector={"trainyard.io/node-pool": "a100"},
                labels={"training.kubeflow.org/job-name": "j"},
            ),
        )
    h.advance(1)
    assert {node_of(h, f"w{i}") for i in range(3)} == {"a100-0"}


def test_all_pods_round_trip_through_client_models(h):
    create(h, make_pod("ok", gpus=1))
    create(h, make_pod("pending", gpus=99))
    h.advance(5)
    api = ApiClient()
    for p in h.pods():
        api._ApiClient__deserialize(p, "V1Pod")
    for e in h.store.list("events"):
        api._ApiClient__deserialize(e, "CoreV1Event")
    for n in h.store.list("nodes"):
        api._ApiClient__deserialize(n, "V1Node")


def test_cpu_memory_and_pod_count_fit(h):
    create(h, make_pod("cpu-hog", resources={"cpu": "62", "memory": "8Gi"}))
    h.advance(1)
    assert node_of(h, "cpu-hog") == "cpu-0"  # 63 allocatable cpus on cpu-0, keeps off GPU nodes
    create(h, make_pod("mem-hog", resources={"cpu": "1", "memory": "4Ti"}))
    create(h, make_pod("milli", resources={"cpu": "500m", "memory": "512Mi"}))
    h.advance(1)
    msg = condition(h.pod(NS, "mem-hog"), "PodScheduled")["message"]
    assert msg.startswith("0/6 nodes are available: 6 Insufficient memory.")
    assert node_of(h, "milli") == "cpu-0"  # 62.5 of 63 cpus


def test_too_many_pods():
    from kubesim.sim.profile import load_profile

    prof = load_profile("small")
    for pool in prof["pools"]:
        pool["pods"] = "2"
    h = SimHarness(prof)
    h.namespace(NS)
    for i in range(13):
        create(h, make_pod(f"p{i}", resources={"cpu": "10m"}))
    h.advance(1)
    pending = [p for p in h.pods(NS) if not p["spec"].get("nodeName")]
    assert len(pending) == 1
    assert condition(pending[0], "PodScheduled")["message"].startswith(
        "0/6 nodes are available: 6 Too many pods."
    )


def test_default_profile_runs_a_job():
    h = SimHarness("default", seed=2)
    h.namespace(NS)
    assert len(h.store.list("nodes")) == 24  # 18 + 2 time-slicing L40S + 2 MPS A10 + 2 HAMi L4
    h.store.create(
        "pytorchjobs.kubeflow.org",
        make_job("d", workers=3, gpus=8, product=H800, run_seconds=30),
        namespace=NS,
    )
    h.advance(40)
    nodes = {p["spec"]["nodeName"] for p in h.pods(NS)}
    assert len(nodes) == 4 and all(n.startswith("h800-") for n in nodes)
    assert {p["status"]["phase"] for p in h.pods(NS)} == {"Succeeded"}


def test_preferred_node_affinity_wins_over_packing(h):
    create(h, make_pod("filler", gpus=4, node_selector={"kubernetes.io/hostname": "a100-0"}))
    h.advance(1)
    pref = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 50,
                    "preference": {
                        "matchExpressions": [
                            {
                                "key": "trainyard.io/switch",
                                "operator": "In",
                                "values": ["switch-a2"],
                            }
                        ]
                    },
                }
            ]
        }
    }
    create(h, make_pod("packed", gpus=2, node_selector={"trainyard.io/node-pool": "a100"}))
    create(
        h,
        make_pod(
            "prefers", gpus=2, node_selector={"trainyard.io/node-pool": "a100"}, affinity=pref
        ),
    )
    h.advance(1)
    assert node_of(h, "packed") == "a100-0"  # bin-packing: the fuller node
    assert node_of(h, "prefers") == "a100-1"  # a100-1 is on switch-a2


def test_scheduling_gates_hold_the_pod(h):
    pod = make_pod("gated", gpus=1)
    pod["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    create(h, pod)
    h.advance(2)
    cond = condition(h.pod(NS, "gated"), "PodScheduled")
    assert node_of(h, "gated") is None
    assert cond["reason"] == "SchedulingGated"
    assert cond["message"] == "Scheduling is blocked due to non-empty scheduling gates"
    assert not [
        e for e in h.events(NS, "FailedScheduling") if e["involvedObject"]["name"] == "gated"
    ]
    h.store.patch(
        "pods",
        "gated",
        [{"op": "remove", "path": "/spec/schedulingGates"}],
        patch_type="json",
        namespace=NS,
    )
    h.advance(1)
    assert node_of(h, "gated")
