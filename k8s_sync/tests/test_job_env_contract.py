"""The checkpoint contract: every pod of every job gets each TRAINYARD_* variable the
researcher documentation lists (docs/guides/checkpoints.md), no more, no fewer, with
values that follow the spec."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from k8s_sync.manifests import build_pytorchjob
from k8s_sync.tests.test_pytorchjob import SPECS

DOC = Path(__file__).resolve().parents[2] / "docs" / "guides" / "checkpoints.md"


def documented() -> list[str]:
    return re.findall(r"^\| `(TRAINYARD_[A-Z_]+)` \|", DOC.read_text(encoding="utf-8"), re.M)


def pod_envs(manifest: dict) -> list[dict[str, str]]:
    return [{e["name"]: e["value"] for e in r["template"]["spec"]["containers"][0]["env"]}
            for r in manifest["spec"]["pytorchReplicaSpecs"].values()]


def test_the_documentation_lists_the_contract():
    assert documented() == [
        "TRAINYARD_JOB_ID", "TRAINYARD_JOB", "TRAINYARD_TENANT", "TRAINYARD_POOL",
        "TRAINYARD_TIER", "TRAINYARD_CHECKPOINT_PERSISTENT", "TRAINYARD_CHECKPOINT_DIR",
        "TRAINYARD_CHECKPOINT_INTERVAL_SECONDS", "TRAINYARD_RESUME",
        "TRAINYARD_RESTART_COUNT", "TRAINYARD_GRACE_SECONDS"]


@pytest.mark.parametrize("case", sorted(SPECS))
def test_every_pod_gets_the_documented_variables(case):
    spec = SPECS[case]()
    manifest = build_pytorchjob(spec)
    pod = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    for env in pod_envs(manifest):  # Master and Workers alike
        ours = [k for k in env if k.startswith("TRAINYARD_")]
        assert ours == documented()
        assert env["TRAINYARD_JOB"] == manifest["metadata"]["name"] == spec.name
        assert env["TRAINYARD_TENANT"] == spec.tenant_slug
        assert env["TRAINYARD_POOL"] == spec.pool
        assert env["TRAINYARD_GRACE_SECONDS"] == str(pod["terminationGracePeriodSeconds"])
        assert env["TRAINYARD_CHECKPOINT_DIR"] == pod["containers"][0]["volumeMounts"][0][
            "mountPath"]
        volume = pod["volumes"][0]
        assert env["TRAINYARD_CHECKPOINT_PERSISTENT"] == (
            "1" if "persistentVolumeClaim" in volume else "0")
        assert env["TRAINYARD_RESUME"] == ("1" if spec.resume else "0")
        assert env["TRAINYARD_RESTART_COUNT"] == str(spec.restart_count)


@pytest.mark.parametrize("case", sorted(SPECS))
def test_every_trainjob_node_gets_the_documented_variables(case):
    """A TrainJob's node container: the same variables, the two that change on a resume
    resolved from the pod annotations of Trainyard's runtime patch (the downward API)."""
    import dataclasses

    from k8s_sync.manifests import TRAINYARD_PATCH_MANAGER, build_trainjob

    spec = dataclasses.replace(SPECS[case](), kind="trainjob")
    manifest = build_trainjob(spec)
    [patch] = [p for p in manifest["spec"]["runtimePatches"]
               if p["manager"] == TRAINYARD_PATCH_MANAGER]
    template = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0][
        "template"]["spec"]["template"]
    env = {}
    for item in manifest["spec"]["trainer"]["env"]:
        path = (item.get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath", "")
        key = re.fullmatch(r"metadata\.annotations\['(.+)'\]", path)
        env[item["name"]] = template["metadata"]["annotations"][key.group(1)] if key else (
            item["value"])
    assert [k for k in env if k.startswith("TRAINYARD_")] == documented()
    assert env["TRAINYARD_JOB"] == manifest["metadata"]["name"] == spec.name
    assert env["TRAINYARD_GRACE_SECONDS"] == str(
        template["spec"]["terminationGracePeriodSeconds"])
    assert env["TRAINYARD_CHECKPOINT_DIR"] == template["spec"]["containers"][0][
        "volumeMounts"][0]["mountPath"]
    assert env["TRAINYARD_RESUME"] == ("1" if spec.resume else "0")
    assert env["TRAINYARD_RESTART_COUNT"] == str(spec.restart_count)
