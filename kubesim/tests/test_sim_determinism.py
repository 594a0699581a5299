"""Same seed, same outcome; the seeded failure rate really injects failures."""

from __future__ import annotations

from kubesim.sim.harness import SimHarness, make_job
from kubesim.sim.profile import load_profile

NS = "team-a"


def run(seed: int):
    prof = load_profile("small")
    prof["simulation"]["failure_rate"] = 0.4
    h = SimHarness(prof, seed=seed)
    h.namespace(NS)
    for i in range(6):
        h.store.create(
            "pytorchjobs.kubeflow.org",
            make_job(f"j{i}", workers=2, gpus=2 + i % 3, run_seconds=200 + 50 * i),
            namespace=NS,
        )
    h.advance(900, step=5)
    pods = sorted(
        (
            p["metadata"]["name"],
            p["spec"].get("nodeName"),
            p["status"].get("phase"),
            tuple(c["restartCount"] for c in p["status"].get("containerStatuses") or []),
        )
        for p in h.pods(NS)
    )
    jobs = sorted(
        (
            j["metadata"]["name"],
            tuple(
                (c["type"], c["status"], c["lastTransitionTime"]) for c in j["status"]["conditions"]
            ),
        )
        for j in h.store.list("pytorchjobs.kubeflow.org", namespace=NS)
    )
    return pods, jobs, h.sim.metrics_text()


def test_same_seed_same_outcome():
    a = run(42)
    b = run(42)
    assert a == b
    restarts = sum(sum(p[3]) for p in a[0])
    assert restarts > 0, "failure_rate 0.4 should have caused container restarts"


def test_different_seed_differs():
    assert run(1)[:2] != run(2)[:2]
