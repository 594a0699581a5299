"""pods/log over HTTP with the official client: training-like output, tailLines, limitBytes,
timestamps, sinceSeconds, previous (400 until a restart), follow, and the API server's
refusals (kubesim fixture, small profile)."""

from __future__ import annotations

import re
import threading

import kubernetes
import pytest

from kubesim.sim.harness import make_job

NS = "team-logs"
GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"


@pytest.fixture
def core(kubesim):
    api = kubernetes.client.CoreV1Api(kubesim.api_client)
    api.create_namespace(kubernetes.client.V1Namespace(
        metadata=kubernetes.client.V1ObjectMeta(name=NS)))
    return api


def _job(kubesim, name, **kwargs):
    body = make_job(name, gpus=1, **kwargs)
    body["metadata"]["namespace"] = NS
    kubernetes.client.CustomObjectsApi(kubesim.api_client).create_namespaced_custom_object(
        GROUP, VERSION, NS, PLURAL, body)


def _error(fn, *args, **kwargs):
    with pytest.raises(kubernetes.client.ApiException) as info:
        fn(*args, **kwargs)
    return info.value.status, info.value.body


def _steps(text):
    return [(int(m.group(1)), float(m.group(2)))
            for m in re.finditer(r" step (\d+) loss=([0-9.]+)", text)]


def test_training_output_tail_limit_timestamps_since(kubesim, core):
    _job(kubesim, "fit", run_seconds=3600)
    kubesim.advance(1300, step=10)
    text = core.read_namespaced_pod_log("fit-master-0", NS)
    lines = text.splitlines()
    assert "torchrun: MASTER_ADDR=fit-master-0" in text and "RANK=0" in text
    assert "no checkpoint found: starting at step 0" in text
    steps = _steps(text)
    assert len(steps) >= 40 and [s for s, _ in steps] == sorted(s for s, _ in steps)
    assert steps[-1][1] < steps[0][1] - 0.3  # the loss falls
    assert "throughput=" in text and "saved checkpoint step 1000 to" in text

    tail = core.read_namespaced_pod_log("fit-master-0", NS, tail_lines=3)
    assert tail.splitlines() == lines[-3:]
    assert core.read_namespaced_pod_log("fit-master-0", NS, tail_lines=0) == ""
    limited = core.read_namespaced_pod_log("fit-master-0", NS, limit_bytes=100)
    assert len(limited.encode()) == 100 and text.startswith(limited)
    stamped = core.read_namespaced_pod_log("fit-master-0", NS, timestamps=True, tail_lines=2)
    for line, plain in zip(stamped.splitlines(), lines[-2:], strict=True):
        assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z ", line)
        assert line.split(" ", 1)[1] == plain
    recent = core.read_namespaced_pod_log("fit-master-0", NS, since_seconds=95)
    assert 2 <= len(_steps(recent)) <= 4

    assert _error(core.read_namespaced_pod_log, "fit-master-0", NS, tail_lines=-1)[0] == 422
    status, body = _error(core.read_namespaced_pod_log, "fit-master-0", NS, container="nope")
    assert status == 400 and "container nope is not valid for pod fit-master-0" in body
    assert _error(core.read_namespaced_pod_log, "gone-0", NS)[0] == 404


def test_previous_is_400_until_a_restart_then_differs_and_the_new_one_resumes(kubesim, core):
    _job(kubesim, "crash", run_seconds=3600, annotations={"fail-after-seconds": 700})
    kubesim.advance(300, step=10)
    status, body = _error(core.read_namespaced_pod_log, "crash-master-0", NS, previous=True)
    assert status == 400
    assert 'previous terminated container \\"pytorch\\" in pod \\"crash-master-0\\" not found' \
        in body
    kubesim.advance(900, step=10)  # fails at 700 s, restarts after the back-off
    pod = core.read_namespaced_pod("crash-master-0", NS)
    assert pod.status.container_statuses[0].restart_count >= 1
    previous = core.read_namespaced_pod_log("crash-master-0", NS, previous=True)
    current = core.read_namespaced_pod_log("crash-master-0", NS)
    assert "RuntimeError: CUDA error" in previous and "exited (Error, exit code" in previous
    assert "saved checkpoint step 1000" in previous
    assert "resumed from step 1000" in current and "RuntimeError" not in current
    assert previous != current


def test_follow_streams_new_lines_and_ends_with_the_container(kubesim, core):
    _job(kubesim, "tail", run_seconds=400)
    kubesim.advance(100, step=10)
    resp = core.read_namespaced_pod_log("tail-master-0", NS, follow=True,
                                        _preload_content=False)
    got: list[bytes] = []
    done = threading.Event()

    def reader():
        for chunk in resp.stream(1024):
            got.append(chunk)
        done.set()

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    kubesim.advance(120, step=10)
    kubesim.advance(300, step=10)  # the container completes: the stream ends
    assert done.wait(5), "the followed log did not end with its container"
    text = b"".join(got).decode()
    assert "training finished at step" in text and "exited (Completed, exit code 0)" in text
    steps = [s for s, _ in _steps(text)]
    assert steps == sorted(set(steps)) and len(steps) >= 10  # each line once, in order


def test_a_pending_pod_has_no_log_yet(kubesim, core):
    _job(kubesim, "big", run_seconds=60, annotations={})
    body = make_job("huge", gpus=64)  # no node has 64 GPUs: never scheduled
    body["metadata"]["namespace"] = NS
    kubernetes.client.CustomObjectsApi(kubesim.api_client).create_namespaced_custom_object(
        GROUP, VERSION, NS, PLURAL, body)
    kubesim.advance(2)
    status, body = _error(core.read_namespaced_pod_log, "huge-master-0", NS)
    assert status == 400 and "does not have a host assigned" in body
