"""The incremental Kueue controller decides as the old full scan did: a long run with many
workloads (arrivals, finishes, preemptions in and across queues, a StrictFIFO queue, a
queue outside any cohort, a deactivation and reactivation) replayed once with each, every
Workload write compared (simulated time, conditions with their messages, admission)."""

from __future__ import annotations

import random

import pytest

from kubesim.sim import kueue as kueue_mod
from kubesim.sim.harness import SimHarness, make_job
from kubesim.sim.kueue import WORKLOADS

from .kueue_fullscan import FullScanKueueController

K = "kueue.x-k8s.io"
API = f"{K}/v1beta2"
A100 = "NVIDIA-A100-SXM4-80GB"
H800 = "NVIDIA-H800"
NAMESPACES = ("team-a", "team-b", "team-c", "team-d")


def _objects() -> list[tuple[str, dict]]:
    def flavor(name: str, product: str) -> tuple[str, dict]:
        return ("resourceflavors", {"apiVersion": API, "kind": "ResourceFlavor",
                                    "metadata": {"name": name},
                                    "spec": {"nodeLabels": {"nvidia.com/gpu.product": product}}})

    def cq(name: str, flavors: list[tuple[str, int, int | None]], cohort: str | None,
           preemption: dict | None = None, strategy: str | None = None) -> tuple[str, dict]:
        fls = []
        for fname, n, borrow in flavors:
            gpu: dict = {"name": "nvidia.com/gpu", "nominalQuota": n}
            if borrow is not None:
                gpu["borrowingLimit"] = borrow
            fls.append({"name": fname, "resources": [
                gpu, {"name": "cpu", "nominalQuota": 1000},
                {"name": "memory", "nominalQuota": "10Ti"}]})
        spec: dict = {"namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": ["nvidia.com/gpu", "cpu", "memory"], "flavors": fls}]}
        if cohort:
            spec["cohortName"] = cohort
        if preemption:
            spec["preemption"] = preemption
        if strategy:
            spec["queueingStrategy"] = strategy
        return ("clusterqueues", {"apiVersion": API, "kind": "ClusterQueue",
                                  "metadata": {"name": name}, "spec": spec})

    any_lower = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    out = [flavor("a100", A100), flavor("h800", H800)]
    out += [("workloadpriorityclasses", {"apiVersion": API, "kind": "WorkloadPriorityClass",
                                         "metadata": {"name": n}, "value": v})
            for n, v in (("low", 50), ("mid", 100), ("high", 200))]
    out += [cq("q-a", [("a100", 4, None)], "pool", any_lower),
            cq("q-b", [("a100", 4, 4)], "pool", {
                "reclaimWithinCohort": "LowerPriority", "withinClusterQueue": "LowerPriority",
                "borrowWithinCohort": {"policy": "LowerPriority"}}),
            cq("q-c", [("h800", 4, None), ("a100", 0, None)], "pool", any_lower,
               strategy="StrictFIFO"),
            cq("q-d", [("h800", 4, None)], None,
               {"withinClusterQueue": "LowerOrNewerEqualPriority"})]
    out += [("localqueues", {"apiVersion": API, "kind": "LocalQueue",
                             "metadata": {"name": "main", "namespace": ns},
                             "spec": {"clusterQueue": q}})
            for ns, q in zip(NAMESPACES, ("q-a", "q-b", "q-c", "q-d"), strict=True)]
    return out


def _arrivals(n: int, seed: int) -> list[tuple[float, str, dict]]:
    rnd = random.Random(seed)
    out = []
    t = 0.0
    for i in range(n):
        t += rnd.choice((0.0, 0.5, 1.0, 2.0))
        ns = rnd.choice(NAMESPACES)
        product = H800 if ns in ("team-c", "team-d") else A100
        body = make_job(f"j{i}", workers=rnd.choice((0, 0, 1)), gpus=rnd.choice((1, 1, 2, 3)),
                        product=product, suspend=True, run_seconds=rnd.choice((3, 6, 12, 25)))
        labels = {f"{K}/queue-name": "main"}
        prio = rnd.choice((None, "low", "mid", "high"))
        if prio:
            labels[f"{K}/priority-class"] = prio
        body["metadata"].update(namespace=ns, labels=labels)
        out.append((t, ns, body))
    return out


def _holds_quota(wl: dict) -> bool:
    conds = {c["type"]: c["status"] for c in (wl.get("status") or {}).get("conditions") or []}
    return conds.get("QuotaReserved") == "True" and conds.get("Finished") != "True"


def _run(controller: type, monkeypatch: pytest.MonkeyPatch, n: int = 90, seed: int = 7
         ) -> tuple[list[tuple], int]:
    """Replay the scenario; the Workloads' writes in order, and the controller's passes."""
    monkeypatch.setattr("kubesim.sim.KueueController", controller)
    h = SimHarness("small", seed=1)
    assert type(h.sim.kueue) is controller
    history: list[tuple] = []

    def on_event(etype: str, rt, obj: dict) -> None:  # type: ignore[no-untyped-def]
        if rt.key != WORKLOADS:
            return
        st = obj.get("status") or {}
        history.append((h.sim.now(), etype, obj["metadata"]["name"],
                        tuple((c["type"], c["status"], c["reason"], c["message"],
                               c.get("lastTransitionTime"))
                              for c in st.get("conditions") or []),
                        repr(st.get("admission")), repr((obj.get("spec") or {}).get("active"))))

    h.store.subscribe_raw(on_event)
    for ns in NAMESPACES:
        h.namespace(ns)
    for plural, obj in _objects():
        h.store.create(f"{plural}.{K}", obj, namespace=obj["metadata"].get("namespace"))
    arrivals = _arrivals(n, seed)
    target = ("", "")
    t = 0.0
    while t < 160:
        while arrivals and arrivals[0][0] <= t:
            _, ns, body = arrivals.pop(0)
            h.store.create("pytorchjobs.kubeflow.org", body, namespace=ns)
        if t == 20.0:  # deactivate a workload holding quota, reactivate it later
            target = min((w["metadata"]["namespace"], w["metadata"]["name"])
                         for w in h.store.list(WORKLOADS) if _holds_quota(w))
        if t in (20.0, 45.0):
            h.store.patch(WORKLOADS, target[1], {"spec": {"active": t != 20.0}},
                          patch_type="merge", namespace=target[0])
        h.advance(0.5, step=0.5)
        t += 0.5
    return history, h.sim.kueue.reconciles


def test_incremental_decides_as_the_full_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    new, new_passes = _run(kueue_mod.KueueController, monkeypatch)
    old, old_passes = _run(FullScanKueueController, monkeypatch)
    reasons = {c[2] for e in old for c in e[3] if c[0] in ("QuotaReserved", "Preempted", "Evicted")}
    # the scenario exercises what it is meant to: admissions, waits, both preemptions
    assert {"QuotaReserved", "WaitingForQuota", "WaitingForPreemptedWorkloads",
            "InClusterQueue", "InCohortReclamation", "Deactivated"} <= reasons, reasons
    assert sum(1 for e in old if any(c[:2] == ("Finished", "True") for c in e[3])) >= 30
    for i, (a, b) in enumerate(zip(new, old, strict=False)):
        assert a == b, f"write {i} differs:\nincremental {a}\nfull scan   {b}"
    assert len(new) == len(old)
    assert new_passes == old_passes
