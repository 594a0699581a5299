"""Progress from the training loop, over HTTP (kubesim fixture, small profile): a TrainJob's
``status.trainerStatus`` (Kubeflow Trainer v2.2+) advances as the simulated training runs,
and says what the rank-0 pod's log says in its ``TRAINYARD_PROGRESS`` lines."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import kubernetes
import pytest

from kubesim.sim.harness import make_job

from .test_sim_trainjob import (  # noqa: F401 - apis is a fixture
    NS,
    apis,
    create,
    get,
    patch,
    pods,
    trainjob,
)

pytestmark = pytest.mark.timeout(60)


def _reports(text: str) -> list[dict]:
    return [json.loads(m.group(1)) for m in re.finditer(r"TRAINYARD_PROGRESS (\{.*\})", text)]


def _when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone(UTC)


def test_trainer_status_advances_as_the_training_runs(kubesim, apis):  # noqa: F811 - the fixture imported above
    core, co = apis
    create(co, trainjob("prog", nodes=2, gpus=1, run_seconds=1200))
    kubesim.advance(5)
    assert "trainerStatus" in get(co, "prog")["status"]  # the script's first report: 0%
    kubesim.advance(300, step=10)
    first = get(co, "prog")["status"]["trainerStatus"]
    kubesim.advance(400, step=10)
    second = get(co, "prog")["status"]["trainerStatus"]
    # the schema's fields (trainer.kubeflow.org_trainjobs.yaml, v2.3.0)
    assert set(second) == {"progressPercentage", "estimatedRemainingSeconds", "metrics",
                           "lastUpdatedTime"}
    assert 15 <= first["progressPercentage"] < second["progressPercentage"] <= 65
    assert first["estimatedRemainingSeconds"] > second["estimatedRemainingSeconds"] > 400
    assert _when(second["lastUpdatedTime"]) > _when(first["lastUpdatedTime"])
    # the remaining time is the run's: reported + elapsed since the report = its length
    started = pods(core, "prog")[0].status.container_statuses[0].state.running.started_at
    left_at_end = (_when(second["lastUpdatedTime"]) - started).total_seconds() + second[
        "estimatedRemainingSeconds"]
    assert abs(left_at_end - 1200) <= 1
    metrics = {m["name"]: m["value"] for m in second["metrics"]}
    assert set(metrics) == {"loss", "step"} and all(isinstance(v, str) for v in metrics.values())
    assert int(metrics["step"]) > int({m["name"]: m["value"] for m in first["metrics"]}["step"])
    assert float(metrics["loss"]) < float(
        {m["name"]: m["value"] for m in first["metrics"]}["loss"])

    # the rank-0 pod's log says the same in its progress lines
    rank0 = next(p for p in pods(core, "prog")
                 if p.metadata.labels["batch.kubernetes.io/job-completion-index"] == "0")
    reports = _reports(core.read_namespaced_pod_log(rank0.metadata.name, NS))
    assert reports[0]["percent"] == 0 and reports[0]["step"] == 0
    said = next(r for r in reports if r["step"] == int(metrics["step"]))
    assert int(said["percent"]) == second["progressPercentage"]
    assert said["remaining_seconds"] == second["estimatedRemainingSeconds"]
    assert f'{said["metrics"]["loss"]:.4f}' == metrics["loss"]
    other = next(p for p in pods(core, "prog") if p is not rank0
                 and p.metadata.name != rank0.metadata.name)
    assert _reports(core.read_namespaced_pod_log(other.metadata.name, NS)) == []  # rank 0 only

    kubesim.advance(520, step=10)  # past 1200 s: complete, and 100% reported
    job = get(co, "prog")
    assert any(c["type"] == "Complete" and c["status"] == "True"
               for c in job["status"]["conditions"])
    done = job["status"]["trainerStatus"]
    assert done["progressPercentage"] == 100 and done["estimatedRemainingSeconds"] == 0


def test_the_last_report_stays_through_a_suspension(kubesim, apis):  # noqa: F811 - the fixture imported above
    _core, co = apis
    create(co, trainjob("held", nodes=1, gpus=1, run_seconds=3600))
    kubesim.advance(600, step=10)
    before = get(co, "held")["status"]["trainerStatus"]
    assert before["progressPercentage"] > 0
    patch(co, "held", {"spec": {"suspend": True}})
    kubesim.advance(300, step=10)
    assert get(co, "held")["status"]["trainerStatus"] == before  # nothing reports now


def test_a_pytorchjob_master_prints_progress_lines(kubesim, apis):  # noqa: F811 - the fixture imported above
    core, _co = apis
    body = make_job("fit", gpus=1, workers=1, run_seconds=600)
    body["metadata"]["namespace"] = NS
    kubernetes.client.CustomObjectsApi(kubesim.api_client).create_namespaced_custom_object(
        "kubeflow.org", "v1", NS, "pytorchjobs", body)
    kubesim.advance(305, step=10)
    tail = core.read_namespaced_pod_log("fit-master-0", NS, tail_lines=4)
    [last] = _reports(tail)[-1:]
    assert 35 <= last["percent"] <= 55 and 250 <= last["remaining_seconds"] <= 350
    # no resume: the share done is the share of the 600 s run behind it
    assert abs(last["percent"] - (600 - last["remaining_seconds"]) / 6) < 0.1
    assert last["step"] > 0 and last["total_steps"] >= last["step"]
    assert set(last["metrics"]) == {"loss"}
    assert _reports(core.read_namespaced_pod_log("fit-worker-0", NS)) == []
    kubesim.advance(400, step=10)
    text = core.read_namespaced_pod_log("fit-master-0", NS)
    final = _reports(text)[-1]
    assert final["percent"] == 100 and final["remaining_seconds"] == 0
    assert "training finished at step" in text


def test_at_speed_the_remaining_time_is_the_clocks(kubesim_factory):
    """speed 60: a run of 3,600 simulated seconds takes a minute of the clock, and the
    time left that the script and Trainer report is the clock's, not the script's."""
    handle = kubesim_factory(speed=60)
    core = kubernetes.client.CoreV1Api(handle.api_client)
    co = kubernetes.client.CustomObjectsApi(handle.api_client)
    core.create_namespace(
        kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=NS)))
    body = make_job("fast", gpus=1, workers=0, run_seconds=3600)
    body["metadata"]["namespace"] = NS
    co.create_namespaced_custom_object("kubeflow.org", "v1", NS, "pytorchjobs", body)
    create(co, trainjob("fast-v2", nodes=1, gpus=1, run_seconds=3600))
    handle.advance(30, step=1)
    [last] = _reports(core.read_namespaced_pod_log("fast-master-0", NS, tail_lines=3))[-1:]
    assert 0 < last["remaining_seconds"] <= 60 and 20 <= last["percent"] <= 60, last
    status = get(co, "fast-v2")["status"]["trainerStatus"]
    assert 0 < status["estimatedRemainingSeconds"] <= 60, status
