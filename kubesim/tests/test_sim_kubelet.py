"""Kubelet lifecycle, restarts, graceful deletion, node failure, cordon, GC and events."""

from __future__ import annotations

import pytest
from kubernetes.client import ApiClient

from kubesim.sim.harness import SimHarness, condition, make_pod
from kubesim.sim.nodes import FAIL_ANNOTATION

NS = "team-a"


@pytest.fixture
def h():
    h = SimHarness("small", seed=5)
    h.namespace(NS)
    return h


def create(h, pod):
    return h.store.create("pods", pod, namespace=NS)


def test_pod_runs_then_succeeds_with_complete_statuses(h):
    create(h, make_pod("p", gpus=1, annotations={"run-seconds": 60}))
    h.advance(1)
    assert h.pod(NS, "p")["status"]["phase"] == "Pending"  # bound, container starting
    h.advance(3)
    pod = h.pod(NS, "p")
    st = pod["status"]
    assert st["phase"] == "Running"
    cs = st["containerStatuses"][0]
    assert cs["ready"] is True and cs["started"] is True and cs["restartCount"] == 0
    assert cs["image"] == "busybox:1.36" and cs["imageID"].startswith(
        "docker.io/library/busybox@sha256:"
    )
    assert cs["containerID"].startswith("containerd://")
    assert cs["state"]["running"]["startedAt"] == st["startTime"]
    assert st["podIP"] and st["hostIP"]
    assert condition(pod, "Ready")["status"] == "True"
    ApiClient()._ApiClient__deserialize(pod, "V1Pod")
    h.advance(60)
    pod = h.pod(NS, "p")
    assert pod["status"]["phase"] == "Succeeded"
    term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 0 and term["reason"] == "Completed"
    assert condition(pod, "Ready")["reason"] == "PodCompleted"
    ApiClient()._ApiClient__deserialize(pod, "V1Pod")
    evs = {e["reason"]: e for e in h.events(NS) if e["involvedObject"]["name"] == "p"}
    assert {"Scheduled", "Created", "Started"} <= set(evs)
    assert evs["Started"]["involvedObject"]["fieldPath"] == "spec.containers{main}"
    assert evs["Started"]["source"] == {"component": "kubelet", "host": pod["spec"]["nodeName"]}


def test_run_seconds_from_env(h):
    create(h, make_pod("envp", env=[{"name": "KUBESIM_RUN_SECONDS", "value": "10"}]))
    h.advance(14)
    assert h.pod(NS, "envp")["status"]["phase"] == "Succeeded"


def test_failure_injection_never_restart(h):
    create(
        h, make_pod("f", annotations={"run-seconds": 100, "fail-after-seconds": 5, "exit-code": 3})
    )
    h.advance(10)
    pod = h.pod(NS, "f")
    assert pod["status"]["phase"] == "Failed"
    term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 3 and term["reason"] == "Error"


def test_on_failure_restarts_in_place_with_backoff(h):
    create(
        h,
        make_pod(
            "r",
            restart_policy="OnFailure",
            annotations={"run-seconds": 100, "fail-after-seconds": 5},
        ),
    )
    h.advance(8)
    cs = h.pod(NS, "r")["status"]["containerStatuses"][0]
    assert h.pod(NS, "r")["status"]["phase"] == "Running"
    assert cs["restartCount"] == 1 and cs["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert cs["lastState"]["terminated"]["exitCode"] == 1
    h.advance(10)
    cs = h.pod(NS, "r")["status"]["containerStatuses"][0]
    assert "running" in cs["state"] or cs["restartCount"] == 2
    assert any(e["reason"] == "BackOff" for e in h.events(NS))


def test_graceful_deletion_honours_grace_period(h):
    create(h, make_pod("g", grace=45, annotations={"run-seconds": 1000}))
    h.advance(5)
    h.store.delete("pods", "g", namespace=NS)
    h.advance(30)
    pod = h.pod(NS, "g")
    assert (
        pod["metadata"]["deletionTimestamp"] and pod["metadata"]["deletionGracePeriodSeconds"] == 45
    )
    assert any(e["reason"] == "Killing" for e in h.events(NS))
    h.advance(20)
    assert [p for p in h.pods(NS) if p["metadata"]["name"] == "g"] == []


def test_deleting_a_pod_with_grace_zero_removes_it_at_once(h):
    create(h, make_pod("z", grace=0, annotations={"run-seconds": 1000}))
    h.advance(5)
    assert h.pod(NS, "z")["status"]["phase"] == "Running"
    h.store.delete("pods", "z", namespace=NS)
    assert [p for p in h.pods(NS) if p["metadata"]["name"] == "z"] == []


def test_node_failure_fails_pods_and_blocks_scheduling(h):
    sel = {"nvidia.com/gpu.product": "NVIDIA-H800"}
    create(h, make_pod("on-h800", gpus=2, node_selector=sel, annotations={"run-seconds": 1000}))
    h.advance(5)
    h.store.patch("nodes", "h800-0", {"metadata": {"annotations": {FAIL_ANNOTATION: "true"}}})
    h.advance(1)
    node = h.store.get("nodes", "h800-0")
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] != "True"
    assert {t["effect"] for t in node["spec"]["taints"]} == {"NoSchedule", "NoExecute"}
    pod = h.pod(NS, "on-h800")
    assert pod["status"]["phase"] == "Failed" and pod["status"]["reason"] == "NodeLost"
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137
    create(h, make_pod("after", gpus=1, node_selector=sel))
    h.advance(1)
    assert (
        "untolerated taint {node.kubernetes.io/unreachable: }"
        in condition(h.pod(NS, "after"), "PodScheduled")["message"]
    )
    h.store.patch("nodes", "h800-0", {"metadata": {"annotations": {FAIL_ANNOTATION: None}}})
    h.advance(2)
    node = h.store.get("nodes", "h800-0")
    assert next(c for c in node["status"]["conditions"] if c["type"] == "Ready")["status"] == "True"
    assert not node["spec"].get("taints")
    assert h.pod(NS, "after")["spec"]["nodeName"] == "h800-0"
    ApiClient()._ApiClient__deserialize(node, "V1Node")


def test_gc_deletes_dependents_of_deleted_owner_and_orphans(h):
    owner = h.store.create(
        "configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}},
        namespace=NS,
    )
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
    }
    dep = make_pod("dep", annotations={"run-seconds": 1000})
    dep["metadata"]["ownerReferences"] = [ref]
    create(h, dep)
    orphan = make_pod("orphan")
    orphan["metadata"]["ownerReferences"] = [dict(ref, name="gone", uid="0000-not-there")]
    create(h, orphan)
    h.advance(5)
    names = {p["metadata"]["name"] for p in h.pods(NS)}
    assert "dep" in names and "orphan" not in names
    h.store.delete("configmaps", "owner", namespace=NS)
    h.advance(1)
    dep = h.pod(NS, "dep")
    assert dep["metadata"]["deletionTimestamp"]  # graceful, as a normal delete
    h.advance(31)
    assert "dep" not in {p["metadata"]["name"] for p in h.pods(NS)}


def test_events_aggregate_repeats(h):
    pod = create(h, make_pod("e"))
    for _ in range(3):
        h.sim.events.record(pod, "Warning", "Custom", "same thing", component="test", kind="Pod")
    h.sim.events.record(pod, "Warning", "Custom", "other thing", component="test", kind="Pod")
    evs = list(h.events(NS, "Custom"))
    assert sorted(e["count"] for e in evs) == [1, 3]
    three = next(e for e in evs if e["count"] == 3)
    assert three["involvedObject"]["uid"] == pod["metadata"]["uid"]
    assert (
        three["firstTimestamp"]
        and three["lastTimestamp"]
        and three["source"]["component"] == "test"
    )
    ApiClient()._ApiClient__deserialize(three, "CoreV1Event")


def test_events_expire_after_ttl(h):
    pod = create(h, make_pod("old"))
    h.sim.events.record(pod, "Normal", "Ancient", "x", component="test", kind="Pod")
    assert h.events(NS, "Ancient")
    h.advance(3700, step=100)
    assert not h.events(NS, "Ancient")


def test_idle_tick_is_cheap(h):
    import time

    h.advance(5)
    t = time.perf_counter()
    for _ in range(200):
        h.sim.tick()
    per_tick = (time.perf_counter() - t) / 200
    assert per_tick < 0.005, per_tick  # generous bound: an idle tick does no store work


def test_new_simulation_adopts_running_pods_of_an_existing_store(h):
    from kubesim.sim import Simulation

    create(h, make_pod("keep", gpus=2, annotations={"run-seconds": 100}))
    h.advance(10)
    started = h.pod(NS, "keep")["status"]["startTime"]
    gpus = h.sim.gpu_assignment(NS, "keep")
    h.sim.close()
    h.sim = Simulation(h.store, profile=h.sim.profile, seed=5)  # e.g. restored from a state file
    h.sim.bootstrap()
    assert h.sim.gpu_assignment(NS, "keep") == gpus
    h.advance(50)
    pod = h.pod(NS, "keep")
    assert pod["status"]["phase"] == "Running" and pod["status"]["startTime"] == started
    h.advance(50)
    assert h.pod(NS, "keep")["status"]["phase"] == "Succeeded"


def test_pods_of_a_deleted_node_are_garbage_collected(h):
    create(h, make_pod("gone", gpus=1, node_selector={"kubernetes.io/hostname": "h800-0"}))
    h.advance(5)
    assert h.pod(NS, "gone")["status"]["phase"] == "Running"
    h.store.delete("nodes", "h800-0")
    h.advance(1)
    assert "gone" not in {p["metadata"]["name"] for p in h.pods(NS)}
    assert h.sim.metrics_text().count('Hostname="h800-0"') == 0
